r"""Association tests of the WEAT family: effect size, permutation p-value, bootstrap interval.

Caliskan et al. (2017) measure bias with target sets :math:`X, Y` and attribute sets :math:`A, B`.
Ross et al. (2021) write the per-target association, the test statistic and the effect size as

.. math::
    s(w, A, B) = \operatorname{mean}_{a \in A} \cos(w, a) - \operatorname{mean}_{b \in B} \cos(w, b)
    \qquad \text{(Ross Eq. 1; MMBias Eq. 1, } \phi\text{)}

    s(X, Y, A, B) = \sum_{x \in X} s(x, A, B) - \sum_{y \in Y} s(y, A, B)  \qquad \text{(Ross Eq. 2)}

    d = \frac{\operatorname{mean}_{x \in X} s(x, A, B) - \operatorname{mean}_{y \in Y} s(y, A, B)}
             {\operatorname{std}_{w \in X \cup Y} s(w, A, B)}  \qquad \text{(Ross Eq. 3; MMBias Eq. 1)}

MMBias (Janghorbani & de Melo, 2023, Eq. 1, last row) replaces the cosine by the image-text matching
probability of fusion models: :math:`\sigma(w, A, B) = \operatorname{mean}_{a} \sigma(w, a) -
\operatorname{mean}_{b} \sigma(w, b)`.

Every statistic depends on the embeddings only through the per-target association scores, so the
statistics are written once on scores (``*_from_associations``); ``weat_*`` (cosine) and ``itm_*``
(matching probabilities) are thin wrappers that compute the scores first. The ``*_from_associations``
functions sort their inputs before use, so results do not depend on the order of the items (the
same on 1 or N processes), and compute and return float64.

Example:
    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1]]); y = torch.tensor([[0.0, 1.0], [0.1, 0.9]])
    >>> a = torch.tensor([[1.0, 0.0]]); b = torch.tensor([[0.0, 1.0]])
    >>> round(weat_effect_size(x, y, a, b).item(), 4)
    1.7287
    >>> weat_p_value(x, y, a, b).item()  # exact: 1 of the C(4, 2) = 6 partitions is as extreme
    0.16666666666666666
"""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Callable
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import ConfigError, InputError

#: Random re-partitions drawn when the test is not exact. With the observed partition (counted once,
#: see :func:`p_value_from_associations`) this is the 100,000 samples of May et al.'s ``--n_samples``.
DEFAULT_PERMUTATIONS = 99_999
#: The test is exact when C(|X|+|Y|, |X|) is at most this (up to 16 items per target set, where the exact
#: count costs about as much as sampling DEFAULT_PERMUTATIONS partitions).
DEFAULT_EXACT_LIMIT = 10**9
#: The exact count builds tables of 2^|X| subset sums; beyond this many items per set it samples.
MAX_EXACT_SET_SIZE = 24
DEFAULT_BOOTSTRAP = 10_000
#: Bootstrap interval methods of :func:`interval_from_associations`.
IntervalMethod = Literal["percentile", "bca"]
INTERVAL_METHODS: tuple[str, ...] = typing.get_args(IntervalMethod)
#: BCa: closer to nominal coverage at the papers' set sizes (``scripts/bootstrap_coverage.py``).
DEFAULT_INTERVAL_METHOD: IntervalMethod = "bca"
#: Bootstrap replicates within this of the observed effect size (relative to max(|d|, 1)) are ties in BCa's z0.
TIE_RELATIVE = 1e-6
# Rows per chunk are chosen so that a chunk holds about this many numbers (~4 MiB of float64).
# Chunk sizes depend only on the set sizes, so results do not depend on the machine.
_CHUNK_NUMBERS = 2**19
# The permutation test draws the smaller side's m items directly when m is at most this and m^2 at most all items
# (see ``_count_sums_at_least``).
_FEW_ITEMS = 64
# Batches of proposals drawn after the first before the counts still short are drawn exactly (``_proposals_by_count``).
_TOP_UPS = 3


# ----------------------------------------------------------------------------- input checks
def _check_embeddings(name: str, embeddings: Tensor) -> Tensor:
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
        shape = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else type(embeddings).__name__
        raise InputError(f"Expected argument `{name}` to be a 2-D tensor (items, dim) but got {shape}")
    if embeddings.shape[0] == 0:
        raise InputError(f"Expected argument `{name}` to hold at least one embedding but the set `{name}` is empty")
    if not embeddings.is_floating_point():
        raise InputError(f"Expected argument `{name}` to be a floating-point tensor but got {embeddings.dtype}")
    bad_rows = int((~torch.isfinite(embeddings)).any(dim=1).sum())
    if bad_rows:
        raise InputError(
            f"Expected finite embeddings in `{name}` but {bad_rows} of its {embeddings.shape[0]} rows hold NaN or inf"
        )
    zero_rows = int((torch.linalg.vector_norm(embeddings, dim=1) == 0).sum())
    if zero_rows:
        raise InputError(
            f"Expected nonzero embeddings in `{name}` (cosine needs a direction) but {zero_rows} of its "
            f"{embeddings.shape[0]} rows are all zeros"
        )
    return embeddings


def _check_same_dim(**sets: Tensor) -> None:
    dims = {name: embeddings.shape[1] for name, embeddings in sets.items()}
    if len(set(dims.values())) > 1:
        listed = ", ".join(f"`{name}`: {dim}" for name, dim in dims.items())
        raise InputError(f"Expected all embeddings to have the same dimension but got {listed}")


def _check_scores(name: str, scores: Tensor) -> Tensor:
    """1-D, non-empty, finite association scores, sorted, as float64."""
    if not isinstance(scores, Tensor) or scores.ndim != 1:
        shape = tuple(scores.shape) if isinstance(scores, Tensor) else type(scores).__name__
        raise InputError(f"Expected argument `{name}` to be a 1-D tensor of association scores but got {shape}")
    if scores.numel() == 0:
        raise InputError(f"Expected argument `{name}` to hold at least one association score but it is empty")
    bad = int((~torch.isfinite(scores)).sum())
    if bad:
        raise InputError(f"Expected finite association scores in `{name}` but {bad} of {scores.numel()} are NaN or inf")
    return scores.to(torch.float64).sort().values


