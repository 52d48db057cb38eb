r"""SEAT (May et al., 2019) and Grounded-WEAT/SEAT (Ross et al., 2021) association tests.

Specs come from :mod:`vlbias.data.seat`: a ``.jsonl`` file or a directory of them, SEAT and grounded
mixed. Every number is computed by :mod:`vlbias.metrics` on association scores
:math:`s(w, A, B)` (Ross Eq. 1); the suite only builds the stimuli and embeds them.

**Embeddings** (Ross Sec. 4; ``source="token_states"``, the default) are last-layer text states:

* ``word`` and ``sentence``: the [CLS] state (``pooling="cls"``, May et al.) or the mean of the
  non-padding states (``pooling="mean"``; what sentence-transformers' MiniLM was trained with). The default,
  ``pooling="model"``, is the adapter's own sentence pooling where it has one (``sentence_bert``: its
  checkpoint's sentence-transformers pooling, mean for all-MiniLM-L6-v2), else [CLS]; each row of the item
  table records the pooling used (``pooling``);
* ``contextual`` (Tan & Celis, 2019): the state of the *first word piece* of the spec's first
  ``contextual_words`` entry in the sentence (earliest occurrence, whole words, case-insensitive; a
  sentence holding none is skipped with a reason).

``source="embed"`` takes EMBED models (CLIP, ...): a text's embedding is ``embed_texts``; a
(caption, image) pair, which such models never fuse, is represented by
:math:`[t; v] / \sqrt2` (unit text and image embeddings concatenated), whose cosine is the mean of
the text and image cosines. It has no ``contextual`` embedding.

``embedding="auto"`` runs each grounded spec's ``test_types``, and a SEAT spec as ``sentence`` if its
file name starts with ``sent-`` else ``word``. ``word``/``sentence`` differ only in the stimuli.

**Experiments** on grounded specs (targets X, Y are captions with their own images; :math:`A_x` are
attribute captions with images of X's group, etc.; Ross Sec. 4.1--4.3):

* ``1``: :math:`s(X, Y, A_x \cup A_y, B_x \cup B_y)` -- vision integrated out;
* ``2``: :math:`\sum_x s(x, A_x, B_x) - \sum_y s(y, A_y, B_y)` -- images of the target's group;
* ``3_congruence``: the absolute-value statistic of images congruent versus incongruent with the
  target (:mod:`vlbias.metrics.functional.grounded_weat`);
* ``3_mask_text`` (T): Experiment 2 with every contextual word of every caption replaced by the mask
  token (the contextual embedding is then the state of the first mask);
* ``3_mask_image`` (I): Experiment 2 with the regions whose detector label is in
  ``person_object_ids`` zeroed (:meth:`RegionFeatures.zero_regions`); region models (VisualBERT,
  LXMERT) with labelled region features only.

Effect size (Ross Eq. 3), one-sided permutation p-value (May et al.) and bootstrap interval per row,
and p-values adjusted across the whole battery (Holm and Benjamini--Hochberg). Target sets of
unequal size have no permutation test (see :func:`vlbias.metrics.functional.weat.p_value_from_associations`):
the row keeps its effect size and interval and says why it has no p-value.

Texts the model cannot see as written (:mod:`vlbias.models.unseen_text`): an empty or whitespace-only text
and one whose every token is the unknown token carry no information and are skipped in each of their sets, with
the reason (``kind`` ``empty`` / ``unknown``); a text longer than the model's maximum is measured on what the
model reads and noted in the ``notes`` of each row it belongs to (``n_truncated`` per row); a contextual
sentence whose contextual word is past the cut is skipped (``kind`` ``truncated``). The metrics count them:
``n_skipped/empty``, ``n_skipped/unknown``, ``n_skipped/truncated`` and ``n_truncated`` (distinct stimuli).

Images are read from the ``images`` folder (default ``<data>/images``), as ``images/<file>`` or
``images/<dataset_dir>/<file>``. Missing images are listed; with ``on_missing_images="skip"`` the test
runs on the pairs that are present (counts per set in the item table), with ``"stop"`` nothing runs.

Measures:
    Whether a model's text (or caption and image) embeddings tie one target set X, more than another Y, to the
    attributes A rather than B (e.g. male names to career words, female names to family words), per test of a
    battery; and, on grounded specs, how much images of a group move that association.

Direction:
    An ``effect_size`` above 0 means the targets X (the spec's ``targ1``) sit closer to A (``attr1``), relative to
    B, than the targets Y (``targ2``) do: in the SEAT and Grounded-WEAT batteries, the stereotype the test is named
    after. Below 0 is the reverse association. Experiment 3's congruence effect size is at least 0 and has no
    direction.

Glossary:
    * ``effect_size``: the effect size d of Ross Eq. 3 (Caliskan et al.'s WEAT; May et al. for sentences): the
      mean association s(w, A, B) of X minus that of Y, over the standard deviation of s over
      X ∪ Y; from -2 to 2, 0 for none. Its p-value is one-sided (re-partitions of X ∪ Y), with Holm and
      Benjamini–Hochberg adjustments over the battery; target sets of unequal size get none.
    * ``word``, ``sentence``, ``contextual``: the embedding of each stimulus: of a word or a sentence alone, or of a
      word inside its sentence (Tan & Celis).
    * ``exp1``: grounded Experiment 1, every caption scored with the images of both groups (vision integrated out).
    * ``exp2``: grounded Experiment 2, each caption with the images of its own group.
    * ``exp3_congruence``: grounded Experiment 3: its effect size is d₃ = (|d_X| + |d_Y|) / 2 of congruent
      against incongruent images (at least 0, no direction), with a paired sign-flip p-value.
    * ``exp3_mask_text``, ``exp3_mask_image``: Experiment 2 with the contextual words, or the person regions of the
      images, masked.
    * ``n_skipped``: ``n_skipped/empty``, ``n_skipped/unknown``: distinct stimuli skipped as empty or made of
      unknown tokens only; ``n_skipped/truncated``: contextual sentences whose word was cut off.
    * ``n_truncated``: distinct stimuli measured truncated to the model's maximum length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import Tensor
from torchmetrics import Metric

from vlbias.data.seat import GroundedTest, SeatTest, read_specs, spec_files
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.metrics import GroundedCongruenceTest, WEATTest
from vlbias.metrics.weat import association_test_results
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.models.unseen_text import EMPTY, TRUNCATED, UNKNOWN, UnseenText
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.options import WEATOptions
from vlbias.suites.rows import association_row, report_tests
from vlbias.suites.weat_encoder import Encoder, Stimulus, word_pattern

_SHOWN = 10
_SEAT_ROLES = {"targ1": "x", "targ2": "y", "attr1": "a", "attr2": "b"}
_POOLED_ROLES = {"x": "x", "y": "y", "ax": "a", "ay": "a", "bx": "b", "by": "b"}  # Experiment 1


@dataclass(frozen=True)
class _Embedded:
    """What :meth:`_WEATMeasurement.probe` gives for one stimulus: its embedding (``None`` when it was not
    embedded) and why the model cannot see its text as written, if so (:mod:`vlbias.models.unseen_text`)."""

    embedding: Tensor | None
    unseen: UnseenText | None = None


@dataclass(frozen=True)
class _Item:
    """One stimulus of the run: a :class:`Stimulus` embedded as ``kind`` under test number ``test``'s
    contextual words (one embedding per distinct item, shared by every row that uses it)."""

    test: int
    kind: str
    stimulus: Stimulus


@dataclass
class _Row:
    """One row of the battery: a test, an embedding kind, an experiment (``"seat"`` for SEAT specs) and the
    names of its sets (``targ1``, ... for SEAT; ``x``, ``y``, ``ax``, ``ay``, ``bx``, ``by`` for grounded)."""

    key: str
    test: int
    kind: str
    experiment: str
    sets: list[str]


class _PooledTest:
    r"""A row whose targets share one pair of attribute sets: SEAT, and Experiment 1 (:math:`A = A_x \cup A_y`,
    :math:`B = B_x \cup B_y`); one :class:`~vlbias.metrics.WEATTest`."""

    def __init__(self, roles: dict[str, str], options: dict) -> None:
        self.roles, self.test = roles, WEATTest(**options, allow_unequal_sizes=True)

    def feeds(self, name: str) -> list[tuple[Metric, str]]:
        """The (metric, ``update`` keyword) pairs that set ``name``'s embeddings go to."""
        return [(self.test, self.roles[name])]

    def metrics(self) -> list[Metric]:
        return [self.test]

    def compute(self) -> dict[str, Tensor]:
        return self.test.compute()


