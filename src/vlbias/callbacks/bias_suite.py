"""Run bias suites during training and log them next to accuracy."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info
from typing_extensions import override

from vlbias.measure import build_suite, run_suite
from vlbias.results import write_results


class BiasSuiteCallback(Callback):
    """Every ``every_n_epochs`` validation epochs, run ``suites`` on ``pl_module.adapter`` with
    stimuli from the datamodule's BiasWorld (``trainer.datamodule.world``), log each metric as
    ``bias/<suite>/<metric>`` (plus ``.../ci_low``, ``.../ci_high``, ``.../p_value``), print a
    line per metric, and write the results schema to ``<out_dir>/epoch=NNN/`` and, as the
    latest, to ``<out_dir>/``. ``out_dir`` defaults to ``<trainer.log_dir>/bias``.

    Skipped during the sanity check and ``fast_dev_run``. Every rank computes the same numbers
    (the suites are deterministic); rank 0 writes.

    Args:
        suites: suite names.
        every_n_epochs: run after every n-th validation epoch.
        out_dir: where results go.
        seed: seed of the suites' permutation tests and bootstrap.
        suite_options: per-suite keyword options, e.g. ``{"mmbias": {"n_permutations": 2000}}``.
    """

    def __init__(
        self,
        suites: list[str] | None = None,
        every_n_epochs: int = 1,
        out_dir: str | None = None,
        seed: int = 0,
        suite_options: dict[str, dict] | None = None,
    ) -> None:
        self.suites = suites or ["mmbias"]
        self.every_n_epochs = every_n_epochs
        self.out_dir = out_dir
        self.seed = seed
        self.suite_options = suite_options or {}

    @override
    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking or trainer.fast_dev_run or (trainer.current_epoch + 1) % self.every_n_epochs:
            return
        out_dir = Path(self.out_dir or Path(trainer.log_dir or trainer.default_root_dir) / "bias")
        was_training = pl_module.adapter.training
        pl_module.adapter.eval()
        for name in self.suites:
            suite = build_suite(name, trainer.datamodule.world, self.suite_options.get(name))
            config = {"trainer_epoch": trainer.current_epoch, "global_step": trainer.global_step, "module": dict(pl_module.hparams)}
            results, items = run_suite(suite, pl_module.adapter, model=pl_module.adapter.name, checkpoint=None, seed=self.seed, config=config)
            for metric, value in results.metrics.items():
                key = f"bias/{name}/{metric}"
                logged = {key: value}
                line = f"epoch {trainer.current_epoch}: {key} = {value:+.3f}"
                if metric in results.intervals:
                    low, high = results.intervals[metric]
                    logged |= {f"{key}/ci_low": low, f"{key}/ci_high": high}
                    line += f" [{low:+.3f}, {high:+.3f}]"
                if metric in results.p_values:
                    logged[f"{key}/p_value"] = results.p_values[metric]
                    line += f" p={results.p_values[metric]:.4f}"
                pl_module.log_dict(logged, rank_zero_only=True)
                rank_zero_info(line)
            if trainer.is_global_zero:
                write_results(out_dir / f"epoch={trainer.current_epoch:03d}", results, items)
                write_results(out_dir, results, items)
        pl_module.adapter.train(was_training)
