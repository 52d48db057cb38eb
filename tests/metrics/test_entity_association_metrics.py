"""Srinivasan & Bisk association scores: hand-computed values, the metric twins, DDP."""

import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from tests.metrics.ddp import results_per_rank
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.entity_association import (
    BiasScore,
    LanguageAssociation,
    LanguageBiasInterval,
    PretrainingAssociation,
    VisualAssociation,
    VisualBiasInterval,
)
from vlbias.metrics.functional.entity_association import (
    bias_score,
    language_association,
    language_bias_interval,
    pretraining_association,
    visual_association,
    visual_bias_interval,
)

log = math.log


def test_hand_computed_scores():
    # P_VL(E|f) = 0.02, P_L(E|f) = 0.01 -> S_PT = ln 2
    assert_close(pretraining_association(torch.tensor(log(0.02)), torch.tensor(log(0.01))), torch.tensor(log(2.0)))
    # three images: P(E|g, I) = .3, .2, .05 against P(E|p, I) = .1, .2, .1 -> mean(ln 3, 0, ln .5)
    agent, neutral = torch.tensor([0.3, 0.2, 0.05]).log(), torch.tensor([0.1, 0.2, 0.1]).log()
    assert_close(language_association(agent, neutral), torch.tensor((log(3) + 0 + log(0.5)) / 3))
    # S_V averages probabilities, not log-probabilities: mean(.3, .2, .05) = .55 / 3 against P(E) = .1
    assert_close(
        visual_association(neutral.new_tensor([0.3, 0.2, 0.05]).log(), torch.tensor(log(0.1))),
        torch.tensor(log(0.55 / 3 / 0.1)),
    )
    assert_close(bias_score(torch.tensor([log(3.0)]), torch.tensor([log(1.5)])), torch.tensor([log(2.0)]))


def test_scores_along_a_dimension():
    # (images, entities) = (2, 3); dim=0 averages over images for every entity at once
    agent = torch.tensor([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]).log()
    neutral = torch.full((2, 3), 0.2).log()
    expected = torch.tensor([(log(0.5) + log(1.5)) / 2, 0.0, (log(1.5) + log(0.5)) / 2])
    assert_close(language_association(agent, neutral), expected)
    assert_close(
        visual_association(agent, torch.full((3,), 0.2).log()), torch.tensor([0.0, 0.0, 0.0]), atol=1e-6, rtol=0
    )


def test_visual_association_is_stable_for_tiny_probabilities():
    tiny = torch.tensor([-2000.0, -2000.0 + log(3.0)], dtype=torch.float64)  # exp() underflows to 0
    assert_close(
        visual_association(tiny, torch.tensor(-2000.0, dtype=torch.float64)),
        torch.tensor(log(2.0), dtype=torch.float64),
    )


def reference_percentiles(values: list[float], confidence: float) -> list[float]:
    return [float(np.quantile(values, q)) for q in ((1 - confidence) / 2, (1 + confidence) / 2)]