class _OwnGroupTest:
    r"""A row that scores each target against the attributes pictured with its own group: Experiment 2 and
    3_mask_* on :math:`s(x, A_x, B_x)` and :math:`s(y, A_y, B_y)`, or 3_congruence on those and the
    other group's :math:`s(x, A_y, B_y)`, :math:`s(y, A_x, B_x)`.

    A target's score needs every attribute embedding, which may lie on other ranks, so the embeddings are kept
    (and synced) in two :class:`~vlbias.metrics.WEATTest` states, ``by_x`` (X, Y, :math:`A_x`, :math:`B_x`) and
    ``by_y`` (X, Y, :math:`A_y`, :math:`B_y`); both receive X and Y in the same order, so a target's own and
    other scores stay paired. ``compute`` takes the scores from them and the test from
    :mod:`vlbias.metrics`."""

    def __init__(self, congruence: bool, options: dict) -> None:
        self.congruence, self.options = congruence, options
        self.by_x, self.by_y = (WEATTest(**options, allow_unequal_sizes=True) for _ in range(2))

    def feeds(self, name: str) -> list[tuple[Metric, str]]:
        """The (metric, ``update`` keyword) pairs that set ``name``'s embeddings go to."""
        if name in ("x", "y"):
            return [(self.by_x, name), (self.by_y, name)]
        return [(self.by_x if name.endswith("x") else self.by_y, name[0])]

    def metrics(self) -> list[Metric]:
        return [self.by_x, self.by_y]

    def compute(self) -> dict[str, Tensor]:
        x_own, y_other = self.by_x.associations()
        x_other, y_own = self.by_y.associations()
        if not self.congruence:
            return association_test_results(x_own, y_own, self.by_x)
        # its sign-flip test counts up to its own limit of sign vectors; `exact_limit` counts re-partitions of X ∪ Y
        test = GroundedCongruenceTest(**{key: value for key, value in self.options.items() if key != "exact_limit"})
        test.update(x_own=x_own, x_other=x_other, y_own=y_own, y_other=y_other)
        return test.compute()


