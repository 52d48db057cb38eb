"""Train an experiment config on BiasWorld at a chosen bias strength and seed, quietly: the shared
step of the planted-bias sanity scripts (``scripts/biasworld_*sanity.py``)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

from vlbias.lightning_cli import VlbiasCLI, make_cli


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


def run_table(
    run: Callable[..., dict], jobs: Sequence[tuple], workers: int, show: Callable[[dict], None], out: Path | None
) -> list[dict]:
    """``run(*job)`` for every job in ``workers`` processes, in order; each row is shown (``show``) as soon as it
    ends and, with ``out``, all rows so far are written there as JSON after every run (atomically), so a long
    table stopped half-way keeps what it measured."""
    from vlbias.atomic import atomic_write

    rows: list[dict] = []
    with ProcessPoolExecutor(workers) as pool:
        for row in pool.map(run, *zip(*jobs)):
            rows.append(row)
            show(row)
            if out is not None:
                atomic_write(out, lambda handle: handle.write(json.dumps(rows, indent=1).encode()))
    return rows


def mean_sd(values: Sequence[float], digits: int = 2) -> str:
    """``"mean ± sd"`` of ``values`` (the sample standard deviation) to ``digits`` decimals; the mean alone for one
    value. The tables of the scripts print their per-method summaries with it.

    Example:
        >>> mean_sd([1.0, 2.0, 4.0]), mean_sd([3.14159], digits=3)
        ('2.33 ± 1.53', '3.142')
    """
    spread = f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.{digits}f}{spread}"
