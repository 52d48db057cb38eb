r"""MI-guided embedding-dimension pruning as a LightningModule (MMBias, Janghorbani & de Melo, 2023, Sec. 6).

``trainer.predict`` embeds the images batch by batch on every device (the Trainer shards them); the text
sides are embedded once, in ``on_predict_start``: each bias test's attribute phrases A and B and the
zero-shot class prompts. At the end of predict the image embeddings, their class labels and their group
labels are gathered from every rank and Algorithm 1 (or its greedy variant, or the CLIP-clip baseline) runs
on the whole set (:mod:`vlbias.mitigation.pruning`):

* bias tests: for each ``tests`` entry ``{name, x, y, a, b}``, :math:`d(X^I, Y^I, A^T, B^T)` with
  :math:`X^I` the images of group ``x`` (a name in ``group_names``, whose position is the batch's group
  label), :math:`Y^I` those of ``y``, :math:`A^T`, :math:`B^T` the embedded phrases ``a`` and ``b``;
* MI labels: the images' zero-shot classes (``label_key``) for ``ranked`` and ``greedy``; the protected
  attribute (``group_key``) for ``clip_clip``, which removes what is most informative of it;
* zero-shot accuracy (:mod:`vlbias.mitigation.zero_shot`) of the images against ``class_prompts``
  (prompts of class ``k`` at position ``k``) with all dimensions and with the removed ones left out;
* the trade-off (:mod:`vlbias.mitigation.tradeoff`): bias and accuracy for :math:`N = 0, s, \dots,`
  ``max_dims`` along the strategy's removal order (default ``max_dims``: 25 % of :math:`D`).

The vocabulary (group names, phrases, prompts) comes from configuration, never from a data set's constants.
Under DDP each rank may hold a different number of images (Lightning's predict sampler does not repeat
items): rows are padded to the largest count for ``all_gather`` and cut back, so every image counts once
and every rank computes the same selection. The gathered rows are then put in one canonical order
(:func:`canonical_order`, by their values), because the MI estimator is not invariant to row order: it
adds seeded noise row by row and counts the neighbours within each point's k-th-neighbour distance, so on
a small sample a reordering, or any float-level difference, can move a point across that radius (13
images: up to 0.2 nats). With the same embeddings (the same images at the same batch size, e.g. 1, as
float results may differ in the last bits with a batch's composition) 1 and 2 processes choose the same
dimensions. Rank 0 writes ``out`` as a unit (:mod:`vlbias.mitigation.outputs`), with a model card beside each
exported model, when it is given; :attr:`outcome` holds the summary and the trade-off rows on every rank.

What can be refused is refused before any image is embedded: ``out`` that is not an earlier output of
``vlbias prune`` when the module is made, N (``n_dims`` or ``fraction``) that does not fit the embedding dimension
D, or a model whose own-format export cannot be written (:func:`~vlbias.mitigation.outputs.check_exportable`), once
the model is loaded. A removal that raises a test's :math:`|d|` or flips its sign
(:func:`~vlbias.mitigation.pruning.worsened_tests`) is written as the result asks, with a warning on the console
and in ``prune.json`` (``worsened``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, replace

import numpy as np
import torch
from lightning.pytorch import LightningModule
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.outputs import PRUNE_FOLDER, check_exportable, write_pruning_outputs
from vlbias.mitigation.pruning import (
    BiasTest,
    PruningResult,
    mutual_information,
    select_dimensions,
    worsened_tests,
)
from vlbias.mitigation.removal_count import PruningChoice
from vlbias.mitigation.tradeoff import tradeoff_rows
from vlbias.models.base import Capability
from vlbias.modules.model_spec import ModelSpec

logger = logging.getLogger(__name__)
MAX_DIMS_FRACTION = 0.25  # default end of the trade-off curve, as a share of D
#: How each exported model is used (its model card's usage line): folder -> (library, line).
USAGE = {
    "model": ("vlbias", "vlbias measure --model pruned --checkpoint <this folder> --suite <suite> --out <dir>"),
    "clip": ("transformers", "transformers.CLIPModel.from_pretrained('<this folder>')"),
    "open_clip": ("open_clip", "open_clip.create_model_from_pretrained('local-dir:<this folder>')"),
}


class EmbeddingPruning(LightningModule):
    """Collect image embeddings in ``predict``; choose the dimensions to remove at its end (see the module).

    Args:
        model: the EMBED adapter (:class:`~vlbias.modules.model_spec.ModelSpec`); its ``seed`` also seeds the MI
            estimator.
        tests: bias tests, each ``{"name": str, "x": group, "y": group, "a": [phrases], "b": [phrases]}``.
        group_names: the protected groups, in the order of the batch's ``group_key`` labels.
        class_prompts: per zero-shot class (in the order of the batch's ``label_key`` labels) its prompts.
        pruning: how the dimensions are chosen (:class:`~vlbias.mitigation.removal_count.PruningChoice`: N or its fraction of
            D, the strategy, Θ or its quantile, the objective, the trade-off curve's largest N — default 25 % of D,
            at least N — and step), the options of ``vlbias prune``.
        label_key, group_key, image_key: batch keys of the class label, the group label and the images.
        out: directory to write (rank 0); ``None`` writes nothing.
        data_config: what the data were, recorded in ``prune.json``.
    """

    def __init__(
        self,
        model: ModelSpec,
        tests: list[dict],
        group_names: list[str],
        class_prompts: list[list[str]],
        pruning: PruningChoice | None = None,
        label_key: str = "activity",
        group_key: str = "group",
        image_key: str = "pixel_values",
        out: str | None = None,
        data_config: dict | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.pruning = pruning or PruningChoice()
        self.hparams["model"], self.hparams["pruning"] = asdict(model), asdict(self.pruning)
        self.test_specs = _checked_tests(tests, group_names)
        self.class_prompts = _checked_prompts(class_prompts)
        if out is not None:
            PRUNE_FOLDER.check(out)
        self.spec = model
        self.adapter = model.load(Capability.EMBED, "prune")
        if out is not None:
            check_exportable(self.adapter)
        dim = self._embed_texts(["a"]).shape[1]  # D, so that N is refused before any image is embedded
        self.pruning.count(dim)
        self.outcome: dict | None = None
        self._batches: list[tuple[Tensor, Tensor, Tensor]] = []

    def on_predict_start(self) -> None:
        """Check ``out`` again, now that Lightning has written what it writes at the start (a ``config.yaml`` in
        the trainer's root, which must not be ``out``); then embed every test's A and B and every class prompt
        once."""
        if self.hparams.out is not None and self.trainer.is_global_zero:
            PRUNE_FOLDER.check(self.hparams.out)
        self.attributes = [(self._embed_texts(spec["a"]), self._embed_texts(spec["b"])) for spec in self.test_specs]
        self.prompts = self._embed_texts([p for prompts in self.class_prompts for p in prompts])  # (P, D)
        self.prompt_classes = torch.tensor([k for k, prompts in enumerate(self.class_prompts) for _ in prompts])

    def on_predict_epoch_start(self) -> None:
        self._batches = []

    def predict_step(self, batch: dict, batch_idx: int) -> None:
        keys = self.hparams.image_key, self.hparams.label_key, self.hparams.group_key
        missing = [key for key in keys if key not in batch]
        if missing:
            raise ConfigError(
                f"Expected batch keys {list(keys)} but {missing} are missing; the batch has {sorted(batch)}"
            )
        pixels = self.adapter.prepare_images(batch[self.hparams.image_key])
        images = self.adapter.embed_images(pixels.to(self.device)).float()  # (B, D)
        labels, groups = (torch.as_tensor(batch[key], device=self.device).long() for key in keys[1:])
        self._batches.append((images, labels, groups))

    def on_predict_epoch_end(self) -> None:
        if self._batches:
            local = [torch.cat(part) for part in zip(*self._batches)]
        else:  # a rank with no batch still joins the gathers
            empty = torch.empty(0, dtype=torch.long, device=self.device)
            local = [torch.empty(0, self.prompts.shape[1], device=self.device), empty, empty]
        images, labels, groups = (self._gather_rows(rows).cpu() for rows in local)
        order = canonical_order(images, labels, groups)
        images, labels, groups = images[order], labels[order], groups[order]
        self.outcome = self.select(images.double(), labels, groups)
        if not self.trainer.is_global_zero:
            return
        summary, rows = self.outcome["summary"], self.outcome["tradeoff"]
        for worse in summary["worsened"]:
            changes = ["raises |d|"] * worse["abs_raised"] + ["flips its sign"] * worse["sign_flipped"]
            logger.warning(
                f"warning: test {worse['test']!r}: removing the {summary['n_remove']} dimensions "
                f"{' and '.join(changes)}: d {worse['effect_size_before']:+.3f} -> {worse['effect_size_after']:+.3f} "
                "(recorded in prune.json under `worsened`; tradeoff.png shows the bias at other N)"
            )
        if self.hparams.out is not None:
            write_pruning_outputs(
                self.hparams.out, self.adapter, summary, rows, summary["n_remove"], files=_model_cards(summary)
            )

    def select(self, images: Tensor, labels: Tensor, groups: Tensor) -> dict:
        """Selection, accuracy and trade-off from all image embeddings ``(n, D)`` with their class and group labels."""
        hp = self.hparams
        bad = (~torch.isfinite(images).all(1)).nonzero().flatten()
        if bad.numel():
            raise InputError(
                f"{bad.numel()} of {images.shape[0]} image embeddings hold NaN or inf (rows {bad[:10].tolist()}); "
                f"model {self.spec.name!r} cannot be pruned on them"
            )
        outside = groups[(groups < 0) | (groups >= len(hp.group_names))].unique()
        if outside.numel():
            raise InputError(
                f"Expected group labels in [0, {len(hp.group_names)}) ({hp.group_names}) but got {outside.tolist()}"
            )
        tests = [
            BiasTest(spec["name"], *self._group_images(images, groups, spec), a.double().cpu(), b.double().cpu())
            for spec, (a, b) in zip(self.test_specs, self.attributes, strict=True)
        ]
        seed, choice = self.spec.seed, self.pruning
        mi = mutual_information(images, groups if choice.strategy == "clip_clip" else labels, seed=seed)
        options = {
            "strategy": choice.strategy,
            "theta": choice.theta,
            "theta_quantile": choice.theta_quantile,
            "objective": choice.objective,
        }
        result = replace(select_dimensions(tests, mi, choice.count(images.shape[1]), **options), seed=seed)
        order, max_dims = self._removal_order(tests, mi, result, options, images.shape[1])
        prompts = self.prompts.double().cpu()
        rows = tradeoff_rows(tests, images, labels, prompts, self.prompt_classes, order, result.n_remove, choice.step)
        accuracy = {n: row["zero_shot_accuracy"] for n, row in ((row["n_removed"], row) for row in rows)}
        summary = {
            "model": self.spec.name,
            "checkpoint": self.spec.checkpoint,
            "tiny": self.spec.tiny,
            "data": hp.data_config,
            "n_images": images.shape[0],
            "embedding_dim": images.shape[1],
            "n_dims": choice.n_dims,
            "fraction": choice.fraction,
            "mi_labels": hp.group_key if choice.strategy == "clip_clip" else hp.label_key,
            **result.to_dict(),
            "zero_shot_accuracy": {"before": accuracy[0], "after": accuracy[result.n_remove]},
            "tradeoff": {"max_dims": max_dims, "reached": len(order), "step": choice.step, "order": list(order)},
            "worsened": worsened_tests(result.effect_sizes_before, result.effect_sizes_after),
        }
        return {"summary": summary, "tradeoff": rows}

    def _removal_order(
        self, tests: list[BiasTest], mi: Tensor, result: PruningResult, options: dict, dim: int
    ) -> tuple[list[int], int]:
        """The strategy's first ``max_dims`` removals, whose first N are ``result.removed`` (each strategy's
        order is a prefix-stable ranking); when fewer dimensions lower the bias, the curve ends at N."""
        max_dims = self.pruning.max_dims if self.pruning.max_dims is not None else round(MAX_DIMS_FRACTION * dim)
        max_dims = min(max(max_dims, result.n_remove), dim - 1)
        if max_dims == result.n_remove:
            return result.removed, max_dims
        try:
            return select_dimensions(tests, mi, max_dims, **options).removed, max_dims
        except ConfigError:  # too few candidates lower the bias for the longer curve
            return result.removed, max_dims

    def _group_images(self, images: Tensor, groups: Tensor, spec: dict) -> tuple[Tensor, Tensor]:
        names = self.hparams.group_names
        sets = tuple(images[groups == names.index(spec[role])] for role in ("x", "y"))
        empty = [spec[role] for role, s in zip(("x", "y"), sets) if s.shape[0] == 0]
        if empty:
            raise InputError(
                f"Bias test {spec['name']!r}: no images of group(s) {empty} among the {images.shape[0]} predicted"
            )
        return sets

    def _embed_texts(self, texts: Sequence[str]) -> Tensor:
        with torch.no_grad():
            return self.adapter.embed_texts(self.adapter.prepare_texts(list(texts))).float()

    def _gather_rows(self, rows: Tensor) -> Tensor:
        """``rows`` of every rank, concatenated in rank order (uneven counts padded for ``all_gather``)."""
        if self.trainer.world_size == 1:
            return rows
        counts = self.all_gather(torch.tensor(rows.shape[0], device=self.device))  # (W,)
        padded = rows.new_zeros((int(counts.max()), *rows.shape[1:]))
        padded[: rows.shape[0]] = rows
        gathered = self.all_gather(padded)  # (W, max, ...)
        return torch.cat([gathered[rank, : int(count)] for rank, count in enumerate(counts)])


def _model_cards(summary: dict) -> dict[str, bytes]:
    """The model card (``README.md``) of each exported model (:data:`USAGE`), by its path in the run folder."""
    from vlbias.report.model_card import CARD_NAME, card_text, pruning_card

    card = pruning_card(summary)
    return {
        f"{folder}/{CARD_NAME}": card_text(card, library_name=library, usage=line).encode()
        for folder, (library, line) in USAGE.items()
    }


def canonical_order(images: Tensor, labels: Tensor, groups: Tensor) -> Tensor:
    """The permutation that sorts the rows ``(images (n, D), labels (n,), groups (n,))`` lexicographically by
    group, label, then embedding coordinates 0, 1, ...: the same set of rows gives the same order on any
    number of processes, whatever order the ranks gathered them in."""
    keys = torch.cat([groups[:, None].double(), labels[:, None].double(), images.double()], dim=1)
    return torch.from_numpy(np.lexsort(keys.numpy().T[::-1]))


def _checked_tests(tests: list[dict], group_names: list[str]) -> list[dict]:
    if len(set(group_names)) != len(group_names) or len(group_names) < 2:
        raise ConfigError(f"Expected at least 2 distinct `group_names` but got {group_names!r}")
    if not tests:
        raise ConfigError("Expected at least one bias test in `tests` but got none")
    for index, spec in enumerate(tests):
        if not isinstance(spec, dict) or set(spec) != {"name", "x", "y", "a", "b"}:
            raise ConfigError(f"Expected `tests[{index}]` to have exactly keys name, x, y, a, b but got {spec!r}")
        unknown = [spec[role] for role in ("x", "y") if spec[role] not in group_names]
        if unknown:
            raise ConfigError(f"`tests[{index}]` names group(s) {unknown}; expected among `group_names` {group_names}")
        for role in ("a", "b"):
            if not spec[role] or not all(isinstance(p, str) and p.strip() for p in spec[role]):
                raise ConfigError(
                    f"Expected `tests[{index}].{role}` to be a non-empty list of phrases but got {spec[role]!r}"
                )
    return tests


def _checked_prompts(class_prompts: list[list[str]]) -> list[list[str]]:
    if len(class_prompts) < 2:
        raise ConfigError(f"Expected prompts for at least 2 zero-shot classes but got {len(class_prompts)}")
    for index, prompts in enumerate(class_prompts):
        if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
            raise ConfigError(
                f"Expected `class_prompts[{index}]` to be a non-empty list of prompts but got {prompts!r}"
            )
    return class_prompts