def test_bias_intervals_match_reference_loops():
    first, second = torch.tensor([0.3, 0.2, 0.05, 0.1]).log(), torch.tensor([0.1, 0.25, 0.1, 0.2]).log()
    generator = torch.Generator().manual_seed(4)  # the same draws as the functions make
    rows = torch.randint(4, (200, 4), generator=generator).tolist()
    statistics = [
        sum(log(p_f / p_m) for p_f, p_m in ((float(first[i].exp()), float(second[i].exp())) for i in row)) / 4
        for row in rows
    ]
    interval = language_bias_interval(first, second, n_bootstrap=200, confidence=0.9, seed=4)
    assert_close(interval.double(), torch.tensor(reference_percentiles(statistics, 0.9), dtype=torch.float64))

    generator = torch.Generator().manual_seed(4)
    rows_f = torch.randint(4, (200, 4), generator=generator).tolist()
    rows_m = torch.randint(3, (200, 3), generator=generator).tolist()
    p_f, p_m = first.exp().tolist(), second[:3].exp().tolist()
    statistics = [log(sum(p_f[i] for i in a) / 4) - log(sum(p_m[i] for i in b) / 3) for a, b in zip(rows_f, rows_m)]
    interval = visual_bias_interval(first, second[:3], n_bootstrap=200, confidence=0.9, seed=4)
    assert_close(interval.double(), torch.tensor(reference_percentiles(statistics, 0.9), dtype=torch.float64))
    low, high = interval.tolist()
    point = float(visual_association(first, torch.tensor(0.0)) - visual_association(second[:3], torch.tensor(0.0)))
    assert low < point < high


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: pretraining_association(torch.zeros(2), torch.zeros(3)), "`log_p_vl` and `log_p_l`"),
        (lambda: language_association(torch.zeros(0), torch.zeros(0)), "at least one image"),
        (lambda: visual_association(torch.zeros(2, 3), torch.zeros(2)), "log_p_no_image"),
        (lambda: bias_score(torch.zeros(1), torch.zeros(2)), "`s_first` and `s_second`"),
        (lambda: visual_bias_interval(torch.zeros(2), torch.zeros(0)), "`log_p_second`"),
    ],
)
def test_shape_errors_name_the_argument(call, message):
    with pytest.raises(InputError, match=message):
        call()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: language_bias_interval(torch.zeros(2), torch.zeros(2), n_bootstrap=0), "n_bootstrap"),
        (lambda: visual_bias_interval(torch.zeros(2), torch.zeros(2), confidence=1.0), "confidence"),
    ],
)
def test_option_errors_name_the_argument(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


# ----------------------------------------------------------------------------- metric twins
CUTS = [(0, 3), (3, 4), (4, 8), (8, 10)]
GROUP = torch.tensor(
    [0, 0, 1, 1, 0, 1, 0, 1, 1, 0]
)  # each of entities 0 and 1 has images of both groups, in the even batches too
INTERVAL_OPTIONS = {"n_bootstrap": 200, "confidence": 0.9, "seed": 6}


def batches():
    """Four batches of (entity, log P(E|g, I), log P(E|p, I), log P(E|p)) for 3 entities; entity 2 never appears."""
    generator = torch.Generator().manual_seed(3)
    entity = torch.tensor([0, 1, 1, 0, 0, 1, 1, 0, 1, 0])
    agent = -torch.rand(10, generator=generator, dtype=torch.float64) * 5
    neutral = -torch.rand(10, generator=generator, dtype=torch.float64) * 5
    no_image = torch.tensor([-2.0, -3.0], dtype=torch.float64)[entity]
    return [(entity[a:b], agent[a:b], neutral[a:b], no_image[a:b]) for a, b in CUTS], (entity, agent, neutral, no_image)


def run_metrics(order):
    """Every metric over the given batches, and ``even_`` twins over the even batches only: in DDP rank 1
    never updates those, so its empty int64 and float64 list states are gathered with rank 0's. The interval
    metrics read ``agent`` / ``neutral`` as the two groups' scores (B_L) and ``neutral`` with :data:`GROUP` (B_V),
    each row keeping its place among the 10 rows as its ``order``."""
    parts, _ = batches()
    metrics = {
        "language": LanguageAssociation(num_entities=3),
        "visual": VisualAssociation(num_entities=3),
        "pretraining": PretrainingAssociation(num_entities=3),
        "language_interval": LanguageBiasInterval(num_entities=3, **INTERVAL_OPTIONS),
        "visual_interval": VisualBiasInterval(num_entities=3, **INTERVAL_OPTIONS),
    }
    metrics.update(
        {
            f"even_{name}": type(metric)(num_entities=3, **(INTERVAL_OPTIONS if "interval" in name else {}))
            for name, metric in metrics.items()
        }
    )
    for i in order:
        entity, agent, neutral, no_image = parts[i]
        rows = torch.arange(*CUTS[i])
        for prefix in ("", "even_") if i % 2 == 0 else ("",):
            metrics[f"{prefix}language"].update(entity, agent, neutral)
            metrics[f"{prefix}visual"].update(entity, neutral, no_image)
            metrics[f"{prefix}pretraining"].update(entity, agent, neutral)
            metrics[f"{prefix}language_interval"].update(rows, entity, agent, neutral)
            metrics[f"{prefix}visual_interval"].update(rows, entity, GROUP[rows], neutral)
    metrics["bias"] = BiasScore(metrics["language"], metrics["pretraining"])
    return {name: metric.compute() for name, metric in metrics.items()}


def test_metrics_equal_the_functional_scores():
    result = run_metrics(range(4))
    _, (entity, agent, neutral, no_image) = batches()
    for index in (0, 1):
        rows = entity == index
        assert_close(result["language"][index], language_association(agent[rows], neutral[rows]))
        assert_close(result["visual"][index], visual_association(neutral[rows], no_image[rows][0]))
    assert result["language"][2].isnan() and result["visual"][2].isnan()  # no image of entity 2


def test_new_metrics_equal_the_functional_scores():
    result = run_metrics(range(4))
    _, (entity, agent, neutral, _) = batches()
    for index in (0, 1):
        rows = entity == index
        assert_close(result["pretraining"][index], pretraining_association(agent[rows], neutral[rows]).mean())
        assert_close(result["bias"][index], bias_score(result["language"][index], result["pretraining"][index]))
        assert_close(
            result["language_interval"][index], language_bias_interval(agent[rows], neutral[rows], **INTERVAL_OPTIONS)
        )
        first, second = (neutral[rows & (GROUP == g)] for g in (0, 1))
        assert_close(result["visual_interval"][index], visual_bias_interval(first, second, **INTERVAL_OPTIONS))
    assert (
        result["pretraining"][2].isnan()
        and result["language_interval"][2].isnan().all()
        and result["visual_interval"][2].isnan().all()
    )


def test_visual_interval_needs_both_groups():
    metric = VisualBiasInterval(num_entities=2, n_bootstrap=10)
    metric.update(
        torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]), torch.tensor([0, 0, 1]), torch.tensor([-1.0, -1.0, -2.0])
    )
    interval = metric.compute()
    assert interval[0].isnan().all() and interval[1].tolist() == [1.0, 1.0]  # entity 0 has no image of group 1


