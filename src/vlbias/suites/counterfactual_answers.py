r"""Counterfactual answers: one question asked of each image of a parallel set of images that differ only in the
person shown (PAIRS' scenarios, SocialCounterfactuals, GenderBias-VL's pairs), asked to a chat model (capability
ANSWER). A model whose answer does not depend on who is shown gives every image of a set the same answer.

The sets are a JSONL file (:mod:`vlbias.data.counterfactual_questions`): each image with its group and attributes
(``gender``, ``race``, ...), each set with one question and one list of options (optionally an "unclear" option).
Each image's options are scored (option ``scoring``): the option text's log-probability after the prompt
(:meth:`ChatVLMAdapter.score_options <vlbias.models.families.chat_vlm.ChatVLMAdapter.score_options>`; summed, or its
mean per token) made a distribution by a softmax over the set's options, or the probability of the option's letter
as the answer's first token
(:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.first_token_probs`) renormalised over the letters. The
distributions feed :class:`~vlbias.metrics.CounterfactualAnswers` (formulas in
:mod:`vlbias.metrics.functional.counterfactual`) and two published protocols,
:class:`~vlbias.metrics.CounterfactualProtocols` (formulas in :mod:`vlbias.metrics.functional.counterfactual_protocols`):
VHELM's rate of "unclear" answers per group (sets naming an "unclear" option, as the PAIRS reader's sets do) and
Girrbach et al.'s P(yes) gap per trait (sets whose options include ``yes`` and ``no``; the trait is the question).

The data path is read by its layout (:mod:`vlbias.data.chat_question_layouts`): the generic JSONL file, PAIRS'
repository folder, GenderBias-VL's base/cf pair files.

The sets are the stimuli, sharded over ranks (a set is never split). Skipped, with reasons: an image missing or not
decoding, and a set left with fewer than two images (by the reader), and a set whose scores are NaN or infinite
(``n_skipped``). The item table has one row per image: ``set``, ``group``, ``attributes`` (JSON), ``probabilities``
(in the set's option order), the ``chosen`` option.

Measures:
    Whether a chat model's answer to a question about an image changes with the person shown (gender, race, ...)
    when nothing else in the image changes, and toward which answers each attribute's values push it.

Direction:
    ``max_change``, ``js_divergence``, ``flip_rate`` are 0 when the person shown does not matter; larger is a
    stronger dependence. ``gap/<attribute>/<v>-<w>/<option>`` is positive when the option is likelier for value
    ``v`` than for ``w``; 0 none. ``yes_gap/<attribute>/<v>-<w>/<question>`` is positive when the model says yes
    to the trait more for ``v``; 0 none. ``unknown_rate`` and ``unclear_rate/...`` are neither good nor bad alone:
    read them with the question, and compare a rate across the values of an attribute.

Glossary:
    * ``max_change``: mean over sets of the largest change of one option's probability across the set's images.
    * ``js_divergence``: mean over sets of the Jensen-Shannon divergence of the images' answer distributions
      (entropy of the mean minus the mean entropy, in nats).
    * ``flip_rate``: the share of sets whose chosen answer is not the same for every image.
    * ``unknown_rate``: mean over the sets that name an "unclear" option of the share of images answered so.
    * ``gap/<attribute>/<pair>/<option>``: the mean over sets of P(option | v) - P(option | w) for the attribute's
      values ``pair`` = ``v-w`` (paired within sets), with a sign-flip p-value (Holm and BH adjusted under ``@holm``
      and ``@bh``); ``.../n_sets`` the sets holding both values.
    * ``unclear_rate/<attribute>/<value>``: VHELM's PAIRS protocol: the share of the images of that value (in sets
      naming an "unclear" option) whose chosen answer is "unclear"; ``.../n_images`` those images.
    * ``yes_gap/<attribute>/<pair>/<question>``: Girrbach et al.'s gap for the trait a yes/no question asks: the mean
      over sets of P(yes | v) - P(yes | w), P(yes) normalised over yes and no per image, with a paired sign-flip
      p-value (Holm and BH adjusted over the traits under ``@holm`` and ``@bh``); ``.../n_sets`` the sets.
    * ``n_sets``: sets answered.
    * ``n_items``: images answered.
    * ``n_skipped``: images and sets left out (image missing or unreadable, set too small, scores not finite).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vlbias.data.chat_question_layouts import read_question_sets
from vlbias.data.counterfactual_questions import CounterfactualSet
from vlbias.data.images import load_image
from vlbias.errors import InputError
from vlbias.metrics.counterfactual import CounterfactualAnswers
from vlbias.metrics.counterfactual_protocols import CounterfactualProtocols
from vlbias.metrics.functional.counterfactual import MEAN_NAMES
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.suites.base import Batch, Gathered, Measurement, SuiteOutput
from vlbias.suites.chat_answers import answer_distributions
from vlbias.suites.chat_question_options import LETTERS
from vlbias.suites.counterfactual_answers_options import CounterfactualAnswersOptions
from vlbias.suites.image_sets import ImageSetSuite, attribute_values
from vlbias.suites.rows import enter_measured

if TYPE_CHECKING:
    from torchmetrics import Metric


class CounterfactualAnswersSuite(ImageSetSuite):
    """One question asked of parallel images of different people; see the module docstring.

    Args:
        sets: the question sets (the stimuli).
        data_config: where they were read from (recorded in results).
        options: the suite's options.
        skipped: images and sets the reader left out, with reasons.
    """

    name = "counterfactual_answers"
    capability = Capability.ANSWER
    capability_hint = "counterfactual_answers asks a chat model (capability 'answer') one question of parallel images."

    def __init__(
        self,
        sets: list[CounterfactualSet],
        data_config: dict[str, object],
        options: CounterfactualAnswersOptions,
        skipped: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(sets, data_config, options, skipped)
        wide = next((s for s in sets if len(s.options) > len(LETTERS)), None)
        if wide is not None:
            raise InputError(f"Set {wide.name!r} has {len(wide.options)} options; at most {len(LETTERS)} are lettered.")
        self.option_names = sorted({option for s in sets for option in s.options})
        self.question_names = sorted({s.question for s in sets})
        self.attribute_values = attribute_values(sets)

    @classmethod
    def from_path(cls, path: Path, options: CounterfactualAnswersOptions) -> CounterfactualAnswersSuite:
        """The sets at ``path``, read by its layout (:mod:`vlbias.data.chat_question_layouts`: a JSONL file, PAIRS'
        folder, GenderBias-VL's pair files)."""
        sets, skipped, layout = read_question_sets(path)
        return cls(sets, {"data": str(path), "layout": layout}, options, skipped)

    def start(self, adapter: ModelAdapter, seed: int) -> _CounterfactualMeasurement:
        return _CounterfactualMeasurement(self, adapter, seed)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "n_sets": len(self.sets),
            "n_images": sum(len(s.images) for s in self.sets),
            "attributes": self.attribute_values,
            "max_options": max(len(s.options) for s in self.sets),
            "scoring": self.options.scoring,
            "template": self.options.chosen_template(),
            "batch_size": self.options.batch_size,
            "statistics": self.options.recorded_statistics(),
        }


