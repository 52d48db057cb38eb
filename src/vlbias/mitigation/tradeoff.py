r"""Bias and zero-shot accuracy against the number of removed dimensions: the curve MMBias (Sec. 6) says to
inspect before choosing :math:`N` ("the trade-off between bias reduction and accuracy").

For :math:`N = 0, s, 2s, \dots, N_{\max}` the first :math:`N` dimensions of a strategy's removal order are
dropped, and each bias test's effect size (MMBias Eq. 1, recomputed on the kept dimensions by
:func:`~vlbias.mitigation.leave_one_out.effect_size_without`) and the zero-shot accuracy
(:func:`~vlbias.mitigation.zero_shot.zero_shot_accuracy`) are recorded. :func:`plot_tradeoff` draws one
line of :math:`|d|` per test and the accuracy on a second axis, with the chosen :math:`N` marked.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.errors import ConfigError
from vlbias.mitigation.leave_one_out import effect_size_without
from vlbias.mitigation.pruning import BiasTest
from vlbias.mitigation.zero_shot import zero_shot_accuracy

ACCURACY = "zero_shot_accuracy"


def tradeoff_rows(
    tests: Sequence[BiasTest],
    images: Tensor,
    labels: Tensor,
    prompts: Tensor,
    prompt_classes: Tensor,
    order: Sequence[int],
    chosen: int,
    step: int = 1,
) -> list[dict[str, float | int]]:
    """One row per :math:`N` in ``0, step, ..., len(order)``, plus ``len(order)`` and ``chosen``: ``n_removed``,
    ``<test>/effect_size`` (signed :math:`d`) per test and :data:`ACCURACY`, with ``order[:N]`` removed."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ConfigError(f"Expected `step` to be a positive integer but got {step!r}")
    if not 0 <= chosen <= len(order):
        raise ConfigError(f"Expected the chosen N in [0, {len(order)}] (the removal order's length) but got {chosen}")
    counts = sorted({*range(0, len(order) + 1, step), len(order), chosen})
    rows = []
    for n in counts:
        removed = torch.tensor(list(order[:n]), dtype=torch.long)
        row = {"n_removed": n}
        row |= {f"{t.name}/effect_size": float(effect_size_without(t.x, t.y, t.a, t.b, removed)) for t in tests}
        row[ACCURACY] = zero_shot_accuracy(images, prompts, prompt_classes, labels, removed)
        rows.append(row)
    return rows


def plot_tradeoff(rows: Sequence[dict[str, float | int]], chosen: int, title: str) -> bytes:
    """PNG bytes of :func:`tradeoff_rows`: :math:`|d|` per test (left axis) and zero-shot accuracy (right axis)
    against :math:`N`, a dashed vertical line at ``chosen``. Uses matplotlib's Agg backend (no display)."""
    from matplotlib.figure import Figure  # the object API draws with Agg and touches no global state

    n = [row["n_removed"] for row in rows]
    figure = Figure(figsize=(6, 3.6), dpi=100)
    bias_axis = figure.add_subplot()
    for key in (k for k in rows[0] if k.endswith("/effect_size")):
        bias_axis.plot(n, [abs(row[key]) for row in rows], marker=".", label=f"|d| {key.removesuffix('/effect_size')}")
    bias_axis.set_xlabel("removed dimensions N")
    bias_axis.set_ylabel("|effect size d|")
    accuracy_axis = bias_axis.twinx()
    accuracy_axis.plot(n, [row[ACCURACY] for row in rows], color="black", marker="x", label="zero-shot accuracy")
    accuracy_axis.set_ylabel("zero-shot accuracy")
    bias_axis.axvline(chosen, color="grey", linestyle="--", label=f"chosen N = {chosen}")
    lines = bias_axis.get_legend_handles_labels()
    more = accuracy_axis.get_legend_handles_labels()
    bias_axis.legend(lines[0] + more[0], lines[1] + more[1], fontsize="small", loc="best")
    bias_axis.set_title(title, fontsize="medium")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
