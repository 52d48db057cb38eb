r"""The knee of a decreasing curve (Kneedle: Satopää, Albrecht, Irwin & Raghavan, 2011, "Finding a 'Kneedle' in a
Haystack: Detecting Knee Points in System Behavior", ICDCS workshops), as BendVLM's released code chooses how many
reference images to average when no count is given (:mod:`vlbias.mitigation.bend_vlm`).

For values :math:`y_0 \ge y_1 \ge \dots \ge y_{n-1}` at :math:`x_i = i`: normalise both to [0, 1],
:math:`\hat x_i = i / (n - 1)` and :math:`\hat y_i = (y_i - \min y) / (\max y - \min y)`; the difference curve of a
convex decreasing curve is :math:`d_i = (1 - \hat y_i) - \hat x_i`. Its local maxima and minima are the points at
least as large (small) as both neighbours (an end compared with its one neighbour). Walking from the first local
maximum, a local maximum :math:`i` sets the threshold :math:`T = d_i - S / (n - 1)` (``S = 1``, the mean step of
:math:`\hat x`) and is the candidate knee; a local minimum sets :math:`T = 0`; the knee is the candidate at the first
:math:`j` with :math:`d_{j+1} < T`. No local maximum, no such :math:`j`, or a flat curve: no knee.

This is ``kneed.KneeLocator(range(n), y, curve="convex", direction="decreasing")`` of kneed 0.8.5 (its defaults
``S=1.0``, ``interp_method="interp1d"``, ``online=False``), the release current when BendVLM's code
(``bend_utils.legrange_text``, which lists ``kneed`` unpinned) was published; kneed 0.9.0 no longer lets a local
minimum's :math:`T = 0` end the walk, and can answer otherwise.

Example:
    >>> knee_index(torch.tensor([1.0, 0.5, 0.3, 0.25, 0.22, 0.2, 0.19, 0.18]))
    2
"""

from __future__ import annotations

import torch
from torch import Tensor

SENSITIVITY = 1.0  # Kneedle's S, kneed's default


def knee_index(values: Tensor) -> int | None:
    """The index of the knee of ``values`` ``(n,)``, sorted in decreasing order (module docstring); ``None`` where
    there is none."""
    y = values.detach().double().cpu()
    n = y.shape[0]
    if n < 2 or y.max() == y.min():
        return None
    x = torch.arange(n, dtype=torch.float64) / (n - 1)
    difference = (1 - (y - y.min()) / (y.max() - y.min())) - x  # (n,)
    before = torch.cat([difference[:1], difference[:-1]])  # each point's left neighbour (an end: itself)
    after = torch.cat([difference[1:], difference[-1:]])
    maxima = (difference >= before) & (difference >= after)
    minima = (difference <= before) & (difference <= after)
    if not maxima.any():
        return None
    candidate, threshold = None, 0.0
    for i in range(int(maxima.nonzero()[0]), n - 1):
        if maxima[i]:
            candidate, threshold = i, float(difference[i]) - SENSITIVITY / (n - 1)
        if minima[i]:
            threshold = 0.0
        if difference[i + 1] < threshold:
            return candidate
    return None
