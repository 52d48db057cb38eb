r"""MMBias association tests (Janghorbani & de Melo, 2023, Sec. 5, Eq. 1) and zero-shot rankings (Fig. 5).

Every test has targets X, Y and attributes A, B, and reports the effect size of Eq. 1,
:math:`d = (\operatorname{mean}_x \phi - \operatorname{mean}_y \phi) / \operatorname{std}_{w \in X \cup Y} \phi`,
with a permutation p-value, a bootstrap interval and Holm / Benjamini–Hochberg adjusted p-values over all
tests of the run, all computed by :mod:`vlbias.metrics`. Kinds of test (``experiments``):

* ``cross_modal`` (Sec. 5.1.2): :math:`d(X^I, Y^I, A^T, B^T)`, :math:`\phi` = cosine of EMBED embeddings;
* ``textual`` (Sec. 5.1.3): :math:`d(X^T, Y^T, A^T, B^T)`, the groups' phrases as targets;
* ``visual`` (Sec. 5.1.3): :math:`d(X^I, Y^I, A^I, B^I)`, the valence images as attributes;
* ``itm`` (Sec. 5.2, MATCH models): :math:`\phi = \sigma(w, A, B)`, the Eq. 1 last row with
  :math:`\sigma(w, a) = \operatorname{sigmoid}(\text{match logit})` over each image's ``top_k`` (15, "the top 15
  most significant matches") highest probabilities within A and within B
  (:func:`~vlbias.metrics.functional.weat.itm_association`); besides ``d`` it reports the
  ``probability_gap`` :math:`\operatorname{mean}_x \sigma - \operatorname{mean}_y \sigma`, the "probabilistic
  difference" of Table 2's ALBEF and ViLT columns. ``top_k`` is lowered to the smaller attribute set when
  that is smaller (recorded per test);
* ``zero_shot`` (Sec. 5.1.1, Fig. 5): per image group, the ``top_k`` attribute words by mean image-word
  score (cosine, or match probability with ``probe="match"``), see :mod:`vlbias.metrics.functional.zero_shot`.

Attributes: ``A`` = the unpleasant words (valence images), ``B`` = the pleasant ones, so that, as in
Table 2, ``d > 0`` means X sits closer to unpleasantness than Y does.

``probe`` chooses the capability: ``"embed"`` (CLIP-like models; default experiments cross_modal,
textual, visual, zero_shot) or ``"match"`` (fusion models without EMBED; itm, zero_shot).

Outputs: metrics ``<test>/effect_size`` (and ``<test>/probability_gap`` for itm) with their intervals and
p-values (raw under the metric's key, adjusted under ``<key>@holm`` and ``<key>@bh``), and
``zero_shot/<group>/pleasant_share`` (share of pleasant words among the top ``k``). The item table has one
row per test (``kind``, groups, effect size, gap, ``p_value``,
``p_holm``, ``p_bh``, ``ci_low``, ``ci_high``, ``n_x``, ``n_y``, ``n_a``, ``n_b``, ``n_truncated``, ``notes``) and one
row per ranked word (``kind = "zero_shot"``: ``group``, ``rank``, ``word``, ``valence``, ``score``, ``notes``): Fig. 5
as a table.
Tests that cannot run (a group without images or phrases, embeddings with NaN/inf, an image that does
not decode) are listed in ``skipped`` with the reason, as are duplicate phrases: a repeat is kept once, and a
phrase in both attribute sets, or in both target sets of a test, is dropped from both (as in the SEAT reader).
With unequal sets (:math:`|X| \ne |Y|`) the permutation test re-partitions :math:`X \cup Y` into sets of the
original sizes (exact where that is cheap), which orders the re-partitions as the effect size does.

Texts the model cannot see as written (:mod:`vlbias.models.unseen_text`), checked once per run for every text
of every set (attribute words, group phrases, ranked words): an empty text and one whose every token is the
unknown token are skipped, with the reason, in each set that holds them (``item`` ``<set>: '<text>'``, ``kind``
``empty`` / ``unknown``). Skipping removes the word from its sets, and only the word: the tests and rankings run
on the words measured (``n_a``, ``n_b``, ``top_k`` and the ranked words are those measured; with
``probe="match"`` the images are matched with the words measured only), so every number is the one a run
without that word gives. A test or ranking one of whose sets is left empty is skipped with the reason. A text
longer than the model's maximum is measured on what the model reads and noted: a test row's ``notes`` and
``n_truncated``, a ranked word's ``notes``. Counted, when not zero: ``n_skipped/empty``, ``n_skipped/unknown``
(distinct texts) and ``n_truncated`` (distinct texts measured truncated).

Stimuli come from a data directory in MMBias's layout (:mod:`vlbias.data.mmbias`, :meth:`from_path`) or
from BiasWorld (:meth:`from_biasworld`): ``X^I``/``Y^I`` are the balanced test images of each group,
``A^T``/``B^T`` neutral-subject phrases of each group's stereotyped activities (``d > 0``: the planted
stereotype was learned).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from jsonargparse.typing import OpenUnitInterval, PositiveInt
from torch import Tensor

from vlbias.data.biasworld import (
    GROUPS,
    STEREOTYPES,
    BiasWorld,
    activity_phrases,
    group_phrases,
)
from vlbias.data.mmbias import TABLE2_PAIRS, MMBiasData, group_id, read_mmbias
from vlbias.data.seat import dropped_from_both
from vlbias.errors import ConfigError, InputError
from vlbias.metrics import CosineZeroShotRanking, ITMTest, WEATTest, ZeroShotRanking
from vlbias.metrics.functional.checks import check_interval_method
from vlbias.metrics.functional.zero_shot import pleasant_share
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.models.unseen_text import EMPTY, UNKNOWN, UnseenText, unseen_by
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.options import IntervalMethod, Probe
from vlbias.suites.rows import association_row, report_tests

if TYPE_CHECKING:
    from torchmetrics import Metric

PROBES: dict[str, Capability] = {"embed": Capability.EMBED, "match": Capability.MATCH}
EXPERIMENTS: dict[str, tuple[str, ...]] = {
    "embed": ("cross_modal", "textual", "visual", "zero_shot"),
    "match": ("itm", "zero_shot"),
}
BIASWORLD_EXPERIMENTS: dict[str, tuple[str, ...]] = {"embed": ("cross_modal", "textual"), "match": ("itm",)}
BIASWORLD_DEFAULTS: dict[str, tuple[str, ...]] = {"embed": ("cross_modal",), "match": ("itm",)}
MISSING_IMAGE_POLICIES = ("skip", "stop")


@dataclass
class Stimuli:
    """One set of a test. ``key`` names it (``images/muslim``, ``phrases/muslim``, ``attributes/pleasant``)
    and identifies it for the cache: sets with the same key are embedded once."""

    key: str
    modality: Literal["image", "text"]
    items: Tensor | list  # images: float (N, 3, H, W) in [0, 1], paths or PIL images; texts: strings

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class AssociationTest:
    """One test of Eq. 1: targets X, Y and attributes A, B; ``kind`` is one of :data:`EXPERIMENTS`' tests."""

    name: str
    kind: str
    x: Stimuli
    y: Stimuli
    a: Stimuli
    b: Stimuli

    @property
    def sets(self) -> tuple[Stimuli, Stimuli, Stimuli, Stimuli]:
        return self.x, self.y, self.a, self.b


