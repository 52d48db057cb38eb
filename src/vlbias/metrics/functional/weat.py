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
# Random partitions decoded at once; items per block of the decoding (tables of 2^17 subset sums); top bits
# of a rank that look up its size pattern (see ``_sampled_half_sums``).
_SAMPLE_CHUNK = 2**14
_BLOCK_SIZE = 17
_LOOKUP_BITS = 16
# Ranks of the exact decoding are int64, so it covers at most 2^62 subsets; beyond, ``_sampled_half_sums_by_bits``
# draws a head of 16-item blocks as random bits (rows per chunk below) and decodes a tail of at most 62 items.
_RANK_BITS = 62
_TAIL_ITEMS = 62
_HEAD_BLOCK = 16
_P_DIGITS = 8  # binary digits of the head's P(1) for unequal sizes (one random word each)
_BITS_CHUNK = 2**15
_SUM_INDICES = 2**16  # table look-ups per block of the head's sums


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


def _subset_sum_table(block: np.ndarray) -> np.ndarray:
    """``sums[mask]`` = the sum of the items of ``block`` whose bits are set in ``mask``, for all 2^b masks."""
    sums = np.zeros(2**block.size)
    for bit, value in enumerate(block):
        np.add(sums[: 2**bit], value, out=sums[2**bit : 2 ** (bit + 1)])
    return sums


def _block_sums_by_size(block: np.ndarray) -> np.ndarray:
    """Sums of all 2^b subsets of ``block``, the size-k ones together, the sizes ascending and each size's subsets in
    the order of their masks (the order of a stable sort of the masks by number of items). Dynamic programme over
    the items: adding item i keeps every size-k subset and extends every size-(k−1) subset by it, and the subsets
    without item i have the smaller masks."""
    groups = [np.zeros(1)]
    for value in block:
        extended = [np.concatenate([groups[k], groups[k - 1] + value]) for k in range(1, len(groups))]
        groups = [groups[0], *extended, groups[-1] + value]
    return np.concatenate(groups)


class _PartitionCode(NamedTuple):
    """How an integer rank names one subset of N items split into blocks (see ``_sampled_half_sums``); depends only
    on N, the subset sizes it covers and the constants. Built per call with numpy (about a millisecond)."""

    block_sizes: tuple[int, ...]
    n_subsets: int  # ranks lie in [0, n_subsets)
    size_first: np.ndarray  # (N + 1,) first rank of the subsets of each size it covers (0 for the others)
    shift: int  # rank >> shift is the rank's bucket in the look-up of its size pattern
    first: np.ndarray  # (patterns,) first rank of each size pattern (k_1, ..., k_B), ascending
    bucket_pattern: np.ndarray  # (buckets,) the pattern of every rank in the bucket, or -1 if they differ
    radix: np.ndarray  # (B - 1, patterns) C(b_j, k_j), the number of size-k_j subsets of block j, for j < B
    offset: np.ndarray  # (B, patterns) where block j's size-k_j sums start in the concatenated tables


