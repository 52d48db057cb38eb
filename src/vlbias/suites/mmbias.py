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
row per test (``kind``, groups, effect size, gap, ``p_value``, ``p_note`` (why a p-value is missing),
``p_holm``, ``p_bh``, ``ci_low``, ``ci_high``, ``n_x``, ``n_y``, ``n_a``, ``n_b``) and one row per ranked word
(``kind = "zero_shot"``: ``group``, ``rank``, ``word``, ``valence``, ``score``): Fig. 5 as a table.
Tests that cannot run (a group without images or phrases, embeddings with NaN/inf, an image that does
not decode) are listed in ``skipped`` with the reason, as are duplicate phrases: a repeat is kept once, and a
phrase in both attribute sets, or in both target sets of a test, is dropped from both (as in the SEAT reader).
The permutation p-value needs :math:`|X| = |Y|`; for unequal sets it is left out (``p_value`` NaN, ``p_note`` says why) and the effect
size and interval are still reported.

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
from typing import Literal

import torch
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
from vlbias.metrics.functional.multiple_testing import (
    benjamini_hochberg,
    holm_bonferroni,
)
from vlbias.metrics.functional.weat import (
    effect_size_from_associations,
    interval_from_associations,
    itm_association,
    mean_difference_from_associations,
    p_value_from_associations,
    weat_association,
)
from vlbias.metrics.functional.zero_shot import pleasant_share, zero_shot_ranking
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.suites.base import Suite, SuiteOutput, embed_images, embed_texts

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


@dataclass
class RankingTask:
    """Rank ``words`` (pleasant where ``is_pleasant``) for the images of ``group`` (Fig. 5)."""

    group: str
    images: Stimuli
    words: Stimuli
    is_pleasant: list[bool]


def biasworld_tests(world: BiasWorld, split: str = "test", experiments: Sequence[str] = ("cross_modal",)) -> list[AssociationTest]:
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
        return Stimuli(f"activities/{group}", "text", [p for activity in STEREOTYPES[group] for p in activity_phrases(activity)])

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


