"""What CounterBias's probe (:mod:`vlbias.suites.counterbias`) reads and gives: the items, the probe's outputs per
batch (:class:`Probed`), and how it reads a FILL_MASK model (:class:`ConceptReader`): the masked-word
log-probabilities of the target concepts, log P(T | V, L) and log P(T | L) (Eq. 12), and the probabilities of the
bias concepts at the bias prompt, P(B | V) (Eq. 2), each normalised as the suite's options say; and the words and
captions a model cannot score or see as written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from vlbias.counterfactual.image import CounterfactualImages, normalise
from vlbias.counterfactual.text import CAPTION_TEMPLATES, SwapLexicon, fill_template
from vlbias.errors import InputError
from vlbias.models.base import ModelAdapter
from vlbias.models.inference import measuring
from vlbias.models.masked_words import word_log_probs, word_pieces
from vlbias.models.unseen_text import UnseenText, unseen_masked
from vlbias.suites.options import CounterBiasOptions


@dataclass(frozen=True)
class CounterBiasItem:
    """One image: its target concept, concept group and annotated bias concept (None: unannotated)."""

    id: str
    image: Path | Tensor  # a file, or (3, H, W) float pixels in [0, 1]
    target: str
    group: str
    bias: str | None
    bias_annotated: bool = True  # False: ``bias`` is the model's reading (``unannotated="model_reading"``)


@dataclass
class Attacked:
    """The ``n`` images of one batch that loaded, attacked toward their counterfactual concept B': their
    stimulus indices and items (an unannotated one carrying the model's reading), B' ``(n,)`` as an index
    into the bias concepts, P(B | V_f) and P(B | V_cf) ``(n, n_bias)`` (Eq. 2), and which of them are
    measured ``(n,)`` (all, or with ``require_attack_success`` those whose attack succeeded)."""

    indices: list[int]
    items: list[CounterBiasItem]
    counter: Tensor
    p_bias_f: Tensor
    p_bias_cf: Tensor
    keep: Tensor


@dataclass
class Measured:
    """The ``n`` measured images of one batch: stimulus indices and items, P(B | V) of each one's factual
    concept in V_f and V_cf ``(n,)``, whether the attack succeeded (B' is the most likely concept in V_cf), whether
    V_cf came from the cache and its L-infinity distance to V_f ``(n,)``, and P(T | V, L) of its target ``(K, 4, n)``: per template, the (V, L) combinations
    (V_f, L_f), (V_cf, L_cf), (V_cf, L_f), (V_f, L_cf)."""

    indices: list[int]
    items: list[CounterBiasItem]
    p_bias_f: Tensor
    p_bias_cf: Tensor
    attack_succeeded: Tensor
    cache_hit: Tensor
    linf_delta: Tensor
    p_target: Tensor


@dataclass
class Probed:
    """A batch's model outputs: skip entries of its images that did not load (by stimulus index), and the
    attack and measurement of the others (``None`` when there are none)."""

    unreadable: list[tuple[int, dict]]
    attacked: Attacked | None = None
    measured: Measured | None = None


class ConceptReader:
    """Reads the target and bias concepts of one CounterBias run from any FILL_MASK model.

    Args:
        options: the suite's options: ``max_rows`` per forward pass, the multi-piece ``strategy``, and the
            ``target_normalisation`` and ``bias_normalisation`` (over the concepts, or the whole vocabulary).
        bias_concepts: the bias concept words, in the order of P(B | V)'s columns.
        lexicon: the swap lexicon of the counterfactual captions.
    """

    def __init__(self, options: CounterBiasOptions, bias_concepts: list[str], lexicon: SwapLexicon) -> None:
        self.options, self.bias_concepts, self.lexicon = options, bias_concepts, lexicon

    def target_log_probs(
        self,
        adapter: ModelAdapter,
        pixel_values: Tensor | None,
        image_rows: Tensor | None,
        texts: list[str],
        words: list[str],
        group_columns: list[list[int]],
    ) -> Tensor:
        """``(R, n_words)`` log P(T | V, L) of every target word for ``R`` rows, row ``r`` reading text ``texts[r]``
        and image ``image_rows[r]`` of ``pixel_values`` (no image when it is ``None``), normalised per the option
        (over each group's columns, or the whole vocabulary)."""
        chunks = []
        for start in range(0, len(texts), self.options.max_rows):
            pixels, rows = pixel_values, None
            if pixel_values is not None:  # only the images this chunk reads, each once
                used, rows = image_rows[start : start + self.options.max_rows].unique(return_inverse=True)
                pixels = pixel_values.index_select(0, used)
            scores = word_log_probs(
                adapter,
                pixels,
                texts[start : start + self.options.max_rows],
                words,
                self.options.strategy,
                image_rows=rows,
            )
            chunks.append(scores.float().cpu())
        scores = torch.cat(chunks)
        if self.options.target_normalisation == "vocabulary":
            return scores
        normalised = torch.empty_like(scores)
        for columns in group_columns:
            normalised[:, columns] = scores[:, columns].log_softmax(dim=-1)
        return normalised

    def target_probs(
        self,
        adapter: ModelAdapter,
        items: list[tuple[str, str]],
        pixels: Tensor,
        cf_pixels: Tensor,
        templates: list[str],
        words: list[str],
        columns: list[list[int]],
    ) -> Tensor:
        """P(T | V, L) ``(K, 4, n)`` of each of ``n`` items' target for every one of the ``K`` ``templates`` and the
        four (V, L) combinations (V_f, L_f), (V_cf, L_cf), (V_cf, L_f), (V_f, L_cf); ``items`` are (bias concept,
        target) pairs, ``pixels`` and ``cf_pixels`` their ``[0, 1]`` images V_f and V_cf, ``words`` the target words
        ``adapter`` can score and ``columns`` each group's of them."""
        n, mask = len(items), adapter.tokenizer.mask_token
        # Rows: per template, (V_f, L_f), (V_cf, L_cf), (V_cf, L_f), (V_f, L_cf), n each; images V_f then V_cf.
        pick, texts = [], []
        for name in templates:
            factual = [fill_template(CAPTION_TEMPLATES[name], mask, gender=bias) for bias, _ in items]
            swapped = [self.lexicon.swap(text) for text in factual]
            for offset, captions in ((0, factual), (n, swapped), (n, factual), (0, swapped)):
                pick.extend(range(offset, offset + n))
                texts.extend(captions)
        with measuring(adapter.device):
            pixel_values = normalise(adapter, torch.cat([pixels, cf_pixels]).to(adapter.device))
            rows = torch.tensor(pick, device=adapter.device)
            log_probs = self.target_log_probs(adapter, pixel_values, rows, texts, words, columns)
        target = torch.tensor([words.index(target) for _, target in items])
        at_target = log_probs[torch.arange(len(texts)), target.repeat(4 * len(templates))].exp()
        return at_target.view(len(templates), 4, n)

    def bias_probs(self, generator: CounterfactualImages, pixels: Tensor) -> Tensor:
        """``(B, n_bias)`` P(B | V) at the bias prompt (Eq. 2)."""
        with measuring(generator.logits.adapter.device):
            scores = torch.cat([generator.logits(chunk).cpu() for chunk in pixels.split(self.options.max_rows)])
        return scores.softmax(dim=-1) if self.options.bias_normalisation == "concepts" else scores.exp()

    def vocabulary_problems(self, tokenizer, words: list[str]) -> dict[str, str]:
        """``{word: why}`` of the ``words`` that ``tokenizer`` cannot score with the options' multi-piece strategy."""
        problems = {}
        for word in words:
            try:
                word_pieces(tokenizer, [word], self.options.strategy)
            except InputError as err:
                problems[word] = str(err)
        return problems

    def text_only_log_probs(
        self, adapter: ModelAdapter, templates: list[str], words: list[str], columns: list[list[int]]
    ) -> dict[tuple[str, str], Tensor]:
        """log P(T | L) with no image (Eq. 12) of every target word, per (template of ``templates``, bias word):
        captions depend on nothing else. Words outside ``adapter``'s vocabulary get NaN."""
        problems = self.vocabulary_problems(adapter.tokenizer, words)
        usable = [w for w in words if w not in problems]
        keys = [(name, b) for name in templates for b in self.bias_concepts]
        table = torch.full((len(keys), len(words)), torch.nan)
        if usable:
            texts = [fill_template(CAPTION_TEMPLATES[name], adapter.tokenizer.mask_token, gender=b) for name, b in keys]
            local = [[usable.index(words[c]) for c in cols if words[c] in usable] for cols in columns]
            blank = adapter.no_image(1)  # one "no image" for every row, or None for a model that reads text alone
            rows = None if blank is None else torch.zeros(len(texts), dtype=torch.long, device=blank.device)
            with measuring(adapter.device):
                scores = self.target_log_probs(adapter, blank, rows, texts, usable, [c for c in local if c])
            table[:, [words.index(w) for w in usable]] = scores
        return dict(zip(keys, table))

    def caption_problems(self, model: ModelAdapter, name: str, words: list[str]) -> list[tuple[str, UnseenText]]:
        """The captions of template ``name`` that ``model`` reads for ``words`` (every bias concept, and its
        swap; the mask repeated once per word piece, for each piece count among the words ``model`` can score,
        as :func:`~vlbias.models.masked_words.word_log_probs` feeds them) that it cannot see as written, with why."""
        mask = model.tokenizer.mask_token
        problems = self.vocabulary_problems(model.tokenizer, words)
        usable = [word for word in words if word not in problems]
        counts = sorted({len(pieces) for pieces in word_pieces(model.tokenizer, usable, self.options.strategy)})
        factual = [fill_template(CAPTION_TEMPLATES[name], mask, gender=b) for b in self.bias_concepts]
        captions = list(dict.fromkeys([*factual, *map(self.lexicon.swap, factual)]))
        expanded = [caption.replace(mask, " ".join([mask] * count)) for count in counts for caption in captions]
        return [(c, p) for c, p in zip(expanded, unseen_masked(model, expanded), strict=True) if p is not None]
