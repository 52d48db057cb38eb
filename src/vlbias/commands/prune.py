"""``vlbias prune``: remove the embedding dimensions that carry bias (:func:`vlbias.workflows.prune.prune`)."""

from __future__ import annotations

from collections.abc import Sequence

from jsonargparse import ArgumentParser

from vlbias.commands.measure import number
from vlbias.commands.parsing import options_parser, parse_options
from vlbias.workflows.options import PruneOptions

OPTIONS = PruneOptions  # what the command takes (vlbias.commands.resolve checks a Slurm job's with it)


def parser() -> ArgumentParser:
    """The options of :class:`~vlbias.workflows.options.PruneOptions`."""
    return options_parser(OPTIONS, "vlbias prune")


def main(argv: Sequence[str]) -> None:
    options = parse_options(OPTIONS, parser(), argv)  # --help answers here, before torch is imported
    from vlbias.workflows.prune import prune

    summary = prune(options)["summary"]
    print(
        f"removed {summary['n_remove']} of {summary['embedding_dim']} dimensions ({summary['strategy']}): "
        f"{summary['removed']}"
    )
    for test, before in summary["effect_sizes_before"].items():
        print(f"{test}: d {number(before)} -> {number(summary['effect_sizes_after'][test])}")
    accuracy = summary["zero_shot_accuracy"]
    print(f"zero-shot accuracy {accuracy['before']:.3f} -> {accuracy['after']:.3f}")
    print(f"wrote {options.out}")