def _check_probabilities(name: str, probabilities: Tensor) -> Tensor:
    if not isinstance(probabilities, Tensor) or probabilities.ndim != 2:
        shape = tuple(probabilities.shape) if isinstance(probabilities, Tensor) else type(probabilities).__name__
        raise InputError(
            f"Expected argument `{name}` to be a 2-D tensor (targets, attributes) of match probabilities "
            f"but got {shape}"
        )
    if 0 in probabilities.shape:
        raise InputError(f"Expected argument `{name}` to be non-empty but got shape {tuple(probabilities.shape)}")
    outside = int((~((probabilities >= 0) & (probabilities <= 1))).sum())  # also catches NaN
    if outside:
        raise InputError(
            f"Expected match probabilities in [0, 1] in `{name}` but {outside} of {probabilities.numel()} values are "
            "outside it or NaN (pass probabilities, e.g. softmax(itm_logits)[:, 1], not logits)"
        )
    return probabilities


def _check_equal_sizes(n_x: int, n_y: int) -> None:
    if n_x != n_y:
        raise InputError(
            f"Expected target sets of equal size for the permutation test but got |X| = {n_x} and |Y| = {n_y}: "
            "May et al.'s test compares s(X, Y, A, B) with its value over re-partitions of X ∪ Y into equal halves, "
            "where it reduces to sum_X s(x, A, B). The effect size is still defined; use it alone, or pass "
            "allow_unequal_sizes=True to re-partition into sets of sizes |X| and |Y|"
        )


