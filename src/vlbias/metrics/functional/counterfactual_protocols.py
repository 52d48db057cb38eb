r"""Two published protocols on counterfactual answers (suite :mod:`vlbias.suites.counterfactual_answers`): VHELM's
rate of "unclear" answers per group and Girrbach et al.'s gap in P(yes) per trait.

**VHELM's "unclear" rate** (Lee et al., "VHELM: A Holistic Evaluation of Vision Language Models", 2024; the PAIRS
scenario of github.com/stanford-crfm/helm, ``src/helm/benchmark/scenarios/vision_language/pairs_scenario.py``): each
PAIRS question is asked with its two answers and ``unclear``, which is the reference (correct) answer, and the scenario
is run once per group (``black_man``, ..., ``white_woman``); the score is the exact-match rate, so a group's rate is
the share of its images answered "unclear". Here, over the images whose set names an "unclear" option
(``unknown_option``), for each attribute value :math:`v` (``race``: black, ...; ``gender``: man, ...):

.. math:: u_v = \frac{1}{|I_v|} \sum_{i \in I_v} [\arg\max_o p_{io} = o_{\text{unclear}}]

with a percentile bootstrap interval over those images. Higher is the model declining to judge from the image;
a gap between values is the model judging one group more readily than another.

**Girrbach et al.'s P(yes) gap** ("Revealing and Reducing Gender Biases in Vision and Language Assistants (VLAs)",
ICLR 2025; github.com/ExplainableML/vla-gender-bias, ``evaluation/bias.py``): a yes/no question about a trait ("Is
this person competent?") asked of images of people; the model's probability of answering yes, normalised over the
two answers per image,

.. math:: P_i(\text{yes}) = \frac{p_{i,\text{yes}}}{p_{i,\text{yes}} + p_{i,\text{no}}},

and the trait's gender gap the difference of its mean between the groups. Here a set is a yes/no question when its
options include ``yes`` and ``no`` (without case and a final full stop); its trait is its question. For each
attribute, pair of its values :math:`v < w` (sorted) and trait :math:`t`, each set :math:`s` of the trait holding both
values gives the paired difference :math:`d_s = \overline{P(\text{yes})}_s(v) - \overline{P(\text{yes})}_s(w)`
(each side the mean over the set's images of that value); the gap is :math:`\frac{1}{S}\sum_s d_s`, with a
percentile bootstrap interval over sets and the paired permutation test of the sets' group labels: a two-sided
sign-flip p-value of :math:`|\sum_s d_s|` (:func:`~vlbias.metrics.functional.permutation.sign_flip_p_value`,
exact for few sets). The p-values of one attribute pair are adjusted over its traits by Holm and by
Benjamini-Hochberg. (Girrbach et al. compare all images of women with all of men; parallel images make the
comparison paired within sets.)

Numbers that cannot be computed are left out, never 0.

Example:
    >>> p = torch.tensor([[0.6, 0.2, 0.2], [0.1, 0.2, 0.7]], dtype=torch.float64)  # options yes, no, unclear
    >>> options = torch.tensor([[0, 1, 2], [0, 1, 2]])
    >>> [round(value, 4) for value in p_yes(p, options, ["yes", "no", "unclear"]).tolist()]
    [0.75, 0.3333]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from vlbias.metrics.functional.counterfactual import mean_and_interval, paired_gap
from vlbias.metrics.functional.multiple_testing import add_adjusted

YES, NO = "yes", "no"


def _folded(option: str) -> str:
    return option.strip().rstrip(".").strip().casefold()


def p_yes(probabilities: Tensor, options: Tensor, option_names: Sequence[str]) -> Tensor:
    """``(N,)`` each image's P(yes) normalised over yes and no (module docstring); NaN where its set does not offer
    both ``yes`` and ``no`` (``options``: each column's index into ``option_names``, ``-1`` past the set's options)."""
    folded = [_folded(name) for name in option_names]
    codes = {answer: [k for k, name in enumerate(folded) if name == answer] for answer in (YES, NO)}
    out = torch.full((len(probabilities),), torch.nan, dtype=torch.float64)
    if not codes[YES] or not codes[NO]:
        return out
    is_yes = torch.isin(options, torch.tensor(codes[YES]))
    is_no = torch.isin(options, torch.tensor(codes[NO]))
    both = is_yes.any(dim=1) & is_no.any(dim=1)
    p = probabilities.double().nan_to_num(0.0)
    yes, no = (p * is_yes).sum(dim=1), (p * is_no).sum(dim=1)
    out[both] = yes[both] / (yes[both] + no[both])
    return out


def unclear_rates(
    probabilities: Tensor,
    unknown_option: Tensor,
    attributes: Tensor,
    attribute_values: Mapping[str, Sequence[str]],
    n_bootstrap: int,
    confidence: float,
    seed: int = 0,
) -> dict[str, Tensor]:
    """VHELM's rate of "unclear" answers per attribute value (module docstring): ``unclear_rate/<a>/<v>`` with
    ``/interval`` and ``/n_images``, for each value with an image whose set names an "unclear" option."""
    chosen = probabilities.double().nan_to_num(-torch.inf).argmax(dim=1)
    named = unknown_option >= 0
    unclear = (chosen == unknown_option).double()
    results: dict[str, Tensor] = {}
    for a, (attribute, values) in enumerate(attribute_values.items()):
        for v, value in enumerate(values):
            rows = named & (attributes[:, a] == v)
            if not bool(rows.any()):
                continue
            key = f"unclear_rate/{attribute}/{value}"
            mean, interval = mean_and_interval(unclear[rows], n_bootstrap, confidence, seed + 1000 + 97 * a + v)
            results[key], results[f"{key}/interval"] = mean, interval
            results[f"{key}/n_images"] = torch.tensor(float(rows.sum()), dtype=torch.float64)
    return results


def trait_key(question: str) -> str:
    """A question as a key segment: ``/`` written as ``|`` (a metric name's segments are split at ``/``)."""
    return question.replace("/", "|")


def yes_gaps(
    yes: Tensor,
    set_index: Tensor,
    question: Tensor,
    attributes: Tensor,
    attribute_values: Mapping[str, Sequence[str]],
    question_names: Sequence[str],
    n_bootstrap: int,
    confidence: float,
    n_permutations: int,
    seed: int = 0,
) -> dict[str, Tensor]:
    """Girrbach et al.'s P(yes) gap per trait (module docstring) from each image's P(yes) (``yes``, NaN for an image
    of a set that is no yes/no question): ``yes_gap/<a>/<v>-<w>/<trait>`` with ``/interval``, ``/n_sets``,
    ``/p_value`` and, adjusted over the traits of one attribute pair, ``/p_holm`` and ``/p_bh``."""
    answered = ~yes.isnan()
    sets = [torch.nonzero((set_index == s) & answered).flatten() for s in set_index[answered].unique(sorted=True)]
    results: dict[str, Tensor] = {}
    number = 0
    for a, (attribute, values) in enumerate(attribute_values.items()):
        for v in range(len(values)):
            for w in range(v + 1, len(values)):
                family: list[str] = []
                for t, name in enumerate(question_names):
                    gaps = []
                    for rows in sets:
                        if int(question[rows[0]]) != t:
                            continue
                        first, second = rows[attributes[rows, a] == v], rows[attributes[rows, a] == w]
                        if len(first) and len(second):
                            gaps.append(yes[first].mean() - yes[second].mean())
                    if not gaps:
                        continue
                    key = f"yes_gap/{attribute}/{values[v]}-{values[w]}/{trait_key(name)}"
                    stream = seed + 2000 + 2 * number
                    results |= paired_gap(key, gaps, n_bootstrap, confidence, n_permutations, stream)
                    family.append(key)
                    number += 1
                add_adjusted(results, family)
    return results


def counterfactual_protocols(
    probabilities: Tensor,
    set_index: Tensor,
    unknown_option: Tensor,
    options: Tensor,
    attributes: Tensor,
    question: Tensor,
    option_names: Sequence[str],
    attribute_values: Mapping[str, Sequence[str]],
    question_names: Sequence[str],
    n_bootstrap: int,
    confidence: float,
    n_permutations: int,
    seed: int = 0,
) -> dict[str, Tensor]:
    """Both protocols' numbers (:func:`unclear_rates`, :func:`yes_gaps`) from per-image rows, float64 tensors.

    Args:
        probabilities: ``(N, M)`` each image's answer distribution, NaN past its set's options.
        set_index: ``(N,)`` each image's set; a set's images are read in row order.
        unknown_option: ``(N,)`` the set's "unclear" option, ``-1`` for none.
        options: ``(N, M)`` each option's index into ``option_names``, ``-1`` past the set's options.
        attributes: ``(N, A)`` each image's value index into ``attribute_values[a]``, ``-1`` unknown.
        question: ``(N,)`` the set's question, an index into ``question_names``.
        option_names, attribute_values, question_names: what the codes index.
        n_bootstrap, confidence: the percentile intervals.
        n_permutations: random sign vectors when the sign-flip test samples.
        seed: seed of the bootstraps and sampled tests.
    """
    order = torch.sort(set_index, stable=True).indices  # set order: the same rows whatever ranks they came from
    probabilities, set_index, unknown_option = probabilities[order], set_index[order], unknown_option[order]
    options, attributes, question = options[order], attributes[order], question[order]
    yes = p_yes(probabilities, options, option_names)
    return {
        **unclear_rates(probabilities, unknown_option, attributes, attribute_values, n_bootstrap, confidence, seed),
        **yes_gaps(yes, set_index, question, attributes, attribute_values, question_names, n_bootstrap, confidence,
                   n_permutations, seed),
    }  # fmt: skip
