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

from dataclasses import asdict, dataclass, fields
from typing import Literal, NamedTuple

import torch
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveInt
from torch import Tensor, nn

from vlbias.counterfactual.image import AttackConfig, normalise, unit_pixels
from vlbias.counterfactual.text import SwapLexicon
from vlbias.counterfactual.tokens import TokenSwap
from vlbias.counterfactual.training import POLICIES, TrainingImageCounterfactuals
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.modules.masked_lm import MaskedLMPretraining
from vlbias.modules.model_spec import TINY_ALBEF, ModelSpec
from vlbias.objectives import IGNORE_INDEX, fairvlp_loss, hard_negative_itm, itc_loss
from vlbias.options import DropoutRate, check_options, check_value


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


class CounterfactualRows(NamedTuple):
    """A step's counterfactual pairs (V_cf, L_cf), ``N`` rows: the factual items they come from ``rows`` ``(N,)``;
    the attacked images ``attacked_pixels`` ``(A, 3, H, W)`` of the rows whose V_cf is an attack's (in batch order);
    the image each row reads ``image_rows`` ``(N,)``, indexing the batch's B images followed by the A attacked ones
    (its own image for a row with L_cf alone); its masked ids ``masked`` and masked words ``labels`` ``(N, T)``."""

    rows: Tensor
    attacked_pixels: Tensor
    image_rows: Tensor
    masked: Tensor
    labels: Tensor


#: What the counterfactual branch is scored against at a masked bias word (:attr:`FairVLPMethod.counterfactual_targets`).
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


#: The value of each setting of :class:`FairVLPMethod` for a method that reads it and is given none.
SETTING_DEFAULTS: dict[str, object] = {
    "alpha": 0.5,
    "counterfactual_targets": "factual",
    "lexicon": None,
    "image_counterfactuals": "every_n_steps",
    "k": 4,
    "attack": None,
    "dropout": 0.3,
}


def settings_read(method: str, policy: str = "every_n_steps") -> tuple[str, ...]:
    """The settings of :class:`FairVLPMethod` that ``method`` reads, with ``policy`` its image policy: the lexicon
    where it makes counterfactuals, ``alpha`` with the KL term, ``counterfactual_targets`` where
    :func:`reads_targets`, the image policy and attack where it attacks images (``k`` unless the policy is
    ``every_step``), ``dropout`` for ``dropout``."""
    branches = METHODS[method]
    read = ["dropout"] if method == "dropout" else []
    if branches is not None:
        read += ["lexicon"] + ["alpha"] * branches.kl + ["counterfactual_targets"] * reads_targets(method)
        if branches.image:
            read += ["image_counterfactuals", "attack"] + ["k"] * (policy != "every_step")
    return tuple(read)


def switch_method(name: str, **settings: object) -> dict[str, object]:
    """The ``method`` group, as a mapping (``--model.init_args.method '<it as YAML>'``), that switches a config to
    method ``name`` with ``settings``: what ``name`` does not read is set to null, so that the config's values for
    other methods are dropped; what it reads keeps the config's values unless given.

    Example:
        >>> switch_method("fairvlp_l", alpha=0.25)
        {'name': 'fairvlp_l', 'image_counterfactuals': None, 'k': None, 'attack': None, 'dropout': None, 'alpha': 0.25}
    """
    policy = settings.get("image_counterfactuals") or SETTING_DEFAULTS["image_counterfactuals"]
    read = settings_read(name, policy)
    return {"name": name, **{key: None for key in SETTING_DEFAULTS if key not in read}, **settings}