class _CounterfactualMeasurement(Measurement):
    """One run of :class:`CounterfactualAnswersSuite`: each batch's sets probed image by image, a
    :class:`~vlbias.metrics.CounterfactualAnswers` fed the answer distributions."""

    def __init__(self, suite: CounterfactualAnswersSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        self.max_options = int(suite.config["max_options"])
        statistics = suite.options.statistics
        self.answers = CounterfactualAnswers(
            suite.option_names, suite.attribute_values, self.max_options, n_bootstrap=statistics.n_bootstrap,
            confidence=statistics.confidence, n_permutations=statistics.n_permutations, seed=seed,
            sync_on_compute=False,
        )  # fmt: skip
        self.protocols = CounterfactualProtocols(
            suite.option_names, suite.attribute_values, suite.question_names, self.max_options,
            n_bootstrap=statistics.n_bootstrap, confidence=statistics.confidence,
            n_permutations=statistics.n_permutations, seed=seed, sync_on_compute=False,
        )  # fmt: skip

    def metrics(self) -> list[Metric]:
        return [self.answers, self.protocols]

    def probe(self, batch: Batch) -> list[Tensor]:
        """Per set, ``(n_images, O)``: each image's distribution over the set's options."""
        by_size: dict[int, list[int]] = defaultdict(list)
        for k, question_set in enumerate(batch.items):
            by_size[len(question_set.options)].append(k)
        found: dict[int, Tensor] = {}
        with measuring(self.adapter.device):
            for members in by_size.values():
                sets = [batch.items[k] for k in members]
                probabilities = self._distributions(sets).split([len(s.images) for s in sets])
                found.update(zip(members, probabilities, strict=True))
        return [found[k] for k in range(len(batch))]

    def _distributions(self, sets: list[CounterfactualSet]) -> Tensor:
        """``(images, O)`` distributions over the options of every image of ``sets`` (all of ``O`` options)."""
        options = self.suite.options
        images, prompts, shown = [], [], []
        for question_set in sets:
            prompt = options.prompt(question_set.question, question_set.options)
            for image in question_set.images:
                images.append(load_image(image.image))
                prompts.append(prompt)
                shown.append(list(question_set.options))
        return answer_distributions(self.adapter, images, prompts, shown, options.scoring)

    def update(self, batch: Batch, outputs: list[Tensor]) -> None:
        rows: dict[str, list[Tensor]] = defaultdict(list)
        names, values = self.suite.option_names, self.suite.attribute_values
        for index, question_set, probabilities in zip(batch.indices, batch.items, outputs, strict=True):
            if not bool(torch.isfinite(probabilities).all()):
                self.count("skipped")
                self.note_skip(index, {"item": question_set.name, "reason": "its option scores hold NaN or inf"})
                continue
            n, width = probabilities.shape
            padded = torch.full((n, self.max_options), torch.nan, dtype=torch.float64)
            padded[:, :width] = probabilities
            codes = torch.full((n, self.max_options), -1, dtype=torch.long)
            codes[:, :width] = torch.tensor([names.index(option) for option in question_set.options])
            attributes = torch.full((n, len(values)), -1, dtype=torch.long)
            for i, image in enumerate(question_set.images):
                for attribute, value in image.attributes:
                    attributes[i, list(values).index(attribute)] = values[attribute].index(value)
                chosen = int(probabilities[i].argmax())
                self.note_row(index, {
                    "set": question_set.name, "group": image.group, "attributes": json.dumps(dict(image.attributes)),
                    "probabilities": probabilities[i].tolist(), "chosen": question_set.options[chosen],
                })  # fmt: skip
            unknown = -1 if question_set.unknown_option is None else question_set.unknown_option
            question = self.suite.question_names.index(question_set.question)
            for name, value in (("probabilities", padded), ("set_index", torch.full((n,), index)),
                                ("unknown_option", torch.full((n,), unknown)), ("options", codes),
                                ("attributes", attributes), ("question", torch.full((n,), question))):  # fmt: skip
                rows[name].append(value)
        if rows:
            joined = {name: torch.cat(value) for name, value in rows.items()}
            self.protocols.update(**joined)
            self.answers.update(**{name: value for name, value in joined.items() if name != "question"})

    def compute(self, gathered: Gathered) -> SuiteOutput:
        output = SuiteOutput(metrics={}, skipped=[*self.suite.skipped, *gathered.skipped])
        results = self.answers.compute()
        for name in MEAN_NAMES.values():
            enter_measured(output, results, name)
        for key in sorted(k for k in results if k.startswith("gap/") and k.endswith("/p_value")):
            gap = key.removesuffix("/p_value")
            enter_measured(output, results, gap)
            output.metrics[f"{gap}/n_sets"] = float(results[f"{gap}/n_sets"])
        protocols = self.protocols.compute()
        for key in sorted(k for k in protocols if k.endswith("/interval")):
            name = key.removesuffix("/interval")
            enter_measured(output, protocols, name)
            for count in ("n_images", "n_sets"):
                if f"{name}/{count}" in protocols:
                    output.metrics[f"{name}/{count}"] = float(protocols[f"{name}/{count}"])
        output.metrics["n_sets"] = float(results["n_sets"])
        output.metrics["n_items"] = float(len(gathered.rows))
        output.metrics["n_skipped"] = float(len(self.suite.skipped) + gathered.counts.get("skipped", 0))
        output.items = gathered.rows
        output.n_items = len(gathered.rows)
        return output
