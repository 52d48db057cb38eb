r"""FairVLP (Zhang et al., 2022, Sec. 5.1): counterfactual KL-regularised MLM + ITM pre-training, its two
ablations and three baselines, as one LightningModule.

Each training step masks the factual captions L_f once (:func:`~vlbias.objectives.mask_tokens`) and
builds, per item, the counterfactual pair (V_cf, L_cf) of the method's branches:

* L_cf: the masked L_f with its bias words swapped at the token level
  (:class:`~vlbias.counterfactual.tokens.TokenSwap`), so the masked positions coincide; its masked words
  M_cf are M with the bias words swapped. An item whose caption has no bias word, or one the tokenizer
  cannot swap in place (a word split into a different number of pieces, or unknown), has no L_cf.
* V_cf: the targeted attack on the current model toward the counterpart of the concept it reads
  (:class:`~vlbias.counterfactual.training.TrainingImageCounterfactuals`, policy
  ``image_counterfactuals``); an item whose attack fails has no V_cf.

Items with neither counterfactual of the method's branches enter only the factual term. The loss is
Eq. 16 (:func:`~vlbias.objectives.fairvlp_loss`),

.. math::
    (1 - \alpha)\,[\mathcal{H}(M, P(\cdot \mid V_f, L_f)) + \mathcal{H}(M_{cf}, P(\cdot \mid V_{cf}, L_{cf}))]
    + \alpha\, D_{KL}(P(\cdot \mid V_f, L_f) \,\|\, P(\cdot \mid V_{cf}, L_{cf}))

with the KL over the masked positions whose word is not a bias word (where the counterfactual answer
differs by design), plus ``itm_weight`` times ITM with hard negatives (ALBEF; sampled by the contrastive
similarity where the adapter has EMBED, uniformly in the batch otherwise), plus ``itc_weight`` times ALBEF's
image-text contrastive loss (:func:`~vlbias.objectives.itc_loss`, with every caption that describes an image a
positive; adapters with EMBED). ALBEF pre-trains with ITC + ITM + MLM (Li et al., 2021, Sec. 3.2) and FairVLP
fine-tunes such a model; the ITC and ITM terms are the same in every method, only the MLM part is Eq. 16.
Methods (:data:`METHODS`):

=============== ======= ======= ==== ===========================================================
method          L_cf    V_cf    KL   what it is
=============== ======= ======= ==== ===========================================================
``vanilla``     --      --      --   MLM + ITM
``dropout``     --      --      --   MLM + ITM with every dropout raised to ``dropout`` (DR)
``gender_swap`` yes     --      --   swapped captions as augmentation (GS)
``visual_swap`` --      yes     --   attacked images as augmentation: the paper's CycleGAN face
                                     editing cannot be had offline, so the attack's
                                     counterfactual images stand in for it
``fairvlp_v``   --      yes     yes  FairVLP-V
``fairvlp_l``   yes     --      yes  FairVLP-L
``fairvlp``     yes     yes     yes  FairVLP
=============== ======= ======= ==== ===========================================================

Logged besides :class:`MaskedLMPretraining`'s keys: ``train/itc_loss`` (``itc_weight > 0``),
``train/mlm_cf_loss``, ``train/kl_loss`` (KL methods), ``train/cf_text_rate`` (items with an L_cf),
``train/cf_text_unaligned`` (items with a bias word that could not be swapped in place),
``train/cf_image_success`` (attacks that succeeded, of those made or read from the cache this step) and
``train/cf_image_attacked`` (images attacked this step, the cost), ``train/cf_rate`` (items in the
counterfactual term).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn

from vlbias.counterfactual.image import AttackConfig, normalise, unit_pixels
from vlbias.counterfactual.text import SwapLexicon
from vlbias.counterfactual.tokens import TokenSwap
from vlbias.counterfactual.training import TrainingImageCounterfactuals
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.modules.masked_lm import MaskedLMPretraining
from vlbias.objectives import IGNORE_INDEX, fairvlp_loss, itc_loss, itm_loss, sample_negatives


@dataclass(frozen=True)
class Branches:
    """Which counterfactuals a method makes and whether it adds the KL term of Eq. 14."""

    text: bool
    image: bool
    kl: bool


#: Every method and its branches (``None``: no counterfactual pair, the factual MLM alone).
METHODS: dict[str, Branches | None] = {
    "vanilla": None,
    "dropout": None,
    "gender_swap": Branches(text=True, image=False, kl=False),
    "visual_swap": Branches(text=False, image=True, kl=False),
    "fairvlp_v": Branches(text=False, image=True, kl=True),
    "fairvlp_l": Branches(text=True, image=False, kl=True),
    "fairvlp": Branches(text=True, image=True, kl=True),
}

#: What the counterfactual branch is scored against at a masked bias word (``FairVLP(counterfactual_targets=...)``).
COUNTERFACTUAL_TARGETS = ("swapped", "factual")


def uses_kl(method: str) -> bool:
    """Whether ``method`` (one of :data:`METHODS`) trains with Eq. 14's KL term, and so reads alpha."""
    branches = METHODS[method]
    return branches is not None and branches.kl


