"""Entity–gender association in masked-word predictions (Srinivasan & Bisk, 2022, Sec. 3–5).

For every entity ``E`` of a spec (default: the paper's case study, Table 2) the suite reads
``log P([MASK] = E | caption, image)`` with :func:`vlbias.models.masked_words.word_log_probs`
(full-vocabulary softmax at the mask, as a masked LM's head gives it; an entity of several word
pieces scores the mean of its pieces' log-probabilities, all pieces masked at once) and reports,
from the metrics of :mod:`vlbias.metrics.entity_association` (one per score and group, and
:class:`~vlbias.metrics.entity_association.BiasScore` for each ``B``):

* ``S_PT/<E>/<group>``, ``B_PT/<E>``: pre-training shift, ``ln P_VL(E|g) - ln P_L(E|g)`` (Table 1,
  row 1), the VL model given the caption and its own "no image" input (``adapter.no_image``; the
  paper's text-only VL-BERT, Sec. 5) against a text-only masked LM (default ``bert``);
* ``S_L_no_image/<E>/<group>``, ``B_L_no_image/<E>``: the language score of Sec. 5 (Eq. 6, 7),
  caption agent vs *person*, no image; ``B_L_text_model/<E>``: the same with the text model
  (``B_L^Bert``). ``B_PT = B_L_no_image - B_L_text_model`` (the paper's Fig. 5b);
* with an image folder, ``S_L/<E>/<group>``, ``B_L/<E>`` (Eq. 3: agent vs *person*, averaged over
  all of ``E``'s images) and ``S_V/<E>/<group>``, ``B_V/<E>`` (Eq. 4: *person* caption, mean
  probability over the group's images against no image);
* ``n_images`` (images measured) and ``n_skipped`` (entries of ``skipped``).

Intervals (not in the paper, whose scores come from 6 images per group): percentile bootstrap
intervals of ``B_L/<E>`` (images of ``I_E`` resampled) and ``B_V/<E>`` (``I_f`` and ``I_m``
resampled separately), seeded with the run's seed.

``B = S(first group) - S(second group)`` (Eq. 5; the shipped spec lists ``female`` first, so
positive means female-leaning). Missing, unreadable or absent images, and entities that the
measured or the text model's vocabulary lacks (or, with ``strategy="refuse"``, splits), are
skipped with a reason and the scores that would need them are left out, never filled in.

Captions a model cannot see as written (:mod:`vlbias.models.unseen_text`) are checked per entity, as each model
reads them (the mask repeated once per word piece), in the measured and in the text model. An entity one of whose
captions loses a mask to truncation (longer than the model's maximum, the mask past the cut:
:func:`~vlbias.models.unseen_text.unseen_masked`) is skipped with the reason and ``kind`` ``truncated``, since
nothing would be read at its mask; skipping removes the entity (all its scores), because every score compares
its captions across agents. An entity whose captions are cut after their masks is measured on what the model
reads, and its rows carry a ``note``. Captions always hold a mask token, so none is ``empty`` or ``unknown``
(unknown agent and entity words are refused above). Counted, when not zero: ``n_skipped/truncated`` and
``n_truncated`` (entities measured with a truncated caption).

The per-item table has one row per (entity, input): ``source`` is ``image`` (with ``image`` and
``image_group``), ``vl_no_image`` or ``text_model``, and ``log_p_<agent key>`` holds the entity's
score with each agent (the spec's group names and ``neutral``) in the caption.

The stimuli are one :class:`TextUnit` per entity (its captions without an image, in the measured
and the text model) and one :class:`ImageUnit` per image of ``I_E``, so a run shards over
processes by entity and image; each image unit also reads the no-image *person* caption that
normalises ``S_V``, so it needs no other unit.

Measures:
    Whether a masked-word model fills an entity (an occupation, an activity, an object: "the woman is [MASK]")
    more readily for one gender than the other, and where that comes from: pre-training (against a text-only
    model), the language context of the caption, or the image.

Direction:
    A bias score ``B_<source>/<entity>``, S of the spec's first group minus S of its second (Eq. 5), above 0 means
    the entity leans toward the first group (``female`` in the shipped spec, ``woman`` on BiasWorld), below 0
    toward the second; in nats (a log-ratio of probabilities). An association score ``S_<source>/<entity>/<group>`` above 0 means the group raises the
    entity's probability against the source's normaliser.

Glossary:
    * ``S_PT``, ``B_PT``: pre-training: ln P_VL(E | g) - ln P_L(E | g), the VL model without an image against a
      text-only masked LM (Table 1, row 1); ``B_PT = B_L_no_image - B_L_text_model``.
    * ``S_L``, ``B_L``: language context given the image (Eq. 3): ln P_VL(E | g, I) - ln P_VL(E | person, I),
      averaged over the entity's images; with a bootstrap interval over images.
    * ``S_V``, ``B_V``: visual context (Eq. 4): the probability of E in the *person* caption averaged over the
      group's images, against no image; with a bootstrap interval over images.
    * ``S_L_no_image``, ``B_L_no_image``: the language score of Sec. 5 (Eq. 6, 7), caption agent against
      *person*, no image.
    * ``B_L_text_model``: the same language bias read from the text-only model (the paper's ``B_L^Bert``).
    * ``n_images``: images measured.
    * ``n_skipped``: entries skipped (images, entities), in all and by kind (``n_skipped/truncated``: entities
      whose mask was cut off).
    * ``n_truncated``: entities measured with a caption truncated to the model's maximum length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vlbias.data.biasworld import ACTIVITIES, BiasWorld
from vlbias.data.entity_association import (
    EntityImages,
    EntitySpec,
    Template,
    parse_spec,
    read_images,
    read_spec,
)
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.entity_association import (
    BiasScore,
    LanguageAssociation,
    LanguageBiasInterval,
    PretrainingAssociation,
    VisualAssociation,
    VisualBiasInterval,
)
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.models.masked_words import word_log_probs, word_pieces
from vlbias.models.registry import load
from vlbias.models.unseen_text import TRUNCATED, UnseenText, unseen_masked
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.options import EntityAssociationOptions

if TYPE_CHECKING:
    from torchmetrics import Metric

BIASWORLD_SPEC = {  # the paper's design on BiasWorld: activities as entities, test-split images
    "groups": {"woman": "woman", "man": "man"},
    "neutral": "person",
    "templates": [{"name": "activities", "text": "the {agent} is {entity}.", "entities": list(ACTIVITIES)}],
}


class EntityAssociationSuite(Suite):
    """Association scores ``S_PT``, ``S_L``, ``S_V`` and bias scores ``B(E)`` for FILL_MASK models.

    Args:
        spec: templates, entities and agents.
        images: per (entity, group) images, or ``None`` for the text-only scores.
        data_config: where the stimuli came from (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.options.EntityAssociationOptions`): the text model
            giving ``P_L`` (the paper's BERT; with ``text_tiny`` a tiny random one built with the measured model's
            tokenizer, so both score the same word pieces, and ``text_checkpoint`` unused), the multi-piece entity
            strategy, units (so at most that many images) per forward pass, and the intervals of ``B_L`` and ``B_V``.
    """

    name = "entity_association"
    capability = Capability.FILL_MASK

    def __init__(
        self,
        spec: EntitySpec,
        images: EntityImages | None,
        data_config: dict[str, object],
        options: EntityAssociationOptions,
    ) -> None:
        self.spec, self.images, self.data_config, self.options = spec, images, data_config, options

    @classmethod
    def from_path(cls, path: Path, options: EntityAssociationOptions) -> EntityAssociationSuite:
        """``path`` is an image folder (``<path>/<entity>/<group>/*``, spec from the ``spec``
        option or the shipped one) or a spec YAML file (text-only scores)."""
        path = Path(path)
        if path.is_file():
            if options.spec is not None:
                raise ConfigError(
                    f"Give the spec once: data {str(path)!r} is a spec file and suite option `spec` is "
                    f"{str(options.spec)!r}."
                )
            return cls(read_spec(path), None, {"spec": str(path), "images": None}, options)
        read = read_spec(options.spec)
        return cls(read, read_images(path, read), {"spec": read.source, "images": str(path)}, options)

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: EntityAssociationOptions) -> EntityAssociationSuite:
        """BiasWorld's activities as entities in "the {agent} is {entity}.", with agents woman /
        man / person and the balanced ``split``'s images of each (activity, group). ``B > 0`` means
        woman-leaning: a model that learned the planted bias gives ``B > 0`` for cooking,
        cleaning and sewing and ``B < 0`` for repairing, driving and coding."""
        split = options.split
        spec = parse_spec(BIASWORLD_SPEC, "biasworld")
        pictures = world.images(split).float() / 255.0  # (N, 3, H, W)
        found = EntityImages(source=f"biasworld/{split}", images={})
        for item, picture in zip(world.items(split), pictures):
            found.images.setdefault((item.activity, item.group), []).append(
                (f"biasworld/{split}/{item.index}", picture)
            )
        return cls(spec, found, {"data": "biasworld", "split": split, **world.config}, options)

    @property
    def text_checkpoint(self) -> str | None:
        """The text model's weights (``None`` for a tiny one)."""
        return None if self.options.text_tiny else self.options.text_checkpoint

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "groups": self.spec.groups,
            "neutral": self.spec.neutral,
            "templates": [{"name": t.name, "text": t.text, "entities": list(t.entities)} for t in self.spec.templates],
            "text_model": self.options.text_model,
            "text_checkpoint": self.text_checkpoint,
            "text_tiny": self.options.text_tiny,
            "text_options": {key: str(value) for key, value in (self.options.text_options or {}).items()},
            "strategy": self.options.strategy,
            "statistics": self.options.recorded_statistics(),
        }

    # -- measurement -----------------------------------------------------------------
    def stimuli(self) -> list[TextUnit | ImageUnit]:
        """Per template and entity, in spec order: the entity's :class:`TextUnit`, then an :class:`ImageUnit`
        per image of ``I_E`` (in folder order)."""
        units: list[TextUnit | ImageUnit] = []
        for template in self.spec.templates:
            for entity in template.entities:
                units.append(TextUnit(template, entity))
                if self.images is not None:
                    units.extend(
                        ImageUnit(template, entity, group, label, image)
                        for group, label, image in self.images.of(entity)
                    )
        return units

    def start(self, adapter: ModelAdapter, seed: int) -> EntityAssociationMeasurement:
        """Load the text model, refuse the entities that either model cannot score or cannot read the captions of,
        and build the metrics."""
        text_adapter = self._text_adapter(adapter)
        models = (adapter, text_adapter)
        refused = self._refused(models)
        unseen, notes = self._unseen_captions(models, {entry["item"] for entry in refused})
        refused += unseen
        if len(refused) == len(self.spec.entities):
            raise InputError(
                f"Spec {self.spec.source!r}: no entity can be scored: {'; '.join(e['reason'] for e in refused)}"
            )
        return EntityAssociationMeasurement(self, adapter, text_adapter, refused, notes, seed)

    def _text_adapter(self, adapter: ModelAdapter) -> ModelAdapter:
        options = dict(self.options.text_options or {})
        if self.options.text_tiny:
            options.setdefault("tokenizer", adapter.tokenizer)
        return load(
            self.options.text_model,
            checkpoint=self.text_checkpoint,
            tiny=self.options.text_tiny,
            device=adapter.device,
            options=options,
        )

    def _refused(self, models: tuple[ModelAdapter, ...]) -> list[dict[str, str]]:
        """Skip entries of the entities that a model cannot score. An agent word that a model does not know is
        refused outright (the caption would condition on ``[UNK]``)."""
        for model in models:
            unknown = [
                a for a in self.spec.agents().values() if model.tokenizer.unk_token in model.tokenizer.tokenize(a)
            ]
            if unknown:
                raise InputError(
                    f"Spec {self.spec.source!r}: agent word(s) {unknown} are not in model {model.name!r}'s vocabulary."
                )
        refused = []
        for entity in self.spec.entities:
            try:
                for model in models:
                    word_pieces(model.tokenizer, [entity], self.options.strategy)
            except InputError as err:
                refused.append({"item": entity, "reason": f"model {model.name!r}: {err}"})
        return refused

    def _unseen_captions(
        self, models: tuple[ModelAdapter, ...], refused: set[str]
    ) -> tuple[list[dict[str, str]], dict[tuple[str, int], str]]:
        """Skip entries (with ``kind``) of the entities a caption of which ``models[m]`` cannot read
        (:func:`~vlbias.models.unseen_text.unseen_masked`: a mask past the cut), and ``{(entity, m): note}`` of
        the others whose captions model ``m`` reads truncated (``m``: 0 the measured model, 1 the text model)."""
        skipped, notes = [], {}
        for entity in self.spec.entities:
            if entity in refused:
                continue
            found = {m: self._caption_problems(model, entity) for m, model in enumerate(models)}
            blocking = [(m, c, p) for m, problems in found.items() for c, p in problems if p.skip]
            if blocking:
                m, caption, problem = blocking[0]
                reason = f"model {models[m].name!r}, caption {caption!r}: {problem.reason}"
                skipped.append({"item": entity, "reason": reason, "kind": problem.kind})
                continue
            notes |= {
                (entity, m): "; ".join(f"caption {c!r}: {p.reason}" for c, p in problems)
                for m, problems in found.items()
                if problems
            }
        return skipped, notes

    def _caption_problems(self, model: ModelAdapter, entity: str) -> list[tuple[str, UnseenText]]:
        """The captions ``model`` reads for ``entity`` (one per agent, the template's mask repeated once per word
        piece of ``entity``, as :func:`~vlbias.models.masked_words.word_log_probs` feeds them) that it cannot
        see as written, each with why."""
        mask = model.tokenizer.mask_token
        (pieces,) = word_pieces(model.tokenizer, [entity], self.options.strategy)
        masks = " ".join([mask] * len(pieces))
        template = self.spec.template_of(entity)
        captions = [template.caption(agent, mask).replace(mask, masks) for agent in self.spec.agents().values()]
        return [(c, p) for c, p in zip(captions, unseen_masked(model, captions), strict=True) if p is not None]


@dataclass(frozen=True)
class TextUnit:
    """One entity's captions without an image: scored by the measured model (with its "no image" input) and by
    the text model, with every agent; gives ``S_PT``, ``S_L_no_image`` and the text model's ``S_L``."""

    template: Template
    entity: str


@dataclass(frozen=True)
class ImageUnit:
    """One entity's captions with one image of ``I_E`` (of ``group``), with every agent; gives ``S_L`` and
    ``S_V``."""

    template: Template
    entity: str
    group: str
    label: str
    image: object


TEXT_SCORES = ("PT", "L_no_image", "L_text_model")  # S_<key>: every scorable entity has them
UNREPORTED_SCORES = ("L_text_model",)  # only its bias B_L_text_model is reported (the paper's B_L^Bert)


class EntityAssociationMeasurement(Measurement):
    """The association metrics of one measured model: for each score ``S_<key>`` (``key`` in ``PT``,
    ``L_no_image``, ``L_text_model`` and, with images, ``L`` and ``V``) one metric per group and a
    :class:`~vlbias.metrics.entity_association.BiasScore` of the two; with images, the bootstrap intervals of
    ``B_L`` and ``B_V``. Entities are indexed in spec order; refused entities are never probed."""

    def __init__(
        self,
        suite: EntityAssociationSuite,
        adapter: ModelAdapter,
        text_adapter: ModelAdapter,
        refused: list[dict[str, str]],
        notes: dict[tuple[str, int], str],
        seed: int,
    ) -> None:
        super().__init__()
        self.suite, self.adapter, self.text_adapter, self.refused = suite, adapter, text_adapter, refused
        self.notes = notes
        self.groups = list(suite.spec.groups)
        self.entity_index = {entity: index for index, entity in enumerate(suite.spec.entities)}
        self.scorable = set(self.entity_index) - {entry["item"] for entry in refused}
        n_entities, options = len(self.entity_index), {"sync_on_compute": False}

        def per_group(metric: type) -> dict[str, Metric]:
            return {group: metric(n_entities, **options) for group in self.groups}

        self.scores = {
            "PT": per_group(PretrainingAssociation),
            "L_no_image": per_group(LanguageAssociation),
            "L_text_model": per_group(LanguageAssociation),
        }
        self.intervals: dict[str, Metric] = {}
        if suite.images is not None:
            self.scores.update(L=per_group(LanguageAssociation), V=per_group(VisualAssociation))
            statistics = suite.options.statistics
            bootstrap = {"n_bootstrap": statistics.n_bootstrap, "confidence": statistics.confidence, "seed": seed}
            bootstrap |= options
            self.intervals = {
                "L": LanguageBiasInterval(n_entities, **bootstrap),
                "V": VisualBiasInterval(n_entities, **bootstrap),
            }
        self.biases = {key: BiasScore(*pair.values()) for key, pair in self.scores.items()}  # Eq. 5

    def metrics(self) -> list[Metric]:
        return [metric for pair in self.scores.values() for metric in pair.values()] + list(self.intervals.values())

    # -- probe -------------------------------------------------------------------------
    def probe(self, batch: Batch) -> list[dict | None]:
        """Per unit: ``{source: {agent key: log-score}}`` (sources ``vl_no_image`` and ``text_model`` of a text
        unit; ``image`` of an image unit, with ``no_image_neutral``, the *person* caption's no-image score that
        normalises ``S_V``); ``None`` for a refused entity. Units of one template are scored together."""
        outputs: list[dict | None] = [None] * len(batch)
        for kind, probe in ((TextUnit, self._probe_texts), (ImageUnit, self._probe_images)):
            for template, positions in self._by_template(batch, kind).items():
                for position, output in zip(positions, probe(template, [batch.items[p] for p in positions])):
                    outputs[position] = output
        return outputs

    def _by_template(self, batch: Batch, kind: type) -> dict[Template, list[int]]:
        """Positions in ``batch`` of the scorable units of ``kind``, per template."""
        positions: dict[Template, list[int]] = {}
        for position, unit in enumerate(batch.items):
            if isinstance(unit, kind) and unit.entity in self.scorable:
                positions.setdefault(unit.template, []).append(position)
        return positions

    def _scores(
        self, adapter: ModelAdapter, pixel_values, template: Template, entities: list[str]
    ) -> dict[str, Tensor]:
        """``{agent key: (B, len(entities))}`` log-scores with each agent in the caption."""
        mask = adapter.tokenizer.mask_token
        return {
            key: word_log_probs(
                adapter, pixel_values, template.caption(agent, mask), entities, self.suite.options.strategy
            )
            .float()
            .cpu()
            for key, agent in self.suite.spec.agents().items()
        }

    def _probe_texts(self, template: Template, units: list[TextUnit]) -> list[dict]:
        entities = [unit.entity for unit in units]
        with measuring(self.adapter.device):
            vl = self._scores(self.adapter, self.adapter.no_image(1), template, entities)  # (1, n_E) per agent
        with measuring(self.text_adapter.device):
            lm = self._scores(self.text_adapter, self.text_adapter.no_image(1), template, entities)
        return [
            {
                "vl_no_image": {key: v[0, column] for key, v in vl.items()},
                "text_model": {key: v[0, column] for key, v in lm.items()},
            }
            for column in range(len(units))
        ]

    def _probe_images(self, template: Template, units: list[ImageUnit]) -> list[dict]:
        entities = list(dict.fromkeys(unit.entity for unit in units))
        images = [unit.image for unit in units]
        neutral = template.caption(self.suite.spec.neutral, self.adapter.tokenizer.mask_token)
        with measuring(self.adapter.device):
            pixels = self.adapter.prepare_images(torch.stack(images) if isinstance(images[0], Tensor) else images)
            scores = self._scores(self.adapter, pixels, template, entities)  # (n_units, n_E) per agent
            no_image = (
                word_log_probs(self.adapter, self.adapter.no_image(1), neutral, entities, self.suite.options.strategy)
                .float()
                .cpu()
            )
        columns = [entities.index(unit.entity) for unit in units]
        return [
            {"image": {key: v[row, column] for key, v in scores.items()}, "no_image_neutral": no_image[0, column]}
            for row, column in enumerate(columns)
        ]

    # -- update ------------------------------------------------------------------------
    def update(self, batch: Batch, outputs: list[dict | None]) -> None:
        for index, unit, output in zip(batch.indices, batch.items, outputs):
            if output is None:
                continue
            if isinstance(unit, TextUnit):
                self._update_text(index, unit, output)
            else:
                self._update_image(index, unit, output)

    def _update_text(self, index: int, unit: TextUnit, output: dict) -> None:
        entity = torch.tensor([self.entity_index[unit.entity]])
        vl, lm = output["vl_no_image"], output["text_model"]
        for group in self.groups:
            self.scores["PT"][group].update(entity, vl[group][None], lm[group][None])  # Table 1, row 1
            self.scores["L_no_image"][group].update(entity, vl[group][None], vl["neutral"][None])  # Eq. 6
            self.scores["L_text_model"][group].update(entity, lm[group][None], lm["neutral"][None])  # B_L^Bert, Sec. 5
        for source, scores in output.items():
            row = _row(unit.template, unit.entity, source, None, None, scores)
            self.note_row(index, row | self._note(unit.entity, source))

    def _update_image(self, index: int, unit: ImageUnit, output: dict) -> None:
        entity, order = torch.tensor([self.entity_index[unit.entity]]), torch.tensor([index])
        scores, (first, second) = output["image"], self.groups
        for group in self.groups:
            self.scores["L"][group].update(entity, scores[group][None], scores["neutral"][None])  # Eq. 3 over I_E
        self.scores["V"][unit.group].update(
            entity, scores["neutral"][None], output["no_image_neutral"][None]
        )  # Eq. 4 over I_g
        self.intervals["L"].update(order, entity, scores[first][None], scores[second][None])
        self.intervals["V"].update(
            order, entity, torch.tensor([self.groups.index(unit.group)]), scores["neutral"][None]
        )
        self.count("n_images")
        self.count(f"images/{unit.entity}/{unit.group}")
        row = _row(unit.template, unit.entity, "image", unit.label, unit.group, scores)
        self.note_row(index, row | self._note(unit.entity, "image"))

    def _note(self, entity: str, source: str) -> dict[str, str]:
        """``{"note": ...}`` when the model of ``source`` (the text model for ``text_model``, else the measured
        one) reads ``entity``'s captions truncated, else ``{}``."""
        note = self.notes.get((entity, int(source == "text_model")))
        return {"note": note} if note else {}

    # -- compute -----------------------------------------------------------------------
    def compute(self, gathered: Gathered) -> SuiteOutput:
        images = self.suite.images
        output = SuiteOutput(
            metrics={},
            items=gathered.rows,
            skipped=[*(images.skipped if images is not None else []), *self.refused, *gathered.skipped],
            n_items=len(gathered.rows),
        )
        scores = {
            key: {group: _per_entity(metric) for group, metric in pair.items()} for key, pair in self.scores.items()
        }
        biases = {key: _per_entity(metric) for key, metric in self.biases.items()}
        intervals = {key: metric.compute().reshape(-1, 2).tolist() for key, metric in self.intervals.items()}
        undefined: list[dict[str, str]] = []  # intervals written as null, with why (not skipped items)
        for entity in self.suite.spec.entities:
            if entity not in self.scorable:
                continue
            index = self.entity_index[entity]
            for key in self.scores:
                measured = self._measured_groups(key, entity, gathered.counts)
                if key not in UNREPORTED_SCORES:
                    output.metrics.update(
                        {f"S_{key}/{entity}/{group}": scores[key][group][index] for group in measured}
                    )
                if measured == self.groups:
                    output.metrics[f"B_{key}/{entity}"] = biases[key][index]
                    if key in intervals:
                        output.intervals[f"B_{key}/{entity}"] = intervals[key][index]
                        if key == "L" and math.isnan(intervals[key][index][0]):  # resampled_means: one image
                            reason = "one image of the entity: the interval is undefined (a bootstrap over one value)"
                            undefined.append({"item": f"B_L/{entity}", "scope": "interval", "reason": reason})
        output.metrics["n_images"] = float(gathered.counts.get("n_images", 0))
        output.metrics["n_skipped"] = float(len(output.skipped))
        output.skipped += undefined
        output.metrics |= self._unseen_counts()
        return output

    def _unseen_counts(self) -> dict[str, float]:
        """``n_skipped/truncated`` (entities skipped for a mask past the cut) and ``n_truncated`` (entities
        measured with a caption a model reads truncated), always present (zeros included), as every suite's
        counts."""
        counts = {
            f"n_skipped/{TRUNCATED}": float(sum(entry.get("kind") == TRUNCATED for entry in self.refused)),
            "n_truncated": float(len({entity for entity, _ in self.notes})),
        }
        return counts

    def _measured_groups(self, key: str, entity: str, counts: dict[str, float]) -> list[str]:
        """The groups ``g`` whose ``S_<key>(E, g)`` had rows: all for the text-only scores; for ``S_L`` all when
        ``E`` has an image (``I_E`` is shared by the groups); for ``S_V`` those with an image of ``E``."""
        if key in TEXT_SCORES:
            return self.groups
        with_images = [group for group in self.groups if counts.get(f"images/{entity}/{group}", 0)]
        if key == "L":
            return self.groups if with_images else []
        return with_images


def _per_entity(metric: Metric) -> list[float]:
    """A per-entity metric's ``compute`` as floats (torchmetrics squeezes a one-entity result to 0-d)."""
    return metric.compute().reshape(-1).tolist()


def _row(
    template: Template, entity: str, source: str, image: str | None, group: str | None, scores: dict[str, Tensor]
) -> dict:
    return {
        "template": template.name,
        "entity": entity,
        "source": source,
        "image": image,
        "image_group": group,
        **{f"log_p_{key}": float(value) for key, value in scores.items()},
    }
