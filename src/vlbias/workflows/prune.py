"""``vlbias prune``: MI-guided embedding-dimension pruning of one EMBED model on one data set (MMBias Sec. 6).

The service behind the subcommand: it builds the images, the bias tests and the zero-shot class prompts of
the data, then runs :class:`~vlbias.modules.pruning.EmbeddingPruning` through a Lightning
``Trainer.predict`` (CPU by default, no logger, no progress bar), which embeds the images batch by batch,
chooses the dimensions and writes the run directory (:mod:`vlbias.mitigation.outputs`).

Data (``data``):

* ``"biasworld"``: the images of one split (default ``val``: measure the pruned model on ``test``), the cross-modal
  test the ``mmbias`` suite builds (:func:`~vlbias.suites.mmbias_stimuli.biasworld_tests`: men vs women against the man- and
  woman-stereotyped activity phrases), the activities as zero-shot classes (their neutral-subject phrases
  as prompts) and the groups as the protected attribute;
* an MMBias data directory (layout in :mod:`vlbias.data.mmbias`): the cross-modal tests of Table 2's pairs
  that have images (:func:`~vlbias.suites.mmbias_stimuli.mmbias_tests`, unpleasant vs pleasant words), the groups of
  those tests as zero-shot classes *and* protected attribute, each group's phrases as its prompts. A group image
  that cannot be read (truncated, over the pixel limit, a dangling link: :mod:`vlbias.data.images`) is dropped by
  name: a line on the console, and ``prune.json``'s ``data.dropped_images`` lists each with its reason.

``prune.json``'s ``data`` records what the dimensions were chosen on (BiasWorld's ``split`` and world, or the
MMBias folder), and so does ``model/selected_on.json``: ``vlbias measure`` of the pruned model warns when it
measures on that same split or folder (:func:`~vlbias.mitigation.outputs.selection_overlap`).

``vlbias predict --config configs/experiment/prune_biasworld.yaml`` is the same run through LightningCLI
(:class:`~vlbias.data.biasworld_datamodule.BiasWorldDataModule` serves its ``predict_split`` to ``predict``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lightning.pytorch import Trainer
from torch.utils.data import DataLoader, Dataset

from vlbias.data.biasworld import ACTIVITIES, GROUPS, BiasWorld, activity_phrases
from vlbias.data.mmbias import TABLE2_PAIRS, read_mmbias
from vlbias.errors import InputError
from vlbias.mitigation.outputs import PRUNE_FOLDER
from vlbias.mitigation.removal_count import PruningChoice
from vlbias.modules.model_spec import ModelSpec
from vlbias.modules.pruning import EmbeddingPruning
from vlbias.runtime.log_levels import quieted
from vlbias.suites.mmbias_stimuli import biasworld_tests, mmbias_tests
from vlbias.workflows.loaded_model import seed_everything
from vlbias.workflows.options import PruneOptions

logger = logging.getLogger(__name__)


@dataclass
class PruneData:
    """Images to predict on and the vocabulary :class:`EmbeddingPruning` takes (see its arguments)."""

    dataset: Dataset
    tests: list[dict]
    group_names: list[str]
    class_prompts: list[list[str]]
    label_key: str
    group_key: str
    image_key: str
    config: dict


def biasworld_data(world: BiasWorld, split: str = "test") -> PruneData:
    """BiasWorld's ``split`` with the ``mmbias`` suite's cross-modal test and the activities as classes."""
    (test,) = biasworld_tests(world, split, ["cross_modal"])
    first, second = GROUPS
    spec = {"name": test.name, "x": first, "y": second, "a": list(test.a.items), "b": list(test.b.items)}
    return PruneData(
        dataset=world.dataset(split),
        tests=[spec],
        group_names=list(GROUPS),
        class_prompts=[activity_phrases(activity) for activity in ACTIVITIES],
        label_key="activity",
        group_key="group",
        image_key="pixel_values",
        config={"data": "biasworld", "split": split, **world.config},
    )


def mmbias_data(path: str | Path) -> PruneData:
    """An MMBias directory's cross-modal Table-2 tests; its tested groups are classes and protected attribute."""
    data = read_mmbias(path)
    tests, skipped = mmbias_tests(data, TABLE2_PAIRS, ["cross_modal"])
    if not tests:
        reasons = "; ".join(f"{s['item']}: {s['reason']}" for s in skipped[:5])
        raise InputError(f"MMBias data {str(path)!r} has no runnable cross-modal test: {reasons}")
    groups = sorted({s.key.removeprefix("images/") for t in tests for s in (t.x, t.y)})
    without = [group for group in groups if not data.group_phrases.get(group)]
    if without:
        raise InputError(
            f"MMBias data {str(path)!r}: group(s) {without} have images but no phrases to serve as zero-shot prompts"
        )
    specs = [
        {
            "name": t.name,
            "x": t.x.key.removeprefix("images/"),
            "y": t.y.key.removeprefix("images/"),
            "a": t.a.items,
            "b": t.b.items,
        }
        for t in tests
    ]
    items = [{"image": str(file), "group": k} for k, group in enumerate(groups) for file in data.group_images[group]]
    folders = {data.group_folders[group] for group in groups}
    dropped = [entry for entry in data.unreadable if Path(entry["item"]).parent in folders]  # of the tested groups
    if dropped:
        names = "; ".join(f"{entry['item']} ({entry['reason']})" for entry in dropped)
        logger.warning(f"warning: {len(dropped)} image(s) dropped, unreadable: {names}")
    config = {
        "data": str(path),
        "groups": groups,
        "n_images": len(items),
        "dropped_images": dropped,
        "skipped_tests": skipped,
    }
    return PruneData(items, specs, groups, [data.group_phrases[g] for g in groups], "group", "group", "image", config)


def prune(options: PruneOptions) -> dict:
    """Prune ``options.model`` on ``options.data`` (``"biasworld"`` or an MMBias directory) and write
    ``options.out``; returns :attr:`EmbeddingPruning.outcome` (``summary``, the content of ``prune.json``, and the
    ``tradeoff`` rows)."""
    spec = ModelSpec(options.model, options.checkpoint, options.tiny, options=options.model_options, seed=options.seed)
    out = PRUNE_FOLDER.check(options.out)
    if options.data == "biasworld":
        prepared = biasworld_data(BiasWorld(**dataclasses.asdict(options.biasworld)), options.split or "val")
    else:
        prepared = mmbias_data(options.data)
    seed_everything(options.seed)
    module = EmbeddingPruning(
        spec,
        prepared.tests,
        prepared.group_names,
        prepared.class_prompts,
        pruning=PruningChoice(
            **{field.name: getattr(options, field.name) for field in dataclasses.fields(PruningChoice)}
        ),
        label_key=prepared.label_key,
        group_key=prepared.group_key,
        image_key=prepared.image_key,
        out=str(out),
        data_config=prepared.config,
    )
    loader = DataLoader(prepared.dataset, batch_size=options.batch_size)
    with _quiet_lightning():
        trainer = Trainer(
            accelerator=options.accelerator,
            devices=options.devices,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
            default_root_dir=str(out),
        )
        trainer.predict(module, loader, return_predictions=False)
    return module.outcome


@contextlib.contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Silence Lightning's start-up lines ("GPU available ...") and its few-workers and no-predictions hints for one run,
    and on a Slurm login node its hint to run under ``srun`` (as :func:`vlbias.commands.lightning_cli.make_cli` does)."""
    with quieted(logging.WARNING, "lightning.pytorch"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*predict returned None.*")  # embeddings stay in the module
        warnings.filterwarnings("ignore", message=r"The `srun` command is available on your system but is not used")
        yield
