r"""What the compare mode of ``vlbias debias`` tabulates: per method (and ``none``), each suite's metrics with their
intervals, the zero-shot accuracy with its interval (:func:`accuracy_with_interval`) and, where a caption corpus
is given, retrieval R@K with their intervals (:func:`recall_with_intervals`), one row each
(:func:`comparison_rows`); over several folds, each number's mean with the percentile bootstrap interval of that
mean over the folds (:func:`fold_means`); and a figure of bias against accuracy with the Pareto front
(:func:`plot_comparison`).

Zero-shot accuracy is CLIP's prompt-ensembled zero-shot classifier (:func:`~vlbias.mitigation.zero_shot.zero_shot_predictions`)
of BiasWorld's activities, on the debiased image and prompt embeddings; its interval is the percentile bootstrap
of the share of images classified correctly (:func:`~vlbias.metrics.functional.bootstrap.resampled_means`,
:func:`~vlbias.metrics.functional.bootstrap.percentile_interval`), from a generator seeded with the run's seed, so
every method is resampled on the same draws of images.

Retrieval R@K is :func:`~vlbias.metrics.functional.retrieval.retrieval_recall` (text retrieval, image -> its
captions, ``txt_r{K}``; image retrieval, caption -> its image, ``img_r{K}``; pessimistic on ties) of the cosine
scores :math:`S_{ic} = \cos(v_i, t_c)` of the debiased image and caption embeddings, for K in
:data:`~vlbias.metrics.functional.retrieval.DEFAULT_KS`; its interval is the percentile bootstrap of the share of
queries ranked within K (:func:`~vlbias.metrics.functional.retrieval.retrieval_ranks`), the queries resampled from
a generator seeded with the run's seed, as the accuracy's images are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.metrics.functional.bootstrap import percentile_interval, resampled_means
from vlbias.metrics.functional.retrieval import DEFAULT_KS, NO_GROUND_TRUTH, retrieval_ranks, retrieval_recall
from vlbias.mitigation.tradeoff import ACCURACY
from vlbias.mitigation.zero_shot import zero_shot_predictions
from vlbias.results import Results, is_count

#: Bootstrap resamples and coverage of the accuracy and R@K intervals (and of the interval of a mean over folds).
ACCURACY_BOOTSTRAP = 1000
ACCURACY_CONFIDENCE = 0.95
#: The row of the model without a debiaser.
NO_METHOD = "none"
#: The prefix of the retrieval R@K columns (:func:`recall_with_intervals`).
RECALL = "retrieval_recall"

#: A number measured on the embeddings with its interval: ``(value, low, high)``.
Interval = tuple[float, float, float]


def interval_of_mean(values: Tensor, seed: int) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` ``(n,)`` (float64): :data:`ACCURACY_BOOTSTRAP`
    resamples from a generator seeded with ``seed``, so every method is resampled on the same draws, at
    :data:`ACCURACY_CONFIDENCE`."""
    generator = torch.Generator().manual_seed(seed)
    low, high = percentile_interval(resampled_means(values, ACCURACY_BOOTSTRAP, generator), ACCURACY_CONFIDENCE)
    return float(low), float(high)


def accuracy_with_interval(
    images: Tensor, prompts: Tensor, prompt_classes: Tensor, labels: Tensor, seed: int
) -> Interval:
    """Zero-shot accuracy of ``images`` ``(n, D)`` against ``prompts`` ``(P, D)`` (class ``prompt_classes[p]``
    each), and its percentile bootstrap interval: ``(accuracy, low, high)``."""
    correct = (zero_shot_predictions(images, prompts, prompt_classes) == labels).double()  # (n,)
    return float(correct.mean()), *interval_of_mean(correct, seed)


def recall_with_intervals(images: Tensor, captions: Tensor, caption_to_image: Tensor, seed: int) -> dict[str, Interval]:
    """Retrieval R@K of ``images`` ``(n, D)`` and ``captions`` ``(m, D)`` (caption ``c`` describes image
    ``caption_to_image[c]``) and their percentile bootstrap intervals (module docstring):
    ``{"retrieval_recall/txt_r{K}": (recall, low, high), "retrieval_recall/img_r{K}": ...}``.

    Example:
        >>> images, order = torch.eye(10), torch.arange(10).flip(0)  # caption c describes image 9 - c
        >>> out = recall_with_intervals(images, images[order], order, seed=0)
        >>> out["retrieval_recall/txt_r1"], out["retrieval_recall/img_r1"]
        ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))
    """
    scores = F.normalize(images.double(), dim=1) @ F.normalize(captions.double(), dim=1).T  # (n, m)
    recall = retrieval_recall(scores, caption_to_image, DEFAULT_KS)
    text_ranks, image_ranks = retrieval_ranks(scores, caption_to_image)
    out = {}
    for prefix, ranks in (("txt", text_ranks[text_ranks != NO_GROUND_TRUTH]), ("img", image_ranks)):
        for k in DEFAULT_KS:
            out[f"{RECALL}/{prefix}_r{k}"] = (
                float(recall[f"{prefix}_r{k}"]),
                *interval_of_mean((ranks <= k).double(), seed),
            )
    return out


def comparison_rows(
    measured: Mapping[str, Mapping[str, Results]], embedding_scores: Mapping[str, Mapping[str, Interval]]
) -> list[dict[str, object]]:
    """One row per method (``measured``: method -> suite -> results; ``embedding_scores``: method -> the numbers
    measured on its embeddings directly, :data:`~vlbias.mitigation.tradeoff.ACCURACY` (:func:`accuracy_with_interval`)
    and where a caption corpus is given the R@K of :func:`recall_with_intervals`, each ``(value, low, high)``):
    ``method``, then per suite and metric (counts left out) ``<suite>/<metric>`` with ``/ci_low`` and ``/ci_high``
    where the suite gives an interval, then each of ``embedding_scores`` with its interval."""
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
        for key, (value, low, high) in embedding_scores[method].items():
            row[key], row[f"{key}/ci_low"], row[f"{key}/ci_high"] = value, low, high
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
            row[key] = float(values.mean())
            row[f"{key}/ci_low"], row[f"{key}/ci_high"] = interval_of_mean(values.double(), seed)
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