@dataclass
class RankingTask:
    """Rank ``words`` (pleasant where ``is_pleasant``) for the images of ``group`` (Fig. 5)."""

    group: str
    images: Stimuli
    words: Stimuli
    is_pleasant: list[bool]

    @property
    def name(self) -> str:
        return f"zero_shot/{_slug(self.group)}"

    @property
    def sets(self) -> tuple[Stimuli, Stimuli]:
        return self.images, self.words


def biasworld_tests(
    world: BiasWorld, split: str = "test", experiments: Sequence[str] = ("cross_modal",)
) -> list[AssociationTest]:
    """BiasWorld's two groups against their stereotyped activities: ``cross_modal`` (images vs activity
    phrases, named ``man_vs_woman/stereotyped_activities``), ``textual`` (group phrases, ``.../textual``)
    and ``itm`` (match probabilities of the images, ``.../itm``)."""
    images = world.images(split).float() / 255.0
    groups = [item.group for item in world.items(split)]
    first, second = GROUPS
    name = f"{first}_vs_{second}/stereotyped_activities"

    def pick(group: str) -> Stimuli:
        return Stimuli(f"images/{group}", "image", images[[i for i, g in enumerate(groups) if g == group]])

    def activities(group: str) -> Stimuli:
        return Stimuli(
            f"activities/{group}", "text", [p for activity in STEREOTYPES[group] for p in activity_phrases(activity)]
        )

    def phrases(group: str) -> Stimuli:
        return Stimuli(f"phrases/{group}", "text", group_phrases(group))

    a, b = activities(first), activities(second)
    build = {
        "cross_modal": lambda: AssociationTest(name, "cross_modal", pick(first), pick(second), a, b),
        "textual": lambda: AssociationTest(f"{name}/textual", "textual", phrases(first), phrases(second), a, b),
        "itm": lambda: AssociationTest(f"{name}/itm", "itm", pick(first), pick(second), a, b),
    }
    unknown = sorted(set(experiments) - set(build))
    if unknown:
        raise ConfigError(f"Expected BiasWorld `experiments` among {sorted(build)} but got {unknown}")
    return [build[kind]() for kind in experiments]


def _slug(group: str) -> str:
    return group.replace(" ", "_")


