"""Every option of every ``vlbias`` command is listed once in its ``--help``, with its docstring line as help
text: a parser built from a dataclass field without an ``Args:`` line fails here."""

import importlib

import pytest
from jsonargparse import ActionConfigFile

from vlbias.commands import COMMANDS, debias, measure, slurm, slurm_commands


def _module(name: str):
    return importlib.import_module(COMMANDS[name].target.partition(":")[0])


#: every command built from a dataclass or a function (the command table's; LightningCLI's have their own help)
PARSERS = {
    **{name: _module(name).parser for name in COMMANDS if COMMANDS[name].job != "lightning" and name != "slurm"},
    "slurm submit": lambda: slurm.parser("submit"),
    "slurm sweep": lambda: slurm.parser("sweep"),
    "slurm status": slurm.status_parser,
}


def test_the_table_lists_each_command_once_and_a_job_runs_lightning_and_one_process_commands():
    assert set(PARSERS) >= {"measure", "audit", "prune", "debias", "report", "models"}
    assert set(slurm_commands()) == {name for name, command in COMMANDS.items() if command.job is not None}
    assert slurm.Submit.__dataclass_fields__["command"].type == "SlurmCommand"
    assert list(slurm.SlurmCommand.__args__) == list(slurm_commands())
    one_process = [name for name in slurm_commands() if COMMANDS[name].job == "one_process"]
    assert all(hasattr(_module(name), "OPTIONS") for name in one_process)


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


def test_debias_help_names_every_method():
    from vlbias.mitigation.registry import list_debiasers

    text = " ".join(debias.parser().format_help().split())
    assert f"methods (--method): {', '.join(list_debiasers())};" in text


def test_measure_help_gives_every_suite_one_line():
    from vlbias.suites.registry import list_suites, suite_summaries

    lines = measure.parser().format_help().splitlines()
    for suite, summary in suite_summaries().items():
        assert f"  {suite:<20} {summary}" in lines, suite
    assert list(suite_summaries()) == list_suites()


def test_every_registered_suite_has_a_summary_and_no_other_name_does():
    from vlbias.suites import registry

    assert set(registry._SUMMARIES) == set(registry.list_suites())


@pytest.mark.parametrize(
    ("name", "known", "expected"),
    [
        (
            "mmbiass",
            ["mmbias", "weat"],
            "Unknown suite 'mmbiass'; expected one of: mmbias, weat; did you mean 'mmbias'?",
        ),
        ("xyz", ["mmbias", "weat"], "Unknown suite 'xyz'; expected one of: mmbias, weat."),
    ],
)
def test_an_unknown_name_is_refused_with_the_known_ones_and_the_closest(name, known, expected):
    from vlbias.errors import ConfigError
    from vlbias.lazy_table import refuse_unknown

    with pytest.raises(ConfigError) as refused:
        refuse_unknown("suite", name, known)
    assert str(refused.value) == expected
    refuse_unknown("suite", "weat", known)  # a known name passes