def test_metrics_do_not_depend_on_batch_order():
    first, second = run_metrics(range(4)), run_metrics([3, 1, 0, 2])
    for key in first:
        assert_close(second[key], first[key], atol=1e-12, rtol=0, equal_nan=True)


def test_metric_errors():
    with pytest.raises(ConfigError, match="num_entities"):
        LanguageAssociation(num_entities=0)
    metric = VisualAssociation(num_entities=2)
    with pytest.raises(InputError, match=r"indices in \[0, 2\)"):
        metric.update(torch.tensor([2]), torch.zeros(1), torch.zeros(1))
    with pytest.raises(InputError, match="integer"):
        metric.update(torch.tensor([0.0]), torch.zeros(1), torch.zeros(1))
    with pytest.raises(InputError, match="log_p_no_image"):
        metric.update(torch.tensor([0, 1]), torch.zeros(2), torch.zeros(3))
    assert metric.compute().isnan().all()  # nothing seen yet
    with pytest.raises(ConfigError, match="no rows of its own"):
        BiasScore(LanguageAssociation(num_entities=1), LanguageAssociation(num_entities=1)).update(
            torch.tensor([0]), torch.zeros(1), torch.zeros(1)
        )
    with pytest.raises(ConfigError, match="n_bootstrap"):
        LanguageBiasInterval(num_entities=2, n_bootstrap=0)
    with pytest.raises(ConfigError, match="confidence"):
        VisualBiasInterval(num_entities=2, confidence=1.0)
    with pytest.raises(InputError, match="`order`"):
        LanguageBiasInterval(num_entities=2).update(
            torch.tensor([0]), torch.tensor([0, 1]), torch.zeros(2), torch.zeros(2)
        )
    with pytest.raises(InputError, match="`group` to hold 0"):
        VisualBiasInterval(num_entities=2).update(
            torch.tensor([0]), torch.tensor([0]), torch.tensor([2]), torch.zeros(1)
        )
    with pytest.raises(InputError, match="`log_p_l`"):
        PretrainingAssociation(num_entities=2).update(torch.tensor([0]), torch.zeros(1), torch.zeros(2))


# ----------------------------------------------------------------------------- DDP
@pytest.mark.slow  # two spawned processes: ~40 s on the loaded 2-core machine
def test_ddp_two_processes_match_single_process():
    expected = run_metrics(range(4))
    assert not expected["even_visual"][:2].isnan().any()  # batches 0 and 2 hold both entities 0 and 1
    assert not torch.equal(expected["even_visual"][:2], expected["visual"][:2])  # (entity 2 is nan in both)
    results = results_per_rank(run_metrics, 4)
    for result in results:
        assert result.keys() == expected.keys()
        for key, value in expected.items():
            assert_close(result[key], value, atol=1e-12, rtol=0, equal_nan=True, msg=key)
