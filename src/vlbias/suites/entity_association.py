"""Entity–gender association in masked-word predictions (Srinivasan & Bisk, 2022, Sec. 3–5).

For every entity ``E`` of a spec (default: the paper's case study, Table 2) the suite reads
``log P([MASK] = E | caption, image)`` with :func:`vlbias.models.masked_words.word_log_probs`
(full-vocabulary softmax at the mask, as a masked LM's head gives it; an entity of several word
pieces scores the mean of its pieces' log-probabilities, all pieces masked at once) and reports,
with the formulas of :mod:`vlbias.metrics.functional.entity_association`:

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

The per-item table has one row per (entity, input): ``source`` is ``image`` (with ``image`` and
``image_group``), ``vl_no_image`` or ``text_model``, and ``log_p_<agent key>`` holds the entity's
score with each agent (the spec's group names and ``neutral``) in the caption.
"""

from __future__ import annotations

from pathlib import Path

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
from vlbias.metrics.functional.entity_association import (
    bias_score,
    language_association,
    language_bias_interval,
    pretraining_association,
    visual_association,
    visual_bias_interval,
)
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.models.masked_words import STRATEGIES, word_log_probs, word_pieces
from vlbias.models.registry import adapter_class, load
from vlbias.suites.base import Suite, SuiteOutput

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
        text_model: registered FILL_MASK model giving ``P_L`` (the paper's BERT).
        text_checkpoint: its weights (hub id or local directory); the paper used BERT-base.
        text_tiny: use a tiny random text model instead (tests); it is built with the measured
            model's tokenizer, so both score the same word pieces. ``text_checkpoint`` is unused.
        text_options: the text model's own loading options (see :func:`vlbias.models.load`).
        strategy: multi-piece entity strategy of :mod:`vlbias.models.masked_words`.
        batch_size: images per forward pass.
        n_bootstrap: bootstrap resamples for the intervals of ``B_L`` and ``B_V``.
        confidence: interval coverage.
        data_config: where the stimuli came from (recorded in results).
    """

    name = "entity_association"
    capability = Capability.FILL_MASK

    def __init__(
        self,
        spec: EntitySpec,
        images: EntityImages | None = None,
        text_model: str = "bert",
        text_checkpoint: str | None = "bert-base-uncased",
        text_tiny: bool = False,
        text_options: dict | None = None,
        strategy: str = "mean_all_masked",
        batch_size: int = 16,
        n_bootstrap: int = 1000,
        confidence: float = 0.95,
        data_config: dict | None = None,
    ) -> None:
        if Capability.FILL_MASK not in adapter_class(text_model).capabilities:
            raise ConfigError(f"Suite option `text_model` must be a model with capability 'fill_mask' but {text_model!r} lacks it.")
        if not text_tiny and text_checkpoint is None:
            raise ConfigError("Suite option `text_checkpoint` (e.g. 'bert-base-uncased') or `text_tiny: true` is needed for P_L.")
        if strategy not in STRATEGIES:
            raise ConfigError(f"Expected suite option `strategy` to be one of {', '.join(STRATEGIES)} but got {strategy!r}.")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"Expected suite option `batch_size` to be a positive integer but got {batch_size!r}.")
        if not isinstance(n_bootstrap, int) or isinstance(n_bootstrap, bool) or n_bootstrap < 1:
            raise ConfigError(f"Expected suite option `n_bootstrap` to be a positive integer but got {n_bootstrap!r}.")
        if not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
            raise ConfigError(f"Expected suite option `confidence` in (0, 1) but got {confidence!r}.")
        self.spec = spec
        self.images = images
        self.text_model = text_model
        self.text_checkpoint = None if text_tiny else text_checkpoint
        self.text_tiny = text_tiny
        self.text_options = text_options or {}
        self.strategy = strategy
        self.batch_size = batch_size
        self.n_bootstrap = n_bootstrap
        self.confidence = confidence
        self.data_config = data_config or {}

    @classmethod
    def from_path(cls, path: Path, spec: str | Path | None = None, **options) -> EntityAssociationSuite:
        """``path`` is an image folder (``<path>/<entity>/<group>/*``, spec from the ``spec``
        option or the shipped one) or a spec YAML file (text-only scores)."""
        path = Path(path)
        if path.is_file():
            if spec is not None:
                raise ConfigError(f"Give the spec once: data {str(path)!r} is a spec file and suite option `spec` is {str(spec)!r}.")
            read = read_spec(path)
            return cls(read, None, data_config={"spec": str(path), "images": None}, **options)
        read = read_spec(spec)
        return cls(read, read_images(path, read), data_config={"spec": read.source, "images": str(path)}, **options)

    @classmethod
    def from_biasworld(cls, world: BiasWorld, split: str = "test", **options) -> EntityAssociationSuite:
        """BiasWorld's activities as entities in "the {agent} is {entity}.", with agents woman /
        man / person and the balanced ``split``'s images of each (activity, group). ``B > 0`` means
        woman-leaning: a model that learned the planted bias gives ``B > 0`` for cooking,
        cleaning and sewing and ``B < 0`` for repairing, driving and coding."""
        spec = parse_spec(BIASWORLD_SPEC, "biasworld")
        pictures = world.images(split).float() / 255.0  # (N, 3, H, W)
        found = EntityImages(source=f"biasworld/{split}", images={})
        for item, picture in zip(world.items(split), pictures):
            found.images.setdefault((item.activity, item.group), []).append((f"biasworld/{split}/{item.index}", picture))
        return cls(spec, found, data_config={"data": "biasworld", "split": split, **world.config}, **options)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "groups": self.spec.groups,
            "neutral": self.spec.neutral,
            "templates": [{"name": t.name, "text": t.text, "entities": list(t.entities)} for t in self.spec.templates],
            "text_model": self.text_model,
            "text_checkpoint": self.text_checkpoint,
            "text_tiny": self.text_tiny,
            "text_options": {key: str(value) for key, value in self.text_options.items()},
            "strategy": self.strategy,
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
        }

    # -- measurement -----------------------------------------------------------------
    def _text_adapter(self, adapter: ModelAdapter) -> ModelAdapter:
        options = dict(self.text_options)
        if self.text_tiny:
            options.setdefault("tokenizer", adapter.tokenizer)
        return load(self.text_model, checkpoint=self.text_checkpoint, tiny=self.text_tiny, device=adapter.device, options=options)

    def _scores(self, adapter: ModelAdapter, pixel_values, template: Template, entities: list[str]) -> dict[str, Tensor]:
        """``{agent key: (B, len(entities))}`` log-scores with each agent in the caption."""
        mask = adapter.tokenizer.mask_token
        return {
            key: word_log_probs(adapter, pixel_values, template.caption(agent, mask), entities, self.strategy).float().cpu()
            for key, agent in self.spec.agents().items()
        }

    def _scorable(self, models: tuple[ModelAdapter, ...], skipped: list[dict[str, str]]) -> set[str]:
        """The entities both models can score; the others go to ``skipped``. An agent word that a
        model does not know is refused outright: the caption would condition on ``[UNK]``."""
        for model in models:
            unknown = [a for a in self.spec.agents().values() if model.tokenizer.unk_token in model.tokenizer.tokenize(a)]
            if unknown:
                raise InputError(f"Spec {self.spec.source!r}: agent word(s) {unknown} are not in model {model.name!r}'s vocabulary.")
        refused = []
        for entity in self.spec.entities:
            try:
                for model in models:
                    word_pieces(model.tokenizer, [entity], self.strategy)
            except InputError as err:
                refused.append({"item": entity, "reason": f"model {model.name!r}: {err}"})
        if len(refused) == len(self.spec.entities):
            raise InputError(f"Spec {self.spec.source!r}: no entity can be scored: {'; '.join(e['reason'] for e in refused)}")
        skipped.extend(refused)
        return set(self.spec.entities) - {entry["item"] for entry in refused}

    def run(self, adapter: ModelAdapter, seed: int = 0) -> SuiteOutput:
        text_adapter = self._text_adapter(adapter)
        groups, output = list(self.spec.groups), SuiteOutput(metrics={})
        if self.images is not None:
            output.skipped.extend(self.images.skipped)
        scorable = self._scorable((adapter, text_adapter), output.skipped)
        n_images = 0
        for template in self.spec.templates:
            entities = [entity for entity in template.entities if entity in scorable]
            if not entities:
                continue
            with measuring(adapter.device):
                vl = self._scores(adapter, adapter.no_image(1), template, entities)  # (1, n_E) per agent
            with measuring(text_adapter.device):
                lm = self._scores(text_adapter, text_adapter.no_image(1), template, entities)
            for column, entity in enumerate(entities):
                vl_e = {key: v[0, column] for key, v in vl.items()}
                lm_e = {key: v[0, column] for key, v in lm.items()}
                for source, scores in (("vl_no_image", vl_e), ("text_model", lm_e)):
                    output.items.append(self._row(template, entity, source, None, None, scores))
                self._text_metrics(output.metrics, entity, groups, vl_e, lm_e)
                if self.images is not None:
                    n_images += self._image_metrics(output, adapter, template, entity, groups, vl_e["neutral"], seed)
        output.metrics["n_images"] = float(n_images)
        output.metrics["n_skipped"] = float(len(output.skipped))
        output.n_items = len(output.items)
        return output

    @staticmethod
    def _row(template: Template, entity: str, source: str, image: str | None, group: str | None, scores: dict[str, Tensor]) -> dict:
        return {
            "template": template.name,
            "entity": entity,
            "source": source,
            "image": image,
            "image_group": group,
            **{f"log_p_{key}": float(value) for key, value in scores.items()},
        }

    @staticmethod
    def _text_metrics(metrics: dict[str, float], entity: str, groups: list[str], vl: dict[str, Tensor], lm: dict[str, Tensor]) -> None:
        first, second = groups
        s_pt = {g: pretraining_association(vl[g], lm[g]) for g in groups}  # Table 1, row 1
        s_l = {g: language_association(vl[g][None], vl["neutral"][None]) for g in groups}  # Eq. 6: Eq. 3 with no image
        s_l_text = {g: language_association(lm[g][None], lm["neutral"][None]) for g in groups}  # B_L^Bert, Sec. 5
        for g in groups:
            metrics[f"S_PT/{entity}/{g}"] = float(s_pt[g])
            metrics[f"S_L_no_image/{entity}/{g}"] = float(s_l[g])
        metrics[f"B_PT/{entity}"] = float(bias_score(s_pt[first], s_pt[second]))  # Eq. 5
        metrics[f"B_L_no_image/{entity}"] = float(bias_score(s_l[first], s_l[second]))  # Eq. 7
        metrics[f"B_L_text_model/{entity}"] = float(bias_score(s_l_text[first], s_l_text[second]))

    def _image_metrics(
        self,
        output: SuiteOutput,
        adapter: ModelAdapter,
        template: Template,
        entity: str,
        groups: list[str],
        no_image_neutral: Tensor,
        seed: int,
    ) -> int:
        """Score every image of ``I_E``; add S_L, S_V and B for ``entity``; return the image count."""
        members = self.images.of(entity)
        if not members:
            return 0
        chunks: list[dict[str, Tensor]] = []
        with measuring(adapter.device):
            for start in range(0, len(members), self.batch_size):
                batch = [image for _, _, image in members[start : start + self.batch_size]]
                pixels = adapter.prepare_images(torch.stack(batch) if isinstance(batch[0], Tensor) else batch)
                chunks.append(self._scores(adapter, pixels, template, [entity]))
        scores = {key: torch.cat([chunk[key][:, 0] for chunk in chunks]) for key in self.spec.agents()}  # (N,)
        image_groups = [g for g, _, _ in members]
        for row, (group, label, _) in enumerate(members):
            output.items.append(self._row(template, entity, "image", label, group, {k: v[row] for k, v in scores.items()}))

        s_l = {g: language_association(scores[g], scores["neutral"]) for g in groups}  # Eq. 3 over I_E
        of_group = {g: scores["neutral"][torch.tensor([ig == g for ig in image_groups])] for g in groups}
        s_v = {g: visual_association(of_group[g], no_image_neutral) for g in groups if len(of_group[g])}  # Eq. 4 over I_g
        first, second = groups
        for g in groups:
            output.metrics[f"S_L/{entity}/{g}"] = float(s_l[g])
        output.metrics[f"B_L/{entity}"] = float(bias_score(s_l[first], s_l[second]))
        interval = language_bias_interval(scores[first], scores[second], self.n_bootstrap, self.confidence, seed)
        output.intervals[f"B_L/{entity}"] = [float(v) for v in interval]
        for g, value in s_v.items():
            output.metrics[f"S_V/{entity}/{g}"] = float(value)
        if len(s_v) == 2:
            output.metrics[f"B_V/{entity}"] = float(bias_score(s_v[first], s_v[second]))
            interval = visual_bias_interval(of_group[first], of_group[second], self.n_bootstrap, self.confidence, seed)
            output.intervals[f"B_V/{entity}"] = [float(v) for v in interval]
        return len(members)