def _check_options(probe: str, experiments: Sequence[str] | None, allowed: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
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


class _Probe:
    """Embeddings and match probabilities of stimuli, each set computed once per run.

    A set whose forward pass fails with :class:`InputError` (an image that does not decode) or gives
    NaN/inf raises :class:`InputError` naming the set, every time it is asked for.
    """

    def __init__(self, adapter: ModelAdapter, batch_size: int) -> None:
        self.adapter, self.batch_size = adapter, batch_size
        self._embeddings: dict[str, Tensor | InputError] = {}
        self._probabilities: dict[str, dict[str, Tensor]] = {}  # image key -> {text: (n_images,) column}
        self._match_errors: dict[str, InputError] = {}

    def embed(self, stimuli: Stimuli) -> Tensor:
        if stimuli.key not in self._embeddings:
            embed = embed_images if stimuli.modality == "image" else embed_texts
            try:
                self._embeddings[stimuli.key] = _finite(stimuli.key, embed(self.adapter, stimuli.items, self.batch_size))
            except InputError as err:
                self._embeddings[stimuli.key] = err
        return _value(self._embeddings[stimuli.key])

    def prefetch_matches(self, images: Stimuli, texts: Sequence[str]) -> None:
        """Match probabilities of every image of ``images`` with every one of ``texts``, computed in one
        pass over the images (each image prepared once)."""
        cached = self._probabilities.setdefault(images.key, {})
        texts = [text for text in dict.fromkeys(texts) if text not in cached]
        if not texts or images.key in self._match_errors:
            return
        try:
            columns = _finite(images.key, self._match_probabilities(images.items, texts))
        except InputError as err:
            self._match_errors[images.key] = err
            return
        cached.update(zip(texts, columns.T))

    def matches(self, images: Stimuli, texts: Stimuli) -> Tensor:
        """``(len(images), len(texts))`` probabilities :math:`\\sigma(w, a)`."""
        self.prefetch_matches(images, texts.items)
        if images.key in self._match_errors:
            raise self._match_errors[images.key]
        cached = self._probabilities[images.key]
        return torch.stack([cached[text] for text in texts.items], dim=1)

    def _match_probabilities(self, images: Tensor | list, texts: list[str]) -> Tensor:
        adapter, size = self.adapter, self.batch_size
        rows = []
        with measuring(adapter.device):
            tokens = adapter.prepare_texts(texts)  # (m, T) each
            for start in range(0, len(images), size):
                pixels = adapter.prepare_images(images[start : start + size])  # (c, 3, H, W)
                pairs = torch.arange(len(pixels) * len(texts), device=pixels.device)
                logits = []
                for chunk in pairs.split(size):
                    image_index, text_index = chunk // len(texts), chunk % len(texts)
                    batch_tokens = {key: value[text_index] for key, value in tokens.items()}
                    logits.append(adapter.run_capability(Capability.MATCH, pixels[image_index], batch_tokens).float().cpu())
                rows.append(torch.sigmoid(torch.cat(logits)).view(len(pixels), len(texts)))  # (c, m)
        return torch.cat(rows)


def _finite(key: str, values: Tensor) -> Tensor:
    bad = int((~torch.isfinite(values)).any(dim=1).sum())
    if bad:
        raise InputError(f"The model's outputs for {bad} of the {len(values)} items of set {key!r} hold NaN or inf")
    return values


def _value(entry: Tensor | InputError) -> Tensor:
    if isinstance(entry, InputError):
        raise entry
    return entry


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
        probe: str = "embed",
        top_k: int = 15,
        n_permutations: int = 10_000,
        n_bootstrap: int = 1_000,
        confidence: float = 0.95,
        batch_size: int = 64,
    ) -> None:
        _check_options(probe, None, EXPERIMENTS)
        wrong = [test.name for test in tests if (test.kind == "itm") != (probe == "match")]
        if wrong:
            raise ConfigError(f"Tests {wrong} do not fit probe {probe!r}: 'itm' tests need probe 'match', the others 'embed'")
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
        self.batch_size = batch_size

    @classmethod
    def from_biasworld(
        cls, world: BiasWorld, split: str = "test", probe: str = "embed", experiments: Sequence[str] | None = None, **options
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
            raise ConfigError(f"Expected `on_missing_images` to be one of {list(MISSING_IMAGE_POLICIES)} but got {on_missing_images!r}")
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
            raise InputError(f"MMBias data {str(path)!r}: {len(problems)} missing or unreadable image(s)/folder(s): {listed}{more}")
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
        return cls(tests, config, rankings=rankings, skipped=problems + data.duplicates + skipped, probe=probe, **options)

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
        }

    def run(self, adapter: ModelAdapter, seed: int = 0) -> SuiteOutput:
        output = SuiteOutput(metrics={}, skipped=list(self.skipped))
        probe = _Probe(adapter, self.batch_size)
        if self.probe == "match":  # one pass over each image set for all the texts it meets
            for images, texts in _match_plan(self.tests, self.rankings):
                probe.prefetch_matches(images, texts)
        rows, measured = [], {}  # measured: stimuli key -> number of items (each set counted once)
        for test in self.tests:
            try:
                rows.append(self._run_test(test, probe, seed, output))
            except InputError as err:
                output.skipped.append({"item": test.name, "reason": str(err)})
                continue
            measured |= {stimuli.key: len(stimuli) for stimuli in (test.x, test.y, test.a, test.b)}
        _adjust_p_values(rows)
        for row in rows:
            if math.isfinite(row["p_value"]):
                for suffix, column in (("", "p_value"), ("@holm", "p_holm"), ("@bh", "p_bh")):
                    output.p_values[f"{row['test']}/effect_size{suffix}"] = row[column]
        for task in self.rankings:
            try:
                rows += self._rank(task, probe, output)
            except InputError as err:
                output.skipped.append({"item": f"zero_shot/{_slug(task.group)}", "reason": str(err)})
                continue
            measured |= {task.images.key: len(task.images), task.words.key: len(task.words)}
        output.items = rows
        output.n_items = sum(measured.values())
        return output

    def _associations(self, test: AssociationTest, probe: _Probe) -> tuple[Tensor, Tensor, int | None]:
        if test.kind == "itm":
            top_k = min(self.top_k, len(test.a), len(test.b))
            x_a, x_b, y_a, y_b = (probe.matches(w, attributes) for w in (test.x, test.y) for attributes in (test.a, test.b))
            s_x = itm_association(x_a, x_b, top_k=top_k)  # sigma(w, A, B), Eq. 1 last row
            return s_x, itm_association(y_a, y_b, top_k=top_k), top_k
        X, Y, A, B = (probe.embed(stimuli) for stimuli in (test.x, test.y, test.a, test.b))
        return weat_association(X, A, B), weat_association(Y, A, B), None  # phi(w, A, B), Eq. 1

    def _run_test(self, test: AssociationTest, probe: _Probe, seed: int, output: SuiteOutput) -> dict:
        s_x, s_y, top_k = self._associations(test, probe)
        effect = float(effect_size_from_associations(s_x, s_y))
        if not math.isfinite(effect):
            raise InputError(f"effect size undefined: all {len(s_x) + len(s_y)} association scores of X ∪ Y are equal")
        equal = len(s_x) == len(s_y)
        p_value = float(p_value_from_associations(s_x, s_y, n_permutations=self.n_permutations, seed=seed)) if equal else math.nan
        p_note = "" if equal else (
            f"|X| = {len(s_x)} != |Y| = {len(s_y)}: the permutation test re-partitions X ∪ Y into equal halves, so it "
            "has no p-value; the effect size and its interval stand alone"
        )
        low, high = (float(v) for v in interval_from_associations(s_x, s_y, n_bootstrap=self.n_bootstrap, confidence=self.confidence, seed=seed))
        key = f"{test.name}/effect_size"
        output.metrics[key] = effect
        output.intervals[key] = [low, high]
        row = {"kind": test.kind, "test": test.name, "x": test.x.key, "y": test.y.key, "a": test.a.key, "b": test.b.key}
        row |= {"effect_size": effect, "p_value": p_value, "p_note": p_note, "ci_low": low, "ci_high": high}
        if top_k is not None:
            gap = float(mean_difference_from_associations(s_x, s_y))
            output.metrics[f"{test.name}/probability_gap"] = gap
            row |= {"probability_gap": gap, "top_k": top_k}
        row |= {"n_x": len(s_x), "n_y": len(s_y), "n_a": len(test.a), "n_b": len(test.b)}
        return row

    def _rank(self, task: RankingTask, probe: _Probe, output: SuiteOutput) -> list[dict]:
        if self.probe == "match":
            scores = probe.matches(task.images, task.words)
        else:
            scores = probe.embed(task.images) @ probe.embed(task.words).T  # cosines, both normalised
        top_k = min(self.top_k, len(task.words))
        values, indices = zero_shot_ranking(scores, top_k=top_k)
        is_pleasant = torch.tensor(task.is_pleasant)
        name = f"zero_shot/{_slug(task.group)}"
        output.metrics[f"{name}/pleasant_share"] = float(pleasant_share(indices, is_pleasant))
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
            for rank, (value, index) in enumerate(zip(values.tolist(), indices.tolist()), start=1)
        ]


