"""Zero-shot group fairness: agreement with fairlearn on random predictions, hand-computed values where fairlearn
has no counterpart, refused input, the metric's shards against one pass, and the bootstrap interval."""

from __future__ import annotations

import math

import fairlearn.metrics as fairlearn_metrics
import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics import GroupFairness
from vlbias.metrics.functional import (
    demographic_parity_difference,
    equal_opportunity_gap,
    equalized_odds_difference,
    group_accuracy,
    group_fairness,
    group_fairness_intervals,
    harmful_label_rate,
    intersectional_groups,
    worst_group_accuracy,
)
from vlbias.metrics.functional.group_fairness import COUNTS, STATISTICS

TOL = 1e-12


def _random(seed: int, n: int, num_classes: int, num_groups: int) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randint(num_classes, (n,), generator=g),
        torch.randint(num_classes, (n,), generator=g),
        torch.randint(num_groups, (n,), generator=g),
    )


# ----------------------------------------------------------------------------- fairlearn
@pytest.mark.parametrize(("seed", "num_classes", "num_groups"), [(0, 2, 2), (1, 2, 3), (2, 4, 3), (3, 5, 4)])
def test_agrees_with_fairlearn_on_random_predictions(seed, num_classes, num_groups):
    preds, target, groups = _random(seed, 600, num_classes, num_groups)
    out = group_fairness(preds, target, groups, num_classes)
    y_pred, y_true, sensitive = preds.numpy(), target.numpy(), groups.numpy()

    frame = fairlearn_metrics.MetricFrame(
        metrics=accuracy_score, y_true=y_true, y_pred=y_pred, sensitive_features=sensitive
    )
    np.testing.assert_allclose(out["group_accuracy"].numpy(), frame.by_group.to_numpy(), rtol=0, atol=TOL)
    assert abs(out["worst_group_accuracy"].item() - frame.group_min()) <= TOL
    assert abs(out["accuracy"].item() - frame.overall) <= TOL

    for c in range(num_classes):  # one class versus the rest: fairlearn's binary definitions of [y = c], [y_hat = c]
        binary = dict(y_true=(y_true == c).astype(int), y_pred=(y_pred == c).astype(int), sensitive_features=sensitive)
        expected = {
            "demographic_parity_difference": fairlearn_metrics.demographic_parity_difference(**binary),
            "equalized_odds_difference": fairlearn_metrics.equalized_odds_difference(**binary),
            "equal_opportunity_gap": fairlearn_metrics.equal_opportunity_difference(**binary),
        }
        for name, value in expected.items():
            assert abs(out[name][c].item() - value) <= TOL, (name, c, out[name][c].item(), value)
    if num_classes == 2:  # both classes give fairlearn's value with pos_label=1 (complementary rates)
        for name in ("demographic_parity_difference", "equalized_odds_difference"):
            assert abs(out[name][0].item() - out[name][1].item()) <= TOL
            assert out[f"{name}_mean"].item() == pytest.approx(out[name][1].item(), abs=TOL)


def test_intersectional_groups_agree_with_fairlearn_on_two_sensitive_features():
    g = torch.Generator().manual_seed(7)
    preds, target = torch.randint(2, (500,), generator=g), torch.randint(2, (500,), generator=g)
    race, gender = torch.randint(3, (500,), generator=g), torch.randint(2, (500,), generator=g)
    groups, combinations = intersectional_groups(race, gender)
    assert combinations.tolist() == [[r, s] for r in range(3) for s in range(2)]
    assert torch.equal(combinations[groups], torch.stack([race, gender], dim=1))
    with pytest.raises(InputError, match=r"argument `attributes\[1\]` to hold one attribute value per image, 500 like"):
        intersectional_groups(race, gender[:-1])
    sensitive = {"race": race.numpy(), "gender": gender.numpy()}
    binary = dict(y_true=target.numpy(), y_pred=preds.numpy(), sensitive_features=sensitive)
    out = group_fairness(preds, target, groups, 2)
    assert (
        abs(out["demographic_parity_difference"][1].item() - fairlearn_metrics.demographic_parity_difference(**binary))
        <= TOL
    )
    assert (
        abs(out["equalized_odds_difference"][1].item() - fairlearn_metrics.equalized_odds_difference(**binary)) <= TOL
    )


# ----------------------------------------------------------------------------- hand-computed
# Classes 0 and 1 are true labels, class 2 a harmful label no image has. (target, pred) per image:
# group 0: (0,0) (0,0) (0,1) (1,1) (1,2); group 1: (0,0) (0,2) (1,1) (1,1)
_TARGET = torch.tensor([0, 0, 0, 1, 1, 0, 0, 1, 1])
_PREDS = torch.tensor([0, 0, 1, 1, 2, 0, 2, 1, 1])
_GROUPS = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1])