@dataclass(frozen=True)
class FairVLPMethod:
    """A FairVLP method (module docstring) and its settings, each read only by the methods that use it.

    A setting left out (``None``) takes its default (:data:`SETTING_DEFAULTS`) where the method reads it; a setting
    given to a method that does not read it is refused by name, so that nothing given is silently ignored. To switch
    the method of a config that sets others' settings, give the group with those set to null (:func:`switch_method`),
    e.g. ``--model.init_args.method '{name: fairvlp_l, image_counterfactuals: null, k: null, attack: null}'``.

    Args:
        name: one of :data:`METHODS`.
        alpha: :math:`\\alpha` of Eq. 16, in [0, 1] (the KL methods; default 0.5).
        counterfactual_targets: what the counterfactual branch of ``fairvlp_l`` and ``fairvlp`` is scored against
            where the masked word is a bias word: ``"factual"`` (the default: the masked word M itself, as Eq. 15
            writes both terms) or ``"swapped"`` (its counterpart, the word of L_cf; the default until 2026-11-26,
            which asks for the other group's word for the same image and costs gender recognition; docs/results/fairvlp.md, "Seeds 0–9: Eq. 15's
            targets"). Elsewhere the two are the same word. ``gender_swap`` always scores its swapped caption's own
            words (augmentation).
        lexicon: swap-lexicon YAML file (the methods with counterfactuals; default: the gender lexicon shipped with
            vlbias).
        image_counterfactuals: when images are attacked (``every_step``, ``every_n_steps``, ``cached``;
            :mod:`vlbias.counterfactual.training`; the image methods, default ``every_n_steps``).
        k: the period (``every_n_steps``) or version length (``cached``) in steps (default 4).
        attack: :class:`~vlbias.counterfactual.image.AttackConfig` options of the image counterfactuals (the image
            methods; default: its defaults).
        dropout: the dropout probability of every dropout layer with ``name: dropout``, in [0, 1) (default 0.3).
    """

    name: Literal[tuple(METHODS)] = "fairvlp"
    alpha: ClosedUnitInterval | None = None
    counterfactual_targets: Literal[COUNTERFACTUAL_TARGETS] | None = None
    lexicon: str | None = None
    image_counterfactuals: Literal[POLICIES] | None = None
    k: PositiveInt | None = None
    attack: dict | None = None
    dropout: DropoutRate | None = None

    def __post_init__(self) -> None:
        given = {item.name: getattr(self, item.name) for item in fields(self)}
        given = {key: value for key, value in given.items() if value is not None or key == "name"}
        checked = check_options(given, type(self), "FairVLP method option")  # plain values of the declared types
        for key, value in checked.items():
            object.__setattr__(self, key, value)
        read = settings_read(self.name, self.image_counterfactuals or SETTING_DEFAULTS["image_counterfactuals"])
        unused = [key for key in checked if key != "name" and key not in read]
        if unused:
            readers = {key: ", ".join(m for m in METHODS if key in settings_read(m)) for key in unused}
            policies = " under the every_n_steps and cached policies"
            listed = "; ".join(f"`{key}` by {readers[key]}{policies * (key == 'k')}" for key in unused)
            raise ConfigError(
                f"FairVLP method {self.name!r} does not use {', '.join(f'`{key}`' for key in unused)} (read: "
                f"{listed}); leave {'it' if len(unused) == 1 else 'them'} out or null."
            )
        if "attack" in read:  # its options refused by name now, before any model is loaded
            attack = check_options(self.attack, AttackConfig, "attack option")
            AttackConfig(**attack)
            object.__setattr__(self, "attack", attack or None)

    def with_defaults(self) -> FairVLPMethod:
        """This method with every setting it reads and was not given set to its default (:data:`SETTING_DEFAULTS`)."""
        policy = self.image_counterfactuals or SETTING_DEFAULTS["image_counterfactuals"]
        unset = {key: SETTING_DEFAULTS[key] for key in settings_read(self.name, policy) if getattr(self, key) is None}
        return FairVLPMethod(**{**asdict(self), **unset})


