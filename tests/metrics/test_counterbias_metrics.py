"""CounterBias Eq. 4-13 and Table 2 on fixed probabilities computed by hand."""

import math

import pytest
import torch

from tests.metrics.ddp import results_per_rank
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.counterbias import CounterBiasScore
from vlbias.metrics.functional.counterbias import (
    bias_concept_vl,
    dataset_bias,
    instance_bias,
    language_bias,
    log_language_bias,
    mean_absolute_bias,
    multimodal_bias,
    visual_bias,
)

# Three items: P(T|V_f,L_f), P(T|V_cf,L_cf), P(T|V_cf,L_f), P(T|V_f,L_cf), P(B|V_f), P(B|V_cf)
P_F = torch.tensor([0.40, 0.10, 0.30])
P_VL = torch.tensor([0.20, 0.30, 0.30])
P_V = torch.tensor([0.25, 0.15, 0.31])
P_L = torch.tensor([0.35, 0.05, 0.30])
B_VF = torch.tensor([0.90, 0.60, 0.500])
B_VCF = torch.tensor([0.10, 0.20, 0.495])


def test_eq4_instance_bias_by_hand():
    got = instance_bias(torch.tensor([0.4]), torch.tensor([0.2]), torch.tensor([0.9]), torch.tensor([0.1]))
    torch.testing.assert_close(got, torch.tensor([(0.2 - 0.4) / (0.1 - 0.9)]))  # 0.25


def test_eq6_multimodal_bias_by_hand():
    # P(B|V,L) = (P(B|V) + P(B|L)) / 2 with P(B|L_f) = 1, P(B|L_cf) = 0
    expected = [
        (0.20 - 0.40) / ((0.10 + 0) / 2 - (0.90 + 1) / 2),  # -0.2 / -0.9
        (0.30 - 0.10) / ((0.20 + 0) / 2 - (0.60 + 1) / 2),  # 0.2 / -0.7
        (0.30 - 0.30) / ((0.495 + 0) / 2 - (0.500 + 1) / 2),
    ]
    torch.testing.assert_close(multimodal_bias(P_F, P_VL, B_VF, B_VCF), torch.tensor(expected))
    torch.testing.assert_close(bias_concept_vl(torch.tensor([0.9]), 1.0), torch.tensor([0.95]))


def test_eq9_visual_bias_excludes_tiny_bias_change():
    got = visual_bias(P_F, P_V, B_VF, B_VCF, min_bias_change=0.01)
    torch.testing.assert_close(got[:2], torch.tensor([(0.25 - 0.40) / (0.10 - 0.90), (0.15 - 0.10) / (0.20 - 0.60)]))
    assert math.isnan(got[2])  # |ΔP(B)| = 0.005 < 0.01: excluded, not divided
    kept = visual_bias(P_F, P_V, B_VF, B_VCF, min_bias_change=0.001)
    torch.testing.assert_close(kept[2], torch.tensor((0.31 - 0.30) / (0.495 - 0.500)))


def test_eq11_language_bias_by_hand():
    expected = torch.tensor([(0.35 - 0.40) / (0 - 1), (0.05 - 0.10) / (0 - 1), 0.0])
    torch.testing.assert_close(language_bias(P_F, P_L), expected)


def test_eq13_log_language_bias_by_hand():
    log_f, log_cf = torch.tensor([math.log(0.2)]), torch.tensor([math.log(0.05)])
    torch.testing.assert_close(log_language_bias(log_f, log_cf), torch.tensor([math.log(0.2) - math.log(0.05)]))


def test_eq7_dataset_bias_and_table2_mean_absolute():
    bias = torch.tensor([0.2, 0.4, -0.1, float("nan"), 0.3])
    target = torch.tensor([0, 0, 1, 1, 1])
    direction = torch.tensor([1, -1, 1, 1, -1])  # B0, B1, B0, B0, B1
    per_target, counts = dataset_bias(bias, target, direction, n_targets=3)
    # T0: mean(+0.2, -0.4) = -0.1; T1: mean(-0.1, -0.3) = -0.2 (the NaN item excluded); T2: no items
    torch.testing.assert_close(per_target[:2], torch.tensor([-0.1, -0.2], dtype=torch.float64))
    assert math.isnan(per_target[2])
    assert counts.tolist() == [2, 2, 0]
    torch.testing.assert_close(mean_absolute_bias(per_target), torch.tensor(15.0, dtype=torch.float64))
    torch.testing.assert_close(mean_absolute_bias(per_target, percent=False), torch.tensor(0.15, dtype=torch.float64))