def _adjust_p_values(rows: list[dict]) -> None:
    """Add Holm (``p_holm``) and Benjamini–Hochberg (``p_bh``) adjusted p-values to the test ``rows``, the
    family being every test of the run with a p-value; rows without one get NaN."""
    tested = [row for row in rows if math.isfinite(row["p_value"])]
    for row in rows:
        row["p_holm"] = row["p_bh"] = math.nan
    if tested:
        raw = torch.tensor([row["p_value"] for row in tested], dtype=torch.float64)
        for row, holm, bh in zip(tested, holm_bonferroni(raw).tolist(), benjamini_hochberg(raw).tolist()):
            row["p_holm"], row["p_bh"] = holm, bh


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


def mmbias_tests(data: MMBiasData, pairs: Sequence[tuple[str, str]], kinds: Sequence[str]) -> tuple[list[AssociationTest], list[dict[str, str]]]:
    """The association tests of ``pairs`` for each of ``kinds`` on :class:`~vlbias.data.mmbias.MMBiasData`,
    and the tests that cannot run (an empty set) with the reason."""
    unpleasant = Stimuli("attributes/unpleasant", "text", data.unpleasant)
    pleasant = Stimuli("attributes/pleasant", "text", data.pleasant)
    valence = {v: Stimuli(f"valence_images/{v}", "image", data.valence_images.get(v, [])) for v in ("unpleasant", "pleasant")}

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
                    {"item": f"{test.name}: {item!r}", "reason": f"in both {test.x.key} and {test.y.key}; dropped from both"}
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


def _match_plan(tests: list[AssociationTest], rankings: list[RankingTask]) -> list[tuple[Stimuli, list[str]]]:
    """Each image set (once per key) with every text it is matched against."""
    plan: dict[str, tuple[Stimuli, list[str]]] = {}
    pairs = [(images, texts) for t in tests for images in (t.x, t.y) for texts in (t.a, t.b)]
    pairs += [(task.images, task.words) for task in rankings]
    for images, texts in pairs:
        plan.setdefault(images.key, (images, []))[1].extend(texts.items)
    return list(plan.values())
