"""MI-guided dimension pruning (MMBias Sec. 6, Algorithm 1): the closed-form leave-one-out effect sizes,
the ranked and greedy selections against naive loops, the MI threshold, and the refusals."""

import json

import pytest
import torch

from vlbias.errors import ConfigError, InputError
from vlbias.experiments.bench.prune import bench_prune
from vlbias.experiments.command_line import run
from vlbias.mitigation import (
    BiasTest,
    effect_size_without,
    leave_one_out_effect_sizes,
    mutual_information,
    prune_dimensions,
    select_dimensions,
)
from vlbias.mitigation.pruning import OBJECTIVES

F64 = torch.float64


def random_test(name: str, dim: int, seed: int, n_images: int = 20, n_words: int = 30) -> BiasTest:
    """Un-normalised embeddings of varied norms, X and Y shifted apart along a random direction that A shares."""
    g = torch.Generator().manual_seed(seed)
    direction = torch.randn(dim, generator=g, dtype=F64)
    x = torch.randn(n_images, dim, generator=g, dtype=F64) + 0.3 * direction
    y = torch.randn(n_images, dim, generator=g, dtype=F64) * 2.0
    a = torch.randn(n_words, dim, generator=g, dtype=F64) + 0.3 * direction
    b = torch.randn(n_words, dim, generator=g, dtype=F64) * 0.5
    return BiasTest(name, x, y, a, b)


def naive_objective(tests, removed, objective="mean_abs"):
    d = torch.stack([effect_size_without(*t[1:], torch.tensor(removed, dtype=torch.long)) for t in tests])
    return OBJECTIVES[objective](d)


def test_leave_one_out_equals_naive_recomputation_at_512_dims():
    test = random_test("t", 512, seed=0)
    fast = leave_one_out_effect_sizes(*test[1:])
    slow = torch.stack([effect_size_without(*test[1:], torch.tensor([k])) for k in range(512)])
    assert fast.dtype == F64 and fast.shape == (512,)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-9)


def test_leave_one_out_ignores_each_vectors_scale():
    test = random_test("t", 32, seed=1, n_images=5, n_words=4)
    scales = torch.linspace(0.1, 10, 5, dtype=F64)[:, None]
    scaled = (test.x * scales, test.y / scales, test.a * 3, test.b)
    torch.testing.assert_close(leave_one_out_effect_sizes(*scaled), leave_one_out_effect_sizes(*test[1:]))


def naive_ranked(tests, mi, theta, n):
    """Algorithm 1 written as the pseudo-code: one dimension at a time."""
    psi_all = naive_objective(tests, [])
    found = []
    for d in range(mi.numel()):
        if mi[d] < theta:
            psi = naive_objective(tests, [d])
            if psi < psi_all:
                found.append((float(psi), d))
    return [d for _, d in sorted(found)[:n]]


def naive_greedy(tests, mi, theta, n):
    removed = []
    for _ in range(n):
        current = naive_objective(tests, removed)
        scores = {
            d: naive_objective(tests, removed + [d]) for d in range(mi.numel()) if d not in removed and mi[d] < theta
        }
        best = min((s, d) for d, s in scores.items() if s < current)
        removed.append(best[1])
    return removed


@pytest.mark.parametrize(("strategy", "naive"), [("ranked", naive_ranked), ("greedy", naive_greedy)])
def test_selection_equals_its_naive_loop(strategy, naive):
    tests = [
        random_test("one", 24, seed=2, n_images=6, n_words=5),
        random_test("two", 24, seed=3, n_images=7, n_words=4),
    ]
    mi = torch.rand(24, generator=torch.Generator().manual_seed(4), dtype=F64)
    result = select_dimensions(tests, mi, n_remove=3, strategy=strategy, theta=0.8)
    assert result.removed == naive(tests, mi, 0.8, 3)
    assert result.kept == sorted(set(range(24)) - set(result.removed))
    assert result.objective_after == pytest.approx(float(naive_objective(tests, result.removed)), abs=1e-12)
    if strategy == "greedy":  # each score is the objective once that dimension and those before it are gone
        expected = [float(naive_objective(tests, result.removed[: i + 1])) for i in range(3)]
        assert result.removal_scores == pytest.approx(expected, abs=1e-9)


def planted(bias_dim: int, size: float, seed: int, dim: int = 8) -> BiasTest:
    """X = Y + size·e_bias, A = words with a 1 in ``bias_dim``, B = words without; the rest in dims 2..7."""
    g = torch.Generator().manual_seed(seed)

    def neutral(n):
        v = torch.zeros(n, dim, dtype=F64)
        v[:, 2:] = torch.randn(n, dim - 2, generator=g, dtype=F64)
        return v

    y = neutral(6)
    x = y.clone()
    x[:, bias_dim] = size
    a = neutral(5)
    a[:, bias_dim] = 1.0
    return BiasTest(f"dim{bias_dim}", x, y, a, neutral(5))


