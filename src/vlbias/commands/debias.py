"""``vlbias debias``: fit post-hoc debiasers on a model and measure them before and after
(:func:`vlbias.workflows.debias.debias`)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from jsonargparse import ArgumentParser

from vlbias.commands.measure import number
from vlbias.commands.parsing import options_parser, parse_options
from vlbias.workflows.options import DebiasOptions

OPTIONS = DebiasOptions  # what the command takes (vlbias.commands.resolve checks a Slurm job's with it)
#: The numbers printed per method of a chat model's run (those its suites measured).
CHAT_COLUMNS = (
    "bias_qa/bias_ambiguous",
    "bias_qa/accuracy_disambiguated",
    "counterfactual_answers/max_change",
    "counterfactual_answers/flip_rate",
)


def parser() -> ArgumentParser:
    """The options of :class:`~vlbias.workflows.options.DebiasOptions`, with the methods in the epilog."""
    from vlbias.mitigation.chat_registry import list_chat_debiasers  # torch-free: the registries import no method
    from vlbias.mitigation.registry import list_debiasers

    methods = ", ".join(list_debiasers())
    chat = ", ".join(list_chat_debiasers())
    epilog = textwrap.fill(
        f"methods (--method): {methods}; on a chat VLM: {chat}. A list of them, or 'all', compares them.", 116
    )
    return options_parser(OPTIONS, "vlbias debias", epilog=epilog)


def main(argv: Sequence[str]) -> None:
    options = parse_options(OPTIONS, parser(), argv)  # --help answers here, before torch is imported
    from vlbias.mitigation.tradeoff import ACCURACY
    from vlbias.report.pareto import headline_bias
    from vlbias.workflows.comparison import RECALL
    from vlbias.workflows.debias import debias

    rows = debias(options)["comparison"]
    if options.chat:
        for row in rows:
            shown = ", ".join(f"{column} {number(row[column])}" for column in CHAT_COLUMNS if column in row)
            print(f"{row['method']}: {shown or 'not fitted: ' + str(row.get('not_fitted'))}")
        print(f"wrote {options.out}")
        return
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
