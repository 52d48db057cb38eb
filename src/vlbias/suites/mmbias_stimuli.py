"""MMBias's stimuli (:mod:`vlbias.suites.mmbias`): the sets of an association test or a zero-shot ranking, the tests
and rankings built from BiasWorld or from MMBias data (:mod:`vlbias.data.mmbias`), and the stimuli a run probes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from torch import Tensor

from vlbias.data.biasworld import GROUPS, STEREOTYPES, BiasWorld, activity_phrases, group_phrases
from vlbias.data.mmbias import MMBiasData, group_id
from vlbias.data.set_rules import dropped_from_both
from vlbias.errors import ConfigError


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


def image_problems(data: MMBiasData, pairs: Sequence[tuple[str, str]], kinds: Sequence[str]) -> list[dict[str, str]]:
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


def check_pairs(pairs: Sequence[Sequence[str]]) -> tuple[tuple[str, str], ...]:
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


def stimulus_list(sets: Sequence[Stimuli]) -> list[Stimulus]:
    """Every item of ``sets`` once per set key, set by set in order of first appearance."""
    unique = {stimuli.key: stimuli for stimuli in sets}
    return [Stimulus(s.key, s.modality, i, item) for s in unique.values() for i, item in enumerate(s.items)]