def test_algorithm_1_on_a_planted_case():
    """Test ``dim0`` is biased only through dimension 0 and test ``dim1`` only through dimension 1 (their
    vectors are 0 there otherwise). Removing dimension 0 makes X and Y of ``dim0`` identical (d = 0) and
    leaves ``dim1`` untouched, so ψ_0 = |d_dim1| / 2; likewise ψ_1 = |d_dim0| / 2. With |d_dim0| > |d_dim1|
    Algorithm 1 removes 0 then 1; with dimension 0's MI above Θ it removes 1."""
    tests = [planted(0, 2.0, seed=1), planted(1, 1.0, seed=2)]
    d = {t.name: float(effect_size_without(*t[1:], torch.arange(0))) for t in tests}
    assert d["dim0"] > d["dim1"] > 0
    result = select_dimensions(tests, torch.zeros(8), n_remove=2, theta=1.0)
    assert result.removed == [0, 1]
    assert result.removal_scores == pytest.approx([d["dim1"] / 2, d["dim0"] / 2], abs=1e-12)
    assert result.objective_before == pytest.approx((d["dim0"] + d["dim1"]) / 2)
    assert result.effect_sizes_after["dim0"] == pytest.approx(0, abs=1e-12)
    assert result.effect_sizes_after["dim1"] == pytest.approx(0, abs=1e-12)

    guarded = select_dimensions(tests, torch.tensor([0.9] + [0.1] * 7), n_remove=1, theta=0.5)
    assert guarded.removed == [1] and guarded.n_candidates == 7


def test_negative_effect_sizes_count_by_magnitude():
    """Swapping X and Y negates d; with the |d| objective the same dimensions are removed."""
    tests = [
        random_test("one", 16, seed=5, n_images=6, n_words=5),
        random_test("two", 16, seed=6, n_images=6, n_words=5),
    ]
    flipped = [tests[0], BiasTest("two", tests[1].y, tests[1].x, tests[1].a, tests[1].b)]
    mi = torch.zeros(16)
    for objective in OBJECTIVES:
        plain = select_dimensions(tests, mi, 3, theta=1.0, objective=objective)
        swapped = select_dimensions(flipped, mi, 3, theta=1.0, objective=objective)
        assert swapped.effect_sizes_before["two"] == pytest.approx(-plain.effect_sizes_before["two"])
        assert swapped.removed == plain.removed