def _check_options(
    probe: str, experiments: Sequence[str] | None, allowed: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    if probe not in PROBES:
        raise ConfigError(f"Expected `probe` to be one of {sorted(PROBES)} but got {probe!r}")
    if experiments is None:
        return allowed[probe]
    if isinstance(experiments, str):
        experiments = [experiments]
    wrong = [kind for kind in experiments if kind not in allowed[probe]]
    if wrong or not experiments:
        raise ConfigError(
            f"Expected `experiments` to be a non-empty list among {list(allowed[probe])} for probe {probe!r} but got "
            f"{list(experiments)!r}"
        )
    return tuple(dict.fromkeys(experiments))


class MMBiasSuite(Suite):
    """MMBias association tests (Eq. 1) and zero-shot rankings; see the module docstring.

    Args:
        tests: the association tests to run.
        data_config: how the stimuli were made (recorded in results).
        rankings: the zero-shot rankings to compute.
        skipped: items and tests already known not to run (missing images, empty sets), with reasons.
        probe: ``"embed"`` (cosine, EMBED models) or ``"match"`` (ITM probabilities, MATCH models).
        top_k: matches kept per attribute set for ``itm``, and words per zero-shot ranking.
        n_permutations: sampled re-partitions for the p-value (exact when the sets are small).
        n_bootstrap: bootstrap resamples for the interval.
        confidence: interval coverage.
        interval_method: ``"bca"`` or ``"percentile"`` bootstrap interval of the effect sizes (recorded in ``config``).
        batch_size: images, texts or image-text pairs per forward pass.
    """

    name = "mmbias"
    capability = Capability.EMBED  # for probe="embed"; an instance with probe="match" needs MATCH
    capability_hint = "For MATCH-only models run mmbias with --suite_options '{probe: match}'."

    def __init__(
        self,
        tests: list[AssociationTest],
        data_config: dict[str, object],
        rankings: list[RankingTask] | None = None,
        skipped: list[dict[str, str]] | None = None,
        probe: Probe = "embed",
        top_k: PositiveInt = 15,
        n_permutations: PositiveInt = 10_000,
        n_bootstrap: PositiveInt = 1_000,
        confidence: OpenUnitInterval = 0.95,
        interval_method: IntervalMethod = "bca",
        batch_size: PositiveInt = 64,
    ) -> None:
        _check_options(probe, None, EXPERIMENTS)
        wrong = [test.name for test in tests if (test.kind == "itm") != (probe == "match")]
        if wrong:
            raise ConfigError(
                f"Tests {wrong} do not fit probe {probe!r}: 'itm' tests need probe 'match', the others 'embed'"
            )
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ConfigError(f"Expected `top_k` to be a positive integer but got {top_k!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"Expected `batch_size` to be a positive integer but got {batch_size!r}")
        self.tests = tests
        self.data_config = data_config
        self.rankings = rankings or []
        self.skipped = skipped or []
        self.probe = probe
        self.capability = PROBES[probe]
        self.top_k = top_k
        self.n_permutations = n_permutations
        self.n_bootstrap = n_bootstrap
        self.confidence = confidence
        check_interval_method(interval_method, "interval_method")
        self.interval_method = interval_method
        self.batch_size = batch_size

    @classmethod
    def from_biasworld(
        cls,
        world: BiasWorld,
        split: str = "test",
        probe: str = "embed",
        experiments: Sequence[str] | None = None,
        **options,
    ) -> MMBiasSuite:
        """BiasWorld's tests (:func:`biasworld_tests`); ``experiments`` default to ``cross_modal`` for
        ``probe="embed"`` and ``itm`` for ``probe="match"``."""
        if probe in PROBES and experiments is None:
            experiments = BIASWORLD_DEFAULTS[probe]
        kinds = _check_options(probe, experiments, BIASWORLD_EXPERIMENTS)
        config = {"data": "biasworld", "split": split, **world.config}
        return cls(biasworld_tests(world, split, kinds), config, probe=probe, **options)

    @classmethod
    def from_path(
        cls,
        path: Path,
        phrases: str | None = None,
        images: str | None = None,
        valence_images: str | None = None,
        pairs: Sequence[Sequence[str]] | None = None,
        probe: str = "embed",
        experiments: Sequence[str] | None = None,
        on_missing_images: str = "skip",
        **options,
    ) -> MMBiasSuite:
        """The tests of ``pairs`` (default: the paper's Table 2, :data:`~vlbias.data.mmbias.TABLE2_PAIRS`) on an
        MMBias data directory (layout in :mod:`vlbias.data.mmbias`; ``phrases``, ``images`` and
        ``valence_images`` point its parts elsewhere, relative to ``path`` or absolute).

        ``on_missing_images``: ``"skip"`` runs on the images that are present (a missing image root or
        valence folder, undecodable files and empty group folders are listed in ``skipped``; each test
        records its set sizes); ``"stop"`` stops with an :class:`InputError` listing them. A test is
        skipped, with its reason, when a set is empty (a group without phrases, or without an image folder).
        Given ``pairs`` that name a group the data has neither phrases nor an image folder for (a misspelt
        name, most likely) stop with a :class:`ConfigError` listing the data's groups; the default pairs
        skip such tests, since data may cover only part of Table 2.
        """
        kinds = _check_options(probe, experiments, EXPERIMENTS)
        if on_missing_images not in MISSING_IMAGE_POLICIES:
            raise ConfigError(
                f"Expected `on_missing_images` to be one of {list(MISSING_IMAGE_POLICIES)} but got {on_missing_images!r}"
            )
        data = read_mmbias(path, phrases=phrases, images=images, valence_images=valence_images)
        if pairs is None:
            pairs = TABLE2_PAIRS  # data may cover a part of Table 2: the other tests are skipped with the reason
        else:  # a group the user names but the data lacks entirely is most likely misspelt
            pairs = _check_pairs(pairs)
            known = set(data.group_phrases) | set(data.group_folders)
            unknown = sorted({group for pair in pairs for group in pair} - known)
            if unknown:
                raise ConfigError(
                    f"`pairs` name group(s) {unknown} that MMBias data {str(path)!r} has neither phrases nor an image "
                    f"folder for; its groups are {sorted(known)}"
                )
        problems = _image_problems(data, pairs, kinds)
        if problems and on_missing_images == "stop":
            listed = "; ".join(f"{p['item']}: {p['reason']}" for p in problems[:10])
            more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
            raise InputError(
                f"MMBias data {str(path)!r}: {len(problems)} missing or unreadable image(s)/folder(s): {listed}{more}"
            )
        tests, skipped = mmbias_tests(data, pairs, kinds)
        rankings = mmbias_rankings(data) if "zero_shot" in kinds else []
        config = {
            "data": str(path),
            "phrases": phrases,
            "images": images,
            "valence_images": valence_images,
            "pairs": [list(pair) for pair in pairs],
            "experiments": list(kinds),
            "on_missing_images": on_missing_images,
            "n_images": {group: len(files) for group, files in sorted(data.group_images.items())},
            "n_valence_images": {valence: len(files) for valence, files in data.valence_images.items()},
        }
        return cls(
            tests, config, rankings=rankings, skipped=problems + data.duplicates + skipped, probe=probe, **options
        )

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "probe": self.probe,
            "tests": [test.name for test in self.tests],
            "rankings": [task.group for task in self.rankings],
            "top_k": self.top_k,
            "n_permutations": self.n_permutations,
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
            "interval_method": self.interval_method,
        }

    def stimuli(self) -> list[Stimulus]:
        """Every item of every set the run reads, each set once: with ``probe="embed"`` images and texts (each
        embedded once), with ``probe="match"`` the images (each matched with all the texts it meets)."""
        if self.probe == "match":
            return _stimuli(
                [images for t in self.tests for images in (t.x, t.y)] + [task.images for task in self.rankings]
            )
        sets = [s for t in self.tests for s in (t.x, t.y, t.a, t.b)]
        return _stimuli(sets + [s for task in self.rankings for s in (task.images, task.words)])

    def start(self, adapter: ModelAdapter, seed: int) -> Measurement:
        return _MMBiasMeasurement(self, adapter, seed)


def _image_problems(data: MMBiasData, pairs: Sequence[tuple[str, str]], kinds: Sequence[str]) -> list[dict[str, str]]:
    """Missing image roots, unreadable files and empty group folders, for the experiments that use images. A
    group with no folder at all is not a problem here: its image tests are skipped, like the paper's "-"
    cells of Table 2 (no French, Italian, visual- or hearing-disability images)."""
    problems = []
    if any(kind != "textual" for kind in kinds):
        problems += data.missing_images + data.unreadable
        problems += [
            {"item": str(folder), "reason": f"group {group!r} has an image folder but no readable image in it"}
            for group, folder in sorted(data.group_folders.items())
            if not data.group_images[group] and any(group in pair for pair in pairs)
        ]
    if "visual" in kinds:
        problems += data.missing_valence + data.unreadable_valence
    return problems


def _check_pairs(pairs: Sequence[Sequence[str]]) -> tuple[tuple[str, str], ...]:
    checked = []
    for index, pair in enumerate(pairs):
        if isinstance(pair, str) or len(pair) != 2 or not all(isinstance(g, str) and g.strip() for g in pair):
            raise ConfigError(f"Expected `pairs[{index}]` to be two group names [X, Y] but got {pair!r}")
        x, y = group_id(pair[0]), group_id(pair[1])
        if x == y:
            raise ConfigError(f"Expected `pairs[{index}]` to name two different groups but both are {x!r}")
        checked.append((x, y))
    if not checked:
        raise ConfigError("Expected `pairs` to hold at least one [X, Y] pair but it is empty")
    return tuple(checked)


def mmbias_tests(
    data: MMBiasData, pairs: Sequence[tuple[str, str]], kinds: Sequence[str]
) -> tuple[list[AssociationTest], list[dict[str, str]]]:
    """The association tests of ``pairs`` for each of ``kinds`` on :class:`~vlbias.data.mmbias.MMBiasData`,
    and the tests that cannot run (an empty set) with the reason."""
    unpleasant = Stimuli("attributes/unpleasant", "text", data.unpleasant)
    pleasant = Stimuli("attributes/pleasant", "text", data.pleasant)
    valence = {
        v: Stimuli(f"valence_images/{v}", "image", data.valence_images.get(v, [])) for v in ("unpleasant", "pleasant")
    }

    def images(group: str) -> Stimuli:
        return Stimuli(f"images/{group}", "image", data.group_images.get(group, []))

    def phrases(group: str) -> Stimuli:
        return Stimuli(f"phrases/{group}", "text", data.group_phrases.get(group, []))

    sets = {
        "cross_modal": lambda x, y: (images(x), images(y), unpleasant, pleasant),
        "textual": lambda x, y: (phrases(x), phrases(y), unpleasant, pleasant),
        "visual": lambda x, y: (images(x), images(y), valence["unpleasant"], valence["pleasant"]),
        "itm": lambda x, y: (images(x), images(y), unpleasant, pleasant),
    }
    tests, skipped = [], []
    for kind in kinds:
        if kind == "zero_shot":
            continue
        for x, y in pairs:
            test = AssociationTest(f"{_slug(x)}_vs_{_slug(y)}/{kind}", kind, *sets[kind](x, y))
            shared = []  # a phrase cannot stand for both groups: dropped from both, as SEAT's reader does
            if test.x.modality == "text":
                x_kept, y_kept, shared = dropped_from_both(test.x.items, test.y.items)
            if shared:
                skipped += [
                    {
                        "item": f"{test.name}: {item!r}",
                        "reason": f"in both {test.x.key} and {test.y.key}; dropped from both",
                    }
                    for item in shared
                ]
                test = replace(  # new keys: the cache embeds a set once per key
                    test,
                    x=Stimuli(f"{test.x.key} without {test.y.key}", "text", x_kept),
                    y=Stimuli(f"{test.y.key} without {test.x.key}", "text", y_kept),
                )
            empty = [s.key for s in (test.x, test.y, test.a, test.b) if len(s) == 0]
            if empty:
                skipped.append({"item": test.name, "reason": f"empty set(s) {empty}: no stimuli for them in the data"})
            else:
                tests.append(test)
    return tests, skipped


def mmbias_rankings(data: MMBiasData) -> list[RankingTask]:
    """A zero-shot ranking of all attribute words (unpleasant, then pleasant) for every group with images."""
    words = Stimuli("attributes/all", "text", data.unpleasant + data.pleasant)
    is_pleasant = [False] * len(data.unpleasant) + [True] * len(data.pleasant)
    return [
        RankingTask(group, Stimuli(f"images/{group}", "image", files), words, is_pleasant)
        for group, files in sorted(data.group_images.items())
        if files
    ]


@dataclass(frozen=True)
class Stimulus:
    """One item of a set: ``key`` names the set, ``position`` its place there; ``item`` is an image (a float
    ``(3, H, W)`` tensor in [0, 1], a path or a PIL image) or a text."""

    key: str
    modality: Literal["image", "text"]
    position: int
    item: object


def _stimuli(sets: Sequence[Stimuli]) -> list[Stimulus]:
    """Every item of ``sets`` once per set key, set by set in order of first appearance."""
    unique = {stimuli.key: stimuli for stimuli in sets}
    return [Stimulus(s.key, s.modality, i, item) for s in unique.values() for i, item in enumerate(s.items)]


def _unseen_texts(adapter: ModelAdapter, suite: MMBiasSuite) -> dict[str, UnseenText]:
    """Each text of the suite's sets that ``adapter`` cannot see as written, with why
    (:func:`~vlbias.models.unseen_text.unseen_by`)."""
    sets = [stimuli for task in [*suite.tests, *suite.rankings] for stimuli in task.sets]
    texts = list(dict.fromkeys(text for s in sets if s.modality == "text" for text in s.items))
    return {text: problem for text, problem in zip(texts, unseen_by(adapter, texts)) if problem is not None}


def _skipped(text: str, unseen: dict[str, UnseenText]) -> bool:
    """Whether ``text`` is skipped: the model's output for it says nothing about it (empty, unknown tokens)."""
    return text in unseen and unseen[text].skip


def _seen(stimuli: Stimuli, unseen: dict[str, UnseenText]) -> Stimuli:
    """``stimuli`` without the texts that are skipped, under the same key; image sets as they are."""
    if stimuli.modality == "image":
        return stimuli
    return replace(stimuli, items=[text for text in stimuli.items if not _skipped(text, unseen)])


def _seen_test(test: AssociationTest, unseen: dict[str, UnseenText]) -> AssociationTest:
    return replace(test, **{role: _seen(stimuli, unseen) for role, stimuli in zip("xyab", test.sets)})


def _seen_ranking(task: RankingTask, unseen: dict[str, UnseenText]) -> RankingTask:
    kept = list(_seen_positions(task.words, unseen))
    words = replace(task.words, items=[task.words.items[i] for i in kept])
    return replace(task, words=words, is_pleasant=[task.is_pleasant[i] for i in kept])


def _seen_positions(words: Stimuli, unseen: dict[str, UnseenText]) -> dict[int, int]:
    """Each kept word's position in ``words`` -> its position among the kept words."""
    kept = [position for position, word in enumerate(words.items) if not _skipped(word, unseen)]
    return {position: rank for rank, position in enumerate(kept)}


def _images(items: list) -> Tensor | list:
    """A batch for ``prepare_images``: stacked when every image is a tensor, else the list."""
    return torch.stack(items) if all(isinstance(item, Tensor) for item in items) else items


class _MMBiasMeasurement(Measurement):
    """One run of :class:`MMBiasSuite`: a :class:`~vlbias.metrics.WEATTest` per cosine test, an
    :class:`~vlbias.metrics.ITMTest` per ``itm`` test, a :class:`~vlbias.metrics.CosineZeroShotRanking` or
    :class:`~vlbias.metrics.ZeroShotRanking` per ranking. Each stimulus's embedding (or, with
    ``probe="match"``, each image's match probabilities with every text it meets) goes to every metric whose
    sets hold it. An item whose output holds NaN or inf is counted (``nonfinite/<set>``) and fed to no metric;
    every test reading its set is then skipped with the reason; an image that does not decode is skipped alone.

    The texts the model cannot see (module docstring) are found here, alike on every rank, before any metric is
    built: the tests and rankings run on their sets without the skipped texts (``run_tests``,
    ``run_rankings``), so a skipped text is never embedded nor matched, and a test or ranking one of whose sets
    is left empty does not run (``emptied``)."""

    def __init__(self, suite: MMBiasSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        self.unseen = _unseen_texts(adapter, suite)
        self.emptied: list[dict[str, str]] = []
        self.run_tests = self._runnable(suite.tests, _seen_test)
        self.run_rankings = self._runnable(suite.rankings, _seen_ranking)
        self.word_positions = {task.words.key: _seen_positions(task.words, self.unseen) for task in suite.rankings}
        options = {
            "n_permutations": suite.n_permutations,
            "n_bootstrap": suite.n_bootstrap,
            "confidence": suite.confidence,
            "interval_method": suite.interval_method,
        }
        options |= {"seed": seed, "sync_on_compute": False, "allow_unequal_sizes": True}
        self.tests = {}
        for test in self.run_tests:
            if test.kind == "itm":
                self.tests[test.name] = ITMTest(top_k=min(suite.top_k, len(test.a), len(test.b)), **options)
            else:
                self.tests[test.name] = WEATTest(**options)
        self.rankings = {
            task.group: (ZeroShotRanking if suite.probe == "match" else CosineZeroShotRanking)(
                n_words=len(task.words), top_k=min(suite.top_k, len(task.words)), sync_on_compute=False
            )
            for task in self.run_rankings
        }
        self.texts = _match_texts(self.run_tests, self.run_rankings) if suite.probe == "match" else {}

    def _runnable(self, tasks: list, seen) -> list:
        """``tasks`` (tests or rankings) on their sets without the texts the model cannot see (``seen`` makes
        one), but for those a set of which is then empty: noted in ``emptied`` with the reason."""
        runnable = []
        for task in tasks:
            measured = seen(task, self.unseen)
            empty = [stimuli.key for stimuli in measured.sets if len(stimuli) == 0]
            if empty:
                reason = f"empty set(s) {empty} once the texts the model cannot see are skipped"
                self.emptied.append({"item": measured.name, "reason": reason})
            else:
                runnable.append(measured)
        return runnable

    def metrics(self) -> list[Metric]:
        return [*self.tests.values(), *self.rankings.values()]

    def probe(self, batch: Batch) -> dict[int, Tensor]:
        """Per stimulus index: its embedding ``(D,)``, or with ``probe="match"`` its ``(len(texts),)`` match
        probabilities with the texts of its set (:func:`_match_texts`). Items that do not decode are noted; texts
        the model cannot see are not embedded."""
        groups: dict[tuple[str, str], list[tuple[int, Stimulus]]] = {}
        for index, stimulus in zip(batch.indices, batch.items, strict=True):
            if stimulus.modality == "text" and _skipped(stimulus.item, self.unseen):
                continue
            groups.setdefault((stimulus.modality, stimulus.key if self.texts else ""), []).append((index, stimulus))
        outputs = {}
        with measuring(self.adapter.device):
            for (modality, key), members in groups.items():
                try:
                    values = self._outputs(modality, key, [s.item for _, s in members])
                except InputError:  # find the items that do not decode; measure the others
                    values = self._one_by_one(modality, key, members)
                outputs |= {
                    index: value for (index, _), value in zip(members, values, strict=True) if value is not None
                }
        return outputs

    def _one_by_one(self, modality: str, key: str, members: list[tuple[int, Stimulus]]) -> list[Tensor | None]:
        values = []
        for index, stimulus in members:
            try:
                values.append(self._outputs(modality, key, [stimulus.item])[0])
            except InputError as err:
                self.note_skip(index, {"item": str(stimulus.item), "reason": str(err)})
                values.append(None)
        return values

    def _outputs(self, modality: str, key: str, items: list) -> Tensor:
        adapter = self.adapter
        if self.texts:
            return _match_probabilities(
                adapter, adapter.prepare_images(_images(items)), self.texts[key], self.suite.batch_size
            )
        if modality == "image":
            return adapter.embed_images(adapter.prepare_images(_images(items))).float().cpu()
        return adapter.embed_texts(adapter.prepare_texts(items)).float().cpu()

    def update(self, batch: Batch, outputs: dict[int, Tensor]) -> None:
        rows: dict[str, list[tuple[Stimulus, Tensor]]] = {}
        for index, stimulus in zip(batch.indices, batch.items, strict=True):
            if index not in outputs:
                continue
            if not bool(torch.isfinite(outputs[index]).all()):
                self.count(f"nonfinite/{stimulus.key}")
                continue
            rows.setdefault(stimulus.key, []).append((stimulus, outputs[index]))
        for key, members in rows.items():
            values = torch.stack([value for _, value in members])  # (n, D) or (n, len(texts))
            positions = torch.tensor([stimulus.position for stimulus, _ in members])
            self._feed(key, values, positions)

    def _feed(self, key: str, values: Tensor, positions: Tensor) -> None:
        """Give the outputs of items ``positions`` of set ``key`` to every metric that reads the set."""
        for test in self.run_tests:
            metric = self.tests[test.name]
            if test.kind == "itm":
                columns = {text: c for c, text in enumerate(self.texts.get(key, []))}
                for target, stimuli in (("x", test.x), ("y", test.y)):
                    if stimuli.key == key:
                        a, b = ([columns[t] for t in s.items] for s in (test.a, test.b))
                        metric.update(values[:, a], values[:, b], target=target)
                continue
            for role in ("x", "y", "a", "b"):
                if getattr(test, role).key == key:
                    metric.update(**{role: values})
        for task in self.run_rankings:
            metric = self.rankings[task.group]
            if task.images.key == key:
                if self.texts:
                    columns = {text: c for c, text in enumerate(self.texts[key])}
                    metric.update(values[:, [columns[word] for word in task.words.items]])
                else:
                    metric.update(images=values)
            elif task.words.key == key and not self.texts:
                seen = self.word_positions[key]
                metric.update(words=values, positions=torch.tensor([seen[int(p)] for p in positions]))

    def compute(self, gathered: Gathered) -> SuiteOutput:
        suite = self.suite
        skipped = [*suite.skipped, *self._unseen_skips(), *self.emptied, *gathered.skipped]
        output = SuiteOutput(metrics={}, skipped=skipped)
        nonfinite = {
            key.removeprefix("nonfinite/"): int(n) for key, n in gathered.counts.items() if key.startswith("nonfinite/")
        }
        rows, measured = [], {}  # measured: stimuli key -> number of items (each set counted once)
        for test in self.run_tests:
            try:
                _check_finite(test.sets, nonfinite)
                rows.append(_test_row(test, self.tests[test.name]) | self._notes(test.sets))
            except InputError as err:
                output.skipped.append({"item": test.name, "reason": str(err)})
                continue
            measured |= {stimuli.key: len(stimuli) for stimuli in test.sets}
        report_tests(output, rows)
        for row in rows:
            if row["kind"] == "itm":
                output.metrics[f"{row['test']}/probability_gap"] = row["probability_gap"]
        for task in self.run_rankings:
            try:
                _check_finite(task.sets, nonfinite)
                ranked = _ranking_rows(task, *self.rankings[task.group].compute(), output)
            except InputError as err:
                output.skipped.append({"item": task.name, "reason": str(err)})
                continue
            rows += [row | {"notes": self._reason(row["word"])} for row in ranked]
            measured |= {stimuli.key: len(stimuli) for stimuli in task.sets}
        output.items = rows
        output.n_items = sum(measured.values())
        output.metrics |= self._unseen_counts()
        return output

    def _reason(self, text: str) -> str:
        """Why the model reads ``text`` other than as written (truncated), or ``""``."""
        return self.unseen[text].reason if text in self.unseen else ""

    def _notes(self, sets: Sequence[Stimuli]) -> dict[str, object]:
        """A test row's ``n_truncated`` and ``notes``: the texts of its sets that the model reads truncated."""
        texts = [(s.key, text) for s in sets if s.modality == "text" for text in s.items if text in self.unseen]
        notes = [f"{key}: {text!r}: {self.unseen[text].reason}" for key, text in texts]
        return {"n_truncated": len(notes), "notes": "; ".join(notes)}

    def _unseen_skips(self) -> list[dict[str, str]]:
        """A skip entry per set (each set key once) and text of it that the model cannot see."""
        sets = {s.key: s for task in [*self.suite.tests, *self.suite.rankings] for s in task.sets}
        return [
            {"item": f"{key}: {text!r}", "reason": self.unseen[text].reason, "kind": self.unseen[text].kind}
            for key, stimuli in sets.items()
            if stimuli.modality == "text"
            for text in stimuli.items
            if _skipped(text, self.unseen)
        ]

    def _unseen_counts(self) -> dict[str, float]:
        """``n_skipped/empty``, ``n_skipped/unknown`` (distinct texts skipped) and ``n_truncated`` (distinct texts
        measured truncated), always present (zeros included), as every suite's counts."""
        tasks = [*self.run_tests, *self.run_rankings]
        measured = {t for task in tasks for s in task.sets if s.modality == "text" for t in s.items}
        kinds = [problem.kind for problem in self.unseen.values() if problem.skip]
        counts = {f"n_skipped/{kind}": float(kinds.count(kind)) for kind in (EMPTY, UNKNOWN)}
        counts["n_truncated"] = float(sum(not p.skip and t in measured for t, p in self.unseen.items()))
        return counts


def _check_finite(sets: Sequence[Stimuli], nonfinite: dict[str, int]) -> None:
    for stimuli in sets:
        if nonfinite.get(stimuli.key):
            raise InputError(
                f"The model's outputs for {nonfinite[stimuli.key]} of the {len(stimuli)} items of set {stimuli.key!r} hold NaN or inf"
            )


def _test_row(test: AssociationTest, metric: WEATTest | ITMTest) -> dict:
    """The item-table row of one association test (the statistics from :func:`~vlbias.suites.rows.association_row`)."""
    result = metric.compute()
    row = association_row(result)
    if not math.isfinite(row["effect_size"]):
        raise InputError(f"effect size undefined: all {row['n_x'] + row['n_y']} association scores of X ∪ Y are equal")
    head = {"kind": test.kind, "test": test.name, "x": test.x.key, "y": test.y.key, "a": test.a.key, "b": test.b.key}
    stats = {key: row[key] for key in ("effect_size", "p_value", "ci_low", "ci_high")}
    if test.kind == "itm":
        stats |= {"probability_gap": float(result["mean_difference"]), "top_k": metric.top_k}
    return head | stats | {"n_x": row["n_x"], "n_y": row["n_y"], "n_a": len(test.a), "n_b": len(test.b)}


def _ranking_rows(task: RankingTask, values: Tensor, indices: Tensor, output: SuiteOutput) -> list[dict]:
    """Fig. 5 as rows (one per ranked word) and the group's ``pleasant_share`` metric."""
    values, indices = values.reshape(-1), indices.reshape(-1)  # compute squeezes a ranking of one word
    name = task.name
    output.metrics[f"{name}/pleasant_share"] = float(pleasant_share(indices, torch.tensor(task.is_pleasant)))
    return [
        {
            "kind": "zero_shot",
            "test": name,
            "x": task.images.key,
            "rank": rank,
            "word": task.words.items[index],
            "valence": "pleasant" if task.is_pleasant[index] else "unpleasant",
            "score": float(value),
            "n_x": len(task.images),
        }
        for rank, (value, index) in enumerate(zip(values.tolist(), indices.tolist(), strict=True), start=1)
    ]


def _match_probabilities(adapter: ModelAdapter, pixels: Tensor, texts: list[str], batch_size: int) -> Tensor:
    """``(len(pixels), len(texts))`` probabilities :math:`\\sigma(w, a)` = sigmoid of the match logits, in
    chunks of ``batch_size`` image-text pairs."""
    tokens = adapter.prepare_texts(texts)  # (m, T) each
    pairs = torch.arange(len(pixels) * len(texts), device=pixels.device)
    logits = []
    for chunk in pairs.split(batch_size):
        image_index, text_index = chunk // len(texts), chunk % len(texts)
        batch_tokens = {key: value[text_index] for key, value in tokens.items()}
        logits.append(adapter.run_capability(Capability.MATCH, pixels[image_index], batch_tokens).float().cpu())
    return torch.sigmoid(torch.cat(logits)).view(len(pixels), len(texts))


def _match_texts(tests: list[AssociationTest], rankings: list[RankingTask]) -> dict[str, list[str]]:
    """Each image set's key -> every text its images are matched against (each once, in order)."""
    plan: dict[str, dict[str, None]] = {}
    pairs = [(images, texts) for t in tests for images in (t.x, t.y) for texts in (t.a, t.b)]
    pairs += [(task.images, task.words) for task in rankings]
    for images, texts in pairs:
        plan.setdefault(images.key, {}).update(dict.fromkeys(texts.items))
    return {key: list(texts) for key, texts in plan.items()}
