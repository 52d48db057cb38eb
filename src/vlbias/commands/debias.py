"""``vlbias debias``: fit post-hoc debiasers on a model and measure them before and after (:func:`vlbias.debias.debias`)."""

from __future__ import annotations

from collections.abc import Sequence

from jsonargparse import ArgumentParser

from vlbias.commands.measure import number
from vlbias.commands.parsing import options_parser, parse_options
from vlbias.run_options import DebiasOptions


def parser() -> ArgumentParser:
    """The options of :class:`~vlbias.run_options.DebiasOptions`."""
    return options_parser(DebiasOptions, "vlbias debias")


def main(argv: Sequence[str]) -> None:
    options = parse_options(DebiasOptions, parser(), argv)  # --help answers here, before torch is imported
    from vlbias.debias import debias
    from vlbias.mitigation.comparison import RECALL
    from vlbias.mitigation.tradeoff import ACCURACY
    from vlbias.report.pareto import headline_bias

    rows = debias(options)["comparison"]
    bias = headline_bias(rows[0])
    for row in rows:
        if ACCURACY in row:
            recall = "".join(
                f", {direction} R@1 {row[f'{RECALL}/{prefix}_r1']:.3f}"
                for prefix, direction in (("txt", "text retrieval"), ("img", "image retrieval"))
                if f"{RECALL}/{prefix}_r1" in row
            )
            print(f"{row['method']}: {bias} {number(row.get(bias))}, zero-shot accuracy {row[ACCURACY]:.3f}{recall}")
        else:
            print(f"{row['method']}: not fitted: {row['not_fitted']}")
    print(f"wrote {options.out}")
