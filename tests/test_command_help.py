"""Every option of every ``vlbias`` command is listed once in its ``--help``, with its docstring line as help
text: a parser built from a dataclass field without an ``Args:`` line fails here."""

import pytest
from jsonargparse import ActionConfigFile

from vlbias.commands import audit, debias, measure, models, prune, report, slurm

PARSERS = {
    "measure": measure.parser,
    "audit": audit.parser,
    "prune": prune.parser,
    "debias": debias.parser,
    "report": report.parser,
    "models": models.parser,
    "slurm submit": lambda: slurm.parser("submit"),
    "slurm sweep": lambda: slurm.parser("sweep"),
    "slurm status": slurm.status_parser,
}


@pytest.mark.parametrize("command", PARSERS)
def test_every_option_has_help_text_and_is_listed_once(command):
    parser = PARSERS[command]()
    options = [
        action
        for action in parser._actions
        if action.dest not in ("help", "print_config") and not isinstance(action, ActionConfigFile)
    ]
    assert options
    for action in options:
        text = (action.help or "").strip()
        assert text and not text.startswith("(type:"), f"vlbias {command}: {action.option_strings or action.dest}"
    text = parser.format_help()
    for action in options:
        for name in action.option_strings:
            if not name.endswith("+"):
                assert text.count(f"  {name} ") + text.count(f"  {name}\n") + text.count(f"  {name},") == 1, name
