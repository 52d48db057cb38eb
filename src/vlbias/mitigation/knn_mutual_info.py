r"""The mutual information of every continuous feature with discrete labels, all features at once: the k-nearest-
neighbour estimator of Ross (2014) exactly as scikit-learn's ``mutual_info_classif`` computes it, vectorised.

Ross (2014, "Mutual Information between Discrete and Continuous Data Sets", PLoS ONE 9(2): e87357): for sample
:math:`i` of class :math:`L_i`, with :math:`N_{L_i}` samples in that class, :math:`k_i = \min(k, N_{L_i} - 1)`,
:math:`d_i` the distance to its :math:`k_i`-th nearest neighbour of the same class and :math:`m_i` the number of
samples of any class closer than :math:`d_i` (itself included),

.. math::

    \hat I(X; L) = \max\Bigl(0,\ \psi(N) + \langle \psi(k_i) \rangle - \langle \psi(N_{L_i}) \rangle
    - \langle \psi(m_i) \rangle\Bigr),

:math:`\psi` the digamma function, :math:`\langle \cdot \rangle` the mean over the samples; samples alone in their
class are left out (of :math:`N` and the means). The steps of scikit-learn 1.9
(``sklearn/feature_selection/_mutual_info.py``, ``_estimate_mi`` and ``_compute_mi_cd``), kept to the bit:

1. features scaled to unit standard deviation without centring (``sklearn.preprocessing.scale`` on a column-major
   copy, as scikit-learn scales ``X[:, continuous_mask]``);
2. tie-breaking noise: :math:`x_{id} \mathrel{+}= 10^{-10} \max(1, \langle |x_{\cdot d}| \rangle)\,\varepsilon_{id}`,
   :math:`\varepsilon` one ``(n, D)`` draw of ``RandomState(seed).standard_normal``;
3. :math:`d_i` as scikit-learn's ``NearestNeighbors`` finds it: a KD-tree's :math:`|x_i - x_j|` when
   :math:`k_i < \lfloor N_{L_i} / 2 \rfloor`, else brute force's Gram expansion
   :math:`\sqrt{\max(0, (x_i^2 - 2 x_i x_j) + x_j^2)}`, its rounding included; the radius is
   :math:`r_i` = ``nextafter(d_i, 0)``, so that the neighbour at :math:`d_i` is outside;
4. :math:`m_i = |\{j : (x_i - x_j)^2 \le r_i^2\}|`, the squares rounded as a KD-tree's radius query rounds them;
5. the formula evaluated in scikit-learn's order, the means over the samples in their order.

Why not scikit-learn's call: speed. It builds a tree per class and one more per feature, in a Python loop (12 s for
10,000 samples of 512 features on one thread). Each feature is one-dimensional, so once a row is sorted the
:math:`k`-th neighbour of the value at sorted position :math:`p` is among positions :math:`p - k, \dots, p + k`
(the :math:`k`-th smallest of the distances to the left and to the right, :math:`\min_a \max(\ell_a, \rho_{k-a})`),
and :math:`m_i` is the span between two binary searches for :math:`x_i \pm r_i`, moved where the rounding of
:math:`x_i \pm r_i` misplaces them: a few array operations on all features at once.
``tests/mitigation/test_knn_mutual_info.py`` checks that the values equal scikit-learn's.

Example:
    >>> rng = np.random.default_rng(0)
    >>> labels = np.repeat([0, 1, 2], 40)
    >>> x = np.stack([labels + 0.3 * rng.standard_normal(120), rng.standard_normal(120)], axis=1)
    >>> mi = knn_mutual_information(x, labels, n_neighbors=3, seed=0)
    >>> bool(mi[0] > 0.8 and mi[1] < 0.1)
    True
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma
from sklearn.preprocessing import scale

from vlbias.errors import InputError


def knn_mutual_information(x: np.ndarray, labels: np.ndarray, n_neighbors: int = 3, seed: int = 0) -> np.ndarray:
    """:math:`\\hat I(x_{\\cdot d}; L)` in nats for every column of ``x`` ``(n, D)`` and the labels ``(n,)``: ``(D,)``
    float64, equal to ``mutual_info_classif(x, labels, discrete_features=False, n_neighbors=n_neighbors,
    random_state=seed)`` (module docstring)."""
    n, dims = x.shape
    # scikit-learn scales and averages `X[:, continuous_mask]`, a column-major copy: the same sums in the same order
    x = scale(np.array(x, dtype=np.float64, order="F"), with_mean=False, copy=False)
    noise_scale = np.maximum(1, np.mean(np.abs(x), axis=0))
    x += 1e-10 * noise_scale * np.random.RandomState(seed).standard_normal(size=(n, dims))
    _, codes, class_sizes = np.unique(labels, return_inverse=True, return_counts=True)
    kept = class_sizes[codes] > 1  # a sample alone in its class has no neighbour: left out
    if not kept.any():
        raise InputError(f"Expected a class of at least two samples but each of the {len(class_sizes)} classes has one")
    _, codes, class_sizes = np.unique(codes[kept], return_inverse=True, return_counts=True)
    values = np.ascontiguousarray(x[kept].T)  # (D, n): one feature per row, the kept samples in their order
    by_value = np.argsort(values, axis=1)
    ordered = np.take_along_axis(values, by_value, axis=1)  # every step below works on the sorted rows
    radius = np.nextafter(_kth_neighbour_distances(ordered, codes[by_value], class_sizes, n_neighbors), 0)
    within = np.empty_like(by_value)
    np.put_along_axis(within, by_value, _count_within(ordered, radius), axis=1)  # back in the samples' order
    mean_digamma_within = np.mean(digamma(np.arange(1.0, values.shape[1] + 1))[within - 1], axis=1)
    k_all = np.minimum(n_neighbors, class_sizes - 1)[codes]
    mi = digamma(values.shape[1]) + np.mean(digamma(k_all.astype(float))) - np.mean(digamma(class_sizes[codes] * 1.0))
    mi = mi - mean_digamma_within
    return np.where(mi > 0, mi, 0.0)


def _kth_neighbour_distances(
    ordered: np.ndarray, codes: np.ndarray, class_sizes: np.ndarray, n_neighbors: int
) -> np.ndarray:
    """``(D, n)``: for rows sorted ascending and each value's class code, the distance to its :math:`k_i`-th nearest
    other value of its class, as scikit-learn's ``NearestNeighbors`` computes it (module docstring, step 3)."""
    small = np.uint8 if len(class_sizes) <= 256 else np.uint16 if len(class_sizes) <= 65536 else np.intp
    by_class = np.argsort(codes.astype(small), axis=1, kind="stable")  # radix: class 0's values in order, then 1's...
    distances = np.empty_like(ordered)
    for end, size in zip(np.cumsum(class_sizes), class_sizes, strict=True):
        block = by_class[:, end - size : end]
        block_values = np.take_along_axis(ordered, block, axis=1)
        k = min(n_neighbors, int(size) - 1)
        kth = _brute_force_kth(block_values, k) if k >= size // 2 else _sorted_kth(block_values, k)
        np.put_along_axis(distances, block, kth, axis=1)
    return distances


