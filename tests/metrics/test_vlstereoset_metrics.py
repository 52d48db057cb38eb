"""VLStereoSet metrics: hand-computed values, the paper's reference models, categories adding up, DDP."""

import math

import pytest
import torch
from torch.testing import assert_close

from tests.metrics.ddp import results_per_rank
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.vlstereoset import (
    caption_probabilities,
    caption_selection,
    ivlas,
    reference_scores,
    shift_scores,
    shift_summary,
    vlstereoset_intervals,
    vlstereoset_scores,
)
from vlbias.metrics.vlstereoset import VLStereoSetScores, VLStereoSetShift

E = math.e


def test_probabilities_match_hand_computed_softmax():
    logits = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], dtype=torch.float64)
    expected = torch.tensor([[E, 1, 1], [1, E**2, 1]], dtype=torch.float64)
    assert_close(caption_probabilities(logits), expected / expected.sum(1, keepdim=True))
    # temperature 0.5 doubles the logits: e^2 : 1 : 1 for the first row
    assert_close(
        caption_probabilities(logits, temperature=0.5)[0], torch.tensor([E**2, 1, 1], dtype=torch.float64) / (E**2 + 2)
    )


@pytest.mark.parametrize("temperature", [0.01, 0.07, 1.0, 100.0])
def test_selection_does_not_depend_on_the_temperature(temperature):
    cosines = torch.tensor([[0.31, 0.30, 0.29], [0.1, 0.2, 0.3], [0.5, -0.5, 0.0]], dtype=torch.float64)
    anti = torch.tensor([True, True, False])
    assert_close(caption_selection(caption_probabilities(cosines, temperature)), caption_selection(cosines))
    assert_close(
        vlstereoset_scores(caption_probabilities(cosines, temperature), anti)["vlbs"],
        torch.tensor(50.0, dtype=torch.float64),
    )


def test_hand_computed_scores_with_a_tie():
    scores = torch.tensor(
        [
            [3.0, 1.0, 0.0],  # anti image, picks S_s (stereotype)
            [0.0, 2.0, 1.0],  # anti image, picks S_a
            [1.0, 1.0, 0.0],  # anti image, tie S_s/S_a: half a stereotype pick
            [0.0, 0.0, 5.0],  # stereotypical image, picks S_i (irrelevant)
        ]
    )
    anti = torch.tensor([True, True, True, False])
    assert caption_selection(scores)[2].tolist() == [0.5, 0.5, 0.0]
    result = vlstereoset_scores(scores, anti)
    assert result["vlrs"].item() == pytest.approx(75.0)  # 3 of 4 pick a relevant caption
    assert result["vlbs"].item() == pytest.approx(50.0)  # (1 + 0 + 0.5) / 3
    assert result["ivlas"].item() == pytest.approx(2 * 75 * 50 / (75 + 50))  # 60
    assert math.isnan(vlstereoset_scores(scores[3:], anti[3:])["vlbs"].item())  # no anti-stereotypical image


@pytest.mark.parametrize(
    "vlrs, vlbs, printed",
    [  # every row of the paper's Table 3
        (100.0, 0.0, 100.0),
        (85.21, 32.30, 75.46),
        (85.31, 38.91, 71.20),
        (86.94, 41.65, 69.83),
        (74.22, 37.35, 67.94),
        (88.04, 45.72, 67.15),
        (66.67, 33.33, 66.67),
        (60.70, 28.79, 65.53),
        (100.0, 100.0, 0.0),
    ],
)
def test_ivlas_is_the_harmonic_mean_that_reproduces_table_3(vlrs, vlbs, printed):
    assert ivlas(vlrs, vlbs).item() == pytest.approx(printed, abs=0.011)  # the printed inputs are rounded to 0.01


def test_ivlas_of_nothing_is_zero():
    assert ivlas(0.0, 100.0).item() == 0.0


@pytest.mark.parametrize(
    "model, expected",
    [("IDM", (100.0, 0.0, 100.0)), ("BIM", (100.0, 100.0, 0.0)), ("RAM", (200 / 3, 100 / 3, 200 / 3))],
)
def test_reference_models_are_exact(model, expected):
    anti = torch.rand(101, generator=torch.Generator().manual_seed(1)) < 0.4
    result = vlstereoset_scores(reference_scores(model, anti), anti)
    assert_close(
        torch.stack([result[k] for k in ("vlrs", "vlbs", "ivlas")]),
        torch.tensor(expected, dtype=torch.float64),
        atol=1e-12,
        rtol=0,
    )


