"""Masked-language-model (+ image-text matching) pre-training of any FILL_MASK adapter."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jsonargparse.typing import ClosedUnitInterval
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from vlbias.models.base import Capability
from vlbias.modules.adapter_module import AdapterModule
from vlbias.modules.model_spec import TINY_ALBEF, ModelSpec
from vlbias.objectives.itm import itm_loss
from vlbias.objectives.masked_lm import IGNORE_INDEX, mask_tokens, masked_lm_loss
from vlbias.options import check_value

__all__ = ["IGNORE_INDEX", "MaskedLMPretraining", "mask_tokens"]


class MaskedLMPretraining(AdapterModule):
    """Train a FILL_MASK adapter on image-caption batches (images at ``image_key``, captions at
    ``caption_key``).

    The data's vocabulary comes from configuration: ``groups`` and ``key_words`` are the words of
    which one per caption is always masked (for BiasWorld: its groups and its activities, written
    out in ``configs/experiment/biasworld_mlm.yaml``); words the tokenizer splits into pieces or
    does not know are ignored.

    Loss: the masked-word cross-entropy given the image (:func:`mask_tokens`; ALBEF eq. 4) plus,
    when the adapter has MATCH, ``itm_weight`` times the binary cross-entropy of
    ``match_logits`` (log-odds of "match", ALBEF eq. 3) on the batch's own pairs (label 1) and
    on captions shuffled within the batch. A shuffled caption has label 1 where it still
    describes the image. When the batch carries both labels (``content_label_key``,
    ``group_label_key``) that is: the same content label and either the same group label or no
    word of ``groups`` in the caption. Otherwise (the keys are ``None`` or absent from the batch)
    the negatives are plain shuffled captions: label 1 only for a caption identical to the
    image's own.

    Logged: ``{stage}/loss``, ``{stage}/mlm_loss``, ``{stage}/mlm_accuracy`` (all masked
    positions), ``{stage}/group_accuracy`` and ``{stage}/key_word_accuracy`` (the forced words of
    ``groups`` and of ``key_words``), ``{stage}/itm_loss``. Validation masks with a generator
    seeded by the batch index, so every epoch is scored on the same masks. At the end of ``fit``
    the adapter is exported with ``save_pretrained`` to ``<log_dir>/model``.

    Args:
        model, optimizer, scheduler: as :class:`AdapterModule`; the model needs the FILL_MASK capability.
        mask_rate: probability that a token is masked (BERT: 0.15), besides the forced word, in [0, 1].
        groups: group words: always masked, and a caption naming one names a group (ITM labels).
        key_words: other words of which one per caption is always masked (``None``: none).
        image_key: batch key of the images.
        caption_key: batch key of the captions.
        content_label_key: batch key of what each caption says besides the group (BiasWorld:
            ``activity``); ``None``: no such label (plain shuffled-caption negatives).
        group_label_key: batch key of each image's group (BiasWorld: ``group``); ``None``: no
            such label (plain shuffled-caption negatives).
        itm_weight: weight of the ITM loss (0 turns it off).
    """

    capability = Capability.FILL_MASK
    purpose = "masked-LM pre-training"

    def __init__(
        self,
        model: ModelSpec = TINY_ALBEF,
        mask_rate: float = 0.15,
        groups: list[str] | None = None,
        key_words: list[str] | None = None,
        image_key: str = "pixel_values",
        caption_key: str = "caption",
        content_label_key: str | None = None,
        group_label_key: str | None = None,
        itm_weight: float = 1.0,
        optimizer: OptimizerCallable = lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01),
        scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        check_value("mask_rate", mask_rate, ClosedUnitInterval, "masked-LM option")
        super().__init__(model, optimizer, scheduler)
        self.use_itm = itm_weight > 0 and Capability.MATCH in self.adapter.capabilities
        self.groups = [word.lower() for word in groups or []]
        tokenizer = self.adapter.tokenizer
        self._group_ids = self._single_piece_ids(tokenizer, self.groups)
        self._key_ids = self._single_piece_ids(tokenizer, self.groups + list(key_words or []))
        self._special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))

    @staticmethod
    def _single_piece_ids(tokenizer, words: Sequence[str]) -> Tensor:
        """Ids of the ``words`` that the tokenizer reads as one known piece."""
        pieces = [tokenizer(word, add_special_tokens=False)["input_ids"] for word in words]
        ids = {piece[0] for piece in pieces if len(piece) == 1 and piece[0] != tokenizer.unk_token_id}
        return torch.tensor(sorted(ids), dtype=torch.long)

    def _mask(self, tokens: dict[str, Tensor], generator: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor]:
        """:func:`mask_tokens` on the texts ``tokens``: masked ids, labels and forced key-word positions ``(B, T)``."""
        input_ids = tokens["input_ids"]
        special = torch.isin(input_ids, self._special_ids.to(input_ids.device))
        return mask_tokens(
            input_ids, special, self._key_ids.to(input_ids.device), self.adapter.tokenizer.mask_token_id,
            len(self.adapter.tokenizer), self.hparams.mask_rate, generator,
        )  # fmt: skip

    def _log_mlm(
        self, stage: str, loss: Tensor, logits: Tensor, input_ids: Tensor, labels: Tensor, forced: Tensor
    ) -> None:
        """Log ``{stage}/mlm_loss`` and the accuracies over all masked, forced group and forced key-word positions."""
        self.log(f"{stage}/mlm_loss", loss, prog_bar=True, batch_size=len(input_ids))
        correct = logits.argmax(dim=-1) == input_ids  # (B, T)
        is_group = torch.isin(input_ids, self._group_ids.to(input_ids.device))
        accuracies = {"mlm": labels != IGNORE_INDEX, "group": forced & is_group, "key_word": forced & ~is_group}
        for name, where in accuracies.items():
            if where.any():
                accuracy = correct[where].float().mean()
                self.log(f"{stage}/{name}_accuracy", accuracy, prog_bar=stage == "val", batch_size=int(where.sum()))

    def _mlm(
        self, image_states: Tensor, tokens: dict[str, Tensor], generator: torch.Generator | None, stage: str
    ) -> Tensor:
        masked, labels, forced = self._mask(tokens, generator)
        logits = self.adapter.fill_mask_logits_of_states(image_states, {**tokens, "input_ids": masked})  # (B, T, V)
        loss = masked_lm_loss(logits, labels)
        self._log_mlm(stage, loss, logits, tokens["input_ids"], labels, forced)
        return loss

    def _itm(
        self,
        image_states: Tensor,
        tokens: dict[str, Tensor],
        describes: Tensor,
        generator: torch.Generator | None,
        stage: str,
    ) -> Tensor:
        """ITM on the batch's own pairs and one drawn pair per image, each labelled by ``describes`` ``(B, B)``
        (:meth:`_describes`); ``image_states``: the adapter's, of the batch's images; ``tokens``: its captions,
        prepared."""
        batch_size = len(describes)
        order = torch.randperm(batch_size, generator=generator)
        own, device = torch.arange(batch_size), tokens["input_ids"].device
        image_rows, text_rows = torch.cat([own, own]).to(device), torch.cat([own, order]).to(device)
        text_states = self.adapter.text_states(tokens)
        logits = self.adapter.match_logits_of_states(image_states, text_states, image_rows, text_rows)  # (2B,)
        targets = describes[torch.arange(batch_size), order].float()  # (B,)
        labels = torch.cat([torch.ones(batch_size), targets]).to(logits.device)
        loss = itm_loss(logits, labels)
        self.log(f"{stage}/itm_loss", loss, batch_size=batch_size)
        return loss

    def _describes(self, batch: dict[str, object], captions: list[str]) -> Tensor:
        """``(B, B)`` bool: caption ``j`` describes image ``i``. With the batch's content and group labels:
        the same content label and either the same group or no group word in caption ``j``; otherwise:
        caption ``j`` is identical to image ``i``'s own."""
        content_key, group_key = self.hparams.content_label_key, self.hparams.group_label_key
        if content_key in batch and group_key in batch:
            content, group = torch.as_tensor(batch[content_key]).cpu(), torch.as_tensor(batch[group_key]).cpu()
            groups = set(self.groups)
            names_group = torch.tensor([bool(set(text.lower().rstrip(".").split()) & groups) for text in captions])
            same_group = group.view(-1, 1) == group.view(1, -1)
            return (content.view(-1, 1) == content.view(1, -1)) & (same_group | ~names_group.view(1, -1))
        return torch.tensor([[mine == theirs for theirs in captions] for mine in captions])

    def _step(self, batch: dict[str, object], stage: str, generator: torch.Generator | None = None) -> Tensor:
        # one image encoding for MLM and ITM (the adapter's image_states)
        image_states = self.adapter.image_states(self.adapter.prepare_images(batch[self.hparams.image_key]))
        captions = list(batch[self.hparams.caption_key])
        batch_size = len(captions)
        tokens = self.adapter.prepare_texts(captions)  # once, for MLM and ITM
        loss = self._mlm(image_states, tokens, generator, stage)
        if self.use_itm:
            describes = self._describes(batch, captions)
            loss = loss + self.hparams.itm_weight * self._itm(image_states, tokens, describes, generator, stage)
        self.log(f"{stage}/loss", loss, batch_size=batch_size)
        return loss

    def training_step(self, batch: dict[str, object], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "val", torch.Generator().manual_seed(batch_idx))

    def test_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "test", torch.Generator().manual_seed(batch_idx))
