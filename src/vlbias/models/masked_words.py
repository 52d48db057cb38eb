"""Log-probability of a whole word at a template's ``[MASK]``, for any FILL_MASK adapter.

The papers' masked-word probes (CounterBias, Zhang et al. 2022, Eq. 1-2; Srinivasan & Bisk
2022, Sec. 3.2, after Kurita et al. 2019) read ``P([MASK] = w)`` for a word ``w`` that the
tokenizer may split into several word pieces (``hairdresser`` -> ``hair ##dre ##sser`` in BERT's
uncased vocabulary). The papers do not say what to do then; this module is the one place that
decides, and every suite uses it.

``strategy="mean_all_masked"`` (default): the template's single mask is expanded to as many
masks as ``w`` has pieces ``p_1 .. p_K`` and, in one forward pass,

    score(w) = (1 / K) * sum_k log P(token at mask k = p_k | template with K masks, image)

For a single-piece word this is exactly ``log P([MASK] = w)``. The mean (rather than the sum)
keeps words of different lengths on one scale; the pieces are scored jointly masked, so no
piece is given away to the others. ``exp(score)`` is the geometric mean of the pieces'
probabilities, not a probability of the word: across words of different piece counts it is a
comparable score, not a distribution. A multi-word phrase is scored the same way over all its
pieces.

``strategy="refuse"``: a word with more than one piece raises :class:`InputError` listing its
pieces, for studies that want single-token targets only. A word that maps to the tokenizer's
unknown token is always refused: its probability would be that of ``[UNK]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.models.base import Capability, ModelAdapter, require_capability

STRATEGIES = ("mean_all_masked", "refuse")


def word_pieces(tokenizer, words: Sequence[str], strategy: str = "mean_all_masked") -> list[list[int]]:
    """Token ids of each word's pieces, refusing unknown words (and, with ``strategy="refuse"``,
    words of more than one piece) with a message listing them and their pieces.

    Example:
        >>> from vlbias.models.vocab import word_tokenizer
        >>> word_pieces(word_tokenizer(["man", "woman"]), ["woman", "man"])
        [[12], [11]]
    """
    if strategy not in STRATEGIES:
        raise InputError(f"Expected argument `strategy` to be one of {', '.join(STRATEGIES)} but got {strategy!r}.")
    pieces = [tokenizer.tokenize(word) for word in words]
    unknown = [word for word, p in zip(words, pieces) if not p or tokenizer.unk_token in p]
    if unknown:
        raise InputError(
            f"Word(s) not in the tokenizer's vocabulary (they map to {tokenizer.unk_token}): {', '.join(unknown)}."
        )
    if strategy == "refuse":
        split = [f"{word!r} -> {p}" for word, p in zip(words, pieces) if len(p) > 1]
        if split:
            raise InputError(f"strategy='refuse' and these words split into several word pieces: {'; '.join(split)}.")
    return [tokenizer.convert_tokens_to_ids(p) for p in pieces]


def _tokenised_once(adapter: ModelAdapter, texts: list[str]) -> tuple[dict[str, Tensor], Tensor]:
    """Each distinct text of ``texts`` tokenised once (padded to the longest), and the row of each text among them."""
    row_of = {text: row for row, text in enumerate(dict.fromkeys(texts))}
    tokens = adapter.prepare_texts(list(row_of))
    return tokens, torch.tensor([row_of[text] for text in texts], device=adapter.device)


def word_log_probs(
    adapter: ModelAdapter,
    pixel_values: Tensor | None,
    template: str | Sequence[str],
    words: Sequence[str],
    strategy: str = "mean_all_masked",
    image_rows: Tensor | None = None,
) -> Tensor:
    """``(B, n_words)`` scores ``score(w)`` (module docstring) of each word at the template's mask.

    Args:
        adapter: any adapter with FILL_MASK.
        pixel_values: ``(B, 3, H, W)`` from ``adapter.prepare_images``, or
            ``adapter.no_image(B)``; for a text-only model, ``None``. With ``image_rows``, the
            distinct images ``(N, 3, H, W)`` that the rows read.
        template: a text holding the tokenizer's mask token exactly once, or one such text per
            row (``B`` of them). One template with ``pixel_values=None`` gives ``B = 1``.
        words: candidate words; each is scored in every template.
        strategy: ``"mean_all_masked"`` or ``"refuse"`` (module docstring).
        image_rows: ``(B,)`` the image of each row, an index into ``pixel_values``; ``None``: row
            ``b`` reads image ``b``.

    One forward pass per distinct piece count among ``words``. Each distinct text is tokenised
    once, and :meth:`~vlbias.models.base.ModelAdapter.paired_fill_mask_logits` lets two-stream
    models encode each distinct image and text once (attacks and suites score many images with
    few templates, and each image with several texts).

    Example:
        >>> from vlbias.models.registry import load
        >>> bert = load("bert", tiny=True)
        >>> word_log_probs(bert, None, "the [MASK] is cooking.", ["man", "woman", "person"]).shape
        torch.Size([1, 3])
    """
    require_capability(adapter, Capability.FILL_MASK, "masked-word scoring")
    tokenizer = adapter.tokenizer
    mask = tokenizer.mask_token
    templates = [template] if isinstance(template, str) else list(template)
    if image_rows is not None:
        image_rows = _checked_rows(image_rows, pixel_values, adapter.device)
        batch = len(image_rows)
    else:
        batch = len(templates) if pixel_values is None else len(pixel_values)  # RegionFeatures have a len, no shape
    if len(templates) == 1:
        templates = templates * batch
    if len(templates) != batch:
        raise InputError(f"Expected 1 template or {batch} (one per image) but got {len(templates)}.")
    for text in templates:
        if text.count(mask) != 1:
            raise InputError(f"Expected template to hold {mask} exactly once but got {text!r}.")
    pieces = word_pieces(tokenizer, words, strategy)

    scores = torch.empty(batch, len(words), device=adapter.device)
    for n_pieces in sorted({len(p) for p in pieces}):
        columns = [i for i, p in enumerate(pieces) if len(p) == n_pieces]
        tokens, text_rows = _tokenised_once(
            adapter, [text.replace(mask, " ".join([mask] * n_pieces)) for text in templates]
        )
        is_mask = tokens["input_ids"].index_select(0, text_rows) == tokenizer.mask_token_id  # (B, T)
        if (is_mask.sum(dim=1) != n_pieces).any():
            raise InputError(
                f"The mask in a template was truncated away (the model takes {adapter.max_text_length} tokens)."
            )
        positions = is_mask.nonzero()[:, 1].view(batch, n_pieces)  # row-major: mask k of row b
        at_masks = adapter.paired_fill_mask_logits(pixel_values, tokens, image_rows, text_rows, positions)  # (B, K, V)
        log_probs = at_masks.float().log_softmax(dim=-1)
        ids = torch.tensor([pieces[i] for i in columns], device=log_probs.device)  # (W_K, K)
        picked = log_probs[:, torch.arange(n_pieces, device=ids.device)[None, :], ids]  # (B, W_K, K)
        scores[:, columns] = picked.mean(dim=-1)
    return scores


def _checked_rows(image_rows: Tensor, pixel_values: Tensor | None, device: torch.device) -> Tensor:
    """``image_rows`` as a long tensor on ``device``, refused unless it indexes ``pixel_values``."""
    if pixel_values is None or not isinstance(pixel_values, Tensor):
        raise InputError("`image_rows` index into a tensor of images, but `pixel_values` is not one.")
    rows = torch.as_tensor(image_rows, device=device)
    if (
        rows.ndim != 1
        or rows.is_floating_point()
        or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < len(pixel_values))
    ):
        raise InputError(
            f"Expected `image_rows` to be a 1-d integer tensor of indices below {len(pixel_values)} (the number of "
            f"images) but got {image_rows!r}."
        )
    return rows.long()