def _partition_code(total: int, n: int | None, block_size: int, lookup_bits: int) -> _PartitionCode:
    """The code of the n-subsets of ``total`` items, or of all subsets (every size, sizes ascending) if n is None."""
    n_blocks = -(-total // block_size)
    sizes = tuple(total // n_blocks + (j < total % n_blocks) for j in range(n_blocks))
    ks = np.stack([axis.ravel() for axis in np.meshgrid(*(np.arange(b + 1) for b in sizes), indexing="ij")], axis=1)
    pattern_size = ks.sum(axis=1)  # the patterns are in lexicographic order (as itertools.product lists them)
    ks = ks[pattern_size == n] if n is not None else ks[np.argsort(pattern_size, kind="stable")]
    comb = [np.array([math.comb(b, k) for k in range(b + 1)], dtype=np.int64) for b in sizes]
    size_start = [np.concatenate([[0], np.cumsum(c)[:-1]]) for c in comb]  # block j's size-k sums start here
    table_start = np.concatenate([[0], np.cumsum([2**b for b in sizes])[:-1]])
    columns = [comb[j].take(ks[:, j]) for j in range(n_blocks)]
    counts = functools.reduce(np.multiply, columns)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    n_subsets = math.comb(total, n) if n is not None else 2**total
    sizes_covered = np.arange(total + 1) if n is None else np.array([n])
    size_counts = np.array([math.comb(total, k) for k in sizes_covered], dtype=np.int64)
    size_first = np.zeros(total + 1, dtype=np.int64)
    size_first[sizes_covered] = np.concatenate([[0], np.cumsum(size_counts)[:-1]])
    shift = max(0, n_subsets.bit_length() - lookup_bits)
    bucket_first = np.arange(((n_subsets - 1) >> shift) + 1, dtype=np.int64) << shift
    bucket_last = np.minimum((bucket_first >> shift) + 1 << shift, n_subsets) - 1
    bucket_pattern = np.searchsorted(first, bucket_first, side="right") - 1
    bucket_pattern[np.searchsorted(first, bucket_last, side="right") - 1 != bucket_pattern] = -1
    radix = np.stack(columns[:-1]) if n_blocks > 1 else np.zeros((0, len(ks)), dtype=np.int64)
    offset = np.stack([table_start[j] + size_start[j].take(ks[:, j]) for j in range(n_blocks)])
    return _PartitionCode(sizes, n_subsets, size_first, shift, first, bucket_pattern, radix, offset)


def _decoded_sums(code: _PartitionCode, sums: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Sums of the subsets named by ``rank`` (int64, consumed); ``sums`` are the code's blocks' size-grouped tables."""
    pattern = code.bucket_pattern.take(rank >> code.shift)
    mixed = np.flatnonzero(pattern < 0)
    pattern[mixed] = np.searchsorted(code.first, rank[mixed], side="right") - 1
    rank -= code.first.take(pattern)
    subset_sums = np.zeros(rank.size)
    for radix, offset in zip(code.radix, code.offset[:-1]):
        rank, which = np.divmod(rank, radix.take(pattern))  # which: one of the block's size-k_j subsets
        subset_sums += sums.take(offset.take(pattern) + which)
    subset_sums += sums.take(code.offset[-1].take(pattern) + rank)
    return subset_sums


def _code_tables(values: np.ndarray, code: _PartitionCode) -> np.ndarray:
    return np.concatenate([_block_sums_by_size(b) for b in np.split(values, np.cumsum(code.block_sizes)[:-1])])


def _sampled_half_sums(pooled: np.ndarray, n: int, n_permutations: int, rng: np.random.Generator) -> np.ndarray:
    r"""Sums over ``n_permutations`` uniformly random n-subsets of ``pooled``, exactly uniform.

    The N items are split into B blocks of at most :data:`_BLOCK_SIZE`; a subset takes :math:`k_j` items from
    block j. Each subset is one integer (its rank) drawn uniformly from [0, C(N, n)) (numpy's bounded integers:
    Lemire's method, exact by rejection) and decoded without a loop over subsets: the ranks are grouped by size
    pattern :math:`(k_1, \dots, k_B)`, :math:`C(b_1, k_1) \cdots C(b_B, k_B)` consecutive ranks per pattern
    (found by a table look-up on the rank's top bits); the rank within the pattern is read as a mixed-radix
    number whose digit j picks one of block j's size-:math:`k_j` subsets, whose sum is read from a table of the
    block's :math:`2^{b_j}` subset sums. The map from ranks to subsets is a bijection, so uniform ranks give
    uniform subsets. When C(N, n) exceeds :math:`2^{62}` (from 33 items per set) ranks no longer fit in int64
    and ``_sampled_half_sums_by_bits`` draws the subsets. numpy, not torch: its per-call overhead, bounded
    integers and ``divmod`` make this about twice as fast.
    """
    total = pooled.size
    if math.comb(total, n) > 2**_RANK_BITS:
        return _sampled_half_sums_by_bits(pooled, n, n_permutations, rng)
    code = _partition_code(total, n, _BLOCK_SIZE, _LOOKUP_BITS)
    sums = _code_tables(pooled, code)
    half_sums = np.zeros(n_permutations)
    for start in range(0, n_permutations, _SAMPLE_CHUNK):
        rank = rng.integers(0, code.n_subsets, min(_SAMPLE_CHUNK, n_permutations - start), dtype=np.int64)
        half_sums[start : start + rank.size] = _decoded_sums(code, sums, rank)
    return half_sums


class _Level(NamedTuple):
    """One step of ``_sampled_half_sums_by_bits``: the head words [first, first + words) (``size`` items; the bits
    of ``last_lanes`` in the last word) are drawn given r, the number of items still to choose."""

    first: int
    words: int
    size: int
    last_lanes: np.uint64
    rest: int  # items after this step's words
    log_comb_rest: np.ndarray  # (rest + 1,) log C(rest, k)
    log_bound: np.ndarray  # (size + rest + 1,) max over feasible c of the log acceptance weight, per r


def _levels(head: int, total: int, log_odds: float) -> list[_Level]:
    """Halve the remaining items at each step (so each step accepts about 1/sqrt(2) of its proposals) until the
    head left is at most twice the tail; then take the rest of the head in one step."""
    levels, first, remaining, tail = [], 0, total, total - head
    head_words = -(-head // 64)
    while first < head_words:
        left = head - 64 * first
        words = head_words - first if left <= 2 * tail else max(1, round(remaining / 128))
        size = min(64 * words, left)
        rest = remaining - size
        k = np.arange(1, rest + 1)
        log_comb_rest = np.concatenate([[0.0], np.cumsum(np.log((rest - k + 1) / k))])
        r = np.arange(remaining + 1)
        low, high = np.maximum(0, r - rest), np.minimum(size, r)
        # the log weight f(c) = log C(rest, r - c) + c log((1 - p) / p) is concave in c: its maximum is next to
        # c0, where f(c + 1) - f(c) = log((r - c) / (rest - r + c + 1)) + log((1 - p) / p) changes sign
        odds = math.exp(log_odds)
        c0 = np.floor((r * odds - rest + r - 1) / (odds + 1)).astype(np.int64)
        candidates = [np.clip(c0 + step, low, high) for step in (0, 1)]
        log_bound = np.maximum(*(log_comb_rest.take(r - c) + log_odds * c for c in candidates))
        last_lanes = np.uint64(2**64 - 1 if size % 64 == 0 else 2 ** (size % 64) - 1)
        levels.append(_Level(first, words, size, last_lanes, rest, log_comb_rest, log_bound))
        first, remaining = first + words, rest
    return levels


def _random_words(rng: np.random.Generator, shape: tuple[int, ...], digits: list[int]) -> np.ndarray:
    """uint64 words whose bits are independent with P(1) = 0.d_t...d_1 in binary (``digits`` from d_1): each digit
    ORs (1) or ANDs (0) one more uniform word into the running word, least significant digit first."""
    words = None
    for digit in digits:
        drawn = rng.bit_generator.random_raw(math.prod(shape)).reshape(shape)
        words = drawn if words is None else (drawn | words if digit else drawn & words)
    return words


def _sum_tables(values: np.ndarray, bits: int) -> np.ndarray:
    """Concatenated tables of the 2^bits subset sums of consecutive ``bits``-item blocks of ``values``."""
    return np.concatenate([_subset_sum_table(block) for block in values.reshape(-1, bits)])


def _sampled_half_sums_by_bits(pooled: np.ndarray, n: int, n_permutations: int, rng: np.random.Generator) -> np.ndarray:
    r"""Sums over ``n_permutations`` uniformly random n-subsets of ``pooled`` for any N: random bits for a head of
    16-item blocks, an exact rank (``_sampled_half_sums``'s decoding) for a tail of 47 to 62 items.

    A uniform n-subset S of N items is drawn part by part, left to right: with r items still to choose among the
    m items from part P on, the part's mask M (|P| = s items, c = |M| of them chosen) has probability
    :math:`C(m - s, r - c) / C(m, r)`. Each head part is proposed as s random bits with :math:`P(1) = p`
    (:math:`p = 1/2` for equal sizes, else n/N rounded to :math:`2^{-8}`; :func:`_random_words`) and accepted with
    probability :math:`\propto C(m - s, r - c) / (p^c (1 - p)^{s - c})`, normalised by its maximum over c
    (rejection sampling: accepted masks have exactly the law above). The parts halve the remaining items, so each
    accepts about :math:`1/\sqrt 2` of its proposals. The tail's r items are then a uniform r-subset, drawn exactly
    as a uniform rank among the :math:`C(\text{tail}, r)` subsets of that size and decoded as in
    ``_sampled_half_sums``. Uniform up to float64 rounding of the acceptance probabilities (relative 1e-13).

    The sum over S is read from tables of the subset sums of the head's 16-item (at most 8 head blocks) or 8-item
    blocks plus the tail's decoded sum: about N / 8 look-ups per subset instead of N / 2 additions.
    """
    total = pooled.size
    head = _HEAD_BLOCK * -(-(total - _TAIL_ITEMS) // _HEAD_BLOCK)
    head_words = -(-head // 64)
    scale = 2**_P_DIGITS
    numerator = min(scale - 1, max(1, round(scale * n / total)))  # p = numerator / scale = odd / 2^t: t digits
    t = _P_DIGITS + 1 - (numerator & -numerator).bit_length()
    digits = [numerator >> (_P_DIGITS - t) >> bit & 1 for bit in range(t)]
    log_odds = math.log((scale - numerator) / numerator)
    levels = _levels(head, total, log_odds)
    tail_code = _partition_code(total - head, None, _BLOCK_SIZE, _LOOKUP_BITS)
    tail_sums = _code_tables(pooled[head:], tail_code)
    tail_comb = np.array([math.comb(total - head, k) for k in range(total - head + 1)], dtype=np.int64)
    table_bits = 16 if head <= 8 * _HEAD_BLOCK else 8
    lanes = -(-head // table_bits)  # lanes of the mask words that hold head items
    head_sums = _sum_tables(np.concatenate([pooled[:head], np.zeros(lanes * table_bits - head)]), table_bits)
    table_base = np.arange(lanes, dtype=np.intp) << table_bits
    lane_type = np.uint16 if table_bits == 16 else np.uint8
    sum_rows = max(1, _SUM_INDICES // lanes)
    half_sums = np.zeros(n_permutations)
    for start in range(0, n_permutations, _BITS_CHUNK):
        rows = min(_BITS_CHUNK, n_permutations - start)
        masks = np.zeros((rows, head_words), dtype=np.uint64)
        to_choose = np.full(rows, n, dtype=np.int64)
        for level in levels:
            pending = np.arange(rows)
            while pending.size:
                # once few rows are left (those whose r is far from its mean accept rarely), several proposals each
                proposals = 1 if 4 * pending.size > rows else min(4096, rows // pending.size)
                bits = _random_words(rng, (pending.size, proposals, level.words), digits)
                bits[..., -1] &= level.last_lanes
                counts = np.bitwise_count(bits)
                chosen = counts[..., 0].astype(np.int64)
                for word in range(1, level.words):
                    chosen += counts[..., word]
                r = to_choose.take(pending)[:, None]
                feasible = (chosen <= r) & (r - chosen <= level.rest)
                log_weight = level.log_comb_rest.take(np.where(feasible, r - chosen, 0)) + log_odds * chosen
                accepted = feasible & (rng.standard_exponential(chosen.shape) >= level.log_bound.take(r) - log_weight)
                which = accepted.argmax(axis=1) if proposals > 1 else np.zeros(pending.size, dtype=np.intp)
                done = accepted[np.arange(pending.size), which] if proposals > 1 else accepted[:, 0]
                if pending.size == rows:  # the first proposals: every row's, in place (rejected ones are redrawn)
                    masks[:, level.first : level.first + level.words] = bits[:, 0]
                    to_choose -= np.where(done, chosen[:, 0], 0)
                    pending = np.flatnonzero(~done)
                    continue
                rows_done, which = pending[done], which[done]
                masks[rows_done, level.first : level.first + level.words] = bits[done, which]
                to_choose[rows_done] -= chosen[done, which]
                pending = pending[~done]
        rank = tail_code.size_first.take(to_choose) + rng.integers(0, tail_comb.take(to_choose))
        chunk_sums = _decoded_sums(tail_code, tail_sums, rank)
        for first in range(0, rows, sum_rows):  # index blocks of about _SUM_INDICES entries stay in cache
            indices = masks[first : first + sum_rows].view(lane_type)[:, :lanes] + table_base
            chunk_sums[first : first + sum_rows] += head_sums.take(indices).sum(axis=1)
        half_sums[start : start + rows] = chunk_sums
    return half_sums


def _sampled_half_sums_by_keys(pooled: np.ndarray, n: int, n_permutations: int, rng: np.random.Generator) -> np.ndarray:
    """Sums over uniformly random n-subsets of ``pooled``: the n largest of N iid float64 uniform keys per row
    (ties, chance about N^2 2^-54 per row, are broken by position). The plain sampler that the fast ones are
    checked against in the tests; about 30 times slower than ``_sampled_half_sums``."""
    total = pooled.size
    half_sums = []
    for start in range(0, n_permutations, _chunk_rows(total)):
        keys = rng.random((min(_chunk_rows(total), n_permutations - start), total))
        half_sums.append(pooled[np.argpartition(keys, total - n, axis=1)[:, total - n :]].sum(axis=1))
    return np.concatenate(half_sums)


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
      :data:`DEFAULT_PERMUTATIONS` = 99,999; ``_sampled_half_sums``) and :math:`p = (1 + \#\{\ge\}) / (1 + P)`.
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
    half_sums = _sampled_half_sums(pooled.cpu().numpy(), n_x, n_permutations, np.random.default_rng(seed))
    as_extreme = int(np.count_nonzero(half_sums >= threshold.item()))
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