class FairVLP(MaskedLMPretraining):
    """FairVLP and its baselines (module docstring) for any FILL_MASK adapter (ITM where it has MATCH).

    Args:
        method: the method and its settings.
        itc_weight: weight of the image-text contrastive loss, >= 0 (0 turns it off; it needs an adapter with
            EMBED). Its similarities also draw the ITM hard negatives, as in ALBEF.
        model: the adapter to train (:class:`~vlbias.modules.model_spec.ModelSpec`), with FILL_MASK (default: a tiny
            ALBEF).
        kwargs: the other arguments of :class:`MaskedLMPretraining`. Its ``groups`` are the bias concept words:
            always masked like key words, the concepts the attack reads and moves (each one's lexicon counterpart
            must be among them for image counterfactuals).
    """

    def __init__(
        self,
        method: FairVLPMethod = FairVLPMethod(),
        itc_weight: float = 0.0,
        model: ModelSpec = TINY_ALBEF,
        **kwargs,
    ) -> None:
        check_value("itc_weight", itc_weight, NonNegativeFloat, "FairVLP option")
        super().__init__(model=model, **kwargs)
        self.method = method.with_defaults()
        self.hparams["method"] = asdict(self.method)
        self.branches = METHODS[self.method.name]
        self.use_itc = itc_weight > 0
        if self.use_itc and Capability.EMBED not in self.adapter.capabilities:
            raise ConfigError(
                f"`itc_weight: {itc_weight}` needs an adapter with EMBED but model {model.name!r} has none."
            )
        lexicon = self.method.lexicon
        swaps = SwapLexicon.default() if lexicon is None else SwapLexicon.from_yaml(lexicon)
        self.swap = TokenSwap(swaps, self.adapter.tokenizer)
        self.images = None
        if uses_images(self.method.name):
            k = SETTING_DEFAULTS["k"] if self.method.k is None else self.method.k  # every_step reads no k
            attack = AttackConfig(**(self.method.attack or {}))
            policy = self.method.image_counterfactuals
            self.images = TrainingImageCounterfactuals(self.adapter, self.groups, swaps, attack, policy, k)
        if self.method.name == "dropout":
            layers = [module for module in self.adapter.modules() if isinstance(module, nn.Dropout)]
            if not layers:
                raise ConfigError(f"`method.name: dropout` needs dropout layers but model {model.name!r} has none.")
            for layer in layers:
                layer.p = float(self.method.dropout)

    def configure_model(self) -> None:
        """As :class:`~vlbias.modules.adapter_module.AdapterModule`; under FSDP the image methods are refused: their
        attack differentiates the model being trained inside its training step, with its parameters frozen,
        which FSDP's gathered (non-leaf) parameters and backward hooks do not allow."""
        if self.sharded and self.images is not None:
            text_methods = ", ".join(name for name in METHODS if not uses_images(name))
            raise ConfigError(
                f"FairVLP method {self.method.name!r} attacks images through the model it trains, which FSDP "
                f"(`trainer.strategy`: FSDPStrategy) does not allow; train it with `strategy: ddp` "
                f"(configs/trainer/ddp.yaml), or use a method without image counterfactuals ({text_methods})."
            )
        super().configure_model()

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
        counterfactual = self._counterfactuals(images, pixel_values, captions, tokens, masked, labels)
        rows, cf_labels = counterfactual.rows, counterfactual.labels
        n = len(captions)
        # one image encoding for MLM, ITC and ITM: the batch's B images, then the A attacked ones
        image_states = self.adapter.image_states(torch.cat([pixel_values, counterfactual.attacked_pixels]))
        attention = tokens.get("attention_mask")
        both = {**tokens, "input_ids": torch.cat([masked, counterfactual.masked])}
        if attention is not None:
            both["attention_mask"] = torch.cat([attention, attention[rows]])
        image_rows = torch.cat([torch.arange(n, device=rows.device), counterfactual.image_rows])  # (B + N,)
        logits = self.adapter.fill_mask_logits_of_states(image_states, both, image_rows)  # (B + N, T, V)
        alpha = self.method.alpha if uses_kl(self.method.name) else 0.0
        kl_positions = (cf_labels != IGNORE_INDEX) & ~self.swap.is_bias(cf_labels.clamp(min=0))
        parts = fairvlp_loss(logits[:n], labels, logits[n:], cf_labels, kl_positions, alpha, rows)
        self._log_mlm("train", parts.mlm_factual, logits[:n], tokens["input_ids"], labels, forced)
        loss = parts.total
        if self.branches is not None:
            self.log("train/mlm_cf_loss", parts.mlm_counterfactual, batch_size=n)
            self.log("train/cf_rate", len(rows) / n, batch_size=n)
        if uses_kl(self.method.name):
            self.log("train/kl_loss", parts.kl, prog_bar=True, batch_size=n)
        similarity = None
        describes = self._describes(batch, captions) if self.use_itc or self.use_itm else None  # (B, B)
        text_states = self.adapter.text_states(tokens) if self.use_itc or self.use_itm else None  # ITC's and ITM's
        if self.use_itc:
            itc, similarity = self._itc(image_states[:n], text_states, describes)
            loss = loss + self.hparams.itc_weight * itc
        if self.use_itm:
            itm = self._hard_negative_itm(image_states, text_states, describes, None, "train", similarity)
            loss = loss + self.hparams.itm_weight * itm
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
    ) -> CounterfactualRows:
        """The counterfactual rows of the batch (module docstring); no rows for the methods without a
        counterfactual pair."""
        n, device = len(captions), masked.device
        text_ok = torch.zeros(n, dtype=torch.bool)
        image_ok = torch.zeros(n, dtype=torch.bool)
        cf_masked, cf_labels = masked, labels
        attacked_pixels = pixel_values[:0]
        if self.branches is not None and self.branches.text:
            text_ok = self.swap.aligned(captions, tokens["input_ids"])
            has_word = torch.tensor([self.swap.lexicon.n_swaps(caption) > 0 for caption in captions])
            swap_rows = text_ok.to(device).view(-1, 1)
            cf_masked = torch.where(swap_rows, self.swap.swap(masked), masked)
            if self.method.counterfactual_targets == "swapped" or not reads_targets(self.method.name):
                swapped_labels = torch.where(labels == IGNORE_INDEX, labels, self.swap.swap(labels.clamp(min=0)))
                cf_labels = torch.where(swap_rows, swapped_labels, labels)
            self.log("train/cf_text_rate", text_ok.float().mean(), batch_size=n)
            self.log("train/cf_text_unaligned", (has_word & ~text_ok).sum().float(), batch_size=n, reduce_fx="sum")
        if self.images is not None:
            made = self.images(unit_pixels(self.adapter, images), self.global_step)
            if made is not None:
                image_ok = made.success
                attacked_pixels = normalise(self.adapter, made.pixels[image_ok].to(device)).to(pixel_values.dtype)
                self.log("train/cf_image_success", made.success.float().mean(), batch_size=n)
                self.log("train/cf_image_attacked", made.attacked.float().mean(), batch_size=n)
        rows = (text_ok | image_ok).nonzero().flatten()
        image_rows = rows.clone()
        attacked = image_ok[rows]
        image_rows[attacked] = n + torch.arange(int(attacked.sum()))  # rows ascend, as the attacked images do
        rows = rows.to(device)
        return CounterfactualRows(rows, attacked_pixels, image_rows.to(device), cf_masked[rows], cf_labels[rows])

    # -- image-text contrast and matching with hard negatives -------------------------------------
    def _itc(self, image_states: Tensor, text_states: dict[str, Tensor], describes: Tensor) -> tuple[Tensor, Tensor]:
        """ITC on the batch (:func:`~vlbias.objectives.itc_loss`, the captions that describe an image its
        positives, :meth:`_describes`) of its images' ``image_states`` and its captions' ``text_states`` (the
        adapter's) and the detached similarities ``(B, B)`` for the ITM hard negatives."""
        images = self.adapter.embed_image_states(image_states)  # (B, D)
        texts = self.adapter.embed_text_states(text_states)  # (B, D)
        loss = itc_loss(images, texts, self.adapter.logit_scale, positives=describes.to(images.device))
        self.log("train/itc_loss", loss, batch_size=len(images))
        return loss, (images @ texts.T).detach()

    def _itm(
        self,
        image_states: Tensor,
        tokens: dict[str, Tensor],
        describes: Tensor,
        generator: torch.Generator | None,
        stage: str,
    ) -> Tensor:
        """Evaluation's ITM (:meth:`MaskedLMPretraining._itm`'s place): :meth:`_hard_negative_itm` of the
        captions ``tokens``."""
        return self._hard_negative_itm(image_states, self.adapter.text_states(tokens), describes, generator, stage)

    def _hard_negative_itm(
        self,
        image_states: Tensor,
        text_states: dict[str, Tensor],
        describes: Tensor,
        generator: torch.Generator | None,
        stage: str,
        similarity: Tensor | None = None,
    ) -> Tensor:
        """ITM on the batch's pairs, one hard negative text per image and one hard negative image per text
        (:mod:`vlbias.objectives.itm`) drawn by ``similarity`` ``(B, B)`` (``None``: the adapter's embeddings
        where it has EMBED); a drawn pair is labelled by ``describes`` ``(B, B)``, caption ``j`` describes image
        ``i`` (:meth:`_describes`). ``image_states`` and ``text_states``: the adapter's, of the batch's B images
        first and of its captions."""
        if similarity is None and Capability.EMBED in self.adapter.capabilities:
            with torch.no_grad():
                images = self.adapter.embed_image_states(image_states[: len(describes)])
                similarity = images @ self.adapter.embed_text_states(text_states).T  # (B, B)
        loss = hard_negative_itm(self.adapter, image_states, text_states, describes, similarity, generator)
        self.log(f"{stage}/itm_loss", loss, batch_size=len(describes))
        return loss
