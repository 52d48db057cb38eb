r"""Counterfactual answers: how a model's answer to one question moves across a set of parallel images that differ
only in the person shown (suite :mod:`vlbias.suites.counterfactual_answers`).

Each image :math:`i` of a set has an answer distribution :math:`p_i` over the set's :math:`O` options. Per set:

* ``max_change``: :math:`\max_o (\max_i p_{io} - \min_i p_{io})`, the largest move of one option's probability;
* ``js_divergence``: the generalised Jensen-Shannon divergence :math:`H(\bar p) - \frac1n \sum_i H(p_i)` with
  :math:`\bar p` the mean of the :math:`n` distributions, equal weights and natural logarithms (nats, in
  :math:`[0, \ln n]`; for two images it is the usual JS divergence, the square of SciPy's ``jensenshannon`` with
  ``base=e``), :math:`0 \ln 0 = 0`;
* ``flipped``: 1 when the chosen answer :math:`\arg\max_o p_{io}` is not the same for every image, else 0;
* ``unknown_rate``: the share of the set's images whose chosen answer is the "unclear" option (sets that name one).

Their means over sets come with percentile bootstrap intervals over sets. Per attribute (``gender``, ...), pair of
its values :math:`v < w` (sorted by name) and option :math:`o` (by its text, across the sets that offer it), each set
holding both values gives the paired gap :math:`d_s = \bar p_o(v) - \bar p_o(w)` (each side the mean over the set's
images of that value); ``gap`` is their mean over sets, with a percentile bootstrap interval over sets and the
two-sided sign-flip p-value of :math:`|\sum_s d_s|` (:func:`~vlbias.metrics.functional.permutation.sign_flip_p_value`),
adjusted over all (attribute, pair, option) tests by Holm and by Benjamini-Hochberg. Undefined numbers are NaN,
never 0.

Example:
    >>> p = torch.tensor([[0.8, 0.2], [0.3, 0.7]], dtype=torch.float64)
    >>> {k: round(float(v), 4) for k, v in set_measures(p, None).items()}
    {'max_change': 0.5, 'js_divergence': 0.1325, 'flipped': 1.0, 'unknown_rate': nan}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from vlbias.metrics.functional.bootstrap import percentile_interval, resampled_means
from vlbias.metrics.functional.multiple_testing import add_adjusted
from vlbias.metrics.functional.permutation import sign_flip_p_value

#: The per-set measures, in the order :func:`set_measures` returns them.
SET_MEASURES = ("max_change", "js_divergence", "flipped", "unknown_rate")
#: Their names as means over sets.
MEAN_NAMES = {"max_change": "max_change", "js_divergence": "js_divergence", "flipped": "flip_rate",
              "unknown_rate": "unknown_rate"}  # fmt: skip


def entropy(probabilities: Tensor) -> Tensor:
    """:math:`-\\sum_o p_o \\ln p_o` along the last dimension, :math:`0 \\ln 0 = 0`."""
    return -torch.special.xlogy(probabilities, probabilities).sum(dim=-1)


def js_divergence(probabilities: Tensor) -> Tensor:
    """The generalised Jensen-Shannon divergence of the ``(n, O)`` distributions (module docstring), in nats."""
    return entropy(probabilities.mean(dim=0)) - entropy(probabilities).mean()


def set_measures(probabilities: Tensor, unknown_option: int | None) -> dict[str, Tensor]:
    """The four per-set measures of :data:`SET_MEASURES` of one set's ``(n, O)`` answer distributions, float64
    scalars; ``unknown_rate`` NaN when ``unknown_option`` is None."""
    probabilities = probabilities.double()
    chosen = probabilities.argmax(dim=1)
    spread = probabilities.max(dim=0).values - probabilities.min(dim=0).values
    unknown = torch.tensor(torch.nan, dtype=torch.float64)
    if unknown_option is not None:
        unknown = (chosen == unknown_option).double().mean()
    return {
        "max_change": spread.max(),
        "js_divergence": js_divergence(probabilities),
        "flipped": (chosen != chosen[0]).any().double(),
        "unknown_rate": unknown,
    }


def mean_and_interval(values: Tensor, n_bootstrap: int, confidence: float, seed: int) -> tuple[Tensor, Tensor]:
    """The mean of ``values`` (NaN ones left out) and its percentile bootstrap interval; NaN without values."""
    values = values[~values.isnan()]
    if not len(values):
        nan = torch.tensor(torch.nan, dtype=torch.float64)
        return nan, torch.stack([nan, nan])
    replicates = resampled_means(values, n_bootstrap, torch.Generator().manual_seed(seed))
    return values.mean(), percentile_interval(replicates, confidence)


def paired_gap(
    key: str, gaps: list[Tensor], n_bootstrap: int, confidence: float, n_permutations: int, stream: int
) -> dict[str, Tensor]:
    """The numbers of one paired gap test, named under ``key``: the mean of the per-set ``gaps`` with its percentile
    bootstrap interval (generator seeded ``stream``), ``/n_sets`` and the sign-flip ``/p_value`` of their mean
    (seeded ``stream + 1``)."""
    deltas = torch.stack(gaps)
    mean, interval = mean_and_interval(deltas, n_bootstrap, confidence, stream)
    return {
        key: mean,
        f"{key}/interval": interval,
        f"{key}/n_sets": torch.tensor(float(len(gaps)), dtype=torch.float64),
        f"{key}/p_value": sign_flip_p_value(deltas, deltas.new_zeros(0), n_permutations, stream + 1),
    }


def counterfactual_answers(
    probabilities: Tensor,
    set_index: Tensor,
    unknown_option: Tensor,
    options: Tensor,
    attributes: Tensor,
    option_names: Sequence[str],
    attribute_values: Mapping[str, Sequence[str]],
    n_bootstrap: int,
    confidence: float,
    n_permutations: int,
    seed: int = 0,
) -> dict[str, Tensor]:
    """The measures of the module docstring from per-image rows, float64 tensors.

    Args:
        probabilities: ``(N, M)`` each image's answer distribution, NaN past its set's options.
        set_index: ``(N,)`` each image's set; a set's images are read in row order.
        unknown_option: ``(N,)`` the set's "unclear" option, ``-1`` for none.
        options: ``(N, M)`` each option's index into ``option_names``, ``-1`` past the set's options.
        attributes: ``(N, A)`` each image's value index into ``attribute_values[a]`` (in its order), ``-1`` unknown.
        option_names: the option texts.
        attribute_values: each attribute's values, sorted.
        n_bootstrap, confidence: the percentile intervals over sets.
        n_permutations: random sign vectors when the sign-flip test samples.
        seed: seed of the bootstraps and sampled tests.

    Returns:
        ``<mean>`` and ``<mean>/interval`` for each of ``max_change``, ``js_divergence``, ``flip_rate``,
        ``unknown_rate``; ``n_sets``; and for each tested (attribute ``a``, values ``v-w``, option ``o``)
        ``gap/a/v-w/o`` with ``/interval``, ``/p_value``, ``/p_holm``, ``/p_bh`` and ``/n_sets``.
    """
    order = torch.sort(set_index, stable=True).indices
    probabilities, set_index = probabilities[order].double(), set_index[order]
    unknown_option, options, attributes = unknown_option[order], options[order], attributes[order]
    sets = [torch.nonzero(set_index == s).flatten() for s in set_index.unique(sorted=True)]
    per_set = {name: [] for name in SET_MEASURES}
    for rows in sets:
        width = int((options[rows[0]] >= 0).sum())
        unknown = int(unknown_option[rows[0]])
        for name, value in set_measures(probabilities[rows, :width], unknown if unknown >= 0 else None).items():
            per_set[name].append(value)
    results: dict[str, Tensor] = {"n_sets": torch.tensor(float(len(sets)), dtype=torch.float64)}
    for k, name in enumerate(SET_MEASURES):
        values = torch.stack(per_set[name]) if sets else torch.empty(0, dtype=torch.float64)
        mean, interval = mean_and_interval(values, n_bootstrap, confidence, seed + k)
        results[MEAN_NAMES[name]], results[f"{MEAN_NAMES[name]}/interval"] = mean, interval
    tests: list[str] = []
    for a, (attribute, values) in enumerate(attribute_values.items()):
        for v in range(len(values)):
            for w in range(v + 1, len(values)):
                for o, option in enumerate(option_names):
                    gaps = []
                    for rows in sets:
                        column = (options[rows[0]] == o).nonzero().flatten()
                        first, second = rows[attributes[rows, a] == v], rows[attributes[rows, a] == w]
                        if len(column) and len(first) and len(second):
                            c = int(column[0])
                            gaps.append(probabilities[first, c].mean() - probabilities[second, c].mean())
                    if not gaps:
                        continue
                    key = f"gap/{attribute}/{values[v]}-{values[w]}/{option}"
                    stream = seed + 10 + 2 * len(tests)
                    results |= paired_gap(key, gaps, n_bootstrap, confidence, n_permutations, stream)
                    tests.append(key)
    add_adjusted(results, tests)
    return results
