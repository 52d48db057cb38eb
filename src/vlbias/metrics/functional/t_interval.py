r"""Student-t interval of a mean over a few independent values (BendVLM's intervals over gallery folds).

For values :math:`x_1, \dots, x_F` with mean :math:`\bar x` and sample standard deviation :math:`s` (divisor
:math:`F - 1`), the interval of coverage :math:`c` is

.. math::
    \bar x \pm t_{F-1,\,(1+c)/2} \, \frac{s}{\sqrt F}

where :math:`t_{\nu,q}` is the :math:`q` quantile of Student's t distribution with :math:`\nu` degrees of freedom.
The quantile is found by bisection on the distribution function
:math:`F_\nu(t) = \tfrac12 + \tfrac12 \operatorname{sign}(t)\, I_{t^2/(\nu + t^2)}(\tfrac12, \tfrac{\nu}{2})`, the regularised
incomplete beta function :math:`I_x(a, b)` evaluated by its continued fraction (modified Lentz), as numerical
libraries do, written as a tail probability in the tails (:func:`student_t_quantile`); one and two degrees of
freedom have closed forms. It agrees with ``scipy.stats.t.ppf`` to 1e-10, relative to :math:`\max(1, |t|)`
(tested).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.checks import check_confidence
from vlbias.options import DEFAULT_STATISTICS


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of :math:`I_x(a, b)` (modified Lentz, to relative 1e-15)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 400):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return result


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function :math:`I_x(a, b)`, ``x`` in [0, 1]."""
    if x <= 0 or x >= 1:
        return float(x >= 1)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """:math:`P(T \\le t)` for Student's t with ``df`` degrees of freedom (module docstring)."""
    central = _incomplete_beta(0.5, df / 2, t * t / (df + t * t))  # P(|T| <= |t|), exact near t = 0
    return 0.5 + math.copysign(0.5 * central, t)


def student_t_quantile(probability: float, df: float) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom.

    By symmetry the quantile is :math:`\\pm t` with :math:`t \\ge 0`, found from whichever probability is exact in
    floating point: the tail :math:`q = \\min(p, 1 - p) = \tfrac12 I_{\nu/(\nu + t^2)}(\tfrac{\nu}{2}, \tfrac12)`
    in the tails (:math:`q \\le 1/4`), the central :math:`|2p - 1| = I_{t^2/(\nu + t^2)}(\tfrac12, \tfrac{\nu}{2})`
    near the centre, each solved by bisection to the last bits of :math:`t`. One and two degrees of freedom have
    closed forms: :math:`t = \\cot(\\pi q)` (Cauchy) and :math:`t = |1 - 2q| / \\sqrt{2 q (1 - q)}`.

    Example:
        >>> round(student_t_quantile(0.975, 4), 6)  # the 95 % interval of 5 folds
        2.776445
    """
    if not 0 < probability < 1 or not df > 0:
        raise InputError(f"Expected a probability in (0, 1) and df > 0 but got {probability!r}, {df!r}")
    tail = min(probability, 1 - probability)  # exact: 1 - p loses nothing for p >= 1/2
    sign = 1.0 if probability > 0.5 else -1.0
    if df == 1:
        return sign / math.tan(math.pi * tail) if tail < 0.5 else 0.0
    if df == 2:
        return sign * (1 - 2 * tail) / math.sqrt(2 * tail * (1 - tail))
    if tail > 0.25:
        central = abs(2 * probability - 1)  # exact for p in [1/4, 3/4]

        def below(t: float) -> bool:  # P(|T| <= t) < |2p - 1|
            return _incomplete_beta(0.5, df / 2, t * t / (df + t * t)) < central
    else:

        def below(t: float) -> bool:  # P(T > t) > q
            return 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t)) > tail

    low, high = 0.0, 1.0
    while below(high):
        low, high = high, high * 2
    for _ in range(2000):
        middle = (low + high) / 2
        if not low < middle < high:  # no float left between them
            break
        low, high = (middle, high) if below(middle) else (low, middle)
    return sign * (low + high) / 2


def t_interval(values: Tensor, confidence: float = DEFAULT_STATISTICS.confidence) -> Tensor:
    """The float64 ``[low, high]`` t-interval (module docstring) of the mean of the ``(F,)`` ``values``, ``F >= 2``.

    Example:
        >>> t_interval(torch.tensor([1.0, 2.0, 3.0]), 0.95)  # 2 +- 4.303 * 1 / sqrt(3)
        tensor([-0.4841,  4.4841], dtype=torch.float64)
    """
    check_confidence(confidence)
    values = values.double().flatten()
    if values.numel() < 2:
        raise InputError(f"Expected at least 2 values for a t-interval but got {values.numel()}")
    mean, spread = values.mean(), values.std(unbiased=True) / math.sqrt(values.numel())
    half = student_t_quantile((1 + confidence) / 2, values.numel() - 1) * spread
    return torch.stack([mean - half, mean + half])
