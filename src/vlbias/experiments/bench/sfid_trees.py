"""SFID's random forest: the seconds of a fit against what fewer trees change (``scripts/bench_sfid_trees.py``).

On the cached embeddings of :mod:`vlbias.experiments.bench.debias` (``n`` unit reference images in two groups whose
means differ along one direction), SFID is fitted on the images with each number of trees in ``trees`` and seed 0,
and with its default 100 trees and seed 1 (the method's own spread from one seed to another). Per setting: the
seconds of the fit (almost all of it the forest's), how many of the ``k`` imputed dimensions it shares with the
default fit (100 trees, seed 0), and the gap left: the difference of the two groups' mean embeddings after SFID,
along the direction of their difference before, as a fraction of that difference (1: nothing removed).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jsonargparse.typing import PositiveInt
from torch import Tensor

from vlbias.experiments.bench.debias import random_fit_data
from vlbias.experiments.bench.timing import Clock, clock_for, elapsed, machine
from vlbias.mitigation.sfid import SFID, SFIDOptions
from vlbias.runtime.threads import torch_threads


def gap_left(before: Tensor, after: Tensor, first: Tensor) -> float:
    """``((mean_a' - mean_b') . u) / |mean_a - mean_b|``, ``u`` the unit difference of the group means before.

    Example:
        >>> before = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
        >>> gap_left(before, before * 0.5, torch.tensor([True, False]))
        0.5
    """
    difference = before[first].mean(0) - before[~first].mean(0)
    return float((after[first].mean(0) - after[~first].mean(0)) @ difference / difference.square().sum())


def bench_sfid_trees(
    n: PositiveInt = 10_000,
    dims: PositiveInt = 512,
    trees: Sequence[int] = (100, 50, 20, 10),
    threads: int = 1,
    clock: Clock = "thread",
) -> None:
    """Fit SFID on the images with each number of trees and print the table (module docstring).

    Args:
        n: Cached reference image embeddings.
        dims: Embedding dimension D (at least SFID's k = 50).
        trees: Numbers of trees, each fitted with seed 0.
        threads: Torch threads, on which the forest's trees are fitted.
        clock: wall, or thread (this thread's CPU time; one thread only).
    """
    timer = clock_for(clock, threads)
    data = random_fit_data(n, dims)
    images, labels = data.labelled_references()
    first = torch.tensor([label == labels[0] for label in labels])
    settings = [(100, 0, "100 trees (default)"), (100, 1, "100 trees, seed 1")]
    settings += [(count, 0, f"{count} trees") for count in trees if count != 100]
    print(f"{machine(threads)}; n = {n} cached embeddings, D = {dims}, SFID on the images, {clock} clock")
    print(f"{'setting':<24}{'fit s':>10}{'dims shared':>14}{'gap left':>10}")
    with torch_threads(threads):
        reference = None
        for count, seed, name in settings:
            debiaser = SFID(SFIDOptions(n_estimators=count, seed=seed, modalities=("image",)))
            seconds = elapsed(lambda debiaser=debiaser: debiaser.fit(data), clock=timer)
            chosen = set(debiaser.fitted_state()["image_dims"].tolist())
            reference = reference or chosen
            left = gap_left(images, debiaser.transform_images(images), first)
            print(f"{name:<24}{seconds:>10.3g}{len(chosen & reference):>11}/{len(chosen):<2}{left:>10.3f}")
