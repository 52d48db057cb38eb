"""CounterBias (Zhang, Wang & Sang, 2022, Sec. 3-4): counterfactual bias of FILL_MASK models.

For each image with a target concept T (an activity or occupation) and a bias concept B
(``man``/``woman``) and each caption template of Table 1 ("The woman is [MASK]", ...):

* ``V_cf``: the image attacked toward the counterfactual concept B' under the bias prompt
  "a [MASK] is in the picture" (Eq. 2-3, :mod:`vlbias.counterfactual.image`, cached on disk);
* ``L_cf``: the caption with its bias words swapped (:mod:`vlbias.counterfactual.text`);
* the masked-word probabilities P(T | V, L) of the four (V, L) combinations and P(B | V) of
  V_f and V_cf, then bias_V-L (Eq. 6), bias_V (Eq. 9), bias_L (Eq. 11) per item and, with no
  image, the log-probability language bias of Eq. 12-13 (Table 3), optionally also for a
  text-only baseline model (BERT);
* per concept group (activity, occupation), template and measure: bias(T) per target (Eq. 7,
  positive toward B0) and the mean absolute bias in percent (Table 2), through
  :class:`~vlbias.metrics.counterbias.CounterBiasScore`.

Metrics (named and defined in the Glossary below): per concept group, Table 2's summaries, bias(T) per
target, exclusions, the attack's success and the counts.

Intervals (percentile bootstrap over each target's images) for ``<group>/<measure>/<template>``,
``<group>/<measure>/avg`` and ``<group>/<target>/<measure>``, and p-values of a sign-flip test of
bias(T) = 0 under ``<group>/<target>/<measure>`` (raw), ``...@holm`` and ``...@bh`` (adjusted over the
group's targets, per measure), through :class:`~vlbias.metrics.counterbias.CounterBiasUncertainty`.
The paper reports neither. The text-only ``B@L_log`` measures get none: they read no image, so every
image of a target with the same bias concept has the same value and resampling images has nothing to
say about them.

Skipped items, each with its reason and a ``kind`` (:data:`SKIP_KINDS`): no gender annotation
(``no_gender``; unless ``unannotated="model_reading"``), a bias concept outside ``bias_concepts``
(``unknown_bias_concept``), a bias or target word outside the model's vocabulary
(``bias_word_unusable``, ``target_word_unusable``), a missing or corrupt image (``image``), and
(with ``require_attack_success``) a failed attack (``attack_failed``).

Caption templates a model cannot read at their mask (:mod:`vlbias.models.unseen_text`) are checked once per run,
as each model reads them (every bias concept and its swap, the mask repeated once per word piece of the target
words), in the measured model and in the language baseline. A template whose caption is longer than a model's
maximum with its ``[MASK]`` past the cut (:func:`~vlbias.models.unseen_text.unseen_masked`) is skipped with the
reason (``item`` ``template/<name>``, ``kind`` ``truncated``), since nothing is then measured: every Table 1
template ends with its ``[MASK]``, so a cut caption always loses it. Skipping removes the template from the whole
run (its metrics are absent; ``avg`` and the intervals are over the templates measured), not the items: every
item is scored with the same templates, so the other templates' numbers are those of a run with ``templates``
set to them. A caption cut after its mask would be measured on what the model reads, with a ``note`` on the rows
of its template. The captions always hold a mask token, so none is ``empty`` or ``unknown``. Counted:
``n_skipped/truncated`` (templates skipped) and ``n_truncated`` (templates measured with a truncated caption).

Target probabilities are normalised over the group's target concepts (``"concepts"``, what
the authors' released code does) or are the masked-word probability over the whole vocabulary
(``"vocabulary"``); likewise for the bias concepts. Both choices are recorded in the results.

Measures:
    How much a masked-word model's belief in a target concept T (an activity or occupation: "cooking") depends on
    the gender it sees: the change in P(T) when the evidence for the bias concept B (man, woman) is taken away,
    from the image (a targeted attack), the text (the gender words swapped) or both, relative to the change in P(B).

Direction:
    A target's bias(T) (``<group>/<target>/<measure>``) above 0 means T leans toward ``b0`` (``man`` by default):
    taking away the evidence for ``b0`` lowers P(T); below 0 it leans toward the other bias concept. The Table 2
    summaries (``<group>/<measure>/<template>`` and ``.../avg``) average |bias(T)| and have no direction: 0 is no
    bias.

Glossary:
    * ``B@V-L``, ``B@V``, ``B@L``, ``B@L_log``: the measures: bias_V-L (Eq. 6, image and text counterfactual
      together), bias_V (Eq. 9, image only), bias_L (Eq. 11, text only) and the language bias of Eq. 13 (text only, no
      image, log-probabilities; ``B@L_log/<baseline>`` of a text-only baseline model). ``<group>/<target>/<measure>``
      is bias(T) (Eq. 7) averaged over the templates, not in %, with a two-sided sign-flip p-value of bias(T) = 0
      adjusted over the group's targets (image measures only).
    * ``Sw/O``, ``Sw/``, ``Pw/O``, ``Pw/``: ``<group>/<measure>/<template>``: Table 2's mean over the group's targets
      of |bias(T)| with one caption template, in % (at least 0; above 100 when P(B) moves little; B@L_log: Table 3's
      log-probability difference, not in %). The templates are a sentence (S) or a phrase (P), without (``/O``) or
      with (``/``) the photo named: "The man is [MASK]", ..., "A photo of a man who is [MASK]".
    * ``avg``: ``<group>/<measure>/avg``: the mean of the templates' values.
    * ``attack_success_rate``: the share of attacked images whose most likely bias concept after the attack is the
      counterfactual one (images the model already read that way included); only those enter the measures.
    * ``n_excluded``: ``n_excluded/<measure>``: item-template pairs left out because P(B) moved less than
      ``min_bias_change``.
    * ``n_attack_failed``: attacked images still read as their own bias concept.
    * ``n_counterfactual_before_attack``: attacked images the model already read as the counterfactual concept.
    * ``n_skipped``: items skipped, in all and by kind (``n_skipped/<kind>``: ``no_gender``,
      ``unknown_bias_concept``, ``bias_word_unusable``, ``target_word_unusable``, ``image``, ``attack_failed``;
      ``truncated``: templates whose mask was cut off).
    * ``n_truncated``: templates measured with a caption truncated to the model's maximum length.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import Tensor

from vlbias.counterfactual.image import AttackConfig, CounterfactualImages, pixel_transform, unit_pixels
from vlbias.counterfactual.text import CAPTION_TEMPLATES, SwapLexicon
from vlbias.data.biasworld import BiasWorld
from vlbias.data.images import load_image
from vlbias.data.vl_bias import coverage, image_path, read_release_index, read_vl_bias
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.counterbias import CounterBiasScore, CounterBiasUncertainty
from vlbias.metrics.functional.counterbias import language_bias, log_language_bias, multimodal_bias, visual_bias
from vlbias.metrics.functional.multiple_testing import benjamini_hochberg, holm_bonferroni
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.unseen_text import TRUNCATED
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.counterbias_probe import Attacked, ConceptReader, CounterBiasItem, Measured, Probed
from vlbias.suites.options import CounterBiasOptions

MEASURES = ("B@V-L", "B@V", "B@L", "B@L_log")
#: Why an item was not measured: the ``kind`` of its ``skipped`` entry, counted in ``n_skipped/<kind>``.
SKIP_KINDS = (
    "no_gender",
    "unknown_bias_concept",
    "bias_word_unusable",
    "target_word_unusable",
    "image",
    "attack_failed",
    TRUNCATED,
)


class CounterBiasSuite(Suite):
    """CounterBias measurement (module docstring) for FILL_MASK models that read pixels.

    Args:
        items: the images and their annotations.
        data_config: how the items were made (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.options.CounterBiasOptions`); here, where the lexicon
            is read, each bias concept is checked to swap to another one, and ``b0`` to name one side of each pair.
    """

    name = "counterbias"
    capability = Capability.FILL_MASK

    def __init__(
        self, items: Sequence[CounterBiasItem], data_config: dict[str, object], options: CounterBiasOptions
    ) -> None:
        if not items:
            raise InputError("CounterBias needs at least one item.")
        self.items, self.data_config, self.options = list(items), data_config, options
        self.bias_concepts = [word.lower() for word in options.bias_concepts]
        self.lexicon = SwapLexicon.from_yaml(options.lexicon) if options.lexicon else SwapLexicon.default()
        for word in self.bias_concepts:
            if word not in self.lexicon.mapping or self.lexicon.mapping[word] not in self.bias_concepts:
                raise ConfigError(
                    f"Bias concept {word!r} must swap to another bias concept ({', '.join(self.bias_concepts)}) "
                    f"in the lexicon, but swaps to {self.lexicon.mapping.get(word)!r}."
                )
        b0 = options.b0
        self.b0 = [b0] if isinstance(b0, str) else list(b0)
        b1 = [self.lexicon.mapping.get(word) for word in self.b0]
        if any(word not in self.bias_concepts for word in self.b0) or sorted(self.b0 + b1) != sorted(
            self.bias_concepts
        ):
            raise ConfigError(
                f"Expected `b0` to name the B0 side of Eq. 7, bias concepts whose counterparts are the others, so that "
                f"every one of {', '.join(self.bias_concepts)} is on one side, but got {b0!r}; with more than two "
                "concepts give a list, e.g. [man, boy] for [man, woman, boy, girl]."
            )
        self.templates = list(options.templates) if options.templates is not None else list(CAPTION_TEMPLATES)
        self.reader = ConceptReader(options, self.bias_concepts, self.lexicon)
        self.groups: dict[str, list[str]] = {}
        for item in self.items:
            targets = self.groups.setdefault(item.group, [])
            if item.target not in targets:
                targets.append(item.target)
        self.groups = {group: sorted(targets) for group, targets in sorted(self.groups.items())}
        self.annotation_skips = {  # stimulus index -> skip entry of the items no model can be measured on
            index: entry for index, item in enumerate(self.items) if (entry := self._annotation_skip(item))
        }

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: CounterBiasOptions) -> CounterBiasSuite:
        """BiasWorld's ``split`` images: targets = activities, bias concepts = its groups."""
        split = options.split
        images = world.images(split).float() / 255.0
        items = [
            CounterBiasItem(f"{split}/{item.index}", images[i], item.activity, "activity", item.group)
            for i, item in enumerate(world.items(split))
        ]
        return cls(items, {"data": "biasworld", "split": split, **world.config}, options)

    @classmethod
    def from_path(cls, path: Path, options: CounterBiasOptions) -> CounterBiasSuite:
        """A VL-Bias folder in the layout of :mod:`vlbias.data.vl_bias`, or an index file of the authors'
        released scripts (:func:`~vlbias.data.vl_bias.read_release_index`; it annotates no gender, so
        measure it with ``unannotated="model_reading"``)."""
        path = Path(path)
        if path.is_file():
            annotated, layout = read_release_index(path), "vl-bias-release-index"
            images, numbered = [Path(item.image) for item in annotated], "entry"
        else:
            annotated, layout = read_vl_bias(path), "vlbias-local-v1"
            images, numbered = [image_path(path, item) for item in annotated], "row"
        items = [
            CounterBiasItem(f"{item.image}@{numbered}{item.row}", image, item.concept, item.concept_type, item.gender)
            for item, image in zip(annotated, images)
        ]
        data = {"data": "vl_bias", "root": str(path), "layout": layout, "coverage": coverage(annotated)}
        return cls(items, data, options)

    @property
    def config(self) -> dict[str, object]:
        options = self.options
        return {
            "data": self.data_config,
            "bias_concepts": self.bias_concepts,
            "b0": self.b0,
            "templates": {name: CAPTION_TEMPLATES[name] for name in self.templates},
            "attack": AttackConfig(**(options.attack or {})).key(),
            "require_attack_success": options.require_attack_success,
            "unannotated": options.unannotated,
            "min_bias_change": options.min_bias_change,
            "target_normalisation": options.target_normalisation,
            "bias_normalisation": options.bias_normalisation,
            "language_baseline": options.language_baseline,
            "lexicon": options.lexicon or "vlbias/resources/gender_swap_lexicon.yaml",
            "cache_dir": options.cache_dir,
            "batch_size": options.batch_size,
            "strategy": options.strategy,
            "statistics": options.recorded_statistics(),
            "groups": {group: len(targets) for group, targets in self.groups.items()},
        }

    # -- the run ---------------------------------------------------------------------------
    def stimuli(self) -> list[CounterBiasItem]:
        return self.items

    def start(self, adapter: ModelAdapter, seed: int) -> CounterBiasMeasurement:
        pixel_transform(adapter)  # refuse region-feature models before any compute
        return CounterBiasMeasurement(self, adapter, seed)

    def _annotation_skip(self, item: CounterBiasItem) -> dict[str, str] | None:
        """The skip entry of an item whose annotation this suite cannot measure (whatever the model), else None."""
        if item.bias is None and self.options.unannotated == "skip":
            kind, reason = (
                "no_gender",
                "no gender annotation (unannotated='model_reading' would take the model's reading)",
            )
        elif item.bias is not None and item.bias not in self.bias_concepts:
            kind, reason = (
                "unknown_bias_concept",
                f"bias concept {item.bias!r} is not one of {', '.join(self.bias_concepts)}",
            )
        else:
            return None
        return {"item": item.id, "kind": kind, "reason": reason}

    def _vocabulary_skip(self, item: CounterBiasItem, problems: dict[str, str]) -> dict[str, str] | None:
        """The skip entry of an item one of whose words the model cannot score (``problems``: word -> why), else None."""
        # the words its P(B | V) needs: its concept and the counterpart, or every concept for the model's reading
        bias_words = self.bias_concepts if item.bias is None else [item.bias, self.lexicon.mapping.get(item.bias)]
        unusable = [word for word in bias_words if word in problems]
        if unusable:
            kind, reason = "bias_word_unusable", f"bias word {unusable[0]!r} is not usable: {problems[unusable[0]]}"
        elif item.target in problems:
            kind, reason = "target_word_unusable", f"target word {item.target!r} is not usable: {problems[item.target]}"
        else:
            return None
        return {"item": item.id, "kind": kind, "reason": reason}

    def _baseline(self, adapter: ModelAdapter) -> tuple[str, ModelAdapter]:
        from vlbias.models.registry import load

        baseline = self.options.language_baseline  # its options were checked with the suite's
        name = baseline["model"]
        checkpoint, tiny, options = baseline.get("checkpoint"), bool(baseline.get("tiny")), baseline.get("options")
        return name, load(name, checkpoint=checkpoint, tiny=tiny, device=adapter.device, options=options)


class CounterBiasMeasurement(Measurement):
    """One CounterBias run of ``adapter`` (see :class:`CounterBiasSuite`).

    Built once per run on every rank, from everything every rank shares: the items no model can measure here
    (their annotation, or a word outside ``adapter``'s vocabulary; the same list on every rank), the text-only
    log-probabilities of Eq. 12 (the model's own and the baseline's), the attack generator, and the metrics:
    :class:`~vlbias.metrics.counterbias.CounterBiasScore` per (group, measure, template) and
    :class:`~vlbias.metrics.counterbias.CounterBiasUncertainty` per (group, measure) of the measures that read
    an image. Counts (summed over ranks): ``attacked``, ``succeeded``, ``counterfactual_before_attack``,
    ``n_items``. Ranks may share ``cache_dir``: a cached image's file is named by its own key (model, pixels,
    attack, target concept) and written atomically, so two ranks writing at once never leave a partial file.
    """

    def __init__(self, suite: CounterBiasSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        targets = sorted({t for ts in suite.groups.values() for t in ts})
        problems = suite.reader.vocabulary_problems(adapter.tokenizer, sorted(set(targets) | set(suite.bias_concepts)))
        self.excluded = {  # stimulus index -> skip entry, in stimulus order
            index: entry
            for index, item in enumerate(suite.items)
            if (entry := suite.annotation_skips.get(index) or suite._vocabulary_skip(item, problems))
        }
        # Target words the model can score; P(T) is normalised over each group's columns.
        self.words = [t for ts in suite.groups.values() for t in ts if t not in problems]
        columns = [[self.words.index(t) for t in ts if t not in problems] for ts in suite.groups.values()]
        self.columns = [c for c in columns if c]
        measurable = len(self.excluded) < len(suite.items)
        self.baseline = suite._baseline(adapter) if measurable and suite.options.language_baseline else None
        self.templates, self.template_skips, self.template_notes = self._seen_templates()
        self.text_only = self._text_only_tables() if measurable else {}
        self.measures = list(MEASURES) + [measure for measure in self.text_only if measure not in MEASURES]
        self.scores = {
            (group, measure, template): CounterBiasScore(
                len(targets), percent=not measure.startswith("B@L_log"), sync_on_compute=False
            )
            for group, targets in suite.groups.items()
            for measure in self.measures
            for template in self.templates
        }
        self.uncertainty = {  # the text-only measures read no image: nothing to resample (module docstring)
            (group, measure): CounterBiasUncertainty(
                len(targets),
                len(self.templates),
                n_bootstrap=suite.options.statistics.n_bootstrap,
                n_permutations=suite.options.statistics.n_permutations,
                confidence=suite.options.statistics.confidence,
                seed=seed,
                sync_on_compute=False,
            )
            for group, targets in suite.groups.items()
            for measure in self.measures
            if not measure.startswith("B@L_log")
        }
        self.generator = CounterfactualImages(
            adapter,
            suite.bias_concepts,
            AttackConfig(**(suite.options.attack or {}), seed=seed),
            suite.options.cache_dir,
            strategy=suite.options.strategy,
        )

    def _seen_templates(self) -> tuple[list[str], list[dict[str, str]], dict[str, str]]:
        """The templates whose captions every model that reads them (this one, the language baseline) reads at
        their masks; a skip entry (``kind`` ``truncated``) of each other template, whose mask a model's maximum
        length cuts; and a note per kept template whose captions a model reads truncated after the mask."""
        models = [self.adapter] + ([self.baseline[1]] if self.baseline else [])
        kept, skips, notes = [], [], {}
        for name in self.suite.templates:
            found = [(m, c, p) for m in models for c, p in self.suite.reader.caption_problems(m, name, self.words)]
            blocking = [(m, c, p) for m, c, p in found if p.skip]
            if blocking:
                model, caption, problem = blocking[0]
                reason = f"model {model.name!r}, caption {caption!r}: {problem.reason}"
                skips.append({"item": f"template/{name}", "kind": problem.kind, "reason": reason})
                continue
            kept.append(name)
            if found:
                notes[name] = "; ".join(f"model {m.name!r}, caption {c!r}: {p.reason}" for m, c, p in found)
        if not kept:
            raise InputError(f"No caption template can be measured: {'; '.join(entry['reason'] for entry in skips)}")
        return kept, skips, notes

    def _text_only_tables(self) -> dict[str, dict[tuple[str, str], Tensor]]:
        """Eq. 12's log P(T | L) tables of the model (``B@L_log``) and of the language baseline, if any."""
        suite = self.suite
        tables = {"B@L_log": suite.reader.text_only_log_probs(self.adapter, self.templates, self.words, self.columns)}
        if self.baseline:
            name, baseline = self.baseline
            tables[f"B@L_log/{name}"] = suite.reader.text_only_log_probs(
                baseline, self.templates, self.words, self.columns
            )
        return tables

    def metrics(self) -> list[CounterBiasScore | CounterBiasUncertainty]:
        return [*self.scores.values(), *self.uncertainty.values()]

    # -- probe: the model's outputs ----------------------------------------------------------
    def probe(self, batch: Batch) -> Probed:
        """Load the batch's measurable images, read P(B | V_f), attack toward B', read P(B | V_cf), and for the
        items kept P(T | V, L) of the four (V, L) combinations."""
        suite = self.suite
        unreadable, indices, items, pixels = self._load(batch)
        if not items:
            return Probed(unreadable)
        p_bias_f = suite.reader.bias_probs(self.generator, pixels)
        read = [suite.bias_concepts[int(row.argmax())] for row in p_bias_f]  # the concept the model reads
        items = [  # unannotated images kept by `unannotated="model_reading"` take the model's reading
            item if item.bias is not None else replace(item, bias=read[b], bias_annotated=False)
            for b, item in enumerate(items)
        ]
        counter = torch.tensor([suite.bias_concepts.index(suite.lexicon.mapping[item.bias]) for item in items])
        result = self.generator.generate(pixels, counter)
        p_bias_cf = suite.reader.bias_probs(self.generator, result.pixels)
        succeeded = p_bias_cf.argmax(dim=-1) == counter
        keep = succeeded if suite.options.require_attack_success else torch.ones(len(items), dtype=torch.bool)
        attacked = Attacked(indices, items, counter, p_bias_f, p_bias_cf, keep)
        rows = keep.nonzero().flatten()
        if not len(rows):
            return Probed(unreadable, attacked)
        kept = [items[r] for r in rows.tolist()]
        factual = torch.tensor([suite.bias_concepts.index(item.bias) for item in kept])
        measured = Measured(
            [indices[r] for r in rows.tolist()],
            kept,
            p_bias_f[rows, factual],
            p_bias_cf[rows, factual],
            succeeded[rows],
            result.cache_hit[rows],
            (result.pixels[rows] - pixels[rows]).abs().flatten(1).amax(dim=1).cpu(),
            suite.reader.target_probs(
                self.adapter,
                [(item.bias, item.target) for item in kept],
                pixels[rows],
                result.pixels[rows],
                self.templates,
                self.words,
                self.columns,
            ),
        )
        return Probed(unreadable, attacked, measured)

    def _load(self, batch: Batch) -> tuple[list[tuple[int, dict]], list[int], list[CounterBiasItem], Tensor]:
        """Skip entries of the batch's unreadable images, and the stimulus indices, items and ``[0, 1]`` pixels
        (as ``adapter`` sees them) of the others; items excluded for the whole run are left out."""
        unreadable, indices, items, images = [], [], [], []
        for index, item in zip(batch.indices, batch.items):
            if index in self.excluded:
                continue
            try:
                picture = item.image if isinstance(item.image, Tensor) else load_image(item.image)
            except InputError as err:
                unreadable.append((index, {"item": item.id, "kind": "image", "reason": f"image: {err}"}))
                continue
            indices.append(index)
            items.append(item)
            images.append(picture)
        if not items:
            return unreadable, [], [], torch.empty(0)
        if all(isinstance(image, Tensor) for image in images):
            images = torch.stack(images)
        return unreadable, indices, items, unit_pixels(self.adapter, images).cpu()

    # -- update: metric inputs, skips, counts, item rows ------------------------------------
    def update(self, batch: Batch, outputs: Probed) -> None:
        for index, entry in outputs.unreadable:
            self.note_skip(index, entry)
        if outputs.attacked is not None:
            self._note_attacks(outputs.attacked)
        if outputs.measured is not None:
            self._score(outputs.measured)

    def _note_attacks(self, attacked: Attacked) -> None:
        """Count the attacks, their successes (B' is the most likely concept in V_cf) and the images already read
        as B'; skip the items not kept, with the reason."""
        concepts, counter, p_bias_cf = self.suite.bias_concepts, attacked.counter, attacked.p_bias_cf
        self.count("attacked", len(attacked.items))
        self.count("succeeded", int((p_bias_cf.argmax(dim=-1) == counter).sum()))
        self.count("counterfactual_before_attack", int((attacked.p_bias_f.argmax(dim=-1) == counter).sum()))
        for b in (~attacked.keep).nonzero().flatten().tolist():
            self.note_skip(
                attacked.indices[b],
                {
                    "item": attacked.items[b].id,
                    "kind": "attack_failed",
                    "reason": f"attack failed: P({concepts[counter[b]]} | V_cf) = {p_bias_cf[b, counter[b]]:.3f}, "
                    f"{concepts[int(p_bias_cf[b].argmax())]!r} is still the most likely bias concept",
                },
            )

    def _score(self, measured: Measured) -> None:
        """Eq. 6, 9, 11 and 13 per item and template into the metrics, and the item rows."""
        suite, items, n = self.suite, measured.items, len(measured.items)
        target = torch.tensor([self.words.index(item.target) for item in items])
        direction = torch.tensor([1 if item.bias in suite.b0 else -1 for item in items])
        counterpart = [suite.lexicon.mapping[item.bias] for item in items]
        local = {group: torch.tensor([item.group == group for item in items]) for group in suite.groups}
        local_target = torch.tensor([suite.groups[item.group].index(item.target) for item in items])
        per_item = {
            "p_bias_vf": measured.p_bias_f.tolist(),
            "p_bias_vcf": measured.p_bias_cf.tolist(),
            "attack_succeeded": measured.attack_succeeded.tolist(),
            "cache_hit": measured.cache_hit.tolist(),
            "linf_delta": measured.linf_delta.tolist(),
        }
        rows: list[list[dict]] = [[] for _ in items]
        by_template: dict[str, list[Tensor]] = {}
        for t, name in enumerate(self.templates):
            p_f, p_vl, p_v, p_l = measured.p_target[t]
            values = {
                "B@V-L": multimodal_bias(
                    p_f, p_vl, measured.p_bias_f, measured.p_bias_cf, suite.options.min_bias_change
                ),
                "B@V": visual_bias(p_f, p_v, measured.p_bias_f, measured.p_bias_cf, suite.options.min_bias_change),
                "B@L": language_bias(p_f, p_l),
            }
            for measure, table in self.text_only.items():  # Eq. 13, the model's own and the baselines'
                log_f = torch.stack([table[(name, item.bias)] for item in items])[torch.arange(n), target]
                log_cf = torch.stack([table[(name, b)] for b in counterpart])[torch.arange(n), target]
                values[measure] = log_language_bias(log_f, log_cf)
            for measure, bias in values.items():
                by_template.setdefault(measure, []).append(bias)
                for group, in_group in local.items():
                    if in_group.any():
                        self.scores[(group, measure, name)].update(
                            bias[in_group], local_target[in_group], direction[in_group]
                        )
            fields = {
                "p_target_f": p_f.tolist(),
                "p_target_vcf_lcf": p_vl.tolist(),
                "p_target_vcf_lf": p_v.tolist(),
                "p_target_vf_lcf": p_l.tolist(),
                **per_item,
                **{f"bias_{measure}": bias.tolist() for measure, bias in values.items()},
            }
            for b, item in enumerate(items):
                rows[b].append(
                    {
                        "item": item.id,
                        "group": item.group,
                        "target": item.target,
                        "bias": item.bias,
                        "bias_annotated": item.bias_annotated,
                        "counterfactual_bias": counterpart[b],
                        "template": name,
                        **{field: per_row[b] for field, per_row in fields.items()},
                        **({"note": self.template_notes[name]} if name in self.template_notes else {}),
                    }
                )
        for index, item_rows in zip(measured.indices, rows):
            for row in item_rows:
                self.note_row(index, row)
        for measure, biases in by_template.items():  # (n, K): an item's templates share its image
            bias = torch.stack(biases, dim=1)
            for group, in_group in local.items():
                if in_group.any() and (group, measure) in self.uncertainty:
                    self.uncertainty[(group, measure)].update(
                        bias[in_group], local_target[in_group], direction[in_group]
                    )
        self.count("n_items", n)

    # -- compute: the synced metrics and gathered notes ---------------------------------------
    def compute(self, gathered: Gathered) -> SuiteOutput:
        skipped = [*self.excluded.values(), *self.template_skips, *gathered.skipped]
        output = SuiteOutput(
            metrics={}, items=gathered.rows, skipped=skipped, n_items=int(gathered.counts.get("n_items", 0))
        )
        for group, targets in self.suite.groups.items():
            for measure in self.measures:
                if (group, measure) in self.uncertainty:
                    self._summarise_uncertainty(
                        group, targets, measure, _computed(self.uncertainty[(group, measure)]), output
                    )
                self._summarise(group, targets, measure, output)
        attacked, succeeded = (gathered.counts.get(name, 0) for name in ("attacked", "succeeded"))
        output.metrics["attack_success_rate"] = succeeded / attacked if attacked else float("nan")
        output.metrics["n_attack_failed"] = float(attacked - succeeded)
        output.metrics["n_counterfactual_before_attack"] = float(gathered.counts.get("counterfactual_before_attack", 0))
        output.metrics["n_skipped"] = float(len(skipped))
        for kind in SKIP_KINDS:
            output.metrics[f"n_skipped/{kind}"] = float(sum(entry["kind"] == kind for entry in skipped))
        output.metrics["n_truncated"] = float(len(self.template_notes))
        return output

    def _summarise(self, group: str, targets: list[str], measure: str, output: SuiteOutput) -> None:
        """Table 2 per template and averaged, bias(T) per target averaged over templates, and the exclusions."""
        templates = self.templates
        results = [_computed(self.scores[(group, measure, name)]) for name in templates]
        for name, result in zip(templates, results):
            output.metrics[f"{group}/{measure}/{name}"] = float(result["mean_absolute"])
        output.metrics[f"{group}/{measure}/avg"] = float(torch.stack([r["mean_absolute"] for r in results]).nanmean())
        # torchmetrics returns one-element outputs as 0-d tensors: a group with one target
        per_target = torch.stack([r["per_target"].reshape(-1) for r in results]).nanmean(dim=0)
        for target, value in zip(targets, per_target.tolist()):
            output.metrics[f"{group}/{target}/{measure}"] = value
        excluded = float(sum(r["n_excluded"] for r in results))
        output.metrics[f"n_excluded/{measure}"] = output.metrics.get(f"n_excluded/{measure}", 0.0) + excluded

    def _summarise_uncertainty(
        self, group: str, targets: list[str], measure: str, result: dict[str, Tensor], output: SuiteOutput
    ) -> None:
        """Intervals of Table 2 and of bias(T), and bias(T)'s p-values, raw and adjusted over the group's targets."""
        templates = self.templates
        mean_absolute = result["mean_absolute"].reshape(len(templates), 2)  # torchmetrics squeezes 1-element outputs
        for name, interval in zip(templates, mean_absolute.tolist()):
            output.intervals[f"{group}/{measure}/{name}"] = interval
        output.intervals[f"{group}/{measure}/avg"] = result["mean_absolute_avg"].tolist()
        per_target, p_values = result["per_target"].reshape(len(targets), 2), result["p_value"].reshape(-1)
        for target, interval in zip(targets, per_target.tolist()):
            output.intervals[f"{group}/{target}/{measure}"] = interval
        tested = (~p_values.isnan()).nonzero().flatten().tolist()
        if tested:
            raw = p_values[tested]
            for suffix, values in (("", raw), ("@holm", holm_bonferroni(raw)), ("@bh", benjamini_hochberg(raw))):
                for t, value in zip(tested, values.tolist()):
                    output.p_values[f"{group}/{targets[t]}/{measure}{suffix}"] = value


def _computed(metric: CounterBiasScore | CounterBiasUncertainty) -> dict[str, Tensor]:
    """``metric.compute()``. A metric no item reached (every item of its group skipped) gives NaN biases and
    counts of 0, which is the right answer, so torchmetrics' warning about a compute before any update is
    not shown: the skipped items and their reasons are in the results."""
    if metric.update_count:
        return metric.compute()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*was called before the ``update`` method", category=UserWarning)
        return metric.compute()