def test_shift_scores_match_hand_computed_log_ratios():
    original = torch.tensor([[2.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    neutral = torch.tensor([[1.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    blank = torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)

    def log_sigmoid(x):  # ln p(first) of a 2-way softmax whose logits differ by x
        return -math.log1p(math.exp(-x))

    lmss = shift_scores(original, neutral)
    assert lmss.tolist() == pytest.approx([log_sigmoid(1) - math.log(0.5), log_sigmoid(-1) - math.log(0.5)])
    vlss = shift_scores(neutral, blank)
    assert vlss.tolist() == pytest.approx([math.log(0.5) - log_sigmoid(-1), 0.0])
    hot = shift_scores(original, neutral, temperature=0.1)  # the size changes with the temperature, the sign does not
    assert torch.sign(hot).tolist() == torch.sign(lmss).tolist() and abs(hot[0]) > abs(lmss[0])


def test_shift_summary():
    summary = shift_summary(torch.tensor([-1.0, 0.0, 2.0, 3.0]), n_bootstrap=500)
    assert summary["mean"].item() == pytest.approx(1.0)
    assert summary["fraction_positive"].item() == pytest.approx(0.5)  # 0 is not above zero
    low, high = summary["interval"].tolist()
    assert -1.0 <= low <= 1.0 <= high <= 3.0
    assert all(math.isnan(v) for v in shift_summary(torch.empty(0))["interval"].tolist())


def random_items(n=120, seed=0):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(n, 3, generator=generator, dtype=torch.float64)
    scores[:, 0] += 0.5  # some stereotypical preference
    anti = torch.rand(n, generator=generator) < 0.5
    category = torch.randint(3, (n,), generator=generator)  # religion gets no items
    return scores, anti, category


def test_intervals_are_seeded_order_free_and_cover_the_estimate():
    scores, anti, _ = random_items()
    selection = caption_selection(scores)
    first = vlstereoset_intervals(selection, anti, n_bootstrap=400, seed=3)
    order = torch.randperm(len(anti), generator=torch.Generator().manual_seed(9))
    shuffled = vlstereoset_intervals(selection[order], anti[order], n_bootstrap=400, seed=3)
    point = vlstereoset_scores(scores, anti)
    for name, interval in first.items():
        assert_close(shuffled[name], interval, atol=0, rtol=0)
        assert interval[0] <= point[name] <= interval[1]
    assert not torch.equal(vlstereoset_intervals(selection, anti, n_bootstrap=400, seed=4)["vlbs"], first["vlbs"])


def test_metric_batches_equal_the_functional_and_categories_add_up():
    scores, anti, category = random_items()
    metric = VLStereoSetScores(n_bootstrap=200, seed=1)
    for start in range(0, len(anti), 32):
        metric.update(scores[start : start + 32], anti[start : start + 32], category[start : start + 32])
    result = metric.compute()
    expected = vlstereoset_scores(scores, anti)
    for name in ("vlrs", "vlbs", "ivlas"):
        assert_close(result[name], expected[name])
    names = ("gender", "profession", "race", "religion")
    assert result["n_items/religion"].item() == 0 and "vlrs/religion" not in result
    assert sum(result[f"n_items/{c}"] for c in names).item() == result["n_items"].item() == len(anti)
    assert sum(result[f"n_anti/{c}"] for c in names).item() == result["n_anti"].item() == anti.sum().item()
    present = names[:3]
    weighted_vlrs = sum(result[f"vlrs/{c}"] * result[f"n_items/{c}"] for c in present) / result["n_items"]
    weighted_vlbs = sum(result[f"vlbs/{c}"] * result[f"n_anti/{c}"] for c in present) / result["n_anti"]
    assert_close(weighted_vlrs, result["vlrs"])
    assert_close(weighted_vlbs, result["vlbs"])
    for index, name in enumerate(present):
        members = category == index
        assert_close(result[f"vlbs/{name}"], vlstereoset_scores(scores[members], anti[members])["vlbs"])
        assert result[f"vlbs/{name}/interval"].shape == (2,)


def test_shift_metric_equals_the_functional():
    generator = torch.Generator().manual_seed(2)
    pairs = [torch.randn(20, 2, generator=generator, dtype=torch.float64) for _ in range(3)]
    metric = VLStereoSetShift(temperature=0.5, n_bootstrap=100)
    metric.update(*(p[:7] for p in pairs))
    metric.update(*(p[7:] for p in pairs))
    result = metric.compute()
    assert_close(result["lmss/mean"], shift_scores(pairs[0], pairs[1], 0.5).mean())
    assert_close(result["vlss/fraction_positive"], (shift_scores(pairs[1], pairs[2], 0.5) > 0).double().mean())
    assert result["n_items"].item() == 20


def test_errors_name_the_argument():
    metric = VLStereoSetScores()
    with pytest.raises(InputError, match=r"`scores` to be a tensor of shape \(N, 3\)"):
        metric.update(torch.zeros(2, 2), torch.tensor([True, False]), torch.tensor([0, 0]))
    with pytest.raises(InputError, match="finite"):
        metric.update(torch.tensor([[math.nan, 0.0, 0.0]]), torch.tensor([True]), torch.tensor([0]))
    with pytest.raises(InputError, match="`category` in \\[0, 4\\)"):
        metric.update(torch.zeros(1, 3), torch.tensor([True]), torch.tensor([7]))
    with pytest.raises(InputError, match="`anti`"):
        metric.update(torch.zeros(2, 3), torch.tensor([True]), torch.tensor([0, 0]))
    with pytest.raises(InputError, match="at least one item"):
        metric.compute()
    with pytest.raises(ConfigError, match="`temperature`"):
        caption_probabilities(torch.zeros(1, 3), temperature=0)
    with pytest.raises(ConfigError, match="`confidence`"):
        VLStereoSetScores(confidence=95)
    with pytest.raises(ConfigError, match="one of IDM, BIM, RAM"):
        reference_scores("GPT", torch.tensor([True]))


# ----------------------------------------------------------------------------- DDP
NUM_BATCHES = 6


def run_metrics(batches):
    """Scores and shifts of all given batches, and of only the even ones: in DDP rank 1 never updates the
    ``even/`` twins, so its empty (N, 3) float64, bool and int64 list states are gathered with rank 0's."""
    scores, anti, category = random_items(90, seed=5)
    generator = torch.Generator().manual_seed(6)
    pairs = [torch.randn(90, 2, generator=generator, dtype=torch.float64) for _ in range(3)]
    metrics = {
        name: (VLStereoSetScores(n_bootstrap=300, seed=2), VLStereoSetShift(n_bootstrap=300, seed=2))
        for name in ("all", "even")
    }
    for i in batches:
        rows = slice(15 * i, 15 * (i + 1))
        for name in ("all", "even") if i % 2 == 0 else ("all",):
            metrics[name][0].update(scores[rows], anti[rows], category[rows])
            metrics[name][1].update(*(p[rows] for p in pairs))
    return {
        f"{name}/{kind}/{key}": value
        for name, pair in metrics.items()
        for kind, metric in zip(("scores", "shift"), pair)
        for key, value in metric.compute().items()
    }


def test_results_do_not_depend_on_batch_order():
    in_order, gathered_order = run_metrics(range(NUM_BATCHES)), run_metrics([0, 2, 4, 1, 3, 5])
    for key, value in in_order.items():
        assert_close(gathered_order[key], value, atol=0, rtol=0, equal_nan=True, msg=key)


@pytest.mark.slow  # each metric's DDP sync runs in the default suite: tests/metrics/test_ddp_every_metric.py
def test_ddp_two_processes_match_single_process():
    expected = run_metrics(range(NUM_BATCHES))
    assert expected["all/scores/n_items"].item() == 90 and expected["even/shift/n_items"].item() == 45
    assert expected["even/scores/vlbs"].item() != expected["all/scores/vlbs"].item()
    results = results_per_rank(run_metrics, NUM_BATCHES)
    for result in results:
        assert result.keys() == expected.keys()
        for key, value in expected.items():
            assert_close(result[key], value, atol=1e-12, rtol=0, equal_nan=True, msg=key)
