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

What :math:`\sigma(\text{match logit})` is depends on the model's pair logit :math:`s`, recorded as
``match_score`` in the results' config (:attr:`~vlbias.models.base.ModelAdapter.match_score`): for ``itm`` (an
ITM head's log-odds: ALBEF, BLIP, ViLT, ...) it is the match probability of Table 2; for ``sigmoid`` (SigLIP,
SigLIP 2, open_clip's SigLIPs: :math:`s = e^{\tau}\cos + b`, trained as a log-odds by the sigmoid loss) it is the
model's own probability that the pair matches, so ``probability_gap`` means what it means for ALBEF; for
``softmax`` (open_clip's CLIPs: :math:`s = e^{\tau}\cos`, the logit of a softmax over a batch) it is no
probability: with :math:`e^{\tau} = 100` every pair with a cosine above 0.05 gets :math:`\sigma > 0.99`, so the
gap and the top-k barely move. The tests are computed as defined all the same; measure such a model with
``probe="embed"`` (its cosines, the cross-modal test).

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

Measures:
    Whether a model ties one group of people more than another to a set of attributes: how much closer the target
    set X sits to the attributes A, rather than B, than the target set Y does, in images and in phrases (Eq. 1);
    and which attribute words each group's images are matched with first (Fig. 5).

Direction:
    An ``effect_size`` or ``probability_gap`` above 0 means X sits closer to A than Y does. On MMBias data A is
    the unpleasant words (or valence images) and B the pleasant ones, so X is the group the model finds the less
    pleasant; on BiasWorld X, Y are men's and women's images and A, B the men- and women-stereotyped activities,
    so above 0 is the planted stereotype. Below 0 is the reverse association.

Glossary:
    * ``effect_size``: Eq. 1's d, the mean association s(w, A, B) of X minus that of Y, over the standard
      deviation of s over X ∪ Y; from -2 to 2, 0 for none. Its p-value is one-sided (permutations of X ∪ Y),
      with Holm and Benjamini–Hochberg adjustments over the run's tests.
    * ``cross_modal``, ``textual``, ``visual``: the kind of test: images against phrases, the groups' phrases
      against phrases, images against the valence images (a BiasWorld test without a kind is cross_modal).
    * ``itm``: a test on a fusion model's image–text matching probabilities σ(w, a) (each image's
      ``top_k`` best within A and within B) instead of cosines.
    * ``probability_gap``: the mean matching-probability association of X minus that of Y (Table 2's "probabilistic
      difference" for ALBEF and ViLT); from -1 to 1.
    * ``pleasant_share``: ``zero_shot/<group>/pleasant_share``, the share of pleasant words among the ``top_k``
      attribute words of the group's images; from 0 to 1 (Fig. 5).
    * ``n_skipped``: ``n_skipped/empty``, ``n_skipped/unknown``: distinct texts skipped as empty or made of unknown
      tokens only.
    * ``n_truncated``: distinct texts measured truncated to the model's maximum length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vlbias.data.biasworld import BiasWorld
from vlbias.data.mmbias import TABLE2_PAIRS, read_mmbias
from vlbias.errors import ConfigError, InputError
from vlbias.metrics import CosineZeroShotRanking, ITMTest, WEATTest, ZeroShotRanking
from vlbias.metrics.functional.zero_shot import pleasant_share
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.models.unseen_text import EMPTY, UNKNOWN, UnseenText, unseen_by
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.mmbias_stimuli import (
    AssociationTest,
    RankingTask,
    Stimuli,
    Stimulus,
    biasworld_tests,
    check_pairs,
    image_problems,
    mmbias_rankings,
    mmbias_tests,
    stimulus_list,
)
from vlbias.suites.options import MMBiasOptions
from vlbias.suites.rows import association_row, report_tests

if TYPE_CHECKING:
    from torchmetrics import Metric

PROBES: dict[str, Capability] = {"embed": Capability.EMBED, "match": Capability.MATCH}


class MMBiasSuite(Suite):
    """MMBias association tests (Eq. 1) and zero-shot rankings; see the module docstring.

    Args:
        tests: the association tests to run; ``itm`` tests with ``probe="match"``, the others with ``"embed"``.
        data_config: how the stimuli were made (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.options.MMBiasOptions`).
        rankings: the zero-shot rankings to compute.
        skipped: items and tests already known not to run (missing images, empty sets), with reasons.
    """

    name = "mmbias"
    capability = Capability.EMBED  # for probe="embed"; an instance with probe="match" needs MATCH
    capability_hint = "For MATCH-only models run mmbias with --suite_options '{probe: match}'."

    def __init__(
        self,
        tests: list[AssociationTest],
        data_config: dict[str, object],
        options: MMBiasOptions,
        rankings: list[RankingTask] | None = None,
        skipped: list[dict[str, str]] | None = None,
    ) -> None:
        wrong = [test.name for test in tests if (test.kind == "itm") != (options.probe == "match")]
        if wrong:
            raise ConfigError(
                f"Tests {wrong} do not fit probe {options.probe!r}: 'itm' tests need probe 'match', the others 'embed'"
            )
        self.tests, self.data_config, self.options = tests, data_config, options
        self.rankings = rankings or []
        self.skipped = skipped or []
        self.capability = PROBES[options.probe]

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: MMBiasOptions) -> MMBiasSuite:
        """BiasWorld's tests (:func:`~vlbias.suites.mmbias_stimuli.biasworld_tests`); ``experiments`` default to
        ``cross_modal`` for ``probe="embed"`` and ``itm`` for ``probe="match"``."""
        kinds = options.chosen_experiments(biasworld=True)
        config = {"data": "biasworld", "split": options.split, **world.config}
        return cls(biasworld_tests(world, options.split, kinds), config, options)

    @classmethod
    def from_path(cls, path: Path, options: MMBiasOptions) -> MMBiasSuite:
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
        kinds = options.chosen_experiments(biasworld=False)
        data = read_mmbias(path, phrases=options.phrases, images=options.images, valence_images=options.valence_images)
        if options.pairs is None:
            pairs = TABLE2_PAIRS  # data may cover a part of Table 2: the other tests are skipped with the reason
        else:  # a group the user names but the data lacks entirely is most likely misspelt
            pairs = check_pairs(options.pairs)
            known = set(data.group_phrases) | set(data.group_folders)
            unknown = sorted({group for pair in pairs for group in pair} - known)
            if unknown:
                raise ConfigError(
                    f"`pairs` name group(s) {unknown} that MMBias data {str(path)!r} has neither phrases nor an image "
                    f"folder for; its groups are {sorted(known)}"
                )
        problems = image_problems(data, pairs, kinds)
        if problems and options.on_missing_images == "stop":
            listed = "; ".join(f"{p['item']}: {p['reason']}" for p in problems[:10])
            more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
            raise InputError(
                f"MMBias data {str(path)!r}: {len(problems)} missing or unreadable image(s)/folder(s): {listed}{more}"
            )
        tests, skipped = mmbias_tests(data, pairs, kinds)
        rankings = mmbias_rankings(data) if "zero_shot" in kinds else []
        config = {
            "data": str(path),
            "phrases": options.phrases,
            "images": options.images,
            "valence_images": options.valence_images,
            "pairs": [list(pair) for pair in pairs],
            "experiments": list(kinds),
            "on_missing_images": options.on_missing_images,
            "n_images": {group: len(files) for group, files in sorted(data.group_images.items())},
            "n_valence_images": {valence: len(files) for valence, files in data.valence_images.items()},
        }
        return cls(tests, config, options, rankings=rankings, skipped=problems + data.duplicates + skipped)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "probe": self.options.probe,
            "tests": [test.name for test in self.tests],
            "rankings": [task.group for task in self.rankings],
            "top_k": self.options.top_k,
            "statistics": self.options.recorded_statistics(),
        }

    def stimuli(self) -> list[Stimulus]:
        """Every item of every set the run reads, each set once: with ``probe="embed"`` images and texts (each
        embedded once), with ``probe="match"`` the images (each matched with all the texts it meets)."""
        if self.options.probe == "match":
            return stimulus_list(
                [images for t in self.tests for images in (t.x, t.y)] + [task.images for task in self.rankings]
            )
        sets = [s for t in self.tests for s in (t.x, t.y, t.a, t.b)]
        return stimulus_list(sets + [s for task in self.rankings for s in (task.images, task.words)])

    def start(self, adapter: ModelAdapter, seed: int) -> Measurement:
        return _MMBiasMeasurement(self, adapter, seed)


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
        options = asdict(suite.options.statistics) | {
            "seed": seed,
            "sync_on_compute": False,
            "allow_unequal_sizes": True,
        }
        self.tests = {}
        for test in self.run_tests:
            if test.kind == "itm":
                self.tests[test.name] = ITMTest(top_k=min(suite.options.top_k, len(test.a), len(test.b)), **options)
            else:
                self.tests[test.name] = WEATTest(**options)
        self.rankings = {
            task.group: (ZeroShotRanking if suite.options.probe == "match" else CosineZeroShotRanking)(
                n_words=len(task.words), top_k=min(suite.options.top_k, len(task.words)), sync_on_compute=False
            )
            for task in self.run_rankings
        }
        self.texts = _match_texts(self.run_tests, self.run_rankings) if suite.options.probe == "match" else {}

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
