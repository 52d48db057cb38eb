r"""The permutation engine: exact and sampled permutation tests of the association statistics.

Two designs, each tested exactly (all permutations counted, never listed) when they are few and by uniformly random
permutations otherwise:

* **Re-partitions** (two samples; WEAT/SEAT, May et al. 2019): :math:`P[\sum_{X_i} s \ge \sum_X s]` over the
  partitions of :math:`X \cup Y` into sets :math:`X_i, Y_i` of the sizes of X and Y, :func:`repartition_p_value`.
  Exact by a meet-in-the-middle count over subset sums (:func:`_count_exact`); sampled with masks of uniformly
  random subsets read from subset-sum tables (:func:`_count_sums_at_least`).
* **Sign flips** (paired; Grounded-WEAT Experiment 3, Ross et al. 2021):
  :math:`P[\tfrac12(|\sum_X \epsilon\delta| + |\sum_Y \epsilon\delta|) \ge \tfrac12(|\sum_X \delta| +
  |\sum_Y \delta|)]` over the sign vectors :math:`\epsilon \in \{\pm 1\}^{n_x + n_y}`, :func:`sign_flip_p_value`.

Ties count as "at least as extreme" (May et al.'s conservative ``>=``), with values within the rounding of a float64
sum of the observed one counted as ties (:func:`tie_tolerance`). A sampled p-value counts the observed permutation
once, :math:`p = (1 + \#\{\ge\}) / (1 + P)` (:func:`sampled_p_value`; Phipson & Smyth, 2010).

Example:
    >>> s_x, s_y = torch.tensor([0.1, 0.4], dtype=torch.float64), torch.tensor([0.2, 0.3], dtype=torch.float64)
    >>> repartition_p_value(s_x, s_y, n_permutations=100, seed=0).item()  # 4 of the 6 halves sum to >= 0.5
    0.6666666666666666
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from vlbias.metrics.functional.chunks import chunk_rows

#: Re-partitions are counted exactly when C(|X|+|Y|, |X|) is at most this (up to 16 items per target set, where the
#: exact count costs about as much as sampling 99,999 partitions).
REPARTITION_EXACT_LIMIT = 10**9
#: The exact count of re-partitions builds tables of 2^|X| subset sums; beyond this many items per set it samples.
MAX_EXACT_SET_SIZE = 24
#: Sign vectors counted by the exact sign-flip test (2^24: up to 24 targets in X and Y together; the count meets in
#: the middle, so this costs far less than sampling would).
SIGN_FLIP_EXACT_LIMIT = 2**24
# The permutation test draws the smaller side's m items directly when m is at most this and m^2 at most all items
# (see ``_count_sums_at_least``).
_FEW_ITEMS = 64
# Batches of proposals drawn after the first before the counts still short are drawn exactly (``_proposals_by_count``).
_TOP_UPS = 3
# The enumerated side of the exact sign-flip count is split into chunks of 2^_CHUNK_BITS sums (``_count_sign_flips``).
_CHUNK_BITS = 20


def sampled_p_value(as_extreme: int, n_permutations: int) -> float:
    """:math:`(1 + \\#\\{\\ge\\}) / (1 + P)` of ``as_extreme`` of ``n_permutations`` random permutations: the observed
    one counted once keeps p > 0 and the test valid at every level (Phipson & Smyth, 2010); May et al.'s estimator
    ("hallucinate a positive observation"). Its Monte-Carlo standard error is about :math:`\\sqrt{p(1-p)/P}`."""
    return (1 + as_extreme) / (1 + n_permutations)


def tie_tolerance(values: Tensor) -> Tensor:
    """How far below the observed value a permuted value of a float64 sum of ``values`` (each with a sign or not)
    still counts as a tie (:math:`\\ge`)."""
    # Permuted sums are float64 sums of at most N values; their rounding error is below N * eps * sum|v|
    # (Higham's bound), so sums this close to the observed one count as ties (>=). The observed permutation then
    # always counts itself, whatever order its terms are added in.
    return 2 * values.numel() * torch.finfo(torch.float64).eps * values.abs().sum()


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
    step = chunk_rows(half.items)
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
        count, chunk, pooled_sum = 0, chunk_rows(few), pooled.sum()
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


def repartition_p_value(
    s_x: Tensor, s_y: Tensor, n_permutations: int, seed: int, exact_limit: int = REPARTITION_EXACT_LIMIT
) -> Tensor:
    r""":math:`P[\sum_{X_i} s \ge \sum_X s]` over the re-partitions of :math:`X \cup Y` into sets of the sizes of X
    and Y (module docstring), a float64 scalar in (0, 1].

    * **Exact** when :math:`C(|X|+|Y|, |X|) \le` ``exact_limit`` and both sets have at most
      :data:`MAX_EXACT_SET_SIZE` items: (number of re-partitions as extreme, the observed one included) /
      :math:`C(|X|+|Y|, |X|)`, counted over all of them by a meet-in-the-middle count (:func:`_count_exact`).
    * **Sampled** otherwise: ``n_permutations`` uniformly random re-partitions (:func:`_count_sums_at_least`) from a
      ``numpy.random.Generator`` seeded with ``seed``, and :func:`sampled_p_value`.

    Args:
        s_x: ``(n_x,)`` sorted float64 scores of X.
        s_y: ``(n_y,)`` sorted float64 scores of Y.
        n_permutations: random re-partitions when sampling.
        seed: seed of the generator used when sampling.
        exact_limit: largest number of re-partitions counted exactly (0: always sample).
    """
    n_x, n_y = s_x.numel(), s_y.numel()
    pooled = torch.cat([s_x, s_y]).sort().values
    threshold = s_x.sum() - tie_tolerance(pooled)
    n_partitions = math.comb(n_x + n_y, n_x)
    if n_partitions <= exact_limit and max(n_x, n_y) <= MAX_EXACT_SET_SIZE:
        return torch.tensor(_count_exact(s_x, s_y, threshold) / n_partitions, dtype=torch.float64)
    rng = np.random.default_rng(seed)
    as_extreme = _count_sums_at_least(pooled.cpu().numpy(), n_x, n_permutations, threshold.item(), rng)
    return torch.tensor(sampled_p_value(as_extreme, n_permutations), dtype=torch.float64)


def sign_flip_p_value(
    x_deltas: Tensor, y_deltas: Tensor, n_permutations: int, seed: int, exact_limit: int = SIGN_FLIP_EXACT_LIMIT
) -> Tensor:
    r""":math:`P[\tfrac12(|\sum_X \epsilon\delta| + |\sum_Y \epsilon\delta|) \ge \tfrac12(|\sum_X \delta| +
    |\sum_Y \delta|)]` over the sign vectors :math:`\epsilon` of the paired differences (module docstring), a
    float64 scalar in (0, 1].

    Exact when :math:`2^{n_x + n_y} \le` ``exact_limit``: the sign vectors are counted, never listed
    (:func:`_count_sign_flips`). Otherwise ``n_permutations`` random sign vectors from a ``torch.Generator`` seeded
    with ``seed``, and :func:`sampled_p_value`.

    Args:
        x_deltas: ``(n_x,)`` float64 paired differences of X's targets.
        y_deltas: ``(n_y,)`` the same of Y's.
        n_permutations: random sign vectors when sampling.
        seed: seed of the generator used when sampling.
        exact_limit: largest number of sign vectors counted exactly.
    """
    deltas = torch.cat([x_deltas, y_deltas])  # (n,)
    n_x = x_deltas.numel()
    observed = (deltas[:n_x].sum().abs() + deltas[n_x:].sum().abs()) / 2
    threshold = observed - tie_tolerance(deltas)
    if 2 ** deltas.numel() <= exact_limit:
        count = _count_sign_flips(deltas[:n_x], deltas[n_x:], threshold)
        return torch.tensor(count / 2 ** deltas.numel(), dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    count, chunk = 0, chunk_rows(deltas.numel())
    for start in range(0, n_permutations, chunk):
        rows = min(chunk, n_permutations - start)
        flipped = (torch.randint(0, 2, (rows, deltas.numel()), generator=generator).to(torch.float64) * 2 - 1) * deltas
        values = (flipped[:, :n_x].sum(1).abs() + flipped[:, n_x:].sum(1).abs()) / 2
        count += int((values >= threshold).sum())
    return torch.tensor(sampled_p_value(count, n_permutations), dtype=torch.float64)


def _signed_sums(deltas: Tensor) -> Tensor:
    r"""All :math:`2^n` sums :math:`\sum_i \epsilon_i \delta_i`, :math:`\epsilon \in \{\pm 1\}^n` (doubling: each item
    adds itself to every sum so far and subtracts itself from a copy)."""
    sums = deltas.new_zeros(1)
    for delta in deltas:
        sums = torch.cat([sums + delta, sums - delta])
    return sums


def _count_sign_flips(x_deltas: Tensor, y_deltas: Tensor, threshold: Tensor) -> int:
    r"""Number of the :math:`2^{n_x + n_y}` sign vectors with :math:`(|S_X| + |S_Y|) / 2 \ge` threshold.

    :math:`S_X` and :math:`S_Y` flip disjoint items, so the count is over pairs of an X sum and a Y sum (meet in
    the middle): the :math:`2^{n_y}` values :math:`|S_Y|` are sorted once and each :math:`|S_X|` finds by
    ``searchsorted`` how many reach :math:`2\,\text{threshold} - |S_X|`. The larger side is the one enumerated
    in chunks of at most :math:`2^{20}` sums (its first items fixed per chunk), so memory stays bounded.
    """
    small, large = sorted((x_deltas, y_deltas), key=len)
    table = _signed_sums(small).abs().sort().values
    head, tail = large[: max(0, len(large) - _CHUNK_BITS)], large[max(0, len(large) - _CHUNK_BITS) :]
    tail_sums, count = _signed_sums(tail), 0
    for offset in _signed_sums(head).tolist():  # 2^(n - _CHUNK_BITS) chunks, one when the side is small
        reach = 2 * threshold - (tail_sums + offset).abs()
        count += int((table.numel() - torch.searchsorted(table, reach, side="left")).sum())
    return count
