"""The ``vlbias`` console script: the table of subcommands (:data:`vlbias.commands.COMMANDS`) and the one way a
command ends on bad input.

``vlbias fit|validate|test|predict`` are LightningCLI subcommands (``--config`` YAML files from ``configs/``, the
last one wins); ``measure``, ``audit``, ``prune``, ``report``, ``models`` and ``slurm`` are built from the
dataclass or function each one calls (:mod:`vlbias.commands`). Bad input ends with one ``vlbias: error: ...`` line
and exit status 2, whichever command refused it. ``--help``, ``measure --help`` and ``models`` import no torch.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from vlbias.commands import COMMANDS, run


def usage() -> str:
    """The top-level help: every subcommand with its line of help."""
    lines = [f"  {name:<12} {command.help}" for name, command in COMMANDS.items()]
    return (
        f"usage: vlbias {{{','.join(COMMANDS)}}} ...\n\n"
        "Measure and mitigate social bias in vision-language models.\n\nsubcommands:\n"
        + "\n".join(lines)
        + "\n\nExample: vlbias fit --config configs/experiment/quickstart.yaml\n"
        "Run `vlbias <subcommand> --help` for the options of each."
    )


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv else None
    if name in (None, "-h", "--help"):
        print(usage())
    elif name in COMMANDS:
        run(name, argv[1:])
    else:
        print(f"{usage()}\n\nvlbias: error: unknown subcommand {name!r}.", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
