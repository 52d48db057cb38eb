"""Contrastive image-text pre-training (CLIP's objective) of any EMBED adapter."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from vlbias.models.base import Capability
from vlbias.modules.adapter_module import AdapterModule
from vlbias.modules.model_spec import TINY_CLIP, ModelSpec


def contrastive_loss(
    image_embeddings: Tensor, text_embeddings: Tensor, logit_scale: Tensor, labels: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Symmetric InfoNCE over a batch of matching pairs (Radford et al., 2021, Fig. 3).

    ``logits = exp(t) * I @ T^T`` with normalised ``I``, ``T`` (B, D); the loss is the mean of the
    image->text and text->image cross-entropies with the diagonal as targets. Returns the loss and
    the image->text top-1 accuracy: the top caption is correct if it is the image's own, or, when
    ``labels`` (B,) give each pair's content class, any caption of the image's class (synthetic
    data repeats the same content in one batch, and which paraphrase wins is arbitrary).
    """
    logits = logit_scale.exp().clamp(max=100) * image_embeddings @ text_embeddings.T  # (B, B)
    targets = torch.arange(len(logits), device=logits.device)
    loss = (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
    best = logits.argmax(dim=1)
    correct = best == targets if labels is None else labels[best] == labels
    return loss, correct.float().mean()


class ContrastivePretraining(AdapterModule):
    """Train a dual encoder on image-caption batches (``pixel_values``, ``caption``).

    At the end of ``fit`` the adapter is exported with ``save_pretrained`` to
    ``<log_dir>/model``, loadable with ``vlbias measure --model <name> --checkpoint <log_dir>/model``.

    Args:
        model, optimizer, scheduler: as :class:`AdapterModule`; the model needs the EMBED capability.
    """

    capability = Capability.EMBED
    purpose = "contrastive pre-training"

    def __init__(
        self,
        model: ModelSpec = TINY_CLIP,
        optimizer: OptimizerCallable = lambda params: torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01),
        scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        super().__init__(model, optimizer, scheduler)

    def _step(self, batch: dict[str, object], stage: str) -> Tensor:
        images = self.adapter.embed_images(self.adapter.prepare_images(batch["pixel_values"]))
        texts = self.adapter.embed_texts(self.adapter.prepare_texts(batch["caption"]))
        loss, accuracy = contrastive_loss(images, texts, self.adapter.logit_scale, batch.get("label"))
        batch_size = len(batch["caption"])
        self.log(f"{stage}/loss", loss, prog_bar=True, batch_size=batch_size)
        self.log(f"{stage}/i2t_accuracy", accuracy, prog_bar=stage == "val", batch_size=batch_size)
        return loss

    def training_step(self, batch: dict[str, object], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "test")
