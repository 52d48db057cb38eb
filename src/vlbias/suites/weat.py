r"""SEAT (May et al., 2019) and Grounded-WEAT/SEAT (Ross et al., 2021) association tests.

Specs come from :mod:`vlbias.data.seat`: a ``.jsonl`` file or a directory of them, SEAT and grounded
mixed. Every number is computed by :mod:`vlbias.metrics` on association scores
:math:`s(w, A, B)` (Ross Eq. 1); the suite only builds the stimuli and embeds them.

**Embeddings** (Ross Sec. 4; ``source="token_states"``, the default) are last-layer text states:

* ``word`` and ``sentence``: the [CLS] state (``pooling="cls"``, May et al.) or the mean of the
  non-padding states (``pooling="mean"``; what sentence-transformers' MiniLM was trained with);
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

Images are read from the ``images`` folder (default ``<data>/images``), as ``images/<file>`` or
``images/<dataset_dir>/<file>``. Missing images are listed; with ``on_missing_images="skip"`` the test
runs on the pairs that are present (counts per set in the item table), with ``"stop"`` nothing runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import Tensor

from vlbias.data.seat import GroundedTest, SeatTest, read_specs, spec_files
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.metrics.functional.grounded_weat import (
    congruence_effect_size,
    congruence_interval,
    congruence_p_value,
    congruence_statistic,
)
from vlbias.metrics.functional.multiple_testing import (
    benjamini_hochberg,
    holm_bonferroni,
)
from vlbias.metrics.functional.weat import (
    effect_size_from_associations,
    interval_from_associations,
    p_value_from_associations,
    statistic_from_associations,
    weat_association,
)
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.suites.base import Suite, SuiteOutput

EMBEDDINGS = ("word", "sentence", "contextual", "auto")
POOLINGS = ("cls", "mean")
SOURCES = ("token_states", "embed")
EXPERIMENTS = ("1", "2", "3_congruence", "3_mask_text", "3_mask_image")
ON_MISSING = ("skip", "stop")
_SHOWN = 10


@dataclass(frozen=True)
class Stimulus:
    """One thing to embed: a text, its image (grounded) and how it is masked."""

    text: str
    image: Path | None = None
    mask_text: bool = False
    mask_person: bool = False


def _choice(name: str, value: object, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(f"Expected option `{name}` to be one of {', '.join(map(repr, choices))} but got {value!r}.")


def _word_pattern(words: Sequence[str]) -> re.Pattern | None:
    """Whole-word, case-insensitive alternation, longest first (``construction worker`` before ``worker``)."""
    if not words:
        return None
    alternation = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)", re.IGNORECASE)


class Encoder:
    """Embeds :class:`Stimulus` lists with one adapter and one embedding kind, caching each stimulus."""

    def __init__(
        self,
        adapter: ModelAdapter,
        kind: str,
        pooling: str,
        source: str,
        contextual: re.Pattern | None,
        person_object_ids: Sequence[int],
        batch_size: int,
    ) -> None:
        self.adapter, self.kind, self.pooling, self.source = (
            adapter,
            kind,
            pooling,
            source,
        )
        self.contextual, self.person_object_ids, self.batch_size = (
            contextual,
            list(person_object_ids),
            batch_size,
        )
        self.cache: dict[Stimulus, Tensor] = {}

    def text(self, stimulus: Stimulus) -> str:
        if not stimulus.mask_text:
            return stimulus.text
        return self.contextual.sub(self.adapter.tokenizer.mask_token, stimulus.text)

    def anchor(self, stimulus: Stimulus) -> int | None:
        """Character offset of the contextual word (or of the first mask) in the text fed to the model."""
        text = self.text(stimulus)
        if stimulus.mask_text:
            found = text.find(self.adapter.tokenizer.mask_token)
            return None if found < 0 else found
        match = self.contextual.search(text) if self.contextual is not None else None
        return None if match is None else match.start()

    def __call__(self, stimuli: list[Stimulus]) -> Tensor:
        todo = list(dict.fromkeys(s for s in stimuli if s not in self.cache))
        with measuring(self.adapter.device):
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start : start + self.batch_size]
                for stimulus, row in zip(batch, self._encode(batch)):
                    self.cache[stimulus] = row
        return torch.stack([self.cache[s] for s in stimuli])

    def _encode(self, batch: list[Stimulus]) -> Tensor:
        adapter, texts = self.adapter, [self.text(s) for s in batch]
        tokens = adapter.prepare_texts(texts)
        images = [s.image for s in batch]
        if self.source == "embed":
            embedded = adapter.embed_texts(tokens).float()
            if images[0] is not None:
                pictures = adapter.embed_images(adapter.prepare_images(images)).float()
                embedded = torch.cat([embedded, pictures], dim=1) / math.sqrt(2)
            return embedded.cpu()
        pixels = adapter.no_image(len(batch)) if images[0] is None else adapter.prepare_images(images)
        if batch[0].mask_person:
            ids = torch.tensor(self.person_object_ids, device=pixels.object_ids.device)
            pixels = pixels.zero_regions(torch.isin(pixels.object_ids, ids))
        states = adapter.token_states(pixels, tokens).float()  # (B, T, H)
        if self.kind == "contextual":
            return states[torch.arange(len(batch)), self._positions(batch, texts)].cpu()
        if self.pooling == "cls":
            return states[:, 0].cpu()
        mask = tokens["attention_mask"].unsqueeze(-1).to(states.dtype)  # (B, T, 1)
        return ((states * mask).sum(1) / mask.sum(1)).cpu()

    def _positions(self, batch: list[Stimulus], texts: list[str]) -> Tensor:
        """Index of the first word piece covering each stimulus's anchor character."""
        adapter = self.adapter
        offsets = adapter.tokenizer(
            texts,
            return_offsets_mapping=True,
            padding=True,
            truncation=True,
            max_length=adapter.max_text_length,
        )["offset_mapping"]
        positions = []
        for stimulus, spans, text in zip(batch, offsets, texts):
            anchor = self.anchor(stimulus)
            found = [t for t, (lo, hi) in enumerate(spans) if hi > lo and lo <= anchor < hi]
            if not found:
                raise InputError(
                    f"The contextual word at character {anchor} of {text!r} was truncated away by the tokenizer."
                )
            positions.append(found[0])
        return torch.tensor(positions)


