"""CounterBias intervals and p-values: by hand, against scipy and brute force, order- and DDP-independent."""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from tests.metrics.ddp import results_per_rank
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.counterbias import CounterBiasScore, CounterBiasUncertainty
from vlbias.metrics.functional.counterbias_uncertainty import (
    counterbias_bootstrap,
    counterbias_intervals,
    counterbias_p_values,
)

NAN = float("nan")


def _column(values):
    return torch.tensor(values, dtype=torch.float64)[:, None]


def test_exact_sign_flip_p_values_by_hand():
    # signed biases 0.1, 0.2, 0.3 (the third item's B1 sign flips -0.3): mean 0.2; of the 8 sign patterns
    # only +++ and --- reach |mean| >= 0.2
    p = counterbias_p_values(_column([0.1, 0.2, -0.3]), torch.tensor([0, 0, 0]), torch.tensor([1, 1, -1]), 1)
    assert p.tolist() == [0.25]
    # a mean of 0 is reached by every pattern; a target without items has no p-value
    p = counterbias_p_values(_column([1.0, -1.0]), torch.tensor([0, 0]), torch.tensor([1, 1]), 2)
    assert p[0] == 1.0 and math.isnan(p[1])


def test_p_values_match_scipy_permutation_test():
    generator = torch.Generator().manual_seed(3)
    values = torch.randn(11, generator=generator, dtype=torch.float64) + 0.6
    ours = counterbias_p_values(values[:, None], torch.zeros(11, dtype=torch.long), torch.ones(11, dtype=torch.long), 1)
    reference = stats.permutation_test(
        (values.numpy(),), np.mean, permutation_type="samples", alternative="two-sided", n_resamples=np.inf
    ).pvalue
    assert ours.item() == pytest.approx(reference, abs=1e-12)
    assert 0.0 < reference < 0.1  # a shift of 0.6 sd over 11 items: a small p-value, not a trivial one


def test_p_values_with_templates_and_exclusions_match_brute_force():
    bias = torch.tensor([[0.3, NAN], [0.1, 0.2], [-0.4, -0.1], [0.05, NAN], [NAN, 0.3]], dtype=torch.float64)
    direction = torch.tensor([1, -1, -1, 1, 1])

    def statistic(signs):  # mean over templates of each template's mean over its non-NaN items
        signed = bias * (direction * torch.tensor(signs))[:, None].double()
        return torch.stack([column[~column.isnan()].mean() for column in signed.T]).mean()

    observed = statistic([1] * 5)
    flips = [statistic(signs) for signs in itertools.product([1, -1], repeat=5)]
    expected = sum(abs(f) >= abs(observed) - 1e-12 for f in flips) / len(flips)
    got = counterbias_p_values(bias, torch.zeros(5, dtype=torch.long), direction, 1)
    assert got.item() == pytest.approx(float(expected), abs=1e-12)


def test_sampled_p_value_when_flips_are_too_many():
    values = torch.full((40, 1), 0.5, dtype=torch.float64)  # all positive: only the identity and its negation reach
    p = counterbias_p_values(
        values, torch.zeros(40, dtype=torch.long), torch.ones(40, dtype=torch.long), 1, n_permutations=999
    )
    assert p.item() == pytest.approx(1 / 1000)  # (1 + 0) / (1 + 999): no random flip of 40 items is all + or all -


def test_bootstrap_interval_matches_the_normal_approximation():
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(400, generator=generator, dtype=torch.float64) + 0.3
    out = counterbias_intervals(
        values[:, None], torch.zeros(400, dtype=torch.long), torch.ones(400, dtype=torch.long), 1, n_bootstrap=4000
    )
    low, high = out["per_target"][0].tolist()
    half_width = 1.96 * values.std().item() / math.sqrt(400)
    assert (high - low) / 2 == pytest.approx(half_width, rel=0.1)
    assert (low + high) / 2 == pytest.approx(values.mean().item(), abs=0.2 * half_width)
    # away from 0, |m| is monotone, so Table 2's interval is the per-target one in percent
    torch.testing.assert_close(out["mean_absolute"][0], out["per_target"][0] * 100)
    torch.testing.assert_close(out["mean_absolute_avg"], out["per_target"][0] * 100)


def test_an_items_templates_are_resampled_together():
    generator = torch.Generator().manual_seed(1)
    column = torch.randn(30, generator=generator, dtype=torch.float64)
    bias = torch.stack([column, column], dim=1)
    resampled = counterbias_bootstrap(
        bias, torch.randint(0, 3, (30,), generator=generator), torch.ones(30, dtype=torch.long), 3, n_bootstrap=50
    )
    assert resampled.shape == (50, 2, 3)
    torch.testing.assert_close(resampled[:, 0], resampled[:, 1])  # separate draws per template would differ


def test_one_item_per_target_gives_its_own_value_and_excluded_items_are_left_out():
    bias = torch.tensor([[0.1, 0.3], [0.2, NAN], [NAN, NAN]], dtype=torch.float64)
    out = counterbias_intervals(bias, torch.tensor([0, 1, 2]), torch.tensor([1, -1, 1]), 4, n_bootstrap=30)
    torch.testing.assert_close(out["per_target"][:2], torch.tensor([[0.2, 0.2], [-0.2, -0.2]], dtype=torch.float64))
    assert out["per_target"][2:].isnan().all()  # all excluded, and no item at all
    # template 0: mean of |0.1| and |-0.2|; template 1: only target 0's 0.3
    torch.testing.assert_close(out["mean_absolute"], torch.tensor([[15.0, 15.0], [30.0, 30.0]], dtype=torch.float64))
    p = counterbias_p_values(bias, torch.tensor([0, 1, 2]), torch.tensor([1, -1, 1]), 4)
    assert p[:2].tolist() == [1.0, 1.0] and p[2:].isnan().all()  # one item: its flip reaches it