def uses_images(method: str) -> bool:
    """Whether ``method`` (one of :data:`METHODS`) makes image counterfactuals, and so reads the attack policy."""
    branches = METHODS[method]
    return branches is not None and branches.image


def reads_targets(method: str) -> bool:
    """Whether ``method`` (one of :data:`METHODS`) reads ``counterfactual_targets``: the KL methods with text
    counterfactuals (``gender_swap`` always scores its swapped captions' own words)."""
    branches = METHODS[method]
    return branches is not None and branches.text and branches.kl


class FairVLP(MaskedLMPretraining):
    """FairVLP and its baselines (module docstring) for any FILL_MASK adapter (ITM where it has MATCH).

    Args:
        method: one of :data:`METHODS`.
        alpha: :math:`\\alpha` of Eq. 16, in [0, 1] (read by the KL methods only).
        lexicon: swap-lexicon YAML file (``None``: the gender lexicon shipped with vlbias).
        attack: :class:`~vlbias.counterfactual.image.AttackConfig` options of the image counterfactuals.
        image_counterfactuals: when images are attacked (``every_step``, ``every_n_steps``, ``cached``;
            :mod:`vlbias.counterfactual.training`).
        k: the period (``every_n_steps``) or version length (``cached``) in steps.
        dropout: the dropout probability of every dropout layer with ``method: dropout``, in [0, 1).
        itc_weight: weight of the image-text contrastive loss, >= 0 (0 turns it off; it needs an adapter with
            EMBED). Its similarities also draw the ITM hard negatives, as in ALBEF.
        model, checkpoint, tiny, tiny_sizes, tiny_vocabulary, mask_rate, key_words, image_key,
            caption_key, content_label_key, group_label_key, itm_weight, learning_rate, weight_decay,
            seed, optimizer, scheduler: as :class:`MaskedLMPretraining`.
        groups: the bias concept words: always masked like key words, the concepts the attack reads
            and moves (each one's lexicon counterpart must be among them for image counterfactuals).
        counterfactual_targets: what the counterfactual branch of ``fairvlp_l`` and ``fairvlp`` is scored against
            where the masked word is a bias word: ``"factual"`` (the default: the masked word M itself, as Eq. 15
            writes both terms) or ``"swapped"`` (its counterpart, the word of L_cf; the default until 2026-11-26,
            which asks for the other group's word for the same image and costs gender recognition; README, "Eq. 15's
            targets"). Elsewhere the two are the same word. ``gender_swap`` always scores its swapped caption's own
            words (augmentation).
    """

    def __init__(
        self,
        method: str = "fairvlp",
        alpha: float = 0.5,
        lexicon: str | None = None,
        attack: dict | None = None,
        image_counterfactuals: str = "every_n_steps",
        k: int = 4,
        dropout: float = 0.3,
        model: str = "albef",
        checkpoint: str | None = None,
        tiny: bool = True,
        tiny_sizes: dict[str, int] | None = None,
        tiny_vocabulary: list[str] | None = None,
        mask_rate: float = 0.15,
        groups: list[str] | None = None,
        key_words: list[str] | None = None,
        image_key: str = "pixel_values",
        caption_key: str = "caption",
        content_label_key: str | None = None,
        group_label_key: str | None = None,
        itm_weight: float = 1.0,
        itc_weight: float = 0.0,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.01,
        seed: int = 0,
        optimizer: OptimizerCallable | None = None,
        scheduler: LRSchedulerCallable | None = None,
        counterfactual_targets: str = "factual",
    ) -> None:
        if method not in METHODS:
            raise ConfigError(f"Expected `method` to be one of {', '.join(METHODS)} but got {method!r}.")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"Expected `alpha` in [0, 1] but got {alpha!r}.")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ConfigError(f"Expected `dropout` in [0, 1) but got {dropout!r}.")
        if isinstance(itc_weight, bool) or not isinstance(itc_weight, (int, float)) or itc_weight < 0:
            raise ConfigError(f"Expected `itc_weight` >= 0 but got {itc_weight!r}.")
        if counterfactual_targets not in COUNTERFACTUAL_TARGETS:
            raise ConfigError(
                f"Expected `counterfactual_targets` to be one of {', '.join(COUNTERFACTUAL_TARGETS)} "
                f"but got {counterfactual_targets!r}."
            )
        super().__init__(
            model, checkpoint, tiny, tiny_sizes, tiny_vocabulary, mask_rate, groups, key_words, image_key,
            caption_key, content_label_key, group_label_key, itm_weight, learning_rate, weight_decay, seed,
            optimizer, scheduler,
        )  # fmt: skip
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.branches = METHODS[method]
        self.use_itc = itc_weight > 0
        if self.use_itc and Capability.EMBED not in self.adapter.capabilities:
            raise ConfigError(f"`itc_weight: {itc_weight}` needs an adapter with EMBED but model {model!r} has none.")
        swaps = SwapLexicon.default() if lexicon is None else SwapLexicon.from_yaml(lexicon)
        self.swap = TokenSwap(swaps, self.adapter.tokenizer)
        self.images = None
        if uses_images(method):
            self.images = TrainingImageCounterfactuals(
                self.adapter, self.groups, swaps, AttackConfig(**(attack or {})), image_counterfactuals, k
            )
        if method == "dropout":
            layers = [module for module in self.adapter.modules() if isinstance(module, nn.Dropout)]
            if not layers:
                raise ConfigError(f"`method: dropout` needs dropout layers but model {model!r} has none.")
            for layer in layers:
                layer.p = float(dropout)

    # -- training ---------------------------------------------------------------------------
    def training_step(self, batch: dict[str, object], batch_idx: int) -> Tensor:
        captions = list(batch[self.hparams.caption_key])
        empty = [index for index, caption in enumerate(captions) if not caption.strip()]
        if empty:
            raise InputError(f"Expected non-empty captions but captions {empty} of the batch are empty.")
        images = batch[self.hparams.image_key]
        pixel_values = self.adapter.prepare_images(images)
        tokens = self.adapter.prepare_texts(captions)
        masked, labels, forced = self._mask(tokens, None)
        rows, cf_pixels, cf_masked, cf_labels = self._counterfactuals(
            images, pixel_values, captions, tokens, masked, labels
        )
        attention = tokens.get("attention_mask")
        both = {**tokens, "input_ids": torch.cat([masked, cf_masked])}
        if attention is not None:
            both["attention_mask"] = torch.cat([attention, attention[rows]])
        logits = self.adapter.fill_mask_logits(torch.cat([pixel_values, cf_pixels]), both)  # (B + N, T, V)
        n = len(captions)
        alpha = self.hparams.alpha if uses_kl(self.hparams.method) else 0.0
        kl_positions = (cf_labels != IGNORE_INDEX) & ~self.swap.is_bias(cf_labels.clamp(min=0))
        parts = fairvlp_loss(logits[:n], labels, logits[n:], cf_labels, kl_positions, alpha, rows)
        self._log_mlm("train", parts.mlm_factual, logits[:n], tokens["input_ids"], labels, forced)
        loss = parts.total
        if self.branches is not None:
            self.log("train/mlm_cf_loss", parts.mlm_counterfactual, batch_size=n)
            self.log("train/cf_rate", len(rows) / n, batch_size=n)
        if uses_kl(self.hparams.method):
            self.log("train/kl_loss", parts.kl, prog_bar=True, batch_size=n)
        similarity = None
        if self.use_itc:
            itc, similarity = self._itc(pixel_values, tokens, self._describes(batch, captions))
            loss = loss + self.hparams.itc_weight * itc
        if self.use_itm:
            loss = loss + self.hparams.itm_weight * self._itm(pixel_values, batch, None, "train", n, similarity)
        self.log("train/loss", loss, batch_size=n)
        return loss

    def _counterfactuals(
        self,
        images: Tensor,
        pixel_values: Tensor,
        captions: list[str],
        tokens: dict[str, Tensor],
        masked: Tensor,
        labels: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The counterfactual rows of the batch (factual indices ``(N,)``) and their pixel values, masked ids and
        masked words (module docstring); no rows for the methods without a counterfactual pair."""
        n, device = len(captions), masked.device
        text_ok = torch.zeros(n, dtype=torch.bool)
        image_ok = torch.zeros(n, dtype=torch.bool)
        cf_masked, cf_labels = masked, labels
        cf_pixels = pixel_values
        if self.branches is not None and self.branches.text:
            text_ok = self.swap.aligned(captions, tokens["input_ids"])
            has_word = torch.tensor([self.swap.lexicon.n_swaps(caption) > 0 for caption in captions])
            swap_rows = text_ok.to(device).view(-1, 1)
            cf_masked = torch.where(swap_rows, self.swap.swap(masked), masked)
            if self.hparams.counterfactual_targets == "swapped" or not reads_targets(self.hparams.method):
                swapped_labels = torch.where(labels == IGNORE_INDEX, labels, self.swap.swap(labels.clamp(min=0)))
                cf_labels = torch.where(swap_rows, swapped_labels, labels)
            self.log("train/cf_text_rate", text_ok.float().mean(), batch_size=n)
            self.log("train/cf_text_unaligned", (has_word & ~text_ok).sum().float(), batch_size=n, reduce_fx="sum")
        if self.images is not None:
            made = self.images(unit_pixels(self.adapter, images), self.global_step)
            if made is not None:
                image_ok = made.success
                cf_pixels = cf_pixels.clone()
                cf_pixels[image_ok.to(device)] = normalise(self.adapter, made.pixels[image_ok].to(device))
                self.log("train/cf_image_success", made.success.float().mean(), batch_size=n)
                self.log("train/cf_image_attacked", made.attacked.float().mean(), batch_size=n)
        rows = (text_ok | image_ok).nonzero().flatten().to(device)
        return rows, cf_pixels[rows], cf_masked[rows], cf_labels[rows]

    # -- image-text contrast and matching with hard negatives -------------------------------------
    def _itc(self, pixel_values: Tensor, tokens: dict[str, Tensor], describes: Tensor) -> tuple[Tensor, Tensor]:
        """ITC on the batch (:func:`~vlbias.objectives.itc_loss`, the captions that describe an image its
        positives, :meth:`_describes`) and the detached similarities ``(B, B)`` for the ITM hard negatives."""
        images = self.adapter.embed_images(pixel_values)  # (B, D)
        texts = self.adapter.embed_texts(tokens)  # (B, D)
        loss = itc_loss(images, texts, self.adapter.logit_scale, positives=describes.to(images.device))
        self.log("train/itc_loss", loss, batch_size=len(images))
        return loss, (images @ texts.T).detach()

    def _itm(
        self,
        pixel_values: Tensor,
        batch: dict[str, object],
        generator: torch.Generator | None,
        stage: str,
        batch_size: int,
        similarity: Tensor | None = None,
    ) -> Tensor:
        """ITM on the batch's pairs, one hard negative text per image and one hard negative image per text
        (:mod:`vlbias.objectives.itm`) drawn by ``similarity`` ``(B, B)`` (``None``: the adapter's embeddings
        where it has EMBED); a drawn pair is labelled by :meth:`_describes`."""
        captions = list(batch[self.hparams.caption_key])
        tokens = self.adapter.prepare_texts(captions)
        describes = self._describes(batch, captions)  # (B, B): caption j describes image i
        if similarity is None and Capability.EMBED in self.adapter.capabilities:
            with torch.no_grad():
                similarity = self.adapter.embed_images(pixel_values) @ self.adapter.embed_texts(tokens).T  # (B, B)
        negative_text = sample_negatives(~describes, similarity, generator)
        negative_image = sample_negatives(~describes.T, None if similarity is None else similarity.T, generator)
        own = torch.arange(batch_size)
        text_rows = torch.cat([own, negative_text, own]).to(pixel_values.device)
        images = torch.cat([pixel_values, pixel_values, pixel_values[negative_image.to(pixel_values.device)]])
        texts = {key: value.index_select(0, text_rows) for key, value in tokens.items()}
        labels = torch.cat([torch.ones(batch_size), describes[own, negative_text], describes[negative_image, own]])
        loss = itm_loss(self.adapter.match_logits(images, texts), labels.float())
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
