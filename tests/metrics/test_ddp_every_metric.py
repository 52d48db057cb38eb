"""Every ``torchmetrics.Metric`` exported in ``vlbias.metrics.__all__`` on two gloo processes, in ONE spawn.

Each class has a recipe below (a factory with small options, and the update calls of ``N_BATCHES``
batches drawn from a seeded generator). On the two spawned processes every recipe is run twice:

* ``"split"``: the batches round-robin over the ranks (rank r takes batches r, r + 2, ...); some recipes
  put a whole state on one rank only (e.g. WEAT's attribute sets), so the other rank gathers an empty one;
* ``"rank1_empty"``: rank 0 takes every batch and rank 1 never calls ``update`` (an uneven last shard).

On each rank and in each scenario, ``compute`` (a tensor, a tuple or a dict) must equal the
single-process value of all batches, tensor by tensor (``atol=1e-6, rtol=0``, NaN equal to NaN).

:class:`~vlbias.metrics.BiasScore` is a ``CompositionalMetric`` without rows of its own: its recipes
update its two association metrics (``metric_a``, ``metric_b``), which sync themselves in ``compute``;
it is covered twice, with ``"sum"`` components (LanguageAssociation) and ``"cat"`` ones (VisualAssociation).

``test_every_exported_metric_has_a_recipe`` (no spawn) fails, naming the class, when a metric is exported
without a recipe here.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import torch
import torch.distributed as dist
from torch import Tensor
from torch.testing import assert_close
from torchmetrics import Metric

import vlbias.metrics as metrics
from tests.metrics.ddp import WORLD_SIZE, results_per_rank

N_BATCHES = 4
SCENARIOS = ("split", "rank1_empty")

# A batch is a list of update calls ``(target, kwargs)``: target "" is the metric itself, otherwise the
# attribute holding the component metric to update (``metric_a`` / ``metric_b`` of a CompositionalMetric).
Batch = list[tuple[str, dict[str, Any]]]


class Recipe(NamedTuple):
    make: Callable[[], Metric]
    batches: Callable[[torch.Generator], list[Batch]]


def _rand(g: torch.Generator, *shape: int) -> Tensor:
    return torch.rand(*shape, generator=g, dtype=torch.float64)


def _randn(g: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _ints(g: torch.Generator, high: int, n: int) -> Tensor:
    return torch.randint(0, high, (n,), generator=g)


def _unit(g: torch.Generator, n: int, dim: int, dtype: torch.dtype = torch.float64) -> Tensor:
    rows = _randn(g, n, dim)
    return (rows / rows.norm(dim=1, keepdim=True)).to(dtype)


def _entities(g: torch.Generator, n: int, num_entities: int = 3) -> Tensor:
    # every batch holds every entity at least once, so no entity's score is NaN
    return torch.cat([torch.arange(num_entities), _ints(g, num_entities, n - num_entities)])


# ----------------------------------------------------------------------------- batches per class
def _language_association(g: torch.Generator) -> list[Batch]:
    # per image: entity index, log P(E|g, I), log P(E|p, I)
    return [
        [("", dict(entity=_entities(g, 5), log_p_agent=_rand(g, 5).log(), log_p_neutral=_rand(g, 5).log()))]
        for _ in range(N_BATCHES)
    ]


_NO_IMAGE = torch.tensor([0.2, 0.05, 0.1], dtype=torch.float64).log()  # log P(E|p) per entity, repeated per row


def _visual_rows(g: torch.Generator) -> dict[str, Tensor]:
    entity = _entities(g, 5)
    return dict(entity=entity, log_p_image=_rand(g, 5).log(), log_p_no_image=_NO_IMAGE[entity])


def _bias_score_language(g: torch.Generator) -> list[Batch]:
    # BiasScore has no rows: each batch updates both components (first group, second group)
    first, second = _language_association(g), _language_association(g)
    return [[("metric_a", a[0][1]), ("metric_b", b[0][1])] for a, b in zip(first, second, strict=True)]


def _bias_score_visual(g: torch.Generator) -> list[Batch]:
    # the second group's images come only in batches 1 and 3: in "split" rank 0 has none of them
    return [
        [("metric_a", _visual_rows(g))] + ([("metric_b", _visual_rows(g))] if i % 2 else []) for i in range(N_BATCHES)
    ]


def _pretraining_association(g: torch.Generator) -> list[Batch]:
    # entity index, log P_VL(E|g) without an image, log P_L(E|g) of the text-only model
    return [
        [("", dict(entity=_entities(g, 4), log_p_vl=_rand(g, 4).log(), log_p_l=_rand(g, 4).log()))]
        for _ in range(N_BATCHES)
    ]


def _language_bias_interval(g: torch.Generator) -> list[Batch]:
    # order: the rows' global place (distinct over all batches), as a stimulus index would be
    return [
        [
            (
                "",
                dict(
                    order=torch.arange(6 * i, 6 * i + 6),
                    entity=_entities(g, 6),
                    log_p_first=_rand(g, 6).log(),
                    log_p_second=_rand(g, 6).log(),
                ),
            )
        ]
        for i in range(N_BATCHES)
    ]


def _visual_bias_interval(g: torch.Generator) -> list[Batch]:
    # group: 0 for an image of the first group, 1 for the second; every batch has both for every entity
    group = torch.tensor([0, 0, 0, 1, 1, 1, 0, 1])
    entity = torch.tensor([0, 1, 2, 0, 1, 2, 0, 2])
    return [
        [("", dict(order=torch.arange(8 * i, 8 * i + 8), entity=entity, group=group, log_p_image=_rand(g, 8).log()))]
        for i in range(N_BATCHES)
    ]


def _counterbias_score(g: torch.Generator) -> list[Batch]:
    # bias (N,) with a NaN (an excluded item), target index (N,), direction +1 (B0) / -1 (B1)
    batches = []
    for _ in range(N_BATCHES):
        bias = _randn(g, 6)
        bias[0] = float("nan")
        batches.append([("", dict(bias=bias, target=_entities(g, 6), direction=_ints(g, 2, 6) * 2 - 1))])
    return batches


def _counterbias_uncertainty(g: torch.Generator) -> list[Batch]:
    # bias (N, K=2 templates), NaN where excluded
    batches = []
    for _ in range(N_BATCHES):
        bias = _randn(g, 5, 2)
        bias[1, 0] = float("nan")
        batches.append([("", dict(bias=bias, target=_entities(g, 5), direction=_ints(g, 2, 5) * 2 - 1))])
    return batches


def _grounded_congruence(g: torch.Generator) -> list[Batch]:
    # paired scores per target: s(x, A_x, B_x), s(x, A_y, B_y) (and the same for y); X only in batches 0, 1,
    # Y only in 2, 3, so in "split" each rank holds a part of each and here 2^8 sign vectors > exact_limit
    return [[("", {f"{s}_own": _randn(g, 4) + 0.3, f"{s}_other": _randn(g, 4)})] for s in "xxyy"]


def _group_fairness(g: torch.Generator) -> list[Batch]:
    # predicted and true class (3 classes, class 2 harmful) and group (2) of 6 images per batch; batch 0 holds
    # both groups, so in "split" each rank's counts lack some cells
    return [
        [("", dict(preds=_ints(g, 3, 6), target=_ints(g, 2, 6), groups=torch.tensor([0, 1, 0, 1, 0, 0])))]
        for _ in range(N_BATCHES)
    ]


def _itm(g: torch.Generator) -> list[Batch]:
    # match probabilities of n targets with every attribute of A (|A| = 4) and of B (|B| = 3); |X| = |Y| = 6
    return [[("", dict(match_a=_rand(g, 3, 4), match_b=_rand(g, 3, 3), target=t))] for t in "xyxy"]


def _weat(g: torch.Generator) -> list[Batch]:
    # embeddings (n, 5) in the metric's float32; in "split" A and B land on rank 0 only, |X| = |Y| = 5
    return [
        [("", dict(a=_unit(g, 3, 5, torch.float32), b=_unit(g, 4, 5, torch.float32)))],
        [("", dict(x=_unit(g, 3, 5, torch.float32)))],
        [("", dict(y=_unit(g, 5, 5, torch.float32)))],
        [("", dict(x=_unit(g, 2, 5, torch.float32)))],
    ]


def _zero_shot(g: torch.Generator) -> list[Batch]:
    # (batch_images, n_words) scores
    return [[("", dict(scores=_rand(g, 3, 6)))] for _ in range(N_BATCHES)]


def _cosine_zero_shot(g: torch.Generator) -> list[Batch]:
    # words (m, D) with their positions arrive only in batches 0 and 2 (rank 0 in "split"), images (n, D) everywhere
    words = _unit(g, 6, 4)
    return [
        [("", dict(images=_unit(g, 2, 4), words=words[[4, 0, 2]], positions=torch.tensor([4, 0, 2])))],
        [("", dict(images=_unit(g, 3, 4)))],
        [("", dict(words=words[[1, 5, 3]], positions=torch.tensor([1, 5, 3])))],
        [("", dict(images=_unit(g, 1, 4)))],
    ]


def _vlstereoset_scores(g: torch.Generator) -> list[Batch]:
    # caption scores (N, 3) as (S_s, S_a, S_i), anti flags (N,), category index (N,); "religion" (3) never occurs
    return [
        [("", dict(scores=_randn(g, 6, 3), anti=_ints(g, 2, 6).bool(), category=_ints(g, 3, 6)))]
        for _ in range(N_BATCHES)
    ]


def _vlstereoset_shift(g: torch.Generator) -> list[Batch]:
    # three (N, 2) (stereotype, anti-stereotype) score pairs
    return [
        [("", dict(original=_randn(g, 4, 2), neutral=_randn(g, 4, 2), neutral_blank=_randn(g, 4, 2)))]
        for _ in range(N_BATCHES)
    ]


def _retrieval_recall(g: torch.Generator) -> list[Batch]:
    # 6 images x 12 captions, integer scores (ties); image 5 has no caption. Text queries (image rows) come
    # in batches 0 and 2, caption queries (columns) in 1 and 3; batch 3 repeats caption 0 (a padded shard)
    caption_to_image = torch.arange(12) % 5
    scores = torch.randint(0, 4, (6, 12), generator=g).double()
    return [
        [("", dict(scores=scores[:3], query_ids=torch.arange(3), caption_to_image=caption_to_image, direction="text"))],
        [
            (
                "",
                dict(
                    scores=scores.T[:7], query_ids=torch.arange(7), caption_to_image=caption_to_image, direction="image"
                ),
            )
        ],
        [
            (
                "",
                dict(
                    scores=scores[3:], query_ids=torch.arange(3, 6), caption_to_image=caption_to_image, direction="text"
                ),
            )
        ],
        [
            (
                "",
                dict(
                    scores=scores.T[[7, 8, 9, 10, 11, 0]],
                    query_ids=torch.tensor([7, 8, 9, 10, 11, 0]),
                    caption_to_image=caption_to_image,
                    direction="image",
                ),
            )
        ],
    ]


def _ranking_bias(g: torch.Generator) -> list[Batch]:
    # (queries, 10 images) scores; attributes 0 / 1 / 2 (man, woman, neither) of the gallery
    attributes = torch.tensor([0, 1, 2, 0, 1, 0, 1, 1, 2, 0])
    return [[("", dict(scores=_rand(g, 3, 10), attributes=attributes))] for _ in range(N_BATCHES)]


def _precision(g: torch.Generator) -> list[Batch]:
    # (queries, 10 images) scores and whether each image shows the query's concept
    return [[("", dict(scores=_rand(g, 3, 10), relevant=_rand(g, 3, 10) > 0.5))] for _ in range(N_BATCHES)]


def _bbq(g: torch.Generator) -> list[Batch]:
    # 6 items a batch, half ambiguous (right answer: unknown), two categories; item indices in batch order
    batches = []
    for number in range(N_BATCHES):
        ambiguous = torch.tensor([True, False] * 3)
        correct = torch.where(ambiguous, 2, _ints(g, 2, 6))
        items = dict(chosen=_ints(g, 3, 6), correct=correct, ambiguous=ambiguous, category=_ints(g, 2, 6),
                     index=torch.arange(6 * number, 6 * number + 6))  # fmt: skip
        batches.append([("", items)])
    return batches


def _position(g: torch.Generator) -> list[Batch]:
    # 5 items a batch of 2 or 3 options: a chosen position per shown rotation, -1 past the item's options
    batches = []
    for _ in range(N_BATCHES):
        n_options = 2 + _ints(g, 2, 5)
        positions = (_rand(g, 5, 3) * n_options[:, None]).long()
        positions[:, 2] = torch.where(n_options == 3, positions[:, 2], -1)
        batches.append([("", dict(positions=positions, n_options=n_options))])
    return batches


def _counterfactual(g: torch.Generator) -> list[Batch]:
    # a set of 4 images a batch (sets 0..3; in "split" each rank holds two): options 0-2 of a vocabulary of 4, set 2
    # offers options 1-3 in 3 of 3 columns and names no "unclear" option; gender (2 values) x race (2 values)
    batches = []
    for number in range(N_BATCHES):
        probabilities = _rand(g, 4, 3) + 0.1
        probabilities = probabilities / probabilities.sum(dim=1, keepdim=True)
        options = torch.tensor([[1, 2, 3]] * 4 if number == 2 else [[0, 1, 2]] * 4)
        unknown = torch.full((4,), -1 if number == 2 else 2)
        attributes = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])
        rows = dict(probabilities=probabilities, set_index=torch.full((4,), number), unknown_option=unknown,
                    options=options, attributes=attributes)  # fmt: skip
        batches.append([("", rows)])
    return batches


def _counterfactual_protocols(g: torch.Generator) -> list[Batch]:
    # a set of 4 images a batch: options yes, no, unclear (sets 0, 1, 3: question 0, 1, 0) or yes, no, maybe (set 2:
    # question 1, no "unclear" option); gender (2 values) x race (2 values)
    batches = []
    for number in range(N_BATCHES):
        probabilities = _rand(g, 4, 3) + 0.1
        probabilities = probabilities / probabilities.sum(dim=1, keepdim=True)
        options = torch.tensor([[0, 1, 3]] * 4 if number == 2 else [[0, 1, 2]] * 4)
        rows = dict(probabilities=probabilities, set_index=torch.full((4,), number),
                    unknown_option=torch.full((4,), -1 if number == 2 else 2), options=options,
                    attributes=torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]),
                    question=torch.full((4,), number % 2))  # fmt: skip
        batches.append([("", rows)])
    return batches


def _group_scores(g: torch.Generator) -> list[Batch]:
    # a set of 4 images a batch (sets 0..3, given in reverse order): two scores, the second unscored (NaN) on one
    # image of each set; groupings group (4 values) and gender (2 values); in set 3 one image's gender is unknown
    batches = []
    for number in range(N_BATCHES):
        scores = _rand(g, 4, 2)
        scores[number, 1] = float("nan")
        codes = torch.tensor([[0, 0], [1, 1], [2, 0], [3, 1]])
        if number == 3:
            codes[0, 1] = -1
        batches.append([("", dict(scores=scores, set_index=torch.full((4,), 3 - number), codes=codes))])
    return batches


_TEST = dict(n_permutations=50, n_bootstrap=20, seed=3)  # few random draws, fixed seed

RECIPES: dict[str, Recipe] = {
    "BBQScores": Recipe(lambda: metrics.BBQScores(["gender", "race"], n_bootstrap=20, confidence=0.9, seed=3), _bbq),
    "BiasScore[LanguageAssociation]": Recipe(
        lambda: metrics.BiasScore(
            metrics.LanguageAssociation(num_entities=3), metrics.LanguageAssociation(num_entities=3)
        ),
        _bias_score_language,
    ),
    "BiasScore[VisualAssociation]": Recipe(
        lambda: metrics.BiasScore(metrics.VisualAssociation(num_entities=3), metrics.VisualAssociation(num_entities=3)),
        _bias_score_visual,
    ),
    "CosineZeroShotRanking": Recipe(lambda: metrics.CosineZeroShotRanking(n_words=6, top_k=3), _cosine_zero_shot),
    "CounterBiasScore": Recipe(lambda: metrics.CounterBiasScore(n_targets=3), _counterbias_score),
    "CounterBiasUncertainty": Recipe(
        lambda: metrics.CounterBiasUncertainty(n_targets=3, n_templates=2, **_TEST), _counterbias_uncertainty
    ),
    "CounterfactualAnswers": Recipe(
        lambda: metrics.CounterfactualAnswers(
            ["a", "b", "c", "d"], {"gender": ["man", "woman"], "race": ["black", "white"]}, max_options=3, **_TEST
        ),
        _counterfactual,
    ),
    "CounterfactualProtocols": Recipe(
        lambda: metrics.CounterfactualProtocols(
            ["yes", "no", "unclear", "maybe"],
            {"gender": ["man", "woman"], "race": ["black", "white"]},
            ["Is this person kind?", "Is this person rich?"],
            max_options=3,
            **_TEST,
        ),
        _counterfactual_protocols,
    ),
    "GroundedCongruenceTest": Recipe(
        lambda: metrics.GroundedCongruenceTest(exact_limit=16, **_TEST), _grounded_congruence
    ),
    "GroupFairness": Recipe(
        lambda: metrics.GroupFairness(num_classes=3, num_groups=2, harmful_classes=(2,), n_bootstrap=20, seed=3),
        _group_fairness,
    ),
    "GroupScores": Recipe(
        lambda: metrics.GroupScores(
            ["warmth", "sentiment"], {"group": ["a", "b", "c", "d"], "gender": ["m", "w"]}, **_TEST
        ),  # fmt: skip
        _group_scores,
    ),
    "ITMEffectSize": Recipe(lambda: metrics.ITMEffectSize(top_k=2), _itm),
    "ITMTest": Recipe(lambda: metrics.ITMTest(top_k=2, exact_limit=100, **_TEST), _itm),  # C(12, 6) > 100: random test
    "LanguageAssociation": Recipe(lambda: metrics.LanguageAssociation(num_entities=3), _language_association),
    "LanguageBiasInterval": Recipe(
        lambda: metrics.LanguageBiasInterval(num_entities=3, n_bootstrap=20, seed=3), _language_bias_interval
    ),
    "PositionPreference": Recipe(lambda: metrics.PositionPreference(max_options=3), _position),
    "PretrainingAssociation": Recipe(lambda: metrics.PretrainingAssociation(num_entities=3), _pretraining_association),
    "PrecisionAtK": Recipe(lambda: metrics.PrecisionAtK(k=4, n_bootstrap=20, seed=3), _precision),
    "RankingBias": Recipe(lambda: metrics.RankingBias(k=4, num_attributes=3, n_bootstrap=20, seed=3), _ranking_bias),
    "RetrievalRecall": Recipe(lambda: metrics.RetrievalRecall(ks=(1, 3)), _retrieval_recall),
    "VLStereoSetScores": Recipe(lambda: metrics.VLStereoSetScores(n_bootstrap=20, seed=3), _vlstereoset_scores),
    "VLStereoSetShift": Recipe(lambda: metrics.VLStereoSetShift(n_bootstrap=20, seed=3), _vlstereoset_shift),
    "VisualAssociation": Recipe(
        lambda: metrics.VisualAssociation(num_entities=3), lambda g: [[("", _visual_rows(g))] for _ in range(N_BATCHES)]
    ),
    "VisualBiasInterval": Recipe(
        lambda: metrics.VisualBiasInterval(num_entities=3, n_bootstrap=20, seed=3), _visual_bias_interval
    ),
    "WEATEffectSize": Recipe(lambda: metrics.WEATEffectSize(), _weat),
    "WEATTest": Recipe(lambda: metrics.WEATTest(exact_limit=100, **_TEST), _weat),  # C(10, 5) > 100: random test
    "ZeroShotRanking": Recipe(lambda: metrics.ZeroShotRanking(n_words=6, top_k=3), _zero_shot),
}


# ----------------------------------------------------------------------------- running a recipe
def _batches(name: str) -> list[Batch]:
    generator = torch.Generator().manual_seed(sum(map(ord, name)))  # the same batches in every process
    batches = RECIPES[name].batches(generator)
    assert len(batches) == N_BATCHES, name
    return batches


def _value(name: str, indices) -> Any:
    """``compute`` of recipe ``name`` after updating with the batches at ``indices``."""
    metric, batches = RECIPES[name].make(), _batches(name)
    for index in indices:
        for target, kwargs in batches[index]:
            (getattr(metric, target) if target else metric).update(**kwargs)
    return metric.compute()


def _indices(scenario: str, rank: int) -> range:
    if scenario == "split":
        return range(rank, N_BATCHES, WORLD_SIZE)
    return range(N_BATCHES) if rank == 0 else range(0)  # "rank1_empty"


def run_every_recipe(_harness_indices) -> dict[str, dict[str, Any]]:
    """On each rank, every recipe in every scenario (the harness's batch indices are not used: each
    scenario decides which batches this rank takes). A failure is returned as its message, so one class
    does not hide the others (every rank still goes through the same collectives: ``sync`` runs before
    ``compute``'s body, and ``update`` errors would already fail the single-process reference). A state
    whose empty stand-in does not match the other rank's dtype or shape aborts the spawn instead (gloo:
    "Received data size doesn't match"): every test of the module then errors in the fixture."""
    torch.set_num_threads(1)
    rank = dist.get_rank() if dist.is_initialized() else 0
    results: dict[str, dict[str, Any]] = {}
    for name in RECIPES:
        results[name] = {}
        for scenario in SCENARIOS:
            # a collective mismatch aborts the process in gloo's C++ code: this line in the captured stderr names the culprit
            print(f"rank {rank}: {name} ({scenario})", file=sys.stderr, flush=True)
            try:
                results[name][scenario] = _value(name, _indices(scenario, rank))
            except Exception as error:  # noqa: BLE001 - reported by the test
                results[name][scenario] = f"{type(error).__name__}: {error}"
    return results


def _assert_same(actual: Any, expected: Any, where: str) -> None:
    if isinstance(actual, str):
        raise AssertionError(f"{where} raised {actual}")
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), (
            f"{where}: keys {actual!r} != {list(expected)}"
        )
        for key in expected:
            _assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (
            f"{where}: {actual!r} != {expected!r}"
        )
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            _assert_same(got, want, f"{where}[{index}]")
    else:
        assert isinstance(expected, Tensor), f"{where}: expected a tensor but the reference is {expected!r}"
        assert_close(actual, expected, atol=1e-6, rtol=0, equal_nan=True, msg=lambda m: f"{where}: {m}")


def _tensors(value: Any) -> list[Tensor]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return [value]


# ----------------------------------------------------------------------------- tests
def test_every_exported_metric_has_a_recipe():
    exported = {
        name
        for name in metrics.__all__
        if inspect.isclass(getattr(metrics, name)) and issubclass(getattr(metrics, name), Metric)
    }
    covered = {type(recipe.make()).__name__ for recipe in RECIPES.values()}
    missing = sorted(exported - covered)
    assert not missing, f"exported metrics without a DDP recipe in {__name__}.RECIPES: {', '.join(missing)}"


@pytest.fixture(scope="module")
def ddp_results() -> list[dict[str, dict[str, Any]]]:
    """Every recipe on both ranks: one spawn of two processes for the whole module."""
    return results_per_rank(run_every_recipe, N_BATCHES)


@pytest.mark.parametrize("name", list(RECIPES))
def test_two_processes_match_one(name, ddp_results):
    expected = _value(name, range(N_BATCHES))
    assert any(bool(t.isfinite().any()) for t in _tensors(expected)), f"{name}: the reference is all NaN"
    for rank, result in enumerate(ddp_results):
        for scenario in SCENARIOS:
            _assert_same(result[name][scenario], expected, f"{name} ({scenario}, rank {rank})")


def test_scenarios_differ_from_one_rank_alone():
    """The "split" data is not trivially the same on both ranks: a rank's own batches give another value."""
    for name in ("LanguageAssociation", "ZeroShotRanking", "VLStereoSetShift"):
        alone, everything = _value(name, _indices("split", 0)), _value(name, range(N_BATCHES))
        alone, everything = _tensors(alone)[0], _tensors(everything)[0]
        assert not torch.allclose(alone, everything, equal_nan=True), name