def test_results_do_not_depend_on_row_order():
    generator = torch.Generator().manual_seed(2)
    bias = torch.randn(25, 3, generator=generator, dtype=torch.float64)
    bias[[2, 7], 1] = NAN
    target, direction = (
        torch.randint(0, 4, (25,), generator=generator),
        torch.randint(0, 2, (25,), generator=generator) * 2 - 1,
    )
    order = torch.randperm(25, generator=generator)
    first = counterbias_intervals(bias, target, direction, 4, n_bootstrap=200, seed=5)
    second = counterbias_intervals(bias[order], target[order], direction[order], 4, n_bootstrap=200, seed=5)
    for key in first:
        torch.testing.assert_close(first[key], second[key], equal_nan=True)
    torch.testing.assert_close(
        counterbias_p_values(bias, target, direction, 4, 300, seed=5),
        counterbias_p_values(bias[order], target[order], direction[order], 4, 300, seed=5),
    )


def test_bad_inputs_are_refused():
    target, direction = torch.tensor([0, 1]), torch.tensor([1, -1])
    with pytest.raises(InputError, match=r"\(N items, K templates\)"):
        counterbias_p_values(torch.ones(2), target, direction, 2)
    with pytest.raises(InputError, match="one value per row"):
        counterbias_p_values(torch.ones(3, 1), target, direction, 2)
    with pytest.raises(InputError, match="direction"):
        counterbias_p_values(torch.ones(2, 1), target, torch.tensor([1, 0]), 2)
    with pytest.raises(InputError, match="target"):
        counterbias_intervals(torch.ones(2, 1), torch.tensor([0, 2]), direction, 2)
    with pytest.raises(ConfigError, match="n_bootstrap"):
        counterbias_intervals(torch.ones(2, 1), target, direction, 2, n_bootstrap=0)
    with pytest.raises(ConfigError, match="confidence"):
        counterbias_intervals(torch.ones(2, 1), target, direction, 2, confidence=1.0)
    with pytest.raises(ConfigError, match="n_templates"):
        CounterBiasUncertainty(n_targets=2, n_templates=0)
    with pytest.raises(InputError, match=r"shape \(N, 2\)"):
        CounterBiasUncertainty(n_targets=2, n_templates=2).update(torch.ones(2, 3), target, direction)


# ----------------------------------------------------------------------------- the metric, one process and two
N_BATCHES, N_TARGETS, N_TEMPLATES = 4, 3, 2
CUTS = [0, 6, 9, 16, 20]


def batched_items():
    generator = torch.Generator().manual_seed(11)
    bias = torch.randn(20, N_TEMPLATES, generator=generator, dtype=torch.float64) + 0.4
    bias[[3, 12], 0] = NAN
    target = torch.randint(0, N_TARGETS - 1, (20,), generator=generator)  # the last target is never seen
    direction = torch.randint(0, 2, (20,), generator=generator) * 2 - 1
    return bias, target, direction


def run_uncertainty(batches):
    bias, target, direction = batched_items()
    metric = CounterBiasUncertainty(N_TARGETS, N_TEMPLATES, n_bootstrap=300, n_permutations=500, seed=4)
    for i in batches:
        rows = slice(CUTS[i], CUTS[i + 1])
        metric.update(bias[rows], target[rows], direction[rows])
    return metric.compute()


def test_metric_equals_functional_and_brackets_the_point_estimate():
    bias, target, direction = batched_items()
    out = run_uncertainty(range(N_BATCHES))
    expected = counterbias_intervals(bias, target, direction, N_TARGETS, n_bootstrap=300, seed=4)
    for key, value in expected.items():
        torch.testing.assert_close(out[key], value, equal_nan=True)
    torch.testing.assert_close(
        out["p_value"], counterbias_p_values(bias, target, direction, N_TARGETS, 500, seed=4), equal_nan=True
    )
    point = CounterBiasScore(N_TARGETS)  # the suite's point estimate: mean over templates of Eq. 7
    per_template = []
    for k in range(N_TEMPLATES):
        point.reset()
        point.update(bias[:, k], target, direction)
        per_template.append(point.compute()["per_target"])
    estimate = torch.stack(per_template).nanmean(dim=0)
    seen = ~estimate.isnan()
    assert ((out["per_target"][seen, 0] <= estimate[seen]) & (estimate[seen] <= out["per_target"][seen, 1])).all()
    assert out["per_target"][~seen].isnan().all() and out["p_value"][~seen].isnan().all()


@pytest.mark.slow  # each metric's DDP sync runs in the default suite: tests/metrics/test_ddp_every_metric.py
def test_ddp_two_processes_match_single_process():
    expected = run_uncertainty(range(N_BATCHES))
    for result in results_per_rank(run_uncertainty, N_BATCHES):
        assert result.keys() == expected.keys()
        for key, value in expected.items():
            torch.testing.assert_close(result[key], value, equal_nan=True, msg=key)