def labelled_images(n: int = 200, dim: int = 6, seed: int = 0):
    """Dimension 0 is the label plus noise (high MI); the others are noise (MI near 0)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    images = torch.randn(n, dim, generator=g, dtype=F64)
    images[:, 0] += 4 * labels
    return images, labels


def test_mutual_information_is_seeded_and_finds_the_label_dimension():
    images, labels = labelled_images()
    mi = mutual_information(images, labels, seed=3)
    assert mi.shape == (6,) and int(mi.argmax()) == 0 and mi[0] > 0.5 and mi[1:].max() < 0.1
    torch.testing.assert_close(mutual_information(images, labels, seed=3), mi, rtol=0, atol=0)


def test_theta_as_value_and_as_quantile():
    images, labels = labelled_images()
    tests = [BiasTest("t", images[:100:2], images[1:100:2], images[100:130], images[130:160])]
    mi = mutual_information(images, labels, seed=0)
    by_value = prune_dimensions(tests, images, labels, 1, theta=0.3, seed=0, strategy="greedy")
    assert by_value.theta == 0.3 and by_value.n_candidates == 5 and 0 not in by_value.removed
    assert by_value.seed == 0 and by_value.mutual_information == mi.tolist()
    by_quantile = select_dimensions(tests, mi, 1, theta_quantile=0.5, strategy="greedy")
    assert by_quantile.theta == pytest.approx(float(mi.median() + mi.sort().values[3]) / 2)  # linear, 6 values
    assert by_quantile.theta_quantile == 0.5 and by_quantile.n_candidates == 3


def test_clip_clip_removes_the_highest_mi_dimensions():
    tests = [random_test("t", 10, seed=7, n_images=5, n_words=4)]
    mi = torch.tensor([0.1, 0.9, 0.3, 0.8, 0.0, 0.5, 0.2, 0.4, 0.6, 0.7])
    result = select_dimensions(tests, mi, 0.3, strategy="clip_clip")
    assert result.removed == [1, 3, 9] and result.n_remove == 3
    assert result.removal_scores == pytest.approx([0.9, 0.8, 0.7])
    assert result.theta is None and result.n_candidates is None


def test_result_is_json_serialisable():
    tests = [
        random_test("one", 12, seed=8, n_images=5, n_words=4),
        random_test("two", 12, seed=9, n_images=5, n_words=4),
    ]
    result = select_dimensions(tests, torch.zeros(12), 2, theta=1.0)
    back = json.loads(json.dumps(result.to_dict()))
    assert back["removed"] == result.removed and back["effect_sizes_after"].keys() == {"one", "two"}
    assert back["strategy"] == "ranked" and back["objective"] == "mean_abs"


TESTS = [random_test("t", 8, seed=10, n_images=5, n_words=4)]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"theta": -1.0}, ConfigError, r"Θ = -1 leaves no candidate.*smallest MI is 0"),
        ({"theta_quantile": 0.0}, ConfigError, r"`theta_quantile` in \(0, 1\] but got 0.0"),
        ({"theta": 0.5, "theta_quantile": 0.5}, ConfigError, "exactly one of `theta`"),
        ({}, ConfigError, "exactly one of `theta`"),
        ({"theta": 1.0, "n_remove": 8}, ConfigError, r"count in \[1, 7\] for D = 8 but got 8"),
        ({"theta": 1.0, "n_remove": 1.5}, ConfigError, r"fraction `n_remove` in \(0, 1\).*1.5"),
        ({"theta": 1.0, "n_remove": True}, ConfigError, "int count or a float fraction but got True"),
        ({"theta": 1.0, "strategy": "random"}, ConfigError, "`strategy` to be one of.*'random'"),
        ({"theta": 1.0, "objective": "sum"}, ConfigError, "`objective` to be one of.*'sum'"),
        ({"theta": 1.0, "strategy": "clip_clip"}, ConfigError, "'clip_clip' takes no Θ but got theta=1.0"),
        ({"theta": 1.0, "mutual_info": torch.zeros(7)}, InputError, r"shape \(8,\) but got \(7,\)"),
    ],
)
def test_bad_options_are_refused(kwargs, error, message):
    kwargs = {"mutual_info": torch.linspace(0, 0.7, 8), "n_remove": 2, **kwargs}
    with pytest.raises(error, match=message):
        select_dimensions(TESTS, **kwargs)


@pytest.mark.parametrize("strategy", ["ranked", "greedy"])
def test_more_dimensions_than_candidates_is_refused(strategy):
    """The planted case has exactly two dimensions below the MI threshold, so N = 3 cannot be met."""
    tests = [planted(0, 2.0, seed=1), planted(1, 1.0, seed=2)]
    mi = torch.tensor([0.0, 0.0] + [1.0] * 6)
    with pytest.raises(ConfigError, match=r"N = 3"):
        select_dimensions(tests, mi, 3, theta=0.5, strategy=strategy)


def test_bad_data_is_refused():
    x, y, a, b = TESTS[0][1:]
    broken = x.clone()
    broken[2, 3] = float("nan")
    with pytest.raises(InputError, match=r"Bias test 'bad'.*1 of its 5 rows hold NaN"):
        select_dimensions([BiasTest("bad", broken, y, a, b)], torch.zeros(8), 1, theta=1.0)
    with pytest.raises(InputError, match=r"same dimension but got `x`: 8, `y`: 8, `a`: 7"):
        select_dimensions([BiasTest("t", x, y, a[:, :7], b)], torch.zeros(8), 1, theta=1.0)
    with pytest.raises(InputError, match=r"one embedding dimension but got \{'t': 8, 'u': 6\}"):
        select_dimensions(
            [TESTS[0], BiasTest("u", x[:, :6], y[:, :6], a[:, :6], b[:, :6])], torch.zeros(8), 1, theta=1.0
        )
    with pytest.raises(InputError, match=r"distinct bias-test names but got \['t', 't'\]"):
        select_dimensions(TESTS * 2, torch.zeros(8), 1, theta=1.0)
    images, labels = labelled_images(dim=8)
    with pytest.raises(InputError, match=r"all are \[1\]"):
        prune_dimensions(TESTS, images, torch.ones(200, dtype=torch.long), 1, theta=1.0)
    with pytest.raises(InputError, match=r"one label per image, shape \(200,\), but got \(199,\)"):
        prune_dimensions(TESTS, images, labels[:199], 1, theta=1.0)
    with pytest.raises(InputError, match=r"`images` of shape \(n, 8\).*got \(200, 6\)"):
        prune_dimensions(TESTS, images[:, :6], labels, 1, theta=1.0)
    with pytest.raises(InputError, match=r"removed dimensions in \[0, 8\) but got \[8\]"):
        effect_size_without(x, y, a, b, torch.tensor([8]))


def test_bench_prune_sides_choose_the_same_dimensions(capsys):
    run(bench_prune, ["--dims", "40", "--tests", "2", "--repeats", "1", "--threads", str(torch.get_num_threads())])
    out = capsys.readouterr().out
    assert "same dimensions removed: True (4 dims)" in out and "per-dimension loop" in out