def _image_keys(test: GroundedTest, file: str) -> list[str]:
    """Where a grounded spec lists image ``file``: ``targ1.images``, ``attr1.<category>_Images``, ..."""
    keys = []
    for s in test.sets:
        for category, mapping in s.images.items():
            if file in mapping:
                keys.append(f"{s.key}.{category}_Images" if category else f"{s.key}.images")
    return keys


class WEATSuite(Suite):
    """SEAT and Grounded-WEAT/SEAT Experiments 1--3 (module docstring).

    Items table: one row per (test, embedding kind, experiment): ``effect_size``, ``statistic``,
    ``p_value``, ``p_holm``, ``p_bh`` (across the battery), ``ci_low``/``ci_high``, ``n_x``, ``n_y``,
    ``n_a``, ``n_b`` (and ``n_ax``, ``n_ay``, ``n_bx``, ``n_by`` for grounded rows), ``pooling``
    (of word/sentence rows from token states, else empty), ``n_truncated`` and ``notes`` (its truncated texts).
    Metrics ``<row>/effect_size``; p-values under the same key and ``<key>@holm``, ``<key>@bh``; the counts
    ``n_skipped/empty``, ``n_skipped/unknown``, ``n_skipped/truncated``, ``n_truncated`` (module docstring).

    Stimuli (the unit of sharding): each distinct (test, embedding kind, stimulus) once, in the order the rows
    first use it; its embedding goes to every row and set that lists it. Rows a model cannot run (no mask
    token; no labelled person region) are skipped when the measurement starts, and their stimuli are not embedded.

    Args:
        tests: the specs.
        data_config: where they came from (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.options.WEATOptions`); ``images``, the folder of the
            grounded specs' images, as :meth:`from_path` resolved it.
    """

    name = "weat"
    capability_hint = (
        "weat reads token states by default (source: token_states); for EMBED models (clip, ...) run it with "
        "--suite_options '{source: embed}'."
    )

    def __init__(
        self, tests: list[SeatTest | GroundedTest], data_config: dict[str, object], options: WEATOptions
    ) -> None:
        if not tests:
            raise ConfigError("Expected at least one test spec.")
        self.tests, self.data_config, self.options = tests, data_config, options
        self.experiments = options.chosen_experiments()
        self.person_object_ids = [int(i) for i in options.person_object_ids]
        self.images = Path(options.images) if options.images is not None else None
        self.image_paths, self.missing = self._find_images()
        self._plan()

    @property
    def capability(self) -> Capability:
        return Capability.EMBED if self.options.source == "embed" else Capability.TOKEN_STATES

    @classmethod
    def from_path(cls, path: Path, options: WEATOptions) -> WEATSuite:
        """Specs from ``path`` (a ``.jsonl`` file or a directory of them); each test is named by its path
        relative to ``path`` without the suffix (``coco/weat6``); images from ``images`` (default
        ``<path>/images``, or beside a single file)."""
        path = Path(path)
        root = path if path.is_dir() else path.parent
        tests = []
        for file in spec_files(path):
            prefix = file.relative_to(root).with_suffix("").as_posix()
            tests += [replace(test, name=prefix + test.name[len(file.stem) :]) for test in read_specs(file)]
        images = options.images if options.images is not None else str(root / "images")
        return cls(tests, {"data": str(path)}, replace(options, images=images))

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "tests": [test.name for test in self.tests],
            "images": None if self.images is None else str(self.images),
            "on_missing_images": self.options.on_missing_images,
            "embedding": self.options.embedding,
            "pooling": self.options.pooling,
            "source": self.options.source,
            "experiments": self.experiments,
            "person_object_ids": self.person_object_ids,
            "statistics": self.options.recorded_statistics(),
        }

    # ------------------------------------------------------------------------- images
    def _find_images(self) -> tuple[dict[tuple[str, str], Path], dict[str, list[str]]]:
        """``{(test, file): path}`` of the images found and ``{test: [missing files]}``; raises when
        ``on_missing_images="stop"`` and some are missing."""
        found, missing = {}, {}
        for test in self.tests:
            if not isinstance(test, GroundedTest):
                continue
            files = sorted({image for s in test.sets for mapping in s.images.values() for image in mapping})
            for file in files:
                candidates = [] if self.images is None else [self.images / file]
                if self.images is not None and test.dataset_dir:
                    candidates.append(self.images / test.dataset_dir / file)
                path = next((c for c in candidates if c.is_file()), None)
                if path is None:
                    missing.setdefault(test.name, []).append(file)
                else:
                    found[(test.name, file)] = path
        if missing and self.options.on_missing_images == "stop":
            tests = {test.name: test for test in self.tests}
            lines = "; ".join(
                f"{name} ({tests[name].path}): {len(files)} missing, e.g. "
                + ", ".join(f"{file} ({', '.join(_image_keys(tests[name], file))})" for file in files[:_SHOWN])
                for name, files in missing.items()
            )
            raise InputError(f"Images missing from {str(self.images)!r} (on_missing_images='stop'): {lines}.")
        return found, missing

    # ------------------------------------------------------------------------- the battery
    def _plan(self) -> None:
        """The rows, the distinct items they embed (in the order the rows first use them) and, per item, the
        (row, set) pairs it belongs to; skips known from the specs alone go to ``self.skipped``."""
        self.skipped: list[dict[str, str]] = []
        self.rows: list[_Row] = []
        members: dict[_Item, list[tuple[int, str]]] = {}
        for index, test in enumerate(self.tests):
            self.skipped += test.duplicates
            self.skipped += [
                {
                    "item": f"{test.name}: image {file}",
                    "reason": f"not found in {str(self.images)!r} (listed in {', '.join(_image_keys(test, file))})",
                }
                for file in self.missing.get(test.name, [])
            ]
            for kind in self._kinds(test):
                for row, sets in self._test_rows(index, test, kind):
                    self._add_row(row, sets, members)
        self._items = list(members)
        self._members = list(members.values())

    def _kinds(self, test: SeatTest | GroundedTest) -> list[str]:
        if self.options.embedding != "auto":
            kinds = [self.options.embedding]
        elif isinstance(test, GroundedTest):
            kinds = list(test.test_types)
        else:
            kinds = ["sentence" if test.path.stem.startswith("sent-") else "word"]
        keep = []
        for kind in kinds:
            if kind == "contextual" and self.options.source == "embed":
                reason = "source='embed' has no token states for contextual embeddings"
            elif kind == "contextual" and not test.contextual_words:
                reason = f"{test.path} lists no contextual_words"
            else:
                keep.append(kind)
                continue
            self.skipped.append({"item": f"{test.name}/contextual", "reason": reason})
        return keep

    def _test_rows(
        self, index: int, test: SeatTest | GroundedTest, kind: str
    ) -> list[tuple[_Row, dict[str, list[Stimulus]]]]:
        """The rows of one test and embedding kind, each with the stimuli of its sets."""
        if isinstance(test, SeatTest):
            sets = {s.key: [Stimulus(e) for e in s.examples] for s in test.sets}
            return [(_Row(f"{test.name}/{kind}", index, kind, "seat", list(sets)), sets)]
        rows = []
        cat_x, cat_y = test.targ1.category, test.targ2.category
        named = {
            "x": test.targ1.pairs(),
            "y": test.targ2.pairs(),
            "ax": test.attr1.pairs(cat_x),
            "ay": test.attr1.pairs(cat_y),
            "bx": test.attr2.pairs(cat_x),
            "by": test.attr2.pairs(cat_y),
        }
        for experiment in self.experiments:
            key = f"{test.name}/{kind}/exp{experiment}"
            if experiment == "3_mask_text" and not test.contextual_words:
                self.skipped.append({"item": key, "reason": "no contextual_words to mask"})
                continue
            flags = {"mask_text": experiment == "3_mask_text", "mask_person": experiment == "3_mask_image"}
            sets = {
                name: [
                    Stimulus(caption, self.image_paths[(test.name, image)], **flags)
                    for caption, image in pairs
                    if (test.name, image) in self.image_paths
                ]
                for name, pairs in named.items()
            }
            rows.append((_Row(key, index, kind, experiment, list(sets)), sets))
        return rows

    def _add_row(self, row: _Row, sets: dict[str, list[Stimulus]], members: dict[_Item, list[tuple[int, str]]]) -> None:
        """Enter ``row`` and its sets' stimuli (once per set), leaving out contextual sentences without the word."""
        pattern = word_pattern(self.tests[row.test].contextual_words)
        for name, stimuli in sets.items():
            for stimulus in dict.fromkeys(stimuli):
                if row.kind == "contextual" and pattern.search(stimulus.text) is None:
                    self.skipped.append(
                        {"item": f"{row.key}/{name}: {stimulus.text!r}", "reason": "holds none of the contextual_words"}
                    )
                else:
                    members.setdefault(_Item(row.test, row.kind, stimulus), []).append((len(self.rows), name))
        self.rows.append(row)

    def stimuli(self) -> Sequence[_Item]:
        """Every distinct (test, embedding kind, stimulus) of the battery, each embedded once per run."""
        return self._items

    def start(self, adapter: ModelAdapter, seed: int) -> _WEATMeasurement:
        grounded = [t.name for t in self.tests if isinstance(t, GroundedTest)]
        if grounded and adapter.text_only:
            raise CapabilityError(
                f"Model {adapter.name!r} is text-only but grounded tests need images: {', '.join(grounded[:_SHOWN])}. "
                "Run text-only models on plain SEAT specs."
            )
        if "3_mask_image" in self.experiments and grounded:
            from vlbias.models.region_adapter import RegionAdapter

            if not isinstance(adapter, RegionAdapter):
                raise CapabilityError(
                    f"Experiment '3_mask_image' masks person regions, but model {adapter.name!r} reads no regions "
                    "(region models: visualbert, lxmert)."
                )
        return _WEATMeasurement(self, adapter, seed)

    def _has_person_regions(self, test: GroundedTest, adapter: ModelAdapter) -> bool:
        if getattr(adapter, "store", None) is None:  # grid "regions" have no detector labels
            return False
        images = sorted({p for (name, _), p in self.image_paths.items() if name == test.name})
        ids = torch.tensor(self.person_object_ids)
        return any(bool(torch.isin(adapter.prepare_images([image]).object_ids.cpu(), ids).any()) for image in images)