@dataclass
class _Set:
    """Embeddings of one set, with its name and size."""

    name: str
    embeddings: Tensor


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
    ``n_a``, ``n_b`` (and ``n_ax``, ``n_ay``, ``n_bx``, ``n_by`` for grounded rows), ``p_note``.
    Metrics ``<row>/effect_size``; p-values under the same key and ``<key>@holm``, ``<key>@bh``.

    Args:
        tests: the specs.
        data_config: where they came from (recorded in results).
        images: folder of the grounded specs' images.
        on_missing_images: ``"skip"`` (run on what is present) or ``"stop"``.
        embedding: ``"word"``, ``"sentence"``, ``"contextual"`` or ``"auto"``.
        pooling: ``"cls"`` or ``"mean"`` for word/sentence embeddings from token states.
        source: ``"token_states"`` or ``"embed"`` (the capability used).
        experiments: grounded experiments to run; default all but ``3_mask_image``, which is added
            when ``person_object_ids`` is given.
        person_object_ids: detector class ids of people, for ``3_mask_image``.
        n_permutations, n_bootstrap, confidence: see :mod:`vlbias.metrics.functional.weat`.
        batch_size: stimuli per forward pass.
    """

    name = "weat"
    capability_hint = (
        "weat reads token states by default (source: token_states); for EMBED models (clip, ...) run it with "
        "--suite_options '{source: embed}'."
    )

    def __init__(
        self,
        tests: list[SeatTest | GroundedTest],
        data_config: dict[str, object],
        images: str | Path | None = None,
        on_missing_images: str = "skip",
        embedding: str = "auto",
        pooling: str = "cls",
        source: str = "token_states",
        experiments: Sequence[str] | None = None,
        person_object_ids: Sequence[int] = (),
        n_permutations: int | None = None,
        n_bootstrap: int = 1_000,
        confidence: float = 0.95,
        batch_size: int = 32,
    ) -> None:
        _choice("embedding", embedding, EMBEDDINGS)
        _choice("pooling", pooling, POOLINGS)
        _choice("source", source, SOURCES)
        _choice("on_missing_images", on_missing_images, ON_MISSING)
        if source == "embed" and embedding == "contextual":
            raise ConfigError("Option `embedding='contextual'` needs token states; `source='embed'` has none.")
        if experiments is None:
            experiments = [e for e in EXPERIMENTS if e != "3_mask_image" or person_object_ids]
        for experiment in experiments:
            _choice("experiments[]", str(experiment), EXPERIMENTS)
        if "3_mask_image" in experiments and not person_object_ids:
            raise ConfigError(
                "Experiment '3_mask_image' needs option `person_object_ids` (detector class ids of people)."
            )
        if not tests:
            raise ConfigError("Expected at least one test spec.")
        self.tests, self.data_config = tests, data_config
        self.embedding, self.pooling, self.source = embedding, pooling, source
        self.experiments = [str(e) for e in experiments]
        self.person_object_ids = [int(i) for i in person_object_ids]
        self.on_missing_images = on_missing_images
        self.n_permutations, self.n_bootstrap, self.confidence, self.batch_size = (
            n_permutations,
            n_bootstrap,
            confidence,
            batch_size,
        )
        self.images = Path(images) if images is not None else None
        self.image_paths, self.missing = self._find_images()

    @property
    def capability(self) -> Capability:
        return Capability.EMBED if self.source == "embed" else Capability.TOKEN_STATES

    @classmethod
    def from_path(cls, path: Path, images: str | Path | None = None, **options) -> WEATSuite:
        """Specs from ``path`` (a ``.jsonl`` file or a directory of them); each test is named by its path
        relative to ``path`` without the suffix (``coco/weat6``); images from ``images`` (default
        ``<path>/images``, or beside a single file)."""
        path = Path(path)
        root = path if path.is_dir() else path.parent
        tests = []
        for file in spec_files(path):
            prefix = file.relative_to(root).with_suffix("").as_posix()
            tests += [replace(test, name=prefix + test.name[len(file.stem) :]) for test in read_specs(file)]
        images = Path(images) if images is not None else root / "images"
        return cls(tests, {"data": str(path)}, images=images, **options)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "tests": [test.name for test in self.tests],
            "images": None if self.images is None else str(self.images),
            "on_missing_images": self.on_missing_images,
            "embedding": self.embedding,
            "pooling": self.pooling,
            "source": self.source,
            "experiments": self.experiments,
            "person_object_ids": self.person_object_ids,
            "n_permutations": self.n_permutations,
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
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
        if missing and self.on_missing_images == "stop":
            tests = {test.name: test for test in self.tests}
            lines = "; ".join(
                f"{name} ({tests[name].path}): {len(files)} missing, e.g. "
                + ", ".join(f"{file} ({', '.join(_image_keys(tests[name], file))})" for file in files[:_SHOWN])
                for name, files in missing.items()
            )
            raise InputError(f"Images missing from {str(self.images)!r} (on_missing_images='stop'): {lines}.")
        return found, missing

    # ------------------------------------------------------------------------- running
    def run(self, adapter: ModelAdapter, seed: int = 0) -> SuiteOutput:
        grounded = [t.name for t in self.tests if isinstance(t, GroundedTest)]
        if grounded and adapter.text_only:
            raise CapabilityError(
                f"Model {adapter.name!r} is text-only but grounded tests need images: {', '.join(grounded[:_SHOWN])}. "
                "Run text-only models on plain SEAT specs."
            )
        if "3_mask_image" in self.experiments and grounded:
            from vlbias.models.regions import RegionAdapter

            if not isinstance(adapter, RegionAdapter):
                raise CapabilityError(
                    f"Experiment '3_mask_image' masks person regions, but model {adapter.name!r} reads no regions "
                    "(region models: visualbert, lxmert)."
                )
        output = SuiteOutput(metrics={})
        rows: list[dict] = []
        n_embedded = 0
        for test in self.tests:
            output.skipped.extend(test.duplicates)
            for file in self.missing.get(test.name, []):
                output.skipped.append(
                    {
                        "item": f"{test.name}: image {file}",
                        "reason": f"not found in {str(self.images)!r} (listed in {', '.join(_image_keys(test, file))})",
                    }
                )
            for kind in self._kinds(test, output):
                encoder = self._encoder(adapter, test, kind)
                if isinstance(test, SeatTest):
                    rows += self._seat_rows(test, kind, encoder, output, seed)
                else:
                    rows += self._grounded_rows(test, kind, encoder, output, seed)
                n_embedded += len(encoder.cache)
        for row in (r for r in rows if not math.isfinite(r["effect_size"])):
            output.skipped.append(
                {
                    "item": row["key"],
                    "reason": "all association scores are equal (e.g. every item embeds "
                    "alike, as words unknown to the tokenizer do): the effect size is undefined",
                }
            )
        rows = [row for row in rows if math.isfinite(row["effect_size"])]
        self._adjust(rows)
        for row in rows:
            key = row["key"]
            output.metrics[f"{key}/effect_size"] = row["effect_size"]
            output.intervals[f"{key}/effect_size"] = [row["ci_low"], row["ci_high"]]
            if not math.isnan(row["p_value"]):
                for suffix, column in (
                    ("", "p_value"),
                    ("@holm", "p_holm"),
                    ("@bh", "p_bh"),
                ):
                    output.p_values[f"{key}/effect_size{suffix}"] = row[column]
        output.items = rows
        output.n_items = n_embedded
        return output

    def _kinds(self, test: SeatTest | GroundedTest, output: SuiteOutput) -> list[str]:
        if self.embedding != "auto":
            kinds = [self.embedding]
        elif isinstance(test, GroundedTest):
            kinds = list(test.test_types)
        else:
            kinds = ["sentence" if test.path.stem.startswith("sent-") else "word"]
        keep = []
        for kind in kinds:
            if kind == "contextual" and self.source == "embed":
                output.skipped.append(
                    {
                        "item": f"{test.name}/contextual",
                        "reason": "source='embed' has no token states for contextual embeddings",
                    }
                )
            elif kind == "contextual" and not test.contextual_words:
                output.skipped.append(
                    {
                        "item": f"{test.name}/contextual",
                        "reason": f"{test.path} lists no contextual_words",
                    }
                )
            else:
                keep.append(kind)
        return keep

    def _encoder(self, adapter: ModelAdapter, test: SeatTest | GroundedTest, kind: str) -> Encoder:
        pattern = _word_pattern(test.contextual_words)
        return Encoder(
            adapter,
            kind,
            self.pooling,
            self.source,
            pattern,
            self.person_object_ids,
            self.batch_size,
        )

    def _embed(self, name: str, stimuli: list[Stimulus], encoder: Encoder, output: SuiteOutput) -> _Set:
        """Embeddings of ``stimuli``, leaving out (with reasons) contextual sentences without the word
        and non-finite embeddings."""
        kept = []
        for stimulus in dict.fromkeys(stimuli):
            if encoder.kind == "contextual" and encoder.anchor(stimulus) is None:
                output.skipped.append(
                    {
                        "item": f"{name}: {stimulus.text!r}",
                        "reason": "holds none of the contextual_words",
                    }
                )
            else:
                kept.append(stimulus)
        embeddings = encoder(kept) if kept else torch.zeros(0, 1)
        finite = torch.isfinite(embeddings).all(dim=1) if kept else torch.zeros(0, dtype=torch.bool)
        for stimulus in (s for s, ok in zip(kept, finite.tolist()) if not ok):
            output.skipped.append(
                {
                    "item": f"{name}: {stimulus.text!r} {stimulus.image or ''}".rstrip(),
                    "reason": "embedding holds NaN or inf",
                }
            )
        return _Set(name, embeddings[finite])

    def _seat_rows(
        self,
        test: SeatTest,
        kind: str,
        encoder: Encoder,
        output: SuiteOutput,
        seed: int,
    ) -> list[dict]:
        key = f"{test.name}/{kind}"
        sets = [self._embed(f"{key}/{s.key}", [Stimulus(e) for e in s.examples], encoder, output) for s in test.sets]
        if not self._usable(key, sets, output):
            return []
        x, y, a, b = (s.embeddings for s in sets)
        row = self._weat_row(weat_association(x, a, b), weat_association(y, a, b), seed)
        return [
            {
                "key": key,
                "test": test.name,
                "file": str(test.path),
                "embedding": kind,
                "experiment": "seat",
                **row,
                "n_a": len(a),
                "n_b": len(b),
            }
        ]

    def _grounded_rows(
        self,
        test: GroundedTest,
        kind: str,
        encoder: Encoder,
        output: SuiteOutput,
        seed: int,
    ) -> list[dict]:
        rows = []
        cat_x, cat_y = test.targ1.category, test.targ2.category
        for experiment in self.experiments:
            key = f"{test.name}/{kind}/exp{experiment}"
            if experiment == "3_mask_text" and (
                encoder.contextual is None or not getattr(encoder.adapter.tokenizer, "mask_token", None)
            ):
                reason = (
                    "no contextual_words to mask"
                    if encoder.contextual is None
                    else f"model {encoder.adapter.name!r} has no mask token"
                )
                output.skipped.append({"item": key, "reason": reason})
                continue
            flags = {
                "mask_text": experiment == "3_mask_text",
                "mask_person": experiment == "3_mask_image",
            }

            def stimuli(pairs: list[tuple[str, str]], flags: dict[str, bool] = flags) -> list[Stimulus]:
                present = [(caption, self.image_paths.get((test.name, image))) for caption, image in pairs]
                return [Stimulus(caption, path, **flags) for caption, path in present if path is not None]

            named = {
                "x": test.targ1.pairs(),
                "y": test.targ2.pairs(),
                "ax": test.attr1.pairs(cat_x),
                "ay": test.attr1.pairs(cat_y),
                "bx": test.attr2.pairs(cat_x),
                "by": test.attr2.pairs(cat_y),
            }
            sets = {n: self._embed(f"{key}/{n}", stimuli(pairs), encoder, output) for n, pairs in named.items()}
            if not self._usable(key, list(sets.values()), output):
                continue
            if experiment == "3_mask_image" and not self._has_person_regions(test, encoder):
                output.skipped.append(
                    {
                        "item": key,
                        "reason": f"no region of the test's images has a label in person_object_ids "
                        f"{self.person_object_ids} (grid features carry no labels: give labelled region features)",
                    }
                )
                continue
            e = {n: s.embeddings for n, s in sets.items()}
            counts = {f"n_{n}": len(v) for n, v in e.items()} | {
                "n_a": len(e["ax"]) + len(e["ay"]),
                "n_b": len(e["bx"]) + len(e["by"]),
            }
            if experiment == "1":
                a, b = torch.cat([e["ax"], e["ay"]]), torch.cat([e["bx"], e["by"]])
                row = self._weat_row(weat_association(e["x"], a, b), weat_association(e["y"], a, b), seed)
            elif experiment == "3_congruence":
                row = self._congruence_row(
                    weat_association(e["x"], e["ax"], e["bx"]),
                    weat_association(e["x"], e["ay"], e["by"]),
                    weat_association(e["y"], e["ay"], e["by"]),
                    weat_association(e["y"], e["ax"], e["bx"]),
                    seed,
                )
            else:  # 2, and 3_mask_* (Experiment 2 on masked inputs)
                row = self._weat_row(
                    weat_association(e["x"], e["ax"], e["bx"]),
                    weat_association(e["y"], e["ay"], e["by"]),
                    seed,
                )
            rows.append(
                {
                    "key": key,
                    "test": test.name,
                    "file": str(test.path),
                    "embedding": kind,
                    "experiment": experiment,
                    **row,
                    **counts,
                }
            )
        return rows

    def _has_person_regions(self, test: GroundedTest, encoder: Encoder) -> bool:
        if getattr(encoder.adapter, "store", None) is None:  # grid "regions" have no detector labels
            return False
        images = sorted({p for (name, _), p in self.image_paths.items() if name == test.name})
        ids = torch.tensor(self.person_object_ids)
        return any(
            bool(torch.isin(encoder.adapter.prepare_images([image]).object_ids.cpu(), ids).any()) for image in images
        )

    @staticmethod
    def _usable(key: str, sets: list[_Set], output: SuiteOutput) -> bool:
        empty = [s.name for s in sets if len(s.embeddings) == 0]
        if empty:
            output.skipped.append(
                {
                    "item": key,
                    "reason": f"empty set(s) after skipping bad items: {', '.join(empty)}",
                }
            )
        return not empty

    def _weat_row(self, s_x: Tensor, s_y: Tensor, seed: int) -> dict:
        """Effect size, statistic, p-value (NaN with a note when |X| != |Y|) and interval of one test."""
        low, high = (float(v) for v in interval_from_associations(s_x, s_y, self.n_bootstrap, self.confidence, seed))
        if len(s_x) == len(s_y):
            p_value, note = (
                float(p_value_from_associations(s_x, s_y, self.n_permutations, seed)),
                "",
            )
        else:
            p_value = math.nan
            note = (
                f"|X| = {len(s_x)} != |Y| = {len(s_y)}: the permutation test re-partitions X ∪ Y into equal halves, "
                "so it has no p-value; the effect size and its interval stand alone"
            )
        return {
            "effect_size": float(effect_size_from_associations(s_x, s_y)),
            "statistic": float(statistic_from_associations(s_x, s_y)),
            "p_value": p_value,
            "p_note": note,
            "ci_low": low,
            "ci_high": high,
            "n_x": len(s_x),
            "n_y": len(s_y),
        }

    def _congruence_row(self, x_own: Tensor, x_other: Tensor, y_own: Tensor, y_other: Tensor, seed: int) -> dict:
        scores = (x_own, x_other, y_own, y_other)
        low, high = (float(v) for v in congruence_interval(*scores, self.n_bootstrap, self.confidence, seed))
        return {
            "effect_size": float(congruence_effect_size(*scores)),
            "statistic": float(congruence_statistic(*scores)),
            "p_value": float(congruence_p_value(*scores, n_permutations=self.n_permutations, seed=seed)),
            "p_note": "",
            "ci_low": low,
            "ci_high": high,
            "n_x": len(x_own),
            "n_y": len(y_own),
        }

    @staticmethod
    def _adjust(rows: list[dict]) -> None:
        """Holm and BH adjusted p-values across every row that has a p-value."""
        tested = [row for row in rows if not math.isnan(row["p_value"])]
        for row in rows:
            row["p_holm"] = row["p_bh"] = math.nan
        if tested:
            p_values = torch.tensor([row["p_value"] for row in tested], dtype=torch.float64)
            for row, holm, bh in zip(
                tested,
                holm_bonferroni(p_values).tolist(),
                benjamini_hochberg(p_values).tolist(),
            ):
                row["p_holm"], row["p_bh"] = holm, bh
