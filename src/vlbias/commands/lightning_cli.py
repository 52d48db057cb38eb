"""The LightningCLI behind ``vlbias fit|validate|test|predict``, built in one place (:func:`make_cli`) for the
console script, the Slurm resolver and the tests.

Lightning's, with what a ``vlbias`` command promises:

* **one seed name**: ``seed`` (Lightning's ``seed_everything``, renamed; a config still using the old key is
  refused with a line naming the new one), seeded quietly — nothing is printed before an error;
* **one line for bad input**: an unknown, misspelt or renamed key (with the closest names), a missing config
  file, a value of the wrong type, a class Lightning or a module refuses with a plain reason — each one
  :class:`~vlbias.errors.ConfigError` line (:mod:`vlbias.commands.argument_errors`); long options are never
  abbreviated (``--trainer.max_epoch`` is an error, not ``max_epochs``);
* **a fit that says where it writes**, at its start and end, and one line per epoch when its output is not a
  terminal (:class:`~vlbias.callbacks.progress.RunProgress`);
* **no folder from a refused run**: a run that fails before its first training step (a refusal in a module's or a
  datamodule's setup, an evaluation setting that does not fit the data) removes the run folder its logger had
  made, when it holds only what Lightning writes at the start (:data:`STARTUP_FILES`);
* **W&B runs that continue**: when the trainer logs with :class:`vlbias.loggers.WandbLogger`, every checkpoint
  carries the W&B run id (:class:`~vlbias.loggers.KeepWandbRunId` is added to the callbacks), and
  ``vlbias fit --ckpt_path CKPT`` gives the id stored in ``CKPT`` to that logger unless the config names an
  ``id``: a killed fit restarted from its checkpoint continues the same W&B run, a new fit starts a new one.
"""

from __future__ import annotations

import logging
import warnings
from argparse import ArgumentError
from pathlib import Path
from typing import Any

from lightning.fabric.utilities.seed import seed_everything
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from vlbias.callbacks.progress import RunProgress
from vlbias.commands import run_as
from vlbias.commands.argument_errors import one_line
from vlbias.errors import ConfigError
from vlbias.loggers import KeepWandbRunId, WandbLogger, run_id_in_checkpoint
from vlbias.options import Seed

WANDB_LOGGER = f"{WandbLogger.__module__}.{WandbLogger.__qualname__}"
#: What a run folder holds before the first step: the resolved config and the module's hyperparameters.
STARTUP_FILES = frozenset({"config.yaml", "hparams.yaml"})
SUBCOMMANDS = run_as("lightning")
_STRICT = {"exit_on_error": False, "allow_abbrev": False}


