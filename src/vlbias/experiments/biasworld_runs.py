"""Train an experiment config on BiasWorld at a chosen bias strength and seed, quietly: the first step of every
planted-bias and method table (:mod:`vlbias.experiments`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from vlbias.commands.lightning_cli import VlbiasCLI, make_cli
from vlbias.errors import ConfigError

#: The experiment configs (``configs/experiment/`` of the repository that holds this package's source).
EXPERIMENTS = Path(__file__).resolve().parents[3] / "configs" / "experiment"


def experiment_config(name: str) -> Path:
    """The experiment config ``configs/experiment/<name>.yaml`` that a table trains.

    Example:
        >>> experiment_config("quickstart").name
        'quickstart.yaml'
    """
    path = EXPERIMENTS / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"No experiment config {str(path)!r}: the tables run from a checkout of the repository.")
    return path


def fit_on_biasworld(
    config: str | Path, bias_strength: float, seed: int, run_dir: str | Path, extra_args: Sequence[str] = ()
) -> VlbiasCLI:
    """Fit the experiment ``config`` with BiasWorld's ``bias_strength`` and every seed set to
    ``seed``, with no logger, callbacks, checkpoints or progress bar; the trained model is exported
    under ``run_dir``. Returns the CLI (its ``model``, ``datamodule`` and ``trainer``)."""
    cli = make_cli(
        [
            "--trainer.default_root_dir", str(run_dir),
            "--config", str(config),
            "--seed", str(seed),
            "--data.init_args.seed", str(seed),
            "--data.init_args.bias_strength", str(bias_strength),
            "--trainer.logger", "false",
            "--trainer.callbacks", "[]",
            "--trainer.enable_checkpointing", "false",
            "--trainer.enable_progress_bar", "false",
            "--trainer.enable_model_summary", "false",
            *extra_args,
        ],
        run=False,
        save_config=False,
    )  # fmt: skip
    cli.trainer.fit(cli.model, cli.datamodule)
    cli.model.adapter.eval()
    return cli


def callback_suite_options(config: str | Path, suite: str) -> dict:
    """The options ``config``'s ``BiasSuiteCallback`` gives ``suite``, so that a sanity run measures the trained
    model the way its training run did each epoch."""
    callbacks = yaml.safe_load(Path(config).read_text())["trainer"]["callbacks"]
    callback = next(c for c in callbacks if c["class_path"].endswith("BiasSuiteCallback"))
    return next(spec.get("options", {}) for spec in callback["init_args"]["suites"] if spec["suite"] == suite)
