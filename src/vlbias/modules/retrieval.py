r"""Image-text retrieval fine-tuning and evaluation (ALBEF's ``Retrieval.py``, BLIP's ``train_retrieval.py``).

**Training.** Every step embeds the batch's images and captions and minimises

.. math::
    \mathcal{L} = \mathcal{L}_\text{ITC} + w_\text{ITM}\, \mathcal{L}_\text{ITM}

:math:`\mathcal{L}_\text{ITC}`: symmetric InfoNCE (:func:`~vlbias.objectives.contrastive.itc_loss`) against the
images and captions of every rank's batch (``self.all_gather(..., sync_grads=True)`` when the world size is
above 1), at the adapter's learnable temperature or a fixed one. transformers' ``BlipForImageTextRetrieval``
keeps no ITC temperature (BLIP's ``temp`` is not converted), so for BLIP the module learns its own as BLIP's
``blip_retrieval.py`` does: :math:`\tau` initialised to :data:`BLIP_TEMPERATURE` and clamped to
:data:`BLIP_TEMPERATURE_RANGE` before every step (the evaluation's rankings do not depend on it, so the exported
model needs none). A pair is positive when it is the same image (the batch's ``image_index``, as
:class:`~vlbias.data.caption_datamodule.CaptionDataModule` gives it) or, without image indices (BiasWorld), when the captions are
identical: ALBEF's targets of its retrieval fine-tuning, where every caption of an image is a positive of it.
:math:`\mathcal{L}_\text{ITM}`: for adapters with MATCH (ALBEF, BLIP) image-text matching with one hard negative
text per image and one hard negative image per text, drawn within the local batch by the ITC similarity
(:mod:`vlbias.objectives.itm`). Dual encoders (CLIP, open_clip, SigLIP: ``match_follows_embeddings``) train their
own contrastive loss alone: InfoNCE for those whose pair score is a softmax logit (CLIP, open_clip's CLIPs), and
for SigLIP (``match_score`` ``"sigmoid"``: SigLIP 1 and 2, open_clip's SigLIPs) SigLIP's pairwise sigmoid loss
(:func:`~vlbias.objectives.sigmoid.sigmoid_loss`, Zhai et al., 2023, Eq. 1) with the model's scale and bias, over
the same positives and gathered texts, in place of :math:`\mathcal{L}_\text{ITC}`.

**Evaluation** (``validate``, ``test``), as ALBEF and BLIP evaluate: every image and caption of the split is
embedded, :math:`S = I T^\top` ``(n_images, n_captions)``; adapters with MATCH re-score the ``k_test``
candidates of every query (:func:`~vlbias.retrieval.rerank.rerank`, with the similarity added); CLIP
ranks by :math:`S` alone, and so do open_clip and SigLIP, whose pair score :math:`e^{\tau}\cos + b` would
re-rank the candidates in the order :math:`S` gives them (``match_follows_embeddings``). Text retrieval (image → its captions) and image retrieval (caption → its image)
R@1/5/10, as fractions, by :class:`~vlbias.metrics.retrieval.RetrievalRecall` (pessimistic on ties).

Gallery sizes: every K of ``ks`` and (MATCH adapters) ``k_test`` must fit the smaller gallery of the evaluated
split (its images or its captions). They are checked once per stage against the whole split: in :meth:`setup`,
from the datamodule's dataloader, before the run trains or evaluates anything (without a datamodule, when the
split's first evaluation starts), and a K that does not fit is refused naming both sizes. Refused, not clipped,
as ALBEF's own evaluation does (its ``sims.topk(k=config['k_test'])`` fails on a gallery smaller than ``k_test``):
a clipped ``k_test`` would re-rank every candidate and report R@K of another protocol under the configured name;
a small corpus (the synthetic COCO of the retrieval guide) sets ``model.init_args.k_test`` to fit. A pass that sees part
of the split (Lightning's sanity check, ``fast_dev_run``, ``limit_val_batches``) evaluates what it saw: the K above
its smaller gallery are left out of that pass (and ``r_mean`` is the mean of those computed) and ``k_test``
re-ranks every candidate, with a line saying so.

Ground truth: a row of the evaluation dataloader is one caption. With ``image_index`` in the batch the rows
of one image share it (one image, several captions); without it (BiasWorld: one caption per image) every row
is its own image and its own caption is its only answer. Images with identical captions ("a man cooking")
are *not* interchangeable: the retrieved image must be the query's own, so R@1 of a model that reads only
the caption's content is at most one over the number of images sharing that caption, and the numbers are
comparable to those of COCO and Flickr30K, whose ground truth is also the image's own captions. Identical
captions have identical scores, and ties count against the query (pessimistic): an image's text retrieval is a
hit at K only if its caption and every copy of it fit in the top K.

Under DDP every rank embeds its shard of the split; the shards are gathered (``all_gather_object``; the
evaluation split is held whole on every rank, as ALBEF holds its similarity matrix), the repeats that
``DistributedSampler`` pads the last shard with are dropped, and each rank scores every ``world``-th query
into the metric, whose ``cat`` states join them. Adapters whose heads the loss leaves unused (ALBEF's and
BLIP's masked-LM head) train under ``strategy: ddp_find_unused_parameters_true``.

Logged: ``train/itc_loss``, ``train/itm_loss`` (MATCH adapters), ``train/loss``, ``{stage}/loss`` (the
batch-local ITC loss), and ``{stage}/tr_r{K}``, ``{stage}/tr_r_mean``, ``{stage}/ir_r{K}``,
``{stage}/ir_r_mean``, ``{stage}/r_mean`` for ``stage`` in ``val``, ``test``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import torch
import torch.distributed as dist
from jsonargparse.typing import NonNegativeFloat, PositiveFloat, PositiveInt
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from vlbias.errors import ConfigError
from vlbias.metrics.retrieval import RetrievalRecall
from vlbias.models.base import Capability
from vlbias.modules.adapter_module import AdapterModule
from vlbias.modules.model_spec import TINY_CLIP, ModelSpec
from vlbias.objectives.contrastive import itc_loss
from vlbias.objectives.itm import hard_negative_itm
from vlbias.objectives.sigmoid import sigmoid_loss
from vlbias.options import check_value
from vlbias.retrieval.rerank import rerank

#: BLIP's ITC temperature: its initial value and the range it is clamped to (``blip_retrieval.py``, ``self.temp``).
BLIP_TEMPERATURE = 0.07
BLIP_TEMPERATURE_RANGE = (0.001, 0.5)
_STAGE_KEYS = {"txt": "tr", "img": "ir"}  # RetrievalRecall's prefixes -> the log's


class RetrievalFinetuning(AdapterModule):
    """Fine-tune an EMBED adapter for image-text retrieval and evaluate TR/IR R@K (module docstring).

    Batches: ``pixel_values`` (B, 3, S, S), ``caption`` (B str) and optionally ``image_index`` (B,).
    At the end of ``fit`` the adapter is exported to ``<log_dir>/model`` (:class:`AdapterModule`).

    Args:
        model, optimizer, scheduler: as :class:`AdapterModule`; the model needs the EMBED capability (``clip``,
            ``albef``, ``blip``, ...).
        temperature: a fixed ITC temperature :math:`\\tau` > 0 (logit scale :math:`\\log 1/\\tau`); ``None``:
            the adapter's own, learnt (BLIP: the module's own, learnt; see the module docstring).
        itm_weight: :math:`w_\\text{ITM}` >= 0; read only by adapters with an ITM head (0: ITC alone).
        k_test: candidates re-ranked by ITM per query in evaluation (MATCH adapters), >= 1; at most the
            smaller gallery of the evaluated split.
        ks: the recall cut-offs K; each at most the smaller gallery.
        rerank_batch_size: pairs per ITM forward pass in evaluation.
    """

    capability = Capability.EMBED
    purpose = "retrieval fine-tuning"

    def __init__(
        self,
        model: ModelSpec = TINY_CLIP,
        temperature: float | None = None,
        itm_weight: float = 1.0,
        k_test: int = 16,
        ks: Sequence[int] = (1, 5, 10),
        rerank_batch_size: int = 256,
        optimizer: OptimizerCallable = lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01),
        scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        for name, value, kind in [
            ("temperature", temperature, PositiveFloat | None),
            ("itm_weight", itm_weight, NonNegativeFloat),
            ("k_test", k_test, PositiveInt),
        ]:
            check_value(name, value, kind, "retrieval option")
        super().__init__(model, optimizer, scheduler)
        own_temperature = temperature is None and not hasattr(self.adapter, "logit_scale")
        self.temperature = nn.Parameter(torch.tensor(BLIP_TEMPERATURE)) if own_temperature else None
        self.use_match = Capability.MATCH in self.adapter.capabilities
        self.use_itm = self.use_match and itm_weight > 0 and not self.adapter.match_follows_embeddings
        self.sigmoid = self.adapter.match_score == "sigmoid"  # SigLIP's loss in place of ITC
        # a pair score that follows the embeddings' cosine (open_clip, SigLIP) would re-rank the top k_test in the
        # order they already have: evaluation ranks by the cosine alone
        self.rerank_eval = self.use_match and not self.adapter.match_follows_embeddings
        self.val_recall = RetrievalRecall(ks=tuple(ks))
        self.test_recall = RetrievalRecall(ks=tuple(ks))
        self._rows: list[dict[str, object]] = []
        self._checked_galleries: set[str] = set()

    # -- training -----------------------------------------------------------------------------
    def _logit_scale(self) -> Tensor:
        if self.temperature is not None:
            with torch.no_grad():
                self.temperature.clamp_(*BLIP_TEMPERATURE_RANGE)
            return -torch.log(self.temperature)
        if self.hparams.temperature is None:
            return self.adapter.logit_scale
        return torch.tensor(math.log(1.0 / self.hparams.temperature), device=self.device)

    @staticmethod
    def _keys(batch: dict[str, object], captions: list[str]) -> Tensor:
        """``(B,)`` long: equal for positive pairs: the image index, or without one a CRC32 of the caption
        (stable across processes, unlike ``hash``)."""
        if "image_index" in batch:
            return torch.as_tensor(batch["image_index"]).long()
        return torch.tensor([zlib.crc32(caption.encode()) for caption in captions], dtype=torch.long)

    def training_step(self, batch: dict[str, object], batch_idx: int) -> Tensor:
        captions = list(batch["caption"])
        n = len(captions)
        pixel_values = self.adapter.prepare_images(batch["pixel_values"])
        tokens = self.adapter.prepare_texts(captions)
        image_states = self.adapter.image_states(pixel_values)  # the one image encoding ITC and ITM share
        text_states = self.adapter.text_states(tokens)  # and the one text encoding
        images = self.adapter.embed_image_states(image_states)  # (B, D)
        texts = self.adapter.embed_text_states(text_states)  # (B, D)
        keys = self._keys(batch, captions).to(images.device)  # (B,)
        gallery_images, gallery_texts, gallery_keys = images, texts, keys
        if self.trainer.world_size > 1:  # the same B on every rank: DistributedSampler pads the shards
            gallery_images = self.all_gather(images, sync_grads=True).flatten(0, 1)  # (W * B, D)
            gallery_texts = self.all_gather(texts, sync_grads=True).flatten(0, 1)
            gallery_keys = self.all_gather(keys).flatten(0, 1)
        positives = keys[:, None] == gallery_keys[None, :]  # (B, W * B)
        if self.sigmoid:
            loss = sigmoid_loss(images, gallery_texts, self._logit_scale(), self.adapter.logit_bias, positives)
            self.log("train/sigmoid_loss", loss, batch_size=n)
        else:
            loss = itc_loss(images, texts, self._logit_scale(), gallery_images, gallery_texts, positives)
            self.log("train/itc_loss", loss, batch_size=n)
        if self.use_itm:
            describes = (keys[:, None] == keys[None, :]).cpu()  # (B, B)
            loss = loss + self.hparams.itm_weight * self._itm(image_states, text_states, images, texts, describes)
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        return loss

    def _itm(
        self, image_states: Tensor, text_states: dict[str, Tensor], images: Tensor, texts: Tensor, describes: Tensor
    ) -> Tensor:
        """ITM on the batch's pairs, one hard negative text per image and one hard negative image per text,
        drawn by the ITC similarity among the pairs that are not positive (:mod:`vlbias.objectives.itm`), on the
        image and text states the contrast read."""
        similarity = (images @ texts.T).detach()  # (B, B)
        loss = hard_negative_itm(self.adapter, image_states, text_states, describes, similarity)
        self.log("train/itm_loss", loss, batch_size=len(describes))
        return loss

    # -- evaluation ----------------------------------------------------------------------------
    def validation_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._collect(batch, "val")

    def test_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._collect(batch, "test")

    def setup(self, stage: str) -> None:
        split = {"fit": "val", "validate": "val", "test": "test"}.get(stage)
        datamodule = self.trainer.datamodule
        if split is not None and datamodule is not None:
            self._check_gallery(split, getattr(datamodule, f"{split}_dataloader")())

    def on_validation_start(self) -> None:
        self._check_gallery("val", self.trainer.val_dataloaders)

    def on_test_start(self) -> None:
        self._check_gallery("test", self.trainer.test_dataloaders)

    def _check_gallery(self, stage: str, loader: object) -> None:
        """Refuse ``ks`` or ``k_test`` above the smaller gallery of the whole split ``stage``, once per stage. The
        split's captions are its rows; its images ``dataset.n_images`` when the dataset says, else one per row."""
        dataset = getattr(loader, "dataset", None)
        if stage in self._checked_galleries or dataset is None:
            return
        self._checked_galleries.add(stage)
        n_captions = len(dataset)
        n_images = getattr(dataset, "n_images", n_captions)
        gallery = min(n_images, n_captions)
        too_large = (
            [f"ks {[k for k in self.val_recall.ks if k > gallery]}"] if max(self.val_recall.ks) > gallery else []
        )
        if self.rerank_eval and self.hparams.k_test > gallery:
            too_large.append(f"k_test {self.hparams.k_test}")
        if too_large:
            raise ConfigError(
                f"Retrieval option(s) {' and '.join(too_large)} exceed the {stage} split's smaller gallery: "
                f"{n_images} images, {n_captions} captions; set `model.init_args.ks` and `model.init_args.k_test` to "
                f"at most {gallery}."
            )

    def on_validation_epoch_start(self) -> None:
        self._rows = []

    def on_test_epoch_start(self) -> None:
        self._rows = []

    def on_validation_epoch_end(self) -> None:
        self._evaluate("val", self.val_recall)

    def on_test_epoch_end(self) -> None:
        self._evaluate("test", self.test_recall)

    def _collect(self, batch: dict[str, object], stage: str) -> None:
        """Embed a batch of the evaluated split, keep what the epoch's end ranks, and log its local ITC loss."""
        captions = list(batch["caption"])
        pixel_values = self.adapter.prepare_images(batch["pixel_values"])
        images = self.adapter.embed_images(pixel_values)
        texts = self.adapter.embed_texts(self.adapter.prepare_texts(captions))
        keys = self._keys(batch, captions).to(images.device)
        loss = itc_loss(images, texts, self._logit_scale(), positives=keys[:, None] == keys[None, :])
        self.log(f"{stage}/loss", loss, prog_bar=True, batch_size=len(captions), sync_dist=True)
        self._rows.append(
            {
                "images": images.cpu(),
                "texts": texts.cpu(),
                "captions": captions,
                "image_index": batch["image_index"].cpu().long() if "image_index" in batch else None,
                "pixel_values": pixel_values.cpu() if self.rerank_eval else None,
            }
        )

    def _split_rows(self, stage: str) -> tuple[list[int], dict[str, object]]:
        """Every rank's rows joined in the split's order: ``(positions, rows)`` with ``positions`` the rows'
        indices in the dataset (rank ``r``'s ``j``-th row is index ``r + j * world`` under the unshuffled
        ``DistributedSampler``); the padding repeats (index >= the dataset's length) are dropped."""
        local = {
            "images": torch.cat([row["images"] for row in self._rows]),
            "texts": torch.cat([row["texts"] for row in self._rows]),
            "captions": [caption for row in self._rows for caption in row["captions"]],
            "image_index": None if self._rows[0]["image_index"] is None else torch.cat(
                [row["image_index"] for row in self._rows]
            ),
            "pixel_values": torch.cat([row["pixel_values"] for row in self._rows]) if self.rerank_eval else None,
        }  # fmt: skip
        world = self.trainer.world_size
        if world == 1:
            return list(range(len(local["captions"]))), local
        shards: list[dict[str, object]] = [None] * world
        dist.all_gather_object(shards, local)
        loader = self.trainer.val_dataloaders if stage == "val" else self.trainer.test_dataloaders
        length = len(loader.dataset)
        order = sorted(
            (rank + j * world, rank, j) for rank, shard in enumerate(shards) for j in range(len(shard["captions"]))
        )
        order = [(position, rank, j) for position, rank, j in order if position < length]
        positions = [position for position, _, _ in order]

        def pick(key: str):
            if shards[0][key] is None:
                return None
            if key == "captions":
                return [shards[rank][key][j] for _, rank, j in order]
            return torch.stack([shards[rank][key][j] for _, rank, j in order])

        return positions, {key: pick(key) for key in local}

    def _evaluate(self, stage: str, metric: RetrievalRecall) -> None:
        """TR/IR R@K of the whole split (module docstring), logged as ``{stage}/tr_r{K}`` ... ``{stage}/r_mean``."""
        if not self._rows:
            return
        positions, rows = self._split_rows(stage)
        self._rows = []
        image_ids = torch.tensor(positions) if rows["image_index"] is None else rows["image_index"]
        distinct, caption_to_image = torch.unique(image_ids, return_inverse=True)  # (n_images,), (n_captions,)
        first = torch.full((len(distinct),), len(image_ids)).scatter_reduce(
            0, caption_to_image, torch.arange(len(image_ids)), reduce="amin"
        )  # each image's first row
        images, texts = rows["images"][first], rows["texts"]
        similarity = (images @ texts.T).to(self.device)  # (n_images, n_captions)
        metric, k_test = self._fitted(stage, metric, *similarity.shape)
        if metric is None:
            return
        text_scores = image_scores = similarity
        if self.rerank_eval:
            pixel_values = rows["pixel_values"][first].to(self.device)
            tokens = self.adapter.prepare_texts(rows["captions"])
            with self.full_parameters():  # outside a step: under FSDP, the shards gathered
                text_scores, image_scores = rerank(
                    self.adapter, similarity, pixel_values, tokens, k_test, True, self.hparams.rerank_batch_size
                )
        rank, world = self.trainer.global_rank, self.trainer.world_size
        caption_to_image = caption_to_image.to(self.device)
        image_queries = torch.arange(rank, similarity.shape[0], world, device=self.device)
        caption_queries = torch.arange(rank, similarity.shape[1], world, device=self.device)
        metric.update(text_scores[image_queries], image_queries, caption_to_image, direction="text")
        metric.update(image_scores[:, caption_queries].T, caption_queries, caption_to_image, direction="image")
        results = metric.compute()
        metric.reset()
        for key, value in results.items():
            prefix, _, name = key.partition("_")
            if prefix in _STAGE_KEYS and name.startswith("r"):  # not ``txt_missing``: every image has a caption
                self.log(f"{stage}/{_STAGE_KEYS[prefix]}_{name}", value.float())
        self.log(f"{stage}/r_mean", results["r_mean"].float(), prog_bar=True)

    def _fitted(self, stage: str, metric: RetrievalRecall, n_images: int, n_captions: int):
        """``(metric, k_test)`` for a pass that saw ``n_images`` images and ``n_captions`` captions: as configured
        when every K fits the smaller gallery; otherwise (a pass over part of the split, module docstring) a metric
        of the K that fit (``None`` when none does) and ``k_test`` cut to the gallery, with a line saying so."""
        gallery, k_test = min(n_images, n_captions), self.hparams.k_test
        fitting = tuple(k for k in metric.ks if k <= gallery)
        cut_k_test = self.rerank_eval and k_test > gallery
        if len(fitting) == len(metric.ks) and not cut_k_test:
            return metric, k_test
        if self.trainer.sanity_checking:
            which = "the sanity check"
        elif self.trainer.fast_dev_run:
            which = "fast_dev_run"
        else:
            which = "this pass"
        left_out = [f"R@{k}" for k in metric.ks if k > gallery]
        changes = [f"{', '.join(left_out)} not computed"] if left_out else []
        changes += [f"k_test {gallery} instead of {k_test} (every candidate re-ranked)"] if cut_k_test else []
        rank_zero_info(
            f"{stage}: {which} evaluated a gallery of {n_images} images and {n_captions} captions: {'; '.join(changes)}"
        )
        if not fitting:
            return None, k_test
        fitted = metric if len(fitting) == len(metric.ks) else RetrievalRecall(ks=fitting).to(self.device)
        return fitted, min(k_test, gallery)