class VlbiasCLI(LightningCLI):
    """:class:`~lightning.pytorch.cli.LightningCLI` with one seed name, one-line errors, and the W&B run of the
    checkpoint a fit resumes (module docstring)."""

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument(
            "--seed",
            type=bool | Seed,
            default=self.seed_everything_default,
            help="Seed of everything random (Lightning's seed_everything): an integer, or true to draw one; the "
            "seed used is saved in the run's config.yaml.",
        )

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        try:
            super().parse_arguments(parser, args)
        except ArgumentError as err:
            raise ConfigError(one_line(self._refusing_parser(parser, args), err)) from None

    def _refusing_parser(self, parser: LightningArgumentParser, args: Any) -> LightningArgumentParser:
        """The subcommand's parser (whose options an error names), else ``parser``."""
        parsers = getattr(self, "_subcommand_parsers", {})
        return next((parsers[arg] for arg in args or [] if arg in parsers), parser)

    def _parse_ckpt_path(self) -> None:
        """Lightning reads a checkpoint's hyperparameters into the config before anything is built: first check that
        the file is a readable checkpoint of the module the config asks for (:func:`check_checkpoint`)."""
        subcommand = self.config.get("subcommand")
        path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if path and Path(path).is_file():
            init_args = self.config[subcommand].get("model.init_args")
            settings = init_args.as_dict() if hasattr(init_args, "as_dict") else None
            check_checkpoint(Path(path), self.config[subcommand].get("model.class_path"), settings)
        super()._parse_ckpt_path()

    def _set_seed(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        seed = config.get("seed")
        if seed is False:
            return
        config["seed"] = int(seed_everything(None if seed is True else int(seed), workers=True, verbose=False))
        _seed_the_model(config, config["seed"])

    def before_instantiate_classes(self) -> None:
        if self.subcommand != "fit":
            return
        config = self.config[self.subcommand]
        checkpoint = config.get("ckpt_path")
        if not isinstance(checkpoint, str) or not Path(checkpoint).is_file():
            return  # none, or Lightning's "last"/"hpc": a new W&B run
        run_id = run_id_in_checkpoint(checkpoint)
        if run_id is None:
            return
        for entry in _logger_entries(config.get("trainer.logger")):
            if entry.get("class_path") == WANDB_LOGGER:
                init_args = entry.get("init_args")
                if not (init_args.get("id") or init_args.get("version")):
                    init_args["id"] = run_id

    def instantiate_classes(self) -> None:
        try:
            super().instantiate_classes()
        except MisconfigurationException as err:  # Lightning's own refusal of a setting, in plain words
            raise ConfigError(" ".join(str(err).split()) + _way_out(str(err))) from None

    def _run_subcommand(self, subcommand: str) -> None:
        try:
            super()._run_subcommand(subcommand)
        except BaseException:
            _remove_unstarted_run(self.trainer)
            raise

    def after_instantiate_classes(self) -> None:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return
        if any(isinstance(logger, WandbLogger) for logger in trainer.loggers):
            trainer.callbacks.append(KeepWandbRunId())
        if self.subcommand == "fit":
            trainer.callbacks.append(RunProgress())


def _remove_unstarted_run(trainer: Any) -> None:
    """Remove the folder of each logger of a run that failed before its first training step, when it holds only
    :data:`STARTUP_FILES` (nothing a run computed), and the logger's experiment folder when that is left empty."""
    if trainer.global_step or trainer.current_epoch or not trainer.is_global_zero:
        return
    for logger in trainer.loggers:
        log_dir = getattr(logger, "log_dir", None)
        folder = Path(log_dir) if log_dir else None
        if folder is None or not folder.is_dir() or not {p.name for p in folder.iterdir()} <= STARTUP_FILES:
            continue
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
        if folder.parent != Path(getattr(logger, "save_dir", None) or "") and not any(folder.parent.iterdir()):
            folder.parent.rmdir()  # save_dir/name, made for this version alone


def _seed_the_model(config: Any, seed: int) -> None:
    """A training module's :class:`~vlbias.modules.model_spec.ModelSpec` takes its seed (a tiny model's weights,
    the MI estimator's noise) from the run's one ``seed``; a spec seed given apart from it is refused by name."""
    spec = config.get("model.init_args.model") if config.get("model") is not None else None
    if not hasattr(spec, "get") or spec.get("seed") is None:
        return  # a module without a model spec (any LightningModule by class_path)
    if spec["seed"] not in (0, seed):  # 0: the spec's default, left as it is
        raise ConfigError(
            f"`model.init_args.model.seed` ({spec['seed']}) is set from the run's `seed` ({seed}): give `--seed "
            f"{spec['seed']}` instead."
        )
    spec["seed"] = seed


def check_checkpoint(path: Path, module: str | None, settings: dict[str, Any] | None = None) -> None:
    """Refuse ``path`` unless it is a whole, readable Lightning checkpoint of ``module`` (a class path; ``None``:
    any) saved with the module ``settings`` the config gives (its ``model.init_args``; ``None``: not compared):
    random bytes, a truncated file, or the checkpoint of another module would otherwise reach the user as a
    traceback from ``torch.load`` or, worse, train the checkpoint's module in place of the one asked for; and
    Lightning restores a checkpoint's module settings over the config's, so a setting the config changes (a
    ``tiny_sizes`` override, a learning rate) would be dropped without a word."""
    import torch

    try:
        checkpoint = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, EOFError, ... for what is not a checkpoint
        reason = " ".join(str(err).split())[:200]
        raise ConfigError(
            f"Checkpoint {str(path)!r} cannot be read ({type(err).__name__}: {reason}): it is not a Lightning "
            "checkpoint, or it is truncated; give the .ckpt file a fit wrote (its checkpoints/ folder)."
        ) from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise ConfigError(f"Checkpoint {str(path)!r} holds no state_dict: it is not a Lightning checkpoint.")
    saved = (checkpoint.get("hyper_parameters") or {}).get("_class_path")
    if module is not None and saved is not None and saved != module:
        raise ConfigError(
            f"Checkpoint {str(path)!r} is of {saved}, but the config asks for {module}: give the config the checkpoint "
            f"was trained with (its run folder's config.yaml), or a checkpoint of {module}."
        )
    changed = _changed_settings(checkpoint.get("hyper_parameters") or {}, settings or {})
    if changed:
        listed = "; ".join(
            f"`model.init_args.{key}` is {asked!r} here, {saved!r} there" for key, asked, saved in changed
        )
        raise ConfigError(
            f"Checkpoint {str(path)!r} resumes its module as it was saved, but the config changes its settings: "
            f"{listed}. Resume with the settings it was trained with (its run folder's config.yaml), or start a new "
            "fit without --ckpt_path."
        )


#: Module settings a resumed run does not compare: the model spec's seed is the run's ``seed`` (set after this check).
_NOT_COMPARED = frozenset({"model.seed"})


def _changed_settings(saved: Any, asked: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted key, asked value, saved value)`` for every setting both give whose values differ, lists and tuples
    alike (a checkpoint stores tuples as lists); a group given on one side only (``tiny_sizes: None`` saved, a
    dict asked) is one difference."""
    if isinstance(saved, dict) and isinstance(asked, dict):
        keys = sorted(saved.keys() & asked.keys())
        return [
            change
            for key in keys
            if f"{prefix}{key}" not in _NOT_COMPARED
            for change in _changed_settings(saved[key], asked[key], f"{prefix}{key}.")
        ]
    plain = [list(value) if isinstance(value, tuple) else value for value in (asked, saved)]
    return [] if plain[0] == plain[1] else [(prefix[:-1], *plain)]


def make_cli(
    args: list[str], run: bool = True, cli_class: type[VlbiasCLI] = VlbiasCLI, save_config: bool = True
) -> VlbiasCLI:
    """``cli_class`` on ``args`` (a subcommand first when ``run``): any LightningModule and LightningDataModule by
    ``class_path``, the config saved beside the run when ``save_config`` (overwritten on a resumed run), without the messages
    Lightning prints on every run that say nothing about it (the warning that ``args`` and ``sys.argv`` are both
    given — vlbias passes its own argv on purpose —, the tips to install litlogger and litmodels, on a Slurm login
    node the hint to run under ``srun``, which ``vlbias slurm submit`` does, and torch's deprecation of an API that
    Lightning itself calls)."""
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logging.getLogger(name).addFilter(_drop_lightning_tips)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"LightningCLI's args parameter is intended to run from within")
        # on a Slurm login node: `vlbias fit` there runs here on purpose (`vlbias slurm submit` runs jobs with srun)
        warnings.filterwarnings("ignore", message=r"The `srun` command is available on your system but is not used")
        # Lightning's own call of a torch API that torch deprecates: nothing a user's run or config can change
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
        return cli_class(
            LightningModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            args=args,
            run=run,
            save_config_callback=SaveConfigCallback if save_config else None,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={**_STRICT, **{name: dict(_STRICT) for name in SUBCOMMANDS}},
        )


def _way_out(message: str) -> str:
    """What to do about a refusal whose cause is plain: a GPU setting on a machine without one."""
    import torch

    if not torch.cuda.is_available() and any(word in message.lower() for word in ("gpu", "cuda", "nccl")):
        return (
            " This machine has no GPU: add --config configs/trainer/cpu.yaml after the experiment config (or "
            "--trainer.accelerator cpu --trainer.devices 1 --trainer.strategy auto --trainer.precision 32-true)."
        )
    return ""


def _drop_lightning_tips(record: logging.LogRecord) -> bool:
    """A logging filter: drop Lightning's "💡 Tip: try installing litlogger/litmodels" lines."""
    return not record.getMessage().startswith("💡 Tip:")


def _logger_entries(logger: Any) -> list[Any]:
    """The class_path/init_args entries of ``trainer.logger`` (one, a list, or a bool: none)."""
    if isinstance(logger, list):
        return [entry for entry in logger if hasattr(entry, "get") and entry.get("class_path")]
    return [logger] if hasattr(logger, "get") and logger.get("class_path") else []
