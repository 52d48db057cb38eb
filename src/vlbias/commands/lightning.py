"""``vlbias fit|validate|test|predict``: LightningCLI from YAML configs
(:func:`vlbias.commands.lightning_cli.make_cli`)."""

from __future__ import annotations

from collections.abc import Sequence


def run(subcommand: str, argv: Sequence[str]) -> None:
    from vlbias.commands.lightning_cli import make_cli

    make_cli([subcommand, *argv])


def fit(argv: Sequence[str]) -> None:
    run("fit", argv)


def validate(argv: Sequence[str]) -> None:
    run("validate", argv)


def test(argv: Sequence[str]) -> None:
    run("test", argv)


def predict(argv: Sequence[str]) -> None:
    run("predict", argv)