# ----------------------------------------------------------------------------- association scores
def _association(w: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """s(w, A, B) of checked embeddings, computed in their promoted dtype (a float32 and a float64 set mix)."""
    dtype = functools.reduce(torch.promote_types, (w.dtype, a.dtype, b.dtype))
    w, a, b = (F.normalize(m.to(dtype), dim=1) for m in (w, a, b))
    return (w @ a.T).mean(dim=1) - (w @ b.T).mean(dim=1)


def weat_association(w: Tensor, a: Tensor, b: Tensor) -> Tensor:
    r"""Per-target association :math:`s(w, A, B) = \operatorname{mean}_{a} \cos(w, a) -
    \operatorname{mean}_{b} \cos(w, b)` (Ross Eq. 1, MMBias Eq. 1 :math:`\phi`).

    Args:
        w: target embeddings, ``(n_w, d)``; need not be normalised.
        a: attribute set A, ``(n_a, d)``.
        b: attribute set B, ``(n_b, d)``.

    Returns:
        ``(n_w,)`` scores in the promoted floating dtype of the inputs.
    """
    w, a, b = _check_embeddings("w", w), _check_embeddings("a", a), _check_embeddings("b", b)
    _check_same_dim(w=w, a=a, b=b)
    return _association(w, a, b)


def itm_association(match_a: Tensor, match_b: Tensor, top_k: int | None = None) -> Tensor:
    r"""MMBias's matching-probability association :math:`\sigma(w, A, B) = \operatorname{mean}_{a \in A}
    \sigma(w, a) - \operatorname{mean}_{b \in B} \sigma(w, b)` (MMBias Eq. 1, last row).

    MMBias (Sec. 5, ALBEF and ViLT) adds: "In order to reduce irrelevant noise only the top 15 most
    significant matches are considered", without saying over what. Our reading, applied with
    ``top_k = k``: for each target, the means run over its ``k`` highest match probabilities within A
    and, separately, its ``k`` highest within B, so both sets keep the same weight and the score is
    still a difference of mean probabilities. (Ranking A ∪ B together and counting the share of
    pleasant words, as in MMBias's zero-shot experiment, is another reading we do not implement.)

    Args:
        match_a: ``(n_w, |A|)`` probabilities that target ``w`` matches attribute ``a``.
        match_b: ``(n_w, |B|)`` the same for attribute set B.
        top_k: keep only the ``top_k`` largest probabilities per target in each set; ``None`` keeps all.

    Returns:
        ``(n_w,)`` scores.

    Example:
        >>> match_a = torch.tensor([[0.9, 0.1, 0.2]]); match_b = torch.tensor([[0.3, 0.4, 0.5]])
        >>> itm_association(match_a, match_b)  # (0.9 + 0.1 + 0.2) / 3 - (0.3 + 0.4 + 0.5) / 3
        tensor([0.])
        >>> itm_association(match_a, match_b, top_k=1)  # 0.9 - 0.5
        tensor([0.4000])
    """
    return _itm_association(match_a, match_b, top_k, names=("match_a", "match_b"))


def _itm_association(match_a: Tensor, match_b: Tensor, top_k: int | None, names: tuple[str, str]) -> Tensor:
    match_a, match_b = _check_probabilities(names[0], match_a), _check_probabilities(names[1], match_b)
    if match_a.shape[0] != match_b.shape[0]:
        raise InputError(
            f"Expected `{names[0]}` and `{names[1]}` to have one row per target each but got {match_a.shape[0]} "
            f"and {match_b.shape[0]} rows"
        )
    if top_k is None:
        return match_a.mean(dim=1) - match_b.mean(dim=1)
    smallest = min(match_a.shape[1], match_b.shape[1])
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= smallest:
        raise ConfigError(
            f"Expected argument `top_k` to be None or an integer in [1, {smallest}] (the smaller attribute set: "
            f"|A| = {match_a.shape[1]}, |B| = {match_b.shape[1]}) but got {top_k!r}"
        )
    return match_a.topk(top_k, dim=1).values.mean(dim=1) - match_b.topk(top_k, dim=1).values.mean(dim=1)


# ----------------------------------------------------------------------------- statistics on scores
def statistic_from_associations(s_x: Tensor, s_y: Tensor) -> Tensor:
    r""":math:`s(X, Y, A, B) = \sum_{x} s(x, A, B) - \sum_{y} s(y, A, B)` (Ross Eq. 2), float64 scalar."""
    s_x, s_y = _check_scores("s_x", s_x), _check_scores("s_y", s_y)
    return s_x.sum() - s_y.sum()


def mean_difference_from_associations(s_x: Tensor, s_y: Tensor) -> Tensor:
    r"""Numerator of the effect size, :math:`\operatorname{mean}_x s - \operatorname{mean}_y s`; with ITM scores
    this is the "probabilistic difference" MMBias reports for ALBEF and ViLT (Table 2), float64 scalar."""
    s_x, s_y = _check_scores("s_x", s_x), _check_scores("s_y", s_y)
    return s_x.mean() - s_y.mean()


def effect_size_from_associations(s_x: Tensor, s_y: Tensor) -> Tensor:
    r"""Effect size :math:`d` (Ross Eq. 3, MMBias Eq. 1) from per-target association scores.

    The denominator is the *sample* standard deviation (divisor :math:`n - 1`) of the scores pooled over
    :math:`X \cup Y`, as in May et al.'s SEAT reference code (``sentbias/weat.py``:
    ``np.std(..., ddof=1)`` over ``X + Y``), so our numbers compare with the published SEAT and
    Grounded-WEAT tables. It is undefined (NaN) when all pooled scores are equal.

    Args:
        s_x: ``(n_x,)`` scores of the targets in X.
        s_y: ``(n_y,)`` scores of the targets in Y; ``n_x + n_y >= 2``.

    Returns:
        float64 scalar.
    """
    s_x, s_y = _check_scores("s_x", s_x), _check_scores("s_y", s_y)
    return _effect_size(s_x.unsqueeze(0), s_y.unsqueeze(0))[0]


def _effect_size(s_x: Tensor, s_y: Tensor) -> Tensor:
    """Row-wise effect size of ``(R, n_x)`` and ``(R, n_y)`` score matrices."""
    pooled_std = torch.cat([s_x, s_y], dim=1).std(dim=1, correction=1)
    return (s_x.mean(dim=1) - s_y.mean(dim=1)) / pooled_std


def _chunk_rows(n_items: int) -> int:
    return max(1, _CHUNK_NUMBERS // n_items)


def _tie_tolerance(pooled: Tensor) -> Tensor:
    # Partition sums are float64 sums of at most N scores; their rounding error is below
    # N * eps * sum|s| (Higham's bound), so sums this close to the observed one count as ties (>=). The
    # observed partition then always counts itself, whatever order its terms are added in.
    return 2 * pooled.numel() * torch.finfo(torch.float64).eps * pooled.abs().sum()


def _subset_sums_by_size(values: Tensor) -> list[Tensor]:
    """Sums of all 2^n subsets of ``values`` grouped by size: entry k holds the C(n, k) sums of k-subsets.

    Dynamic programme over the items (a loop over items and sizes, not over subsets): adding an item
    keeps every k-subset and extends every (k−1)-subset by it.
    """
    groups = [values.new_zeros(1)] + [values.new_zeros(0) for _ in values]
    for count, value in enumerate(values, start=1):
        groups = (
            [groups[0]]
            + [torch.cat([groups[k], groups[k - 1] + value]) for k in range(1, count + 1)]
            + groups[count + 1 :]
        )
    return groups


def _count_exact(s_x: Tensor, s_y: Tensor, threshold: Tensor) -> int:
    r"""Number of size-:math:`|X|` subsets :math:`X_i` of :math:`X \cup Y` with :math:`\sum_{X_i} s \ge` threshold.

    Every such subset is a size-k subset of X together with a size-(|X|−k) subset of Y, so the count over all
    C(|X|+|Y|, |X|) re-partitions is, for each k, the number of pairs (sum over a k-subset of X, sum over an
    (|X|−k)-subset of Y) whose total reaches the threshold: one ``searchsorted`` per k into tables of
    :math:`2^{|X|}` and :math:`2^{|Y|}` subset sums (meet in the middle), instead of one sum per re-partition.
    """
    n_x, n_y = s_x.numel(), s_y.numel()
    sums_x, sums_y = _subset_sums_by_size(s_x), _subset_sums_by_size(s_y)
    count = 0
    for k in range(max(0, n_x - n_y), n_x + 1):
        from_y = sums_y[n_x - k].sort().values
        below = torch.searchsorted(from_y, threshold - sums_x[k], side="left")
        count += int((from_y.numel() - below).sum())
    return count


def _log_comb(items: int) -> np.ndarray:
    """``(items + 1,)``: log C(items, k) for k = 0 ... items."""
    k = np.arange(1, items + 1)
    return np.concatenate([[0.0], np.cumsum(np.log((items - k + 1) / k))])


def _bit_digits(share: float, items: int) -> list[int]:
    r"""Binary digits of a proposal bit's P(1) for :func:`_random_words`: ``share`` (the fraction of the items to
    choose) rounded to a multiple of 2^-t, t large enough that over ``items`` bits the proposals' mean count is within
    half a standard deviation of the target's, :math:`2^{-t-1}\,items \le \sqrt{items\,share\,(1 - share) / 2} / 2`
    (the target's count is hypergeometric, its variance about half the binomial's), and P(1) within an eighth of
    min(share, 1 - share). Each digit costs one random word per mask word; 1/2 (equal sizes) is one digit."""
    smaller = min(share, 1 - share)
    t = min(
        52,
        max(1, math.ceil(math.log2(math.sqrt(2 * items / (share * (1 - share))))), math.ceil(-math.log2(smaller)) + 2),
    )
    numerator = min(2**t - 1, max(1, round(2**t * share)))
    trailing = (numerator & -numerator).bit_length() - 1
    return [numerator >> (trailing + bit) & 1 for bit in range(t - trailing)]


def _random_words(rng: np.random.Generator, shape: tuple[int, ...], digits: list[int]) -> np.ndarray:
    """uint64 words whose bits are independent with P(1) = 0.d_t...d_1 in binary (``digits`` from d_1 = 1): each
    further digit ORs (1) or ANDs (0) one more uniform word into the running word, least significant digit first."""
    words = None
    for digit in digits:
        drawn = rng.bit_generator.random_raw(math.prod(shape)).reshape(shape)
        words = drawn if words is None else (drawn | words if digit else drawn & words)
    return words


class _Half(NamedTuple):
    """One half of the pooled items in ``_random_subsets``: its item count, the binary digits of its proposal bits'
    P(1) (:func:`_bit_digits`), the proposal's log law of the count of chosen items, log q(k) for k = 0 ... items,
    and the words per mask."""

    items: int
    digits: list[int]
    log_proposal: np.ndarray
    words: int


def _half(items: int, digits: list[int]) -> _Half:
    p = sum(digit * 2.0 ** (bit - len(digits)) for bit, digit in enumerate(digits))
    k = np.arange(items + 1)
    log_proposal = _log_comb(items) + k * math.log(p) + (items - k) * math.log1p(-p)
    return _Half(items, digits, log_proposal, -(-items // 64))


def _proposals_by_count(
    rng: np.random.Generator, half: _Half, demand: np.ndarray, first_batch: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random masks of the half's items (bits with P(1) from ``half.digits``), drawn in batches until, for every count k,
    at least ``demand[k]`` of them have k items: a first batch, at most :data:`_TOP_UPS` more of at most its size,
    then, for counts still short (far in the proposals' tail, where they would take many batches), masks drawn with
    exactly those counts (:func:`_masks_with_counts`). Returns the masks ``(M, words)``, their order sorted by count
    (stable) and where each count's masks start in that order, ``(items + 2,)``."""
    last_word = np.uint64(2**64 - 1 if half.items % 64 == 0 else 2 ** (half.items % 64) - 1)
    count_type = np.uint8 if half.items < 256 else np.int16 if half.items < 2**15 else np.int32
    batches, batch_counts, size, short = [], [], first_batch, demand
    for batch in range(_TOP_UPS + 2):
        if batch <= _TOP_UPS:
            words = _random_words(rng, (size, half.words), half.digits)
            words[:, -1] &= last_word
            bits_per_word = np.bitwise_count(words)
            counts = bits_per_word[:, 0].astype(count_type)
            for column in range(1, half.words):
                counts += bits_per_word[:, column]
        else:
            counts = np.repeat(np.arange(half.items + 1, dtype=count_type), np.maximum(short, 0))
            words = _masks_with_counts(rng, half, counts)
        batches.append(words)
        batch_counts.append(counts)
        # torch: a radix sort of small integers (numpy's stable argsort is slower on these, and not linear)
        by_count = torch.sort(torch.from_numpy(np.concatenate(batch_counts)), stable=True)
        starts = np.searchsorted(by_count.values.numpy(), np.arange(half.items + 1, dtype=count_type))
        starts = np.append(starts, len(by_count.values))
        short = demand - np.diff(starts)
        if (short <= 0).all():
            break
        # enough for the scarcest count in expectation, 10 % more (a count's proposals arrive at rate q(k))
        needed = (short[short > 0] * np.exp(-half.log_proposal[short > 0])).max()
        size = int(min(1.1 * needed + 64, first_batch))
    return np.concatenate(batches), by_count.indices.numpy(), starts


def _masks_with_counts(rng: np.random.Generator, half: _Half, counts: np.ndarray) -> np.ndarray:
    """``(len(counts), words)`` masks of uniformly random subsets of the half's items, row r with ``counts[r]`` items:
    the items with the ``counts[r]`` smallest of iid uniform keys. O(items log items) per row, for the few rows the
    proposals leave short."""
    masks = np.zeros((len(counts), 8 * half.words), dtype=np.uint8)
    step = _chunk_rows(half.items)
    for first in range(0, len(counts), step):
        keys = rng.random((len(counts[first : first + step]), half.items))
        chosen = keys.argsort(axis=1).argsort(axis=1) < counts[first : first + step, None]
        packed = np.packbits(chosen, axis=1, bitorder="little")
        masks[first : first + step, : packed.shape[1]] = packed
    return masks.view("<u8").astype(np.uint64, copy=False)


def _random_subsets(total: int, n: int, rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    r"""Masks of ``rows`` independent, uniformly random n-subsets of ``total`` items: ``(rows, ceil(h_1 / 64))``
    uint64 words for the first :math:`h_1 = \lfloor total / 2 \rfloor` items (item i is bit i % 64 of word i // 64)
    and ``(rows, ceil(h_2 / 64))`` for the other :math:`h_2`, row by row the same subset.

    A uniform n-subset takes c items from the first half with probability
    :math:`\pi_c = C(h_1, c)\, C(h_2, n - c) / C(total, n)` (hypergeometric), and given c its two parts are
    independent, uniform c- and (n − c)-subsets of the halves. So: the rows' counts c are drawn at once (multinomial
    over :math:`\pi`); each half's masks are proposed as random bits (P(1) = n / total, :func:`_bit_digits`), which
    given their count k are uniform k-subsets; and each row takes the next unused proposal of the first half with c
    items and of the second half with n − c items (grouped by a stable sort of the counts). Which proposals are used
    depends on their counts only, so the masks are exactly uniform given the counts. The proposals' count law
    q(k) is wider than the target's, so about max_c π_c / q(c) ≈ sqrt(2) proposals per row are drawn in each half
    (:func:`_proposals_by_count` says how counts that fall short are supplied).
    """
    h1, h2 = total // 2, total - total // 2
    digits = _bit_digits(n / total, h2)
    first, second = _half(h1, digits), _half(h2, digits)
    chosen = np.arange(max(0, n - h2), min(h1, n) + 1)  # items from the first half
    log_law = _log_comb(h1)[chosen] + _log_comb(h2)[n - chosen]
    log_law -= log_law.max()
    log_law -= np.log(np.exp(log_law).sum())
    law = np.exp(log_law)
    per_count = rng.multinomial(rows, law)
    likely = law * rows >= 1e-3  # the ratio π / q in the far tails says nothing about the batch needed
    within = np.arange(rows) - np.repeat(np.cumsum(per_count) - per_count, per_count)  # a row's place in its count
    masks = []
    for half, counts in ((first, chosen), (second, n - chosen)):
        demand = np.zeros(half.items + 1, dtype=np.int64)
        demand[counts] = per_count
        ratio = np.exp((log_law - half.log_proposal[counts])[likely].max())
        words, order, starts = _proposals_by_count(rng, half, demand, int(1.02 * ratio * rows) + 64)
        masks.append(words.take(order[np.repeat(starts[counts], per_count) + within], axis=0))
    return masks[0], masks[1]


def _byte_tables(values: np.ndarray) -> np.ndarray:
    """``(lanes, 256)`` float64: row j holds the sums of all subsets of ``values[8 j : 8 j + 8]`` (zero-padded),
    indexed by their mask (item i of the lane is bit i)."""
    lanes = -(-values.size // 8)
    padded = np.zeros(8 * lanes)
    padded[: values.size] = values
    padded = padded.reshape(lanes, 8)
    tables = np.zeros((lanes, 1))
    for bit in range(8):
        tables = np.concatenate([tables, tables + padded[:, bit : bit + 1]], axis=1)
    return tables


class _HalfSums(NamedTuple):
    """Subset-sum tables of one half's items (see ``_count_sums_at_least``): float32 tables of lanes of ``bits``
    items, and float64 tables of 8-item lanes."""

    bits: int
    fast: np.ndarray
    exact: np.ndarray


def _half_sums(values: np.ndarray) -> _HalfSums:
    exact = _byte_tables(values)
    fast = exact.astype(np.float32)
    if values.size > 64:
        return _HalfSums(8, fast, exact)
    if len(fast) % 2:
        fast = np.concatenate([fast, np.zeros((1, 256), dtype=np.float32)])
    # a 16-item lane's mask is high byte * 256 + low byte: its sum is the high byte's plus the low byte's
    return _HalfSums(16, (fast[1::2, :, None] + fast[0::2, None, :]).reshape(-1, 2**16), exact)


def _lanes(masks: np.ndarray, bits: int, lanes: int) -> np.ndarray:
    """``(rows, lanes)`` unsigned ``bits``-bit lanes of little-endian mask words (a view)."""
    return masks.astype("<u8", copy=False).view(np.uint16 if bits == 16 else np.uint8)[:, :lanes]


def _table_sums(lanes: np.ndarray, tables: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out += sum_j tables[j][lanes[:, j]]``. Up to 16 lanes, one look-up per lane over all rows; more, row blocks
    of about 2^16 look-ups at once (their indices stay in cache)."""
    if len(tables) <= 16:
        looked_up = np.empty(len(lanes), dtype=tables.dtype)
        for lane, table in zip(lanes.T, tables):
            out += table.take(lane, out=looked_up, mode="clip")
        return out
    flat, base = tables.ravel(), np.arange(len(tables), dtype=np.intp) * tables.shape[1]
    step = max(1, 2**16 // len(tables))
    for first in range(0, len(lanes), step):
        indices = lanes[first : first + step].astype(np.intp)
        indices += base
        out[first : first + step] += flat.take(indices, mode="clip").sum(axis=1)
    return out


def _floyd_subsets(total: int, m: int, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``(rows, m)`` item indices of independent, uniformly random m-subsets of ``total`` items, by Floyd's
    algorithm (Bentley & Floyd, 1987) on every row at once: for j = total − m, ..., total − 1, draw t uniformly from
    [0, j] and take t, or j if t is taken already. m draws and about m² / 2 comparisons per row."""
    taken = np.empty((rows, m), dtype=np.intp)
    for column, last in enumerate(range(total - m, total)):
        drawn = rng.integers(0, last + 1, size=rows)
        taken[:, column] = np.where((taken[:, :column] == drawn[:, None]).any(axis=1), last, drawn)
    return taken


def _count_sums_at_least(
    pooled: np.ndarray, n: int, n_permutations: int, threshold: float, rng: np.random.Generator
) -> int:
    r"""How many of ``n_permutations`` uniformly random n-subsets of ``pooled`` (``_random_subsets``) have
    :math:`\sum s \ge` ``threshold``.

    A subset's sum is read from tables of the subset sums of 16-item lanes (halves of at most 64 items) or 8-item
    lanes: about N / 16 or N / 8 look-ups instead of n additions. The look-ups use float32 tables; a float32 sum of
    L lanes is within :math:`(L + 2)\,2^{-24} \sum |s|` of the exact one (a 16-item entry rounds three times, each
    partial sum once, and all are at most :math:`\sum |s|` in size), so only rows within twice that of the threshold
    are summed again, from float64 tables of 8-item lanes, and decide the count. The scores and the threshold are
    first scaled by a power of two (exactly) so that the largest :math:`|s|` lies in [1/2, 1): float32 sums neither
    overflow nor underflow.

    When the smaller side has m items, m at most :data:`_FEW_ITEMS` and m² at most N, its items are drawn directly
    instead (:func:`_floyd_subsets`, about m² / 2 comparisons per row) and summed in float64 (X's sum is then their
    sum or the total less it): proposal bits would need a random word per binary digit of n / N.
    """
    few = min(n, pooled.size - n)
    if few <= _FEW_ITEMS and few * few <= pooled.size:  # the smaller side's items, drawn directly
        count, chunk, pooled_sum = 0, _chunk_rows(few), pooled.sum()
        for start in range(0, n_permutations, chunk):
            sums = pooled[_floyd_subsets(pooled.size, few, min(chunk, n_permutations - start), rng)].sum(axis=1)
            count += int(np.count_nonzero((sums if few == n else pooled_sum - sums) >= threshold))
        return count
    scale = 2.0 ** -int(np.frexp(np.abs(pooled).max())[1])
    pooled, threshold, total = pooled * scale, threshold * scale, pooled.size
    halves = _half_sums(pooled[: total // 2]), _half_sums(pooled[total // 2 :])
    lanes = sum(len(half.fast) for half in halves)
    margin = 2 * (lanes + 2) * 2.0**-24 * float(np.abs(pooled).sum())
    above, below = np.float32(threshold + margin), np.float32(threshold - margin)
    above, below = np.nextafter(above, np.float32(np.inf)), np.nextafter(below, np.float32(-np.inf))
    chunk = max(2**10, min(2**17, 2**27 // total))  # rows per chunk; depends only on the sizes
    count = 0
    for start in range(0, n_permutations, chunk):
        rows = min(chunk, n_permutations - start)
        masks = _random_subsets(total, n, rows, rng)
        fast = np.zeros(rows, dtype=np.float32)
        for half_masks, half in zip(masks, halves):
            _table_sums(_lanes(half_masks, half.bits, len(half.fast)), half.fast, fast)
        count += int(np.count_nonzero(fast >= above))
        close = np.flatnonzero((fast > below) & (fast < above))
        if close.size:
            exact = np.zeros(close.size)
            for half_masks, half in zip(masks, halves):
                _table_sums(_lanes(half_masks[close], 8, len(half.exact)), half.exact, exact)
            count += int(np.count_nonzero(exact >= threshold))
    return count


def p_value_from_associations(
    s_x: Tensor,
    s_y: Tensor,
    n_permutations: int | None = None,
    seed: int = 0,
    exact_limit: int = DEFAULT_EXACT_LIMIT,
    allow_unequal_sizes: bool = False,
) -> Tensor:
    r"""One-sided permutation p-value of May et al. (2019), used by Ross et al. (Sec. 5):
    :math:`P[s(X_i, Y_i, A, B) \ge s(X, Y, A, B)]` over the re-partitions of :math:`X \cup Y` into sets
    :math:`X_i, Y_i` of the sizes of X and Y. Ties count as "at least as extreme" (May et al.'s conservative ``>=``).

    **Test statistic.** Over re-partitions that keep the sizes, with :math:`T = \sum_{X \cup Y} s` fixed,
    the WEAT statistic :math:`s(X_i, Y_i) = \sum_{X_i} s - \sum_{Y_i} s = 2 \sum_{X_i} s - T` (Caliskan et al.
    2017, Eq. 1-3; Ross Eq. 2), the mean difference :math:`\operatorname{mean}_{X_i} s - \operatorname{mean}_{Y_i} s
    = (1/|X| + 1/|Y|) \sum_{X_i} s - T / |Y|` (the effect size's numerator) and the effect size itself (its pooled
    standard deviation is the same for every re-partition) are all increasing functions of
    :math:`\sum_{X_i} s`, so they order the re-partitions alike and give one p-value; only :math:`\sum_{X_i} s`
    is computed. This holds for unequal sizes too: the sum difference and the mean difference are then different
    numbers but not different tests. With :math:`|X| = |Y|` it is May et al.'s test exactly.

    * **Sizes.** May et al. define the test for :math:`|X| = |Y|` (halves); unequal sizes raise unless
      ``allow_unequal_sizes=True``, which re-partitions into sets of sizes :math:`|X|` and :math:`|Y|` (the
      permutation test of a two-sample difference in means; Good, *Permutation Tests*, 2005, ch. 3).
    * **Exact** when :math:`C(|X|+|Y|, |X|) \le` ``exact_limit`` (default :data:`DEFAULT_EXACT_LIMIT` = 1e9,
      i.e. up to 16 items per set) and both sets have at most :data:`MAX_EXACT_SET_SIZE` items: the p-value is
      (number of re-partitions as extreme, the observed one included) / :math:`C(|X|+|Y|, |X|)`, counted over all
      of them by a meet-in-the-middle count (see ``_count_exact``).
    * **Sampled** otherwise: ``n_permutations`` = P uniformly random re-partitions (default
      :data:`DEFAULT_PERMUTATIONS` = 99,999; ``_count_sums_at_least``) and :math:`p = (1 + \#\{\ge\}) / (1 + P)`.
      Counting the observed partition once keeps p > 0 and makes the test valid at every level (Phipson &
      Smyth, 2010); it is May et al.'s estimator ("hallucinate a positive observation") with their 100,000
      samples = P + 1. Its Monte-Carlo standard error is about :math:`\sqrt{p(1-p)/P}`.

    Deterministic for a given ``seed`` (a private ``numpy.random.Generator``) and independent of the order of
    the items. Set ``exact_limit=0`` to force sampling.

    Args:
        s_x: ``(n_x,)`` association scores of X.
        s_y: ``(n_y,)`` association scores of Y; ``n_y = n_x`` unless ``allow_unequal_sizes``.
        n_permutations: random re-partitions when sampling; ``None`` means :data:`DEFAULT_PERMUTATIONS`.
        seed: seed of the generator used when sampling.
        exact_limit: largest number of re-partitions tested exactly.
        allow_unequal_sizes: test :math:`|X| \ne |Y|` by re-partitions of the original sizes instead of raising.

    Returns:
        float64 scalar in (0, 1].
    """
    s_x, s_y = _check_scores("s_x", s_x), _check_scores("s_y", s_y)
    if not allow_unequal_sizes:
        _check_equal_sizes(s_x.numel(), s_y.numel())
    n_permutations = DEFAULT_PERMUTATIONS if n_permutations is None else n_permutations
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise ConfigError(
            f"Expected argument `n_permutations` to be a positive integer or None but got {n_permutations!r}"
        )
    n_x, n_y = s_x.numel(), s_y.numel()
    pooled = torch.cat([s_x, s_y]).sort().values
    threshold = s_x.sum() - _tie_tolerance(pooled)
    n_partitions = math.comb(n_x + n_y, n_x)
    if n_partitions <= exact_limit and max(n_x, n_y) <= MAX_EXACT_SET_SIZE:
        return torch.tensor(_count_exact(s_x, s_y, threshold) / n_partitions, dtype=torch.float64)
    rng = np.random.default_rng(seed)
    as_extreme = _count_sums_at_least(pooled.cpu().numpy(), n_x, n_permutations, threshold.item(), rng)
    return torch.tensor((1 + as_extreme) / (1 + n_permutations), dtype=torch.float64)


def interval_from_associations(
    s_x: Tensor,
    s_y: Tensor,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    confidence: float = 0.95,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_INTERVAL_METHOD,
) -> Tensor:
    r"""Stratified bootstrap interval of the effect size: BCa (default) or percentile.

    Each replicate resamples X's scores (with replacement, :math:`n_x` of them) and Y's scores
    (:math:`n_y`) separately, keeping the two groups' sizes as in the design, and recomputes :math:`d`
    with the same pooled sample standard deviation. Replicates whose pooled scores are all equal have no
    effect size and are left out (NaN if all are). The attribute sets are held fixed: the interval reflects
    the choice of target items only. Both methods read the same replicates (the same ``seed``, the same draws).

    * ``"percentile"`` (Efron & Tibshirani, 1993, ch. 13): the :math:`(1-c)/2` and :math:`(1+c)/2` quantiles
      (linear interpolation) of the replicates.
    * ``"bca"`` (Efron, 1987; Efron & Tibshirani, 1993, ch. 14, Eq. 14.10): the quantiles at the adjusted levels
      :math:`\alpha_{1,2} = \Phi\big(\hat z_0 + (\hat z_0 + z_{(1 \mp c)/2}) / (1 - \hat a (\hat z_0 +
      z_{(1 \mp c)/2}))\big)`, with the bias correction :math:`\hat z_0` of :func:`_bias_correction` and the
      acceleration :math:`\hat a` of :func:`_acceleration` over :func:`_effect_size_jackknife`. At 8--12 items
      per set it covers closer to ``c`` than the percentile interval (``scripts/bootstrap_coverage.py``). NaN where
      the adjusted levels are undefined (:math:`\hat z_0 = \pm\infty`: every replicate on one side of :math:`d`).

    Args:
        s_x: ``(n_x,)`` association scores of X.
        s_y: ``(n_y,)`` association scores of Y.
        n_bootstrap: number of replicates.
        confidence: coverage ``c`` in (0, 1).
        seed: seed of the private ``torch.Generator``.
        method: ``"bca"`` or ``"percentile"``.

    Returns:
        float64 tensor ``[low, high]``.
    """
    s_x, s_y = _check_scores("s_x", s_x), _check_scores("s_y", s_y)
    check_bootstrap(n_bootstrap, confidence, method)
    replicates = _bootstrap_replicates(s_x, s_y, n_bootstrap, torch.Generator().manual_seed(seed))
    observed = _effect_size(s_x.unsqueeze(0), s_y.unsqueeze(0))[0]
    bca = (observed, _effect_size_jackknife(s_x, s_y)) if method == "bca" else None
    return bootstrap_interval(replicates, confidence, bca)


def check_bootstrap(n_bootstrap: object, confidence: object, method: object) -> None:
    """Raise a :class:`~vlbias.errors.ConfigError` naming the argument unless ``n_bootstrap`` is a positive
    integer, ``confidence`` in (0, 1) and ``method`` one of :data:`INTERVAL_METHODS`."""
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 1:
        raise ConfigError(f"Expected argument `n_bootstrap` to be a positive integer but got {n_bootstrap!r}")
    if not 0 < confidence < 1:
        raise ConfigError(f"Expected argument `confidence` to be in (0, 1) but got {confidence!r}")
    check_interval_method(method)


def bootstrap_interval(replicates: Tensor, confidence: float, bca: tuple[Tensor, list[Tensor]] | None) -> Tensor:
    """``[low, high]`` of the bootstrap ``replicates`` (NaN ones left out) at coverage ``confidence``: the
    percentile interval, or with ``bca`` = (the observed statistic, its jackknife values per resampled set; see
    :func:`_acceleration`) the BCa interval, NaN where its adjusted levels are undefined
    (:func:`interval_from_associations`)."""
    levels = torch.tensor([(1 - confidence) / 2, (1 + confidence) / 2], dtype=torch.float64)
    if bca is not None:
        observed, jackknife = bca
        levels = _bca_levels(levels, _bias_correction(replicates, observed), _acceleration(jackknife))
        if not torch.isfinite(levels).all():
            return torch.full((2,), float("nan"), dtype=torch.float64)
    return torch.nanquantile(replicates, levels)


def check_interval_method(method: object, name: str = "method") -> None:
    """Raise a :class:`~vlbias.errors.ConfigError` naming argument ``name`` unless ``method`` is one of
    :data:`INTERVAL_METHODS`."""
    if method not in INTERVAL_METHODS:
        raise ConfigError(f"Expected argument `{name}` to be one of {INTERVAL_METHODS} but got {method!r}")


def _bootstrap_replicates(s_x: Tensor, s_y: Tensor, n_bootstrap: int, generator: torch.Generator) -> Tensor:
    """``(n_bootstrap,)`` effect sizes of stratified resamples, drawn in chunks (X's indices, then Y's, per chunk)."""
    n_x, n_y = s_x.numel(), s_y.numel()
    rows_per_chunk = _chunk_rows(n_x + n_y)
    replicates = []
    for start in range(0, n_bootstrap, rows_per_chunk):
        rows = min(rows_per_chunk, n_bootstrap - start)
        resampled_x = s_x[torch.randint(n_x, (rows, n_x), generator=generator)]  # (rows, n_x)
        resampled_y = s_y[torch.randint(n_y, (rows, n_y), generator=generator)]  # (rows, n_y)
        replicates.append(_effect_size(resampled_x, resampled_y))
    return torch.cat(replicates)


def _bias_correction(replicates: Tensor, observed: Tensor) -> Tensor:
    r""":math:`\hat z_0 = \Phi^{-1}(\#\{d^*_b < d\} / B)` (Efron & Tibshirani, 1993, Eq. 14.14), ties with
    :math:`d` counted as half below (mid-rank, as ``scipy.stats.bootstrap``), over the :math:`B` defined replicates.

    A tie is a replicate within :data:`TIE_RELATIVE` of :math:`d` (relative to :math:`\max(|d|, 1)`): at small set
    sizes many resamples are the original items in another order (at 3 per set, 22 % of them), and their
    :math:`d^*_b` differs from :math:`d` by rounding only, or by float32 noise in the scores when the same data are
    embedded in other batches (DDP shards); counted exactly, such a tie would fall below or above :math:`d` by
    chance and move the interval."""
    defined = replicates[~replicates.isnan()]
    tolerance = TIE_RELATIVE * observed.abs().clamp(min=1.0)
    below = (defined < observed - tolerance).sum()
    ties = ((defined - observed).abs() <= tolerance).sum()
    return torch.special.ndtri((2 * below + ties).to(torch.float64) / (2 * defined.numel()))


def _leave_one_out(scores: Tensor, first: int = 0, stop: int | None = None) -> Tensor:
    """``(stop - first, n - 1)``: row ``i`` holds ``scores`` without item ``first + i`` (all items by default)."""
    n = scores.numel()
    kept = torch.arange(n - 1).unsqueeze(0)  # (1, n - 1)
    left_out = torch.arange(first, n if stop is None else stop).unsqueeze(1)  # (rows, 1)
    return scores[kept + (kept >= left_out).long()]  # skip column first + i in row i


def leave_one_out_values(statistic: Callable[..., Tensor], *aligned: Tensor, row_width: int) -> Tensor:
    """``(n,)``: ``statistic`` of the ``aligned`` ``(n,)`` tensors with item ``i`` left out of each, for every
    ``i``. ``statistic`` maps ``(rows, n - 1)`` tensors to ``(rows,)``; it is called on chunks of rows holding about
    :data:`_CHUNK_NUMBERS` numbers (``row_width``: the numbers it handles per row), so memory stays linear in n."""
    n = aligned[0].numel()
    step = _chunk_rows(row_width)
    chunks = [
        statistic(*(_leave_one_out(values, first, min(first + step, n)) for values in aligned))
        for first in range(0, n, step)
    ]
    return torch.cat(chunks)


def _effect_size_jackknife(s_x: Tensor, s_y: Tensor) -> list[Tensor]:
    """The effect size's jackknife values for :func:`_acceleration`: each item of X left out in turn (Y whole,
    ``(n_x,)``), then each item of Y (X whole, ``(n_y,)``); a set of one item has no jackknife values."""
    n_x, n_y = s_x.numel(), s_y.numel()
    jackknife = []
    if n_x > 1:
        jackknife.append(
            leave_one_out_values(lambda x: _effect_size(x, s_y.expand(len(x), -1)), s_x, row_width=n_x + n_y)
        )
    if n_y > 1:
        jackknife.append(
            leave_one_out_values(lambda y: _effect_size(s_x.expand(len(y), -1), y), s_y, row_width=n_x + n_y)
        )
    return jackknife


def _acceleration(jackknife: list[Tensor]) -> Tensor:
    r"""Acceleration :math:`\hat a` of a statistic of several independently resampled sets, from its jackknife
    values (Efron & Tibshirani, 1993, Eq. 14.15 and its several-sample form Eq. 15.36): with
    :math:`\theta_{(i)}` the statistic without item :math:`i` of set :math:`j` (``jackknife[j][i]``; the other sets
    whole) and :math:`U_{ji} = (n_j - 1)(\bar\theta_{(\cdot)} - \theta_{(i)})`,

    .. math::
        \hat a = \frac{\sum_j n_j^{-3} \sum_i U_{ji}^3}{6 \big(\sum_j n_j^{-2} \sum_i U_{ji}^2\big)^{3/2}}.

    Sets of one item are not passed: they would add nothing (their factor :math:`n_j - 1` is 0, and their
    resamples never vary). Undefined (NaN) jackknife values, whose pooled scores are all equal, are left out, as
    such replicates are. :math:`\hat a = 0` when no jackknife value varies."""
    numerator = denominator = torch.zeros((), dtype=torch.float64)
    for values in jackknife:
        n = values.numel()
        influence = (n - 1) * (values.nanmean() - values)
        numerator = numerator + influence.pow(3).nansum() / n**3
        denominator = denominator + influence.pow(2).nansum() / n**2
    if denominator == 0:
        return denominator
    return numerator / (6 * denominator.pow(1.5))


def _bca_levels(levels: Tensor, bias_correction: Tensor, acceleration: Tensor) -> Tensor:
    r"""BCa levels :math:`\Phi\big(\hat z_0 + (\hat z_0 + z_\alpha) / (1 - \hat a(\hat z_0 + z_\alpha))\big)` of the
    percentile levels :math:`\alpha` (Efron & Tibshirani, 1993, Eq. 14.10)."""
    shifted = bias_correction + torch.special.ndtri(levels)
    return torch.special.ndtr(bias_correction + shifted / (1 - acceleration * shifted))


# ----------------------------------------------------------------------------- cosine (WEAT/SEAT) wrappers
def _target_associations(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    x, y = _check_embeddings("x", x), _check_embeddings("y", y)
    a, b = _check_embeddings("a", a), _check_embeddings("b", b)
    _check_same_dim(x=x, y=y, a=a, b=b)
    return _association(x, a, b), _association(y, a, b)


def weat_test_statistic(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """Test statistic s(X, Y, A, B) (Ross Eq. 2) of embeddings ``(n, d)``; see :func:`statistic_from_associations`."""
    return statistic_from_associations(*_target_associations(x, y, a, b))


def weat_effect_size(x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """Effect size d (Ross Eq. 3) of embeddings ``(n, d)``; see :func:`effect_size_from_associations`
    (sample standard deviation, n − 1, over X ∪ Y, as in May et al.'s code)."""
    return effect_size_from_associations(*_target_associations(x, y, a, b))


def weat_p_value(
    x: Tensor,
    y: Tensor,
    a: Tensor,
    b: Tensor,
    n_permutations: int | None = None,
    seed: int = 0,
    exact_limit: int = DEFAULT_EXACT_LIMIT,
    allow_unequal_sizes: bool = False,
) -> Tensor:
    """Permutation p-value of May et al. for embeddings ``(n, d)``, ``|X| = |Y|`` unless ``allow_unequal_sizes``;
    the scores s(w, A, B) are computed once and only they are re-partitioned. See
    :func:`p_value_from_associations`."""
    s_x, s_y = _target_associations(x, y, a, b)
    return p_value_from_associations(
        s_x,
        s_y,
        n_permutations=n_permutations,
        seed=seed,
        exact_limit=exact_limit,
        allow_unequal_sizes=allow_unequal_sizes,
    )


def weat_effect_size_interval(
    x: Tensor,
    y: Tensor,
    a: Tensor,
    b: Tensor,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    confidence: float = 0.95,
    seed: int = 0,
    method: IntervalMethod = DEFAULT_INTERVAL_METHOD,
) -> Tensor:
    """Stratified bootstrap interval ``[low, high]`` (``method``: ``"bca"`` or ``"percentile"``) of the effect size
    of embeddings ``(n, d)``; see :func:`interval_from_associations`."""
    s_x, s_y = _target_associations(x, y, a, b)
    return interval_from_associations(
        s_x, s_y, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, method=method
    )


# ----------------------------------------------------------------------------- matching-probability wrappers
def itm_effect_size(
    x_match_a: Tensor, x_match_b: Tensor, y_match_a: Tensor, y_match_b: Tensor, top_k: int | None = None
) -> Tensor:
    r"""Effect size of MMBias Eq. 1 with :math:`\sigma(w, A, B)` scores of fusion models (ALBEF, ViLT);
    see :func:`itm_association` (``top_k``) and :func:`effect_size_from_associations`.

    Args:
        x_match_a: ``(n_x, |A|)`` match probabilities of the targets in X with the attributes in A.
        x_match_b: ``(n_x, |B|)`` the same with B.
        y_match_a: ``(n_y, |A|)`` match probabilities of the targets in Y with A.
        y_match_b: ``(n_y, |B|)`` the same with B.
        top_k: keep each target's ``top_k`` largest probabilities per attribute set.
    """
    s_x = _itm_association(x_match_a, x_match_b, top_k, names=("x_match_a", "x_match_b"))
    s_y = _itm_association(y_match_a, y_match_b, top_k, names=("y_match_a", "y_match_b"))
    for name, x_cols, y_cols in (
        ("A", x_match_a.shape[1], y_match_a.shape[1]),
        ("B", x_match_b.shape[1], y_match_b.shape[1]),
    ):
        if x_cols != y_cols:
            raise InputError(
                f"Expected X and Y to be matched against the same attribute set {name} but got {x_cols} and "
                f"{y_cols} columns"
            )
    return effect_size_from_associations(s_x, s_y)
