r"""What the compare mode of ``vlbias debias`` tabulates: per method (and ``none``), each suite's metrics with their
intervals and the zero-shot accuracy with its interval (:func:`accuracy_with_interval`), one row each
(:func:`comparison_rows`); over several folds, each number's mean with the percentile bootstrap interval of that
mean over the folds (:func:`fold_means`); and a figure of bias against accuracy with the Pareto front
(:func:`plot_comparison`).

Zero-shot accuracy is CLIP's prompt-ensembled zero-shot classifier (:func:`~vlbias.mitigation.zero_shot.zero_shot_predictions`)
of BiasWorld's activities, on the debiased image and prompt embeddings; its interval is the percentile bootstrap
of the share of images classified correctly (:func:`~vlbias.metrics.functional.bootstrap.resampled_means`,
:func:`~vlbias.metrics.functional.bootstrap.percentile_interval`), from a generator seeded with the run's seed, so
every method is resampled on the same draws of images.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import torch
from torch import Tensor

from vlbias.metrics.functional.bootstrap import percentile_interval, resampled_means
from vlbias.mitigation.tradeoff import ACCURACY
from vlbias.mitigation.zero_shot import zero_shot_predictions
from vlbias.results import Results, is_count

#: Bootstrap resamples and coverage of the accuracy interval (and of the interval of a mean over folds).
ACCURACY_BOOTSTRAP = 1000
ACCURACY_CONFIDENCE = 0.95
#: The row of the model without a debiaser.
NO_METHOD = "none"


def accuracy_with_interval(
    images: Tensor, prompts: Tensor, prompt_classes: Tensor, labels: Tensor, seed: int
) -> tuple[float, float, float]:
    """Zero-shot accuracy of ``images`` ``(n, D)`` against ``prompts`` ``(P, D)`` (class ``prompt_classes[p]``
    each), and its percentile bootstrap interval: ``(accuracy, low, high)``."""
    correct = (zero_shot_predictions(images, prompts, prompt_classes) == labels).double()  # (n,)
    generator = torch.Generator().manual_seed(seed)
    low, high = percentile_interval(resampled_means(correct, ACCURACY_BOOTSTRAP, generator), ACCURACY_CONFIDENCE)
    return float(correct.mean()), float(low), float(high)


def comparison_rows(
    measured: Mapping[str, Mapping[str, Results]], accuracy: Mapping[str, tuple[float, float, float]]
) -> list[dict[str, object]]:
    """One row per method (``measured``: method -> suite -> results; ``accuracy``: method -> :func:`accuracy_with_interval`):
    ``method``, then per suite and metric (counts left out) ``<suite>/<metric>`` with ``/ci_low`` and ``/ci_high``
    where the suite gives an interval, and :data:`~vlbias.mitigation.tradeoff.ACCURACY` with its interval."""
    rows = []
    for method, suites in measured.items():
        row: dict[str, object] = {"method": method}
        for suite, results in suites.items():
            for metric, value in results.metrics.items():
                if is_count(metric):
                    continue
                row[f"{suite}/{metric}"] = value
                low, high = results.intervals.get(metric, (None, None))
                row[f"{suite}/{metric}/ci_low"], row[f"{suite}/{metric}/ci_high"] = low, high
        value, low, high = accuracy[method]
        row[ACCURACY], row[f"{ACCURACY}/ci_low"], row[f"{ACCURACY}/ci_high"] = value, low, high
        rows.append(row)
    return rows


def fold_means(folds: Sequence[Sequence[Mapping[str, object]]], seed: int) -> list[dict[str, object]]:
    """One row per method of the folds' :func:`comparison_rows` (each fold holds the same methods): every number's
    mean over the folds, and as its ``/ci_low``, ``/ci_high`` the percentile bootstrap interval of that mean (the
    folds resampled with replacement, :data:`ACCURACY_BOOTSTRAP` times, from a generator seeded with ``seed``; with
    few folds it is narrow: five folds have 126 distinct resamples). A number missing in a fold is left out of its
    mean.

    Example:
        >>> rows = fold_means([[{"method": "none", "d": 1.0}], [{"method": "none", "d": 3.0}]], seed=0)
        >>> rows[0]["method"], rows[0]["d"], 1.0 <= rows[0]["d/ci_low"] <= rows[0]["d/ci_high"] <= 3.0
        ('none', 2.0, True)
    """
    means = []
    for index, first in enumerate(folds[0]):
        row: dict[str, object] = {"method": first["method"]}
        for key in first:
            if key == "method" or key.endswith(("/ci_low", "/ci_high")):
                continue
            values = torch.tensor([float(fold[index][key]) for fold in folds if fold[index].get(key) is not None])
            if not len(values):
                row[key], row[f"{key}/ci_low"], row[f"{key}/ci_high"] = None, None, None
                continue
            generator = torch.Generator().manual_seed(seed)
            replicates = resampled_means(values.double(), ACCURACY_BOOTSTRAP, generator)
            low, high = percentile_interval(replicates, ACCURACY_CONFIDENCE)
            row[key], row[f"{key}/ci_low"], row[f"{key}/ci_high"] = float(values.mean()), float(low), float(high)
        means.append(row)
    return means


def plot_comparison(rows: Sequence[Mapping[str, object]], bias: str) -> bytes:
    """PNG bytes: ``|bias|`` against zero-shot accuracy, one point per fitted method, the Pareto front ringed and
    joined (:func:`vlbias.report.plots.bias_vs_accuracy`)."""
    from vlbias.report import plots

    rows = [row for row in rows if ACCURACY in row]  # a method listed as not fitted has no point
    points = pd.DataFrame(
        {
            "run": [row["method"] for row in rows],
            "bias": [float("nan") if row.get(bias) is None else row[bias] for row in rows],
            "accuracy": [row[ACCURACY] for row in rows],
        }
    )
    return plots.bias_vs_accuracy(plots.with_front(points), bias, ACCURACY)
