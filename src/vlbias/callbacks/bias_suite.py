"""Run bias suites inside a Trainer, on every rank over that rank's shard, and log them next to accuracy."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from typing_extensions import override

from vlbias.errors import ConfigError, InputError
from vlbias.modules.adapter_module import AdapterModule
from vlbias.results import Results, is_count, write_results
from vlbias.suites.base import Suite
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite


@dataclass
class SuiteSpec:
    """One suite the callback runs: ``suite`` (a name from ``vlbias.suites.registry``), ``data`` (a path in the suite's
    public format, or ``"biasworld"``: the datamodule's world when it has one, else a world built from the
    callback's ``biasworld`` options), the suite's ``options`` as in ``vlbias measure --suite_options``
    (:mod:`vlbias.suites.options`, e.g. ``{probe: match, statistics: {n_bootstrap: 200}}``), and ``name``, the log
    prefix (default: the suite name; give distinct names when one suite runs on two data sets)."""

    suite: str
    data: str = "biasworld"
    options: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    @property
    def key(self) -> str:
        return self.name or self.suite


class BiasSuiteCallback(Callback):
    """Measure bias while training: after every ``every_n_epochs``-th validation epoch of ``fit``, and after
    every ``validate`` and ``test`` epoch, run each suite of ``suites`` on ``pl_module.adapter``.

    Each suite's options are checked when the callback is made (before any data or model is loaded), and the suites
    are built once, in ``setup`` (their data read once per fit). Under DDP every rank measures its
    own shard of each suite's stimuli and all ranks get the same numbers, equal to a one-process run
    (:func:`vlbias.suites.run.measure_suite`); under FSDP every rank measures every stimulus with the adapter's shards
    gathered (:meth:`~vlbias.modules.adapter_module.AdapterModule.full_parameters`; FSDP's layers gather at each
    forward, so the ranks must run the same forwards) and gets the one-process numbers. Skipped during the sanity check and
    ``fast_dev_run``.

    Logged (to whatever logger the trainer has), per suite and metric: ``bias/<name>/<metric>``, and where
    the suite gives them ``bias/<name>/<metric>/ci_low``, ``.../ci_high``, ``.../p_value``. A line per metric
    is printed (counts such as ``n_skipped/<kind>`` only when not zero). Rank 0 writes the results schema to
    ``<out_dir>/epoch=NNN/`` and, as the latest, to ``<out_dir>/`` during fit, and to
    ``<out_dir>/<validate|test>/`` otherwise; ``out_dir`` defaults to ``<trainer.log_dir>/bias``.

    A suite that measured nothing (every image unreadable, no item in the vocabulary: the runs ``vlbias measure``
    refuses, :meth:`~vlbias.results.Results.nothing_measured`) is neither logged nor written; a line names it and
    why, every time, and ``on_nothing_measured`` says whether the run goes on (``continue``) or ends with that line
    as its error (``stop``).

    The callback's state (the metrics of every measured epoch, ``history``) is saved in checkpoints under
    :attr:`state_key`, so a resumed run keeps it.

    Args:
        suites: what to run: suite names (on BiasWorld, default options) or
            ``{suite, data, options, name}`` mappings (:class:`SuiteSpec`).
        every_n_epochs: during fit, run after every n-th validation epoch.
        out_dir: where results go.
        seed: seed of the suites' permutation tests and bootstrap (recorded in every result).
        biasworld: options of the :class:`~vlbias.data.biasworld.BiasWorld` built for ``data: biasworld``
            when the datamodule has no ``world``.
        on_nothing_measured: when a suite measured nothing: say so and go on (``continue``), or stop the run
            with that line as its error (``stop``).
    """

    def __init__(
        self,
        suites: list[str | dict[str, Any]] | None = None,
        every_n_epochs: int = 1,
        out_dir: str | None = None,
        seed: int = 0,
        biasworld: dict[str, Any] | None = None,
        on_nothing_measured: Literal["continue", "stop"] = "continue",
    ) -> None:
        if isinstance(every_n_epochs, bool) or not isinstance(every_n_epochs, int) or every_n_epochs < 1:
            raise ConfigError(f"Expected `every_n_epochs` to be a positive integer but got {every_n_epochs!r}")
        if on_nothing_measured not in ("continue", "stop"):
            raise ConfigError(
                f"Expected `on_nothing_measured` to be 'continue' or 'stop' but got {on_nothing_measured!r}"
            )
        self.specs = [_spec(entry, index) for index, entry in enumerate(suites or ["mmbias"])]
        names = [spec.key for spec in self.specs]
        if len(set(names)) != len(names):
            raise ConfigError(
                f"Expected distinct suite names (give `name` to tell two runs of a suite apart) but got {names}"
            )
        self.options = {spec.key: check_suite_options(spec.suite, spec.options) for spec in self.specs}
        self.every_n_epochs = every_n_epochs
        self.out_dir = out_dir
        self.seed = seed
        self.biasworld = biasworld or {}
        self.on_nothing_measured = on_nothing_measured
        self.suites: dict[str, Suite] = {}
        self.history: list[dict[str, Any]] = []

    @property
    def state_key(self) -> str:
        return self._generate_state_key(
            suites=[asdict(spec) for spec in self.specs], every_n_epochs=self.every_n_epochs
        )

    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.suites:
            return
        world = getattr(trainer.datamodule, "world", None) if trainer.datamodule is not None else None
        for spec in self.specs:
            data = world if spec.data == "biasworld" and world is not None else spec.data
            self.suites[spec.key] = build_suite(self.options[spec.key], data, self.biasworld)

    @override
    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Say on which epochs the suites will measure (none, when the fit ends before the first)."""
        names = ", ".join(self.suites) or "none"
        last = trainer.max_epochs if trainer.max_epochs is not None and trainer.max_epochs >= 0 else None
        every = self.every_n_epochs
        if last is not None and last < every:
            rank_zero_info(
                f"bias suites {names}: no epoch measured (every_n_epochs is {every}, max_epochs {last}); "
                "`vlbias validate` measures the trained model"
            )
        else:
            epochs = [epoch for epoch in range(every - 1, every * 3, every)]
            more = ", ..." if last is None or last > every * 3 else ""
            shown = [epoch for epoch in epochs if last is None or epoch < last]
            rank_zero_info(f"bias suites {names}: measured after epochs {', '.join(map(str, shown))}{more}")

    @override
    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking or trainer.fast_dev_run:
            return
        fitting = trainer.state.fn == TrainerFn.FITTING
        if fitting and (trainer.current_epoch + 1) % self.every_n_epochs:
            return
        self._measure(trainer, pl_module, stage=None if fitting else "validate")

    @override
    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.fast_dev_run:
            self._measure(trainer, pl_module, stage="test")

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict["history"])

    def _measure(self, trainer: Trainer, pl_module: LightningModule, stage: str | None) -> None:
        adapter = pl_module.adapter
        was_training = adapter.training
        adapter.eval()
        config = {"stage": stage or "fit", "trainer_epoch": trainer.current_epoch, "global_step": trainer.global_step}
        config["module"] = dict(pl_module.hparams)
        measured = {"stage": config["stage"], "epoch": trainer.current_epoch, "global_step": trainer.global_step}
        out_dirs = self.results_dirs(trainer, stage)  # on every rank: trainer.log_dir is a broadcast under DDP
        sharded = isinstance(pl_module, AdapterModule) and pl_module.sharded
        gathered = pl_module.full_parameters() if isinstance(pl_module, AdapterModule) else nullcontext()
        try:
            with gathered:
                for spec in self.specs:
                    suite = self.suites[spec.key]
                    results, items = run_suite(
                        suite, adapter, model=adapter.name, checkpoint=None, seed=self.seed,
                        config={**config, "data": spec.data, "suite_options": spec.options}, replicated=sharded,
                    )  # fmt: skip
                    empty = results.nothing_measured(spec.data)
                    if empty is not None:
                        self._say_nothing_measured(empty, trainer.current_epoch)
                        continue
                    logged = _logged(spec.key, results)
                    pl_module.log_dict(logged, rank_zero_only=True)
                    measured |= logged
                    for line in _lines(spec.key, results, trainer.current_epoch):
                        rank_zero_info(line)
                    if trainer.is_global_zero:
                        for out_dir in out_dirs:
                            write_results(out_dir, results, items, name=spec.key)
        finally:
            adapter.train(was_training)
        self._record(measured)

    def _say_nothing_measured(self, reason: str, epoch: int) -> None:
        """The line of a suite that measured nothing; with ``on_nothing_measured: stop`` the run's error."""
        if self.on_nothing_measured == "stop":
            raise InputError(f"epoch {epoch}: {reason}; the run stops (on_nothing_measured: stop).")
        rank_zero_info(
            f"epoch {epoch}: {reason}; nothing logged or written, the run goes on (on_nothing_measured: continue)."
        )

    def _record(self, measured: dict[str, Any]) -> None:
        """Add one measurement to ``history``, replacing an earlier one of the same stage and epoch: a run resumed
        after a measurement but before its epoch ended (a requeued SLURM job) measures that epoch again."""
        same = (measured["stage"], measured["epoch"])
        self.history = [entry for entry in self.history if (entry["stage"], entry["epoch"]) != same] + [measured]

    def results_dirs(self, trainer: Trainer, stage: str | None) -> list[Path]:
        """Where this measurement's results go, the first being this epoch's (or stage's) own folder:
        ``<out_dir>/epoch=NNN`` and, as the latest, ``<out_dir>`` during fit; ``<out_dir>/<stage>`` otherwise.
        Each suite's files are named by its ``name`` (``<name>.json``, ``<name>.items.parquet``). Call it on
        every rank: it reads ``trainer.log_dir``, a broadcast under DDP."""
        out_dir = Path(self.out_dir) if self.out_dir else run_dir(trainer) / "bias"
        if stage is not None:
            return [out_dir / stage]
        return [out_dir / f"epoch={trainer.current_epoch:03d}", out_dir]