def test_metric_equals_functional_across_batches_and_merged_ranks():
    generator = torch.Generator().manual_seed(0)
    bias = torch.randn(40, generator=generator)
    bias[::7] = float("nan")
    target = torch.randint(0, 4, (40,), generator=generator)
    direction = torch.randint(0, 2, (40,), generator=generator) * 2 - 1
    per_target, counts = dataset_bias(bias, target, direction, 4)

    whole = CounterBiasScore(n_targets=4)
    for chunk in range(4):
        sl = slice(10 * chunk, 10 * (chunk + 1))
        whole.update(bias[sl], target[sl], direction[sl])
    # two "ranks" see alternate batches; summing their states is what DDP's reduction does
    ranks = [CounterBiasScore(n_targets=4), CounterBiasScore(n_targets=4)]
    for chunk in range(4):
        sl = slice(10 * chunk, 10 * (chunk + 1))
        ranks[chunk % 2].update(bias[sl], target[sl], direction[sl])
    ranks[0].merge_state(ranks[1])
    for metric in (whole, ranks[0]):
        out = metric.compute()
        torch.testing.assert_close(out["per_target"], per_target)
        assert out["count"].tolist() == counts.tolist()
        assert int(out["n_excluded"]) == int(torch.isnan(bias).sum())
        torch.testing.assert_close(out["mean_absolute"], mean_absolute_bias(per_target))


def test_bad_inputs_are_refused():
    with pytest.raises(InputError, match="same shape|one shape"):
        instance_bias(torch.ones(2), torch.ones(3), torch.ones(2), torch.ones(2))
    with pytest.raises(InputError, match="min_bias_change"):
        instance_bias(torch.ones(1), torch.ones(1), torch.ones(1), torch.zeros(1), min_bias_change=0)
    with pytest.raises(InputError, match="direction"):
        dataset_bias(torch.ones(2), torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    with pytest.raises(InputError, match="target"):
        dataset_bias(torch.ones(2), torch.tensor([0, 2]), torch.tensor([1, 1]), 2)
    with pytest.raises(ConfigError, match="n_targets"):
        CounterBiasScore(n_targets=0)


# ----------------------------------------------------------------------------- DDP
NUM_BATCHES, N_TARGETS = 6, 5
CUTS = [0, 9, 11, 18, 19, 23, 30]  # batch sizes 9, 2, 7, 1, 4, 7: rank 0 holds 17 items, rank 1 holds 13


def ddp_items():
    """30 items with NaN (excluded) biases; target 3 only on rank 0, target 4 never seen."""
    generator = torch.Generator().manual_seed(21)
    bias = torch.randn(30, generator=generator, dtype=torch.float64)
    bias[[1, 5, 9, 20, 27]] = float("nan")  # 3 excluded on rank 0 (batches 0, 4), 2 on rank 1 (batches 1, 5)
    target = torch.randint(0, 3, (30,), generator=generator)
    target[[0, 12, 21]] = 3  # batches 0, 2, 4
    direction = torch.randint(0, 2, (30,), generator=generator) * 2 - 1
    return bias, target, direction


def run_counterbias(batches):
    """compute() of CounterBiasScore (percent and plain) fed with the given batches."""
    bias, target, direction = ddp_items()
    metrics = {
        "percent": CounterBiasScore(n_targets=N_TARGETS),
        "plain": CounterBiasScore(n_targets=N_TARGETS, percent=False),
    }
    for i in batches:
        rows = slice(CUTS[i], CUTS[i + 1])
        for metric in metrics.values():
            metric.update(bias[rows], target[rows], direction[rows])
    return {name: metric.compute() for name, metric in metrics.items()}


def test_results_do_not_depend_on_batch_order():
    # what a 2-process gather hands to `compute`: rank 0's batches, then rank 1's
    in_order, gathered_order = run_counterbias(range(NUM_BATCHES)), run_counterbias([0, 2, 4, 1, 3, 5])
    for family, result in in_order.items():
        for key, value in result.items():
            torch.testing.assert_close(
                gathered_order[family][key], value, atol=1e-12, rtol=0, equal_nan=True, msg=f"{family}/{key}"
            )


def test_ddp_two_processes_match_single_process():
    expected = run_counterbias(range(NUM_BATCHES))
    bias, target, direction = ddp_items()
    per_target, counts = dataset_bias(bias, target, direction, N_TARGETS)  # one process, the functional form
    torch.testing.assert_close(expected["percent"]["per_target"], per_target, atol=1e-12, rtol=0, equal_nan=True)
    assert expected["percent"]["count"].tolist() == counts.tolist() and counts[3] == 3 and counts[4] == 0
    assert int(expected["percent"]["n_excluded"]) == 5
    results = results_per_rank(run_counterbias, NUM_BATCHES)
    for result in results:  # every rank computes the same numbers as one process did
        for family in ("percent", "plain"):
            assert result[family].keys() == {"per_target", "count", "mean_absolute", "n_excluded"}
            for key, value in expected[family].items():
                torch.testing.assert_close(
                    result[family][key], value, atol=1e-12, rtol=0, equal_nan=True, msg=f"{family}/{key}"
                )
            assert result[family]["count"].tolist() == expected[family]["count"].tolist()
            assert int(result[family]["n_excluded"]) == 5