def _sorted_kth(ordered: np.ndarray, k: int) -> np.ndarray:
    """``(D, c)``: for rows sorted ascending, each value's distance to its ``k``-th nearest other value,
    :math:`|x_i - x_j|` (a KD-tree's distance): :math:`\\min_a \\max(\\ell_a, \\rho_{k-a})`, with :math:`\\ell_a`
    the distance to the ``a``-th value on the left and :math:`\\rho_b` to the ``b``-th on the right."""
    dims, size = ordered.shape
    padded = np.concatenate([np.full((dims, k), -np.inf), ordered, np.full((dims, k), np.inf)], axis=1)

    def to_left(a: int) -> np.ndarray:  # >= 0: the rows are sorted
        return ordered - padded[:, k - a : k - a + size]

    def to_right(b: int) -> np.ndarray:
        return padded[:, k + b : k + b + size] - ordered

    kth = np.minimum(to_left(k), to_right(k))  # all k on one side
    for left in range(1, k):  # `left` neighbours on the left, k - left on the right
        np.minimum(kth, np.maximum(to_left(left), to_right(k - left)), out=kth)
    return kth


def _brute_force_kth(values: np.ndarray, k: int) -> np.ndarray:
    """``(D, c)``: the ``k``-th nearest other value's distance as scikit-learn's brute-force search computes it,
    :math:`\\sqrt{\\max(0, (x_i^2 - 2 x_i x_j) + x_j^2)}` (the ``k + 1``-th smallest, the value itself included)."""
    squares = values * values
    gram = (squares[:, :, None] + -2.0 * (values[:, :, None] * values[:, None, :])) + squares[:, None, :]
    return np.sqrt(np.partition(np.maximum(gram, 0.0), k, axis=2)[:, :, k])


def _count_within(ordered: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """``(D, n)``: for rows sorted ascending and a radius per value, how many values of its row satisfy
    :math:`(x_j - x_i)^2 \\le r_i^2` (itself included), the float squares compared as a KD-tree's radius query
    compares them."""
    dims, n = ordered.shape
    # bounds from the rounded x +- r (keys nearly in order, which numpy's binary search is quick on), as flat indices
    # into the rows padded with -inf and +inf (always outside)
    high = np.stack([np.searchsorted(row, row + r, side="right") for row, r in zip(ordered, radius, strict=True)])
    low = np.stack([np.searchsorted(row, row - r) for row, r in zip(ordered, radius, strict=True)]) + 1
    padded = np.concatenate([np.full((dims, 1), -np.inf), ordered, np.full((dims, 1), np.inf)], axis=1).ravel()
    offsets = (np.arange(dims) * (n + 2))[:, None]
    high, low = (high + offsets).ravel(), (low + offsets).ravel()
    centre, squared_radius = ordered.ravel(), (radius * radius).ravel()

    # x + r is rounded, so a bound can be a value off: step it until the last value inside is next to the first one
    # outside (the test is monotone on either side of x, and x itself is inside); the first pass takes every value
    active: slice | np.ndarray = slice(None)
    while True:
        h, lo, x, r2 = high[active], low[active], centre[active], squared_radius[active]
        grow_high, shrink_high = (padded[h + 1] - x) ** 2 <= r2, (padded[h] - x) ** 2 > r2
        grow_low, shrink_low = (padded[lo - 1] - x) ** 2 <= r2, (padded[lo] - x) ** 2 > r2
        high[active] = h + grow_high - shrink_high.astype(np.intp)
        low[active] = lo - grow_low + shrink_low.astype(np.intp)
        moved = grow_high | shrink_high | grow_low | shrink_low
        if not moved.any():
            return (high - low + 1).reshape(dims, n)
        active = np.flatnonzero(moved) if isinstance(active, slice) else active[moved]
