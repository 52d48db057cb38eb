"""Masked-language-model (+ image-text matching) pre-training of any FILL_MASK adapter."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.data.biasworld import ACTIVITIES, GROUPS
from vlbias.errors import ConfigError
from vlbias.models.base import Capability
from vlbias.modules.adapter_module import AdapterModule

IGNORE_INDEX = -100  # label of positions that carry no MLM loss (F.cross_entropy's default)


def mask_tokens(
    input_ids: Tensor,
    special: Tensor,
    key_ids: Tensor,
    mask_token_id: int,
    vocab_size: int,
    mask_rate: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """BERT's masking (Devlin et al., 2019, Sec. 3.1), as in ALBEF's MLM (Li et al., 2021, eq. 4),
    plus one *key word* per text that is always masked.

    Each non-special token is chosen with probability ``mask_rate``; in addition one token
    whose id is in ``key_ids`` (a group or activity word) is chosen uniformly per text that has
    one, so the model learns P(group | image, text) and P(activity | image, text), the
    probabilities CounterBias reads. Chosen tokens become ``[MASK]`` with probability 0.8, a
    random token with 0.1 and stay unchanged with 0.1.

    Args:
        input_ids: ``(B, T)`` token ids.
        special: ``(B, T)`` bool, positions never masked (special tokens, padding).
        key_ids: ``(K,)`` ids of the key words.
        mask_token_id: id of ``[MASK]``.
        vocab_size: random replacements are drawn from ``[0, vocab_size)``.
        mask_rate: probability that a non-special token is chosen.
        generator: random source (``None``: torch's global one).

    Returns:
        The masked ids ``(B, T)``, the labels ``(B, T)`` (the original id at chosen positions,
        ``-100`` elsewhere) and ``(B, T)`` bool, the forced key-word positions.

    Example:
        >>> ids = torch.tensor([[2, 10, 11, 12, 3]])
        >>> special = torch.tensor([[True, False, False, False, True]])
        >>> masked, labels, key = mask_tokens(ids, special, torch.tensor([11]), 4, 20, mask_rate=0.0)
        >>> labels.tolist(), key.tolist()
        ([[-100, -100, 11, -100, -100]], [[False, False, True, False, False]])
    """

    def rand() -> Tensor:  # (B, T) uniform draws from `generator`, on the ids' device
        return torch.rand(input_ids.shape, generator=generator).to(input_ids.device)

    is_key = torch.isin(input_ids, key_ids) & ~special  # (B, T)
    key_score = torch.where(is_key, rand(), torch.full(input_ids.shape, -1.0, device=input_ids.device))
    forced = F.one_hot(key_score.argmax(dim=1), input_ids.shape[1]).bool() & is_key  # one key word per text
    chosen = ((rand() < mask_rate) & ~special) | forced
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    action = rand()
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator).to(input_ids.device)
    masked = torch.where(chosen & (action < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, masked)
    return masked, labels, forced


class MaskedLMPretraining(AdapterModule):
    """Train a FILL_MASK adapter on image-caption batches (``pixel_values``, ``caption``).

    Loss: the masked-word cross-entropy given the image (:func:`mask_tokens`; ALBEF eq. 4) plus,
    when the adapter has MATCH, ``itm_weight`` times the binary cross-entropy of
    ``match_logits`` (log-odds of "match", ALBEF eq. 3) on the batch's own pairs (label 1) and
    on captions shuffled within the batch (label 1 only where the shuffled caption still
    describes the image: same ``activity`` and either the same ``group`` or no group word).

    Logged: ``{stage}/loss``, ``{stage}/mlm_loss``, ``{stage}/mlm_accuracy`` (all masked
    positions), ``{stage}/group_accuracy`` and ``{stage}/activity_accuracy`` (the forced key
    words), ``{stage}/itm_loss``. Validation masks with a generator seeded by the batch index,
    so every epoch is scored on the same masks. At the end of ``fit`` the adapter is exported
    with ``save_pretrained`` to ``<log_dir>/model``.

    Args:
        model: registered adapter name with the FILL_MASK capability.
        checkpoint: hub id or local path of pretrained weights; ``None`` with ``tiny=True``.
        tiny: build a small random instance (``tiny_sizes`` are passed to the adapter's ``tiny``).
        tiny_sizes: keyword sizes for ``tiny`` (e.g. ``hidden_size``, ``num_layers``).
        mask_rate: probability that a token is masked (BERT: 0.15), besides the key word.
        key_words: words of which one per caption is always masked (default: BiasWorld's
            groups and activities); words the tokenizer splits into pieces are ignored.
        itm_weight: weight of the ITM loss (0 turns it off).
        learning_rate: AdamW learning rate.
        weight_decay: AdamW weight decay.
        seed: seed for the random initialisation of a tiny model.
    """

    def __init__(
        self,
        model: str = "albef",
        checkpoint: str | None = None,
        tiny: bool = True,
        tiny_sizes: dict[str, int] | None = None,
        mask_rate: float = 0.15,
        key_words: Sequence[str] | None = None,
        itm_weight: float = 1.0,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.01,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if not 0.0 <= mask_rate <= 1.0:
            raise ConfigError(f"Expected `mask_rate` in [0, 1] but got {mask_rate!r}.")
        self.build_adapter(model, checkpoint, tiny, tiny_sizes, seed, Capability.FILL_MASK, "masked-LM pre-training")
        self.use_itm = itm_weight > 0 and Capability.MATCH in self.adapter.capabilities
        tokenizer = self.adapter.tokenizer
        words = list(key_words) if key_words is not None else list(GROUPS) + list(ACTIVITIES)
        self._group_ids = self._single_piece_ids(tokenizer, [w for w in words if w in GROUPS])
        self._key_ids = self._single_piece_ids(tokenizer, words)
        self._special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))

    @staticmethod
    def _single_piece_ids(tokenizer, words: Sequence[str]) -> Tensor:
        pieces = [tokenizer(word, add_special_tokens=False)["input_ids"] for word in words]
        return torch.tensor(sorted({ids[0] for ids in pieces if len(ids) == 1}), dtype=torch.long)

    def _mlm(self, pixel_values: Tensor, captions: list[str], generator: torch.Generator | None, stage: str, batch_size: int) -> Tensor:
        tokens = self.adapter.prepare_texts(captions)
        input_ids = tokens["input_ids"]
        special = torch.isin(input_ids, self._special_ids.to(input_ids.device))
        masked, labels, forced = mask_tokens(
            input_ids, special, self._key_ids.to(input_ids.device), self.adapter.tokenizer.mask_token_id,
            len(self.adapter.tokenizer), self.hparams.mask_rate, generator,
        )  # fmt: skip
        logits = self.adapter.fill_mask_logits(pixel_values, {**tokens, "input_ids": masked})  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)
        correct = logits.argmax(dim=-1) == input_ids  # (B, T)
        is_group = torch.isin(input_ids, self._group_ids.to(input_ids.device))
        accuracies = {"mlm": labels != IGNORE_INDEX, "group": forced & is_group, "activity": forced & ~is_group}
        self.log(f"{stage}/mlm_loss", loss, prog_bar=True, batch_size=batch_size)
        for name, where in accuracies.items():
            if where.any():
                self.log(f"{stage}/{name}_accuracy", correct[where].float().mean(), prog_bar=stage == "val", batch_size=int(where.sum()))
        return loss

    def _itm(
        self, pixel_values: Tensor, batch: dict[str, object], generator: torch.Generator | None, stage: str, batch_size: int
    ) -> Tensor:
        captions = list(batch["caption"])
        order = torch.randperm(batch_size, generator=generator)
        shuffled = [captions[j] for j in order.tolist()]
        if "activity" in batch and "group" in batch:
            activity, group = (torch.as_tensor(batch["activity"]).cpu(), torch.as_tensor(batch["group"]).cpu())
            names_group = torch.tensor([any(g in text.rstrip(".").split() for g in GROUPS) for text in shuffled])
            targets = (activity[order] == activity) & ((group[order] == group) | ~names_group)
        else:
            targets = order == torch.arange(batch_size)
        logits = self.adapter.match_logits(
            torch.cat([pixel_values, pixel_values]), self.adapter.prepare_texts(captions + shuffled)
        )  # (2B,)
        labels = torch.cat([torch.ones(batch_size), targets.float()]).to(logits.device)
        loss = F.binary_cross_entropy_with_logits(logits.float(), labels)
        self.log(f"{stage}/itm_loss", loss, batch_size=batch_size)
        return loss

    def _step(self, batch: dict[str, object], stage: str, generator: torch.Generator | None = None) -> Tensor:
        pixel_values = self.adapter.prepare_images(batch["pixel_values"])
        captions, batch_size = list(batch["caption"]), len(batch["caption"])
        loss = self._mlm(pixel_values, captions, generator, stage, batch_size)
        if self.use_itm:
            loss = loss + self.hparams.itm_weight * self._itm(pixel_values, batch, generator, stage, batch_size)
        self.log(f"{stage}/loss", loss, batch_size=batch_size)
        return loss

    def training_step(self, batch: dict[str, object], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "val", torch.Generator().manual_seed(batch_idx))

    def test_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "test", torch.Generator().manual_seed(batch_idx))