def test_hand_computed_table():
    out = group_fairness(_PREDS, _TARGET, _GROUPS, num_classes=3, harmful_classes=[2])
    expected = {
        "accuracy": 6 / 9,
        "group_accuracy": [3 / 5, 3 / 4],
        "mean_group_accuracy": (3 / 5 + 3 / 4) / 2,
        "worst_group_accuracy": 3 / 5,
        "worst_group_gap": (3 / 5 + 3 / 4) / 2 - 3 / 5,
        # TPR class 0: 2/3 vs 1/2; class 1: 1/2 vs 1; class 2 is nobody's label: NaN, left out of mean and max
        "equal_opportunity_gap": [2 / 3 - 1 / 2, 1 - 1 / 2, math.nan],
        "equal_opportunity_gap_mean": (1 / 6 + 1 / 2) / 2,
        "equal_opportunity_gap_max": 1 / 2,
        # selection rates class 0: 2/5 vs 1/4; class 1: 2/5 vs 2/4; class 2: 1/5 vs 1/4
        "demographic_parity_difference": [2 / 5 - 1 / 4, 2 / 4 - 2 / 5, 1 / 4 - 1 / 5],
        "demographic_parity_difference_mean": (0.15 + 0.1 + 0.05) / 3,
        "demographic_parity_difference_max": 0.15,
        # FPR class 0: 0/2 vs 0/2; class 1: 1/3 vs 0/2; class 2 (all images negative): 1/5 vs 1/4
        "equalized_odds_difference": [1 / 6, max(1 / 2, 1 / 3), 1 / 4 - 1 / 5],
        "equalized_odds_difference_mean": (1 / 6 + 1 / 2 + 0.05) / 3,
        "equalized_odds_difference_max": 1 / 2,
        "harmful_label_rate": [1 / 5, 1 / 4],
    }
    assert list(out) == [*STATISTICS, "group_size", *COUNTS]
    for name, value in expected.items():
        np.testing.assert_allclose(out[name].numpy(), np.array(value), rtol=0, atol=TOL, err_msg=name)
    assert out["group_size"].tolist() == [5, 4]
    # the one-statistic functions give the same numbers
    args = (_PREDS, _TARGET, _GROUPS, 3)
    torch.testing.assert_close(group_accuracy(*args), out["group_accuracy"], rtol=0, atol=0)
    worst, gap = worst_group_accuracy(*args)
    assert (worst.item(), gap.item()) == (out["worst_group_accuracy"].item(), out["worst_group_gap"].item())
    for function, name in (
        (equal_opportunity_gap, "equal_opportunity_gap"),
        (demographic_parity_difference, "demographic_parity_difference"),
        (equalized_odds_difference, "equalized_odds_difference"),
    ):
        torch.testing.assert_close(function(*args), out[name], rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(harmful_label_rate(*args, harmful_classes=(2,)), out["harmful_label_rate"])


def test_gap_needs_two_groups_defining_the_rate():
    # every image of group 1 is of class 0: its FPR for class 0 and TPR for class 1 are undefined
    preds, target, groups = torch.tensor([0, 1, 1, 0, 0]), torch.tensor([0, 1, 0, 0, 0]), torch.tensor([0, 0, 0, 1, 1])
    out = group_fairness(preds, target, groups, 2)
    assert math.isnan(out["equal_opportunity_gap"][1].item())
    assert out["equal_opportunity_gap"][0].item() == pytest.approx(1 - 1 / 2)
    assert out["equal_opportunity_gap_max"].item() == pytest.approx(1 / 2)
    assert out["equalized_odds_difference"][0].item() == pytest.approx(1 / 2)  # its FPR spread is undefined


# ----------------------------------------------------------------------------- refused input
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(target=torch.tensor([0, 1])), InputError, r"argument `target` to hold one class id per image, 3"),
        (dict(groups=torch.tensor([0, 0, 2]), num_groups=3), InputError, r"argument `groups`.* groups \[1\] have none"),
        (dict(preds=torch.tensor([0, 3, 1])), InputError, r"argument `preds` to hold class ids in \[0, 3\) but got 3"),
        (dict(target=torch.tensor([0, -1, 1])), InputError, r"argument `target` to hold class ids in \[0, 3\)"),
        (dict(preds=torch.tensor([0.0, 1.0, 1.0])), InputError, r"argument `preds` to be a 1-D integer tensor"),
        (dict(preds=torch.tensor([[0, 1, 1]])), InputError, r"argument `preds` to be a 1-D integer tensor"),
        (dict(groups=torch.tensor([0, 0, 0])), InputError, r"argument `groups` to hold at least two group ids"),
        (dict(num_groups=1), ConfigError, r"argument `num_groups` to be an integer >= 2"),
        (dict(num_classes=1), ConfigError, r"argument `num_classes` to be an integer >= 2"),
        (dict(harmful_classes=[3]), ConfigError, r"argument `harmful_classes` to be a non-empty sequence"),
        (dict(harmful_classes=[2, 2]), ConfigError, r"argument `harmful_classes`"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(kwargs, error, match):
    args = dict(preds=torch.tensor([0, 1, 2]), target=torch.tensor([0, 1, 1]), groups=torch.tensor([0, 1, 1]))
    args.update(num_classes=3)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        group_fairness(**args)


def test_metric_refuses_bad_updates_and_an_unseen_group():
    metric = GroupFairness(num_classes=2, num_groups=3, n_bootstrap=10)
    with pytest.raises(InputError, match=r"argument `groups` to hold group ids in \[0, 3\) but got 3"):
        metric.update(torch.tensor([0]), torch.tensor([1]), torch.tensor([3]))
    metric.update(torch.tensor([0, 1]), torch.tensor([1, 1]), torch.tensor([0, 1]))
    with pytest.raises(InputError, match=r"groups \[2\] have none"):
        metric.compute()
    with pytest.raises(ConfigError, match="`interval_method`"):
        GroupFairness(num_classes=2, num_groups=2, interval_method="basic")
    with pytest.raises(ConfigError, match="`n_bootstrap`"):
        GroupFairness(num_classes=2, num_groups=2, n_bootstrap=0)


# ----------------------------------------------------------------------------- metric: shards = one pass
def _assert_same(actual: dict[str, Tensor], expected: dict[str, Tensor]) -> None:
    for name, value in expected.items():
        assert torch.equal(actual[name].isnan(), value.isnan()), name
        assert torch.equal(actual[name].nan_to_num(), value.nan_to_num()), name


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_metric_shards_merged_equal_one_pass_exactly(method):
    preds, target, groups = _random(11, 300, 4, 3)
    options = dict(harmful_classes=[3], n_bootstrap=200, seed=5)
    expected = group_fairness(preds, target, groups, 4, 3, harmful_classes=[3])
    intervals = group_fairness_intervals(preds, target, groups, 4, 3, method=method, **options)
    expected.update({f"{name}_interval": value for name, value in intervals.items()})

    one = GroupFairness(num_classes=4, num_groups=3, interval_method=method, **options)
    one.update(preds, target, groups)
    _assert_same(one.compute(), expected)

    # two "ranks" with uneven shards (one empty batch), merged as the "sum" reduction does
    ranks = [GroupFairness(num_classes=4, num_groups=3, interval_method=method, **options) for _ in range(2)]
    for rank, (start, stop) in zip([0, 1, 1, 0, 1], [(0, 17), (17, 150), (150, 150), (150, 299), (299, 300)]):
        ranks[rank].update(preds[start:stop], target[start:stop], groups[start:stop])
    ranks[0].merge_state(ranks[1])
    merged = ranks[0].compute()
    assert list(merged) == list(one.compute())
    _assert_same(merged, expected)


def test_intervals_do_not_depend_on_the_order_of_the_images():
    preds, target, groups = _random(12, 120, 3, 2)
    order = torch.randperm(120, generator=torch.Generator().manual_seed(0))
    first = group_fairness_intervals(preds, target, groups, 3, n_bootstrap=100)
    second = group_fairness_intervals(preds[order], target[order], groups[order], 3, n_bootstrap=100)
    _assert_same(second, first)


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_is_seeded_and_brackets_the_estimate():
    preds, target, groups = _random(13, 400, 3, 3)
    args = (preds, target, groups, 3)
    for method in ("bca", "percentile"):
        first = group_fairness_intervals(*args, n_bootstrap=300, seed=1, method=method)
        _assert_same(group_fairness_intervals(*args, n_bootstrap=300, seed=1, method=method), first)
        other = group_fairness_intervals(*args, n_bootstrap=300, seed=2, method=method)
        assert not torch.equal(other["worst_group_gap"], first["worst_group_gap"])
        observed = group_fairness(*args)
        for name in ("accuracy", "worst_group_accuracy", "demographic_parity_difference_max"):
            low, high = first[name].tolist()
            assert low <= observed[name].item() <= high, (method, name, low, high)
    narrow = group_fairness_intervals(*args, n_bootstrap=300, confidence=0.5, method="percentile")["accuracy"]
    wide = group_fairness_intervals(*args, n_bootstrap=300, confidence=0.99, method="percentile")["accuracy"]
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


def test_resampling_counts_equals_resampling_the_images_within_each_group():
    """The percentile interval from counts equals the one from images drawn with the same indices: each group's
    images listed in cell order, ``randint(n_g, (B, n_g))`` per group in turn (one chunk at this size)."""
    preds, target, groups = _random(14, 90, 3, 3)
    n_bootstrap, seed = 64, 9
    cells = target * 3 + preds
    generator = torch.Generator().manual_seed(seed)
    members = [
        torch.nonzero(groups == g).flatten()[torch.sort(cells[groups == g], stable=True).indices] for g in range(3)
    ]
    drawn = [m[torch.randint(m.numel(), (n_bootstrap, m.numel()), generator=generator)] for m in members]
    replicates = []
    for b in range(n_bootstrap):
        images = torch.cat([d[b] for d in drawn])
        stats = group_fairness(preds[images], target[images], groups[images], 3, 3)
        replicates.append(torch.stack([stats["worst_group_gap"], stats["equalized_odds_difference_mean"]]))
    replicates = torch.stack(replicates)  # (B, 2)
    expected = torch.nanquantile(replicates, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0).T
    out = group_fairness_intervals(preds, target, groups, 3, 3, n_bootstrap=n_bootstrap, seed=seed, method="percentile")
    torch.testing.assert_close(out["worst_group_gap"], expected[0], rtol=0, atol=TOL)
    torch.testing.assert_close(out["equalized_odds_difference_mean"], expected[1], rtol=0, atol=TOL)


def test_bca_with_a_one_image_group_and_an_undefined_statistic():
    preds, target, groups = torch.tensor([0, 1, 1, 0, 1]), torch.tensor([0, 1, 0, 0, 1]), torch.tensor([0, 0, 0, 0, 1])
    out = group_fairness_intervals(preds, target, groups, 2, n_bootstrap=200)
    assert out["demographic_parity_difference"].isfinite().all()
    assert out["equal_opportunity_gap"][0].isnan().all()  # group 1 has no image of class 0: no TPR, no gap


# ----------------------------------------------------------------------------- undefined rates
def _group_without_positives() -> tuple[Tensor, Tensor, Tensor]:
    """Groups 0 and 1 hold two images of each class; group 2 only two of class 0 (no TPR of class 1, no FPR of
    class 0). TPR of class 1: 1, 1/2, undefined; FPR of class 1: 1/2, 0, 1/2."""
    target = torch.tensor([0, 0, 1, 1, 0, 0, 1, 1, 0, 0])
    preds = torch.tensor([0, 1, 1, 1, 0, 0, 0, 1, 0, 1])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    return preds, target, groups


def test_a_group_without_positives_is_left_out_and_counted_by_hand():
    out = group_fairness(*_group_without_positives(), num_classes=2)
    assert out["equal_opportunity_gap"][1].item() == 0.5  # max(1, 1/2) - min(1, 1/2): group 2 left out
    assert out["equalized_odds_difference"][1].item() == 0.5  # max(TPR spread 1/2, FPR spread 1/2)
    assert out["groups_without_positives"].item() == 1 and out["groups_without_negatives"].item() == 1
    assert out["predicted_classes"].item() == 2


def test_undefined_rates_zero_is_fairlearns_convention():
    preds, target, groups = _group_without_positives()
    out = group_fairness(preds, target, groups, num_classes=2, undefined_rates="zero")
    binary = dict(y_true=target.numpy(), y_pred=preds.numpy(), sensitive_features=groups.numpy())
    assert out["equal_opportunity_gap"][1].item() == fairlearn_metrics.equal_opportunity_difference(**binary) == 1.0
    assert out["equalized_odds_difference"][1].item() == fairlearn_metrics.equalized_odds_difference(**binary)
    assert out["groups_without_positives"].item() == 1  # counted whichever the convention
    left_out = 0
    for seed in range(4):  # random cases where small groups miss classes
        preds, target, groups = _random(seed, 10, 3, 3)
        out = group_fairness(preds, target, groups, 3, 3, undefined_rates="zero")
        left_out += out["groups_without_positives"].item()
        for c in range(3):
            binary = dict(y_true=(target == c).numpy().astype(int), y_pred=(preds == c).numpy().astype(int),
                          sensitive_features=groups.numpy())  # fmt: skip
            assert abs(out["equal_opportunity_gap"][c].item() - fairlearn_metrics.equal_opportunity_difference(**binary)) <= TOL  # fmt: skip
            assert abs(out["equalized_odds_difference"][c].item() - fairlearn_metrics.equalized_odds_difference(**binary)) <= TOL  # fmt: skip
    assert left_out > 0  # the random cases hold groups without a class
    metric = GroupFairness(2, 3, n_bootstrap=50, undefined_rates="zero")
    metric.update(*_group_without_positives())
    assert metric.compute()["equal_opportunity_gap"][1].item() == 1.0
    with pytest.raises(ConfigError, match="`undefined_rates` to be one of leave_out, zero but got 'nan'"):
        group_fairness(*_group_without_positives(), num_classes=2, undefined_rates="nan")