class _WEATMeasurement(Measurement):
    """One run of :class:`WEATSuite`: a test object per row that can run on this adapter (the others are
    skipped with a reason), fed the embeddings of the rows' sets."""

    def __init__(self, suite: WEATSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        self.pooling = getattr(adapter, "pooling", "cls") if suite.options.pooling == "model" else suite.options.pooling
        self.row_skips = self._row_skips()
        options = asdict(suite.options.statistics) | {"seed": seed, "sync_on_compute": False}
        self.tests: dict[int, _PooledTest | _OwnGroupTest] = {
            index: self._test(row, options) for index, row in enumerate(suite.rows) if index not in self.row_skips
        }
        self.encoders = {
            (row.test, row.kind): Encoder(
                adapter,
                row.kind,
                self.pooling,
                suite.options.source,
                word_pattern(suite.tests[row.test].contextual_words),
                suite.person_object_ids,
            )
            for row in suite.rows
        }

    def _row_skips(self) -> dict[int, str]:
        """``{row: reason}`` of the rows this adapter cannot run: text masking without a mask token, person
        masking on images none of whose regions is labelled a person."""
        suite, skips, has_regions = self.suite, {}, {}
        for index, row in enumerate(suite.rows):
            if row.experiment == "3_mask_text" and not getattr(self.adapter.tokenizer, "mask_token", None):
                skips[index] = f"model {self.adapter.name!r} has no mask token"
            elif row.experiment == "3_mask_image":
                if row.test not in has_regions:
                    has_regions[row.test] = suite._has_person_regions(suite.tests[row.test], self.adapter)
                if not has_regions[row.test]:
                    skips[index] = (
                        f"no region of the test's images has a label in person_object_ids {suite.person_object_ids} "
                        "(grid features carry no labels: give labelled region features)"
                    )
        return skips

    @staticmethod
    def _test(row: _Row, options: dict) -> _PooledTest | _OwnGroupTest:
        if row.experiment == "seat":
            return _PooledTest(_SEAT_ROLES, options)
        if row.experiment == "1":
            return _PooledTest(_POOLED_ROLES, options)
        return _OwnGroupTest(row.experiment == "3_congruence", options)

    def metrics(self) -> list[Metric]:
        return [metric for test in self.tests.values() for metric in test.metrics()]

    def _memberships(self, index: int) -> list[tuple[int, str]]:
        """The (row, set) pairs of stimulus ``index`` whose row runs."""
        return [(row, name) for row, name in self.suite._members[index] if row in self.tests]

    def probe(self, batch: Batch) -> list[_Embedded | None]:
        """Each item's embedding (``None`` for an item no running row uses), embedded in groups that share the
        test, kind, masking and image presence; an item whose text the model cannot see
        (:meth:`Encoder.unseen`: empty, all unknown tokens) is not embedded, a truncated one is."""
        groups: dict[tuple, list[int]] = {}
        for position, (index, item) in enumerate(zip(batch.indices, batch.items)):
            if self._memberships(index):
                stimulus = item.stimulus
                groups.setdefault((item.test, item.kind, stimulus.image is None, stimulus.mask_person), []).append(
                    position
                )
        embeddings: list[_Embedded | None] = [None] * len(batch)
        with measuring(self.adapter.device):
            for (test, kind, _, _), positions in groups.items():
                encoder = self.encoders[(test, kind)]
                unseen = encoder.unseen([batch.items[p].stimulus for p in positions])
                for position, problem in zip(positions, unseen):
                    embeddings[position] = _Embedded(None, problem)
                kept = [p for p, problem in zip(positions, unseen) if problem is None or not problem.skip]
                if kept:
                    embedded = encoder([batch.items[p].stimulus for p in kept])
                    for position, embedding in zip(kept, embedded):
                        embeddings[position] = replace(embeddings[position], embedding=embedding)
        return embeddings

    def update(self, batch: Batch, outputs: list[_Embedded | None]) -> None:
        """Feed each finite embedding to the metrics of every (row, set) it belongs to, counting the sets'
        sizes. Skipped in each of its sets, with the reason: a stimulus whose text the model cannot see
        (counted ``skipped/<kind>``) and a non-finite embedding. A truncated text is fed and noted
        (``note_row``: a note on each row it belongs to; counted ``truncated`` and ``<row>/<set>/truncated``)."""
        pending: dict[tuple[int, str], tuple[Metric, str, list[Tensor]]] = {}
        rows = self.suite.rows
        for index, item, output in zip(batch.indices, batch.items, outputs):
            if output is None:
                continue
            memberships, unseen = self._memberships(index), output.unseen
            where = {
                (row, name): f"{rows[row].key}/{name}: {item.stimulus.text!r} {item.stimulus.image or ''}".rstrip()
                for row, name in memberships
            }
            if output.embedding is None:
                self.count(f"skipped/{unseen.kind}")
                for membership in memberships:
                    self.note_skip(index, {"item": where[membership], "reason": unseen.reason, "kind": unseen.kind})
                continue
            self.count("embedded")
            if not torch.isfinite(output.embedding).all():
                for membership in memberships:
                    self.note_skip(index, {"item": where[membership], "reason": "embedding holds NaN or inf"})
                continue
            if unseen is not None:
                self.count(unseen.kind)
                for row, name in memberships:
                    self.count(f"{rows[row].key}/{name}/{unseen.kind}")
                    self.note_row(index, {"row": row, "note": f"{where[row, name]}: {unseen.reason}"})
            for row, name in memberships:
                self.count(f"{rows[row].key}/{name}")
                for metric, role in self.tests[row].feeds(name):
                    pending.setdefault((id(metric), role), (metric, role, []))[2].append(output.embedding)
        for metric, role, embeddings in pending.values():
            metric.update(**{role: torch.stack(embeddings)})

    def compute(self, gathered: Gathered) -> SuiteOutput:
        output = SuiteOutput(metrics={}, skipped=[*self.suite.skipped, *gathered.skipped])
        rows = []
        for index, row in enumerate(self.suite.rows):
            sizes = {name: int(gathered.counts.get(f"{row.key}/{name}", 0)) for name in row.sets}
            reason = self.row_skips.get(index) or self._empty(row, sizes)
            if reason:
                output.skipped.append({"item": row.key, "reason": reason})
            else:
                notes = [note["note"] for note in gathered.rows if note["row"] == index]
                truncated = sum(int(gathered.counts.get(f"{row.key}/{name}/{TRUNCATED}", 0)) for name in row.sets)
                rows.append(
                    self._row(row, self.tests[index].compute(), sizes)
                    | {"n_truncated": truncated, "notes": "; ".join(notes)}
                )
        output.skipped += [
            {
                "item": row["key"],
                "reason": "all association scores are equal (e.g. every item embeds "
                "alike, as words unknown to the tokenizer do): the effect size is undefined",
            }
            for row in rows
            if not math.isfinite(row["effect_size"])
        ]
        output.items = [row for row in rows if math.isfinite(row["effect_size"])]
        report_tests(output, output.items, name="key")
        if output.items:
            output.metrics |= {
                f"n_skipped/{kind}": float(gathered.counts.get(f"skipped/{kind}", 0))
                for kind in (EMPTY, UNKNOWN, TRUNCATED)
            }
            output.metrics["n_truncated"] = float(gathered.counts.get(TRUNCATED, 0))
        output.n_items = int(gathered.counts.get("embedded", 0))
        return output

    @staticmethod
    def _empty(row: _Row, sizes: dict[str, int]) -> str:
        empty = [f"{row.key}/{name}" for name, size in sizes.items() if size == 0]
        return f"empty set(s) after skipping bad items: {', '.join(empty)}" if empty else ""

    def _row(self, row: _Row, result: dict[str, Tensor], sizes: dict[str, int]) -> dict:
        """The item-table row: the suite's columns, the test's numbers and the set sizes."""
        test = self.suite.tests[row.test]
        if row.experiment == "seat":
            counts = {"n_a": sizes["attr1"], "n_b": sizes["attr2"]}
        else:
            counts = {f"n_{name}": size for name, size in sizes.items()}
            counts |= {"n_a": sizes["ax"] + sizes["ay"], "n_b": sizes["bx"] + sizes["by"]}
        pooled = row.kind in ("word", "sentence") and self.suite.options.source == "token_states"
        return {
            "key": row.key,
            "test": test.name,
            "file": str(test.path),
            "embedding": row.kind,
            "experiment": row.experiment,
            "pooling": self.pooling if pooled else "",
            **association_row(result),
            **counts,
        }