def run_dir(trainer: Trainer) -> Path:
    """Where a run's files go: the logger's log directory, else the trainer's root. Call it on every rank:
    ``trainer.log_dir`` is a broadcast under DDP."""
    return Path(trainer.log_dir or trainer.default_root_dir)


def _spec(entry: str | dict[str, Any], index: int) -> SuiteSpec:
    if isinstance(entry, str):
        return SuiteSpec(entry)
    if not isinstance(entry, dict) or "suite" not in entry:
        raise ConfigError(
            f"Expected `suites[{index}]` to be a suite name or a mapping with key 'suite' but got {entry!r}"
        )
    unknown = sorted(set(entry) - {"suite", "data", "options", "name"})
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {unknown} in `suites[{index}]`; expected among ['suite', 'data', 'options', 'name']"
        )
    return SuiteSpec(**entry)


def _logged(name: str, results: Results) -> dict[str, float]:
    """``bias/<name>/<metric>`` with its ``ci_low``, ``ci_high`` and ``p_value`` where the results have them."""
    logged = {}
    for metric, value in results.metrics.items():
        key = f"bias/{name}/{metric}"
        logged[key] = value
        if metric in results.intervals:
            logged[f"{key}/ci_low"], logged[f"{key}/ci_high"] = results.intervals[metric]
        if metric in results.p_values:
            logged[f"{key}/p_value"] = results.p_values[metric]
    return logged


def _lines(name: str, results: Results, epoch: int) -> list[str]:
    """The printed lines: each bias metric with its interval and p-value; each count (:func:`is_count`) that is not
    zero, as an integer (the zeros are logged, not printed)."""
    lines = []
    for metric, value in results.metrics.items():
        if is_count(metric):
            if value:
                lines.append(f"epoch {epoch}: bias/{name}/{metric} = {value:.0f}")
            continue
        line = f"epoch {epoch}: bias/{name}/{metric} = {value:+.3f}"
        if metric in results.intervals:
            low, high = results.intervals[metric]
            line += f" [{low:+.3f}, {high:+.3f}]"
        if metric in results.p_values:
            line += f" p={results.p_values[metric]:.4f}"
        lines.append(line)
    return lines
