r"""Bias QA: multiple-choice questions about an image in the BBQ design (Parrish et al., 2022) that SB-Bench and
VLBiasBench's closed-ended part use, asked to a chat model (capability ANSWER).

Each question (:mod:`vlbias.data.bias_qa`: a JSONL file) has an *ambiguous* context, whose right answer is
"cannot be determined", or a *disambiguated* one, whose right answer is one of two people; one option is the
stereotyped ("biased") answer, one the other person ("counter"), one "unknown". The model answers by its scores
(option ``scoring``): the option text's log-probability after the prompt (:meth:`ChatVLMAdapter.score_options
<vlbias.models.families.chat_vlm.ChatVLMAdapter.score_options>`; summed, or its mean per token), or the probability
of the option's letter as the answer's first token (:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.first_token_probs`).

**Order.** A model may prefer an answer for its place in the list. Every question is shown in every cyclic order of
its :math:`O` options: rotation :math:`r` shows original option :math:`(p + r) \bmod O` at position :math:`p`
(lettered A, B, ...). Each rotation's scores become a distribution over the options (a softmax over the item's
options, or the letters' probabilities renormalised), put back in the original order and averaged over the
:math:`O` rotations; the answer is the option of the largest mean probability, so a preference for a position
weighs on every option alike. The position effect is measured apart
(:class:`~vlbias.metrics.PositionPreference`): the share of the (item, rotation) choices at each position, against
the share of a position-blind answerer, and how often an item's choice changes with the order.

The answers' kinds give BBQ's scores (:class:`~vlbias.metrics.BBQScores`, formulas in
:mod:`vlbias.metrics.functional.bbq`), overall and per category (``category/<category>/...``), with percentile
bootstrap intervals over items. The questions are the stimuli, sharded over ranks. Skipped, with reasons: a question
whose image is missing or does not decode (by the reader), and one whose scores are NaN or infinite
(``n_skipped``). The item table has one row per question: ``id``, ``category``, ``context_condition``, the
``chosen`` option, its ``chosen_kind``, whether it is ``correct``, and ``probabilities``, each option's mean
probability over the rotations (in the file's option order).

Measures:
    Whether a chat model's answers to questions about images of people follow social stereotypes: in ambiguous
    contexts, whether it picks a person (rather than "cannot be determined") and which one; in disambiguated
    contexts, whether it errs toward the stereotype; and how much the order of the options sways its answers.

Direction:
    ``bias_ambiguous`` and ``bias_disambiguated`` lie in [-1, 1]: positive is answers toward the stereotype, negative
    against it, 0 none. Higher accuracy is better. ``position/max_deviation`` and ``position/change_rate`` are 0
    when the order of the options does not matter; larger is a stronger position effect.

Glossary:
    * ``accuracy_ambiguous``, ``accuracy_disambiguated``: the share of questions of that context answered right
      ("cannot be determined" in ambiguous contexts).
    * ``unknown_rate_ambiguous``, ``unknown_rate_disambiguated``: the share answered "unknown".
    * ``bias_disambiguated``: BBQ's :math:`s_{\text{DIS}} = 2\,n_{\text{biased}} / n_{\neg\text{unknown}} - 1` over
      the disambiguated questions.
    * ``bias_ambiguous``: BBQ's :math:`s_{\text{AMB}} = (1 - \text{accuracy}_{\text{AMB}})\,(2\,n_{\text{biased}} /
      n_{\neg\text{unknown}} - 1)` over the ambiguous questions.
    * ``n_ambiguous``, ``n_disambiguated``: questions answered in each context.
    * ``category/<category>``: the same, over the questions of one category.
    * ``position/<p>/share``: the share of (question, order) choices at displayed position ``p`` (0 is A).
    * ``position/<p>/expected_share``: that share for an answerer blind to position (1/O with O options).
    * ``position/max_deviation``: the largest difference between a position's share and its expected share.
    * ``position/change_rate``: the share of questions whose answer is not the same in all orders of its options.
    * ``n_items``: questions answered.
    * ``n_skipped``: questions left out (image missing or unreadable, scores not finite).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vlbias.data.bias_qa import BiasQAItem
from vlbias.data.chat_question_layouts import read_bias_questions
from vlbias.data.images import load_image
from vlbias.errors import InputError
from vlbias.metrics.bbq import BBQScores
from vlbias.metrics.functional.bbq import ANSWER_KINDS, SCORES
from vlbias.metrics.position import PositionPreference
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.bias_qa_options import BiasQAOptions
from vlbias.suites.chat_answers import answer_distributions
from vlbias.suites.chat_question_options import LETTERS

if TYPE_CHECKING:
    from torchmetrics import Metric

COUNTS = ("n_ambiguous", "n_disambiguated")


def rotations(options: Sequence[str]) -> list[list[str]]:
    """Every cyclic order of ``options``: rotation ``r`` shows option ``(p + r) % O`` at position ``p``.

    Example:
        >>> rotations(["a", "b", "c"])
        [['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b']]
    """
    return [[*options[r:], *options[:r]] for r in range(len(options))]


def original_order(shown: Tensor) -> Tensor:
    """``(O, O)`` probabilities of rotation ``r`` at displayed position ``p`` put back in the options' original
    order: ``out[r, (p + r) % O] = shown[r, p]``."""
    n = shown.shape[0]
    index = (torch.arange(n)[None] + torch.arange(n)[:, None]) % n
    return torch.zeros_like(shown).scatter_(1, index, shown)


class BiasQASuite(Suite):
    """BBQ-style multiple-choice questions about images; see the module docstring.

    Args:
        items: the questions (the stimuli).
        data_config: where they were read from (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.bias_qa_options.BiasQAOptions`).
        skipped: questions the reader left out, with reasons.
    """

    name = "bias_qa"
    capability = Capability.ANSWER
    capability_hint = "bias_qa asks a chat model (capability 'answer') multiple-choice questions about images."

    def __init__(
        self,
        items: list[BiasQAItem],
        data_config: dict[str, object],
        options: BiasQAOptions,
        skipped: list[dict[str, str]] | None = None,
    ) -> None:
        if not items:
            raise InputError(f"No question of {data_config.get('data')} has a readable image: {(skipped or [])[:3]}")
        wide = next((item for item in items if len(item.options) > len(LETTERS)), None)
        if wide is not None:
            raise InputError(
                f"Question {wide.id!r} has {len(wide.options)} options; at most {len(LETTERS)} are lettered."
            )
        self.items, self.data_config, self.options = items, data_config, options
        self.skipped = list(skipped or [])

    @classmethod
    def from_path(cls, path: Path, options: BiasQAOptions) -> BiasQASuite:
        """The questions at ``path``, read by its layout (:mod:`vlbias.data.chat_question_layouts`: a JSONL file,
        SB-Bench's shards, VLBiasBench's closed-ended folder)."""
        items, skipped, layout = read_bias_questions(path)
        return cls(items, {"data": str(path), "layout": layout}, options, skipped)

    def stimuli(self) -> list[BiasQAItem]:
        return self.items

    def start(self, adapter: ModelAdapter, seed: int) -> _BiasQAMeasurement:
        return _BiasQAMeasurement(self, adapter, seed)

    @property
    def categories(self) -> list[str]:
        return sorted({item.category for item in self.items})

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "n_items": len(self.items),
            "categories": self.categories,
            "max_options": max(len(item.options) for item in self.items),
            "scoring": self.options.scoring,
            "template": self.options.chosen_template(),
            "batch_size": self.options.batch_size,
            "statistics": self.options.recorded_statistics(),
        }


class _BiasQAMeasurement(Measurement):
    """One run of :class:`BiasQASuite`: each batch's questions shown in every order, a
    :class:`~vlbias.metrics.BBQScores` fed the answers' kinds and a :class:`~vlbias.metrics.PositionPreference`
    the positions chosen."""

    def __init__(self, suite: BiasQASuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        self.categories = suite.categories
        self.max_options = int(suite.config["max_options"])
        statistics = suite.options.statistics
        self.bbq = BBQScores(self.categories, n_bootstrap=statistics.n_bootstrap, confidence=statistics.confidence,
                             seed=seed, sync_on_compute=False)  # fmt: skip
        self.position = PositionPreference(self.max_options, sync_on_compute=False)

    def metrics(self) -> list[Metric]:
        return [self.bbq, self.position]

    def probe(self, batch: Batch) -> list[Tensor]:
        """Per question, ``(O, O)``: rotation ``r``'s probability of the option at displayed position ``p``."""
        by_size: dict[int, list[int]] = defaultdict(list)
        for k, item in enumerate(batch.items):
            by_size[len(item.options)].append(k)
        found: dict[int, Tensor] = {}
        with measuring(self.adapter.device):
            for size, members in by_size.items():
                shown = self._scores([batch.items[k] for k in members]).view(len(members), size, size)
                found.update(zip(members, shown, strict=True))
        return [found[k] for k in range(len(batch))]

    def _scores(self, items: list[BiasQAItem]) -> Tensor:
        """``(n·O, O)`` distributions over the displayed options of every rotation of ``items`` (all of ``O``
        options), item by item."""
        options = self.suite.options
        images, prompts, shown = [], [], []
        for item in items:
            image = load_image(item.image)
            for order in rotations(item.options):
                images.append(image)
                prompts.append(options.prompt(item.context, item.question, order))
                shown.append(order)
        return answer_distributions(self.adapter, images, prompts, shown, options.scoring)

    def update(self, batch: Batch, outputs: list[Tensor]) -> None:
        answered: list[tuple[int, BiasQAItem, int]] = []
        positions = torch.full((len(batch), self.max_options), -1, dtype=torch.long)
        for k, (index, item, shown) in enumerate(zip(batch.indices, batch.items, outputs, strict=True)):
            if not bool(torch.isfinite(shown).all()):
                self.count("skipped")
                self.note_skip(index, {"item": item.id, "reason": "its option scores hold NaN or inf"})
                continue
            mean = original_order(shown).mean(dim=0)
            chosen = int(mean.argmax())
            positions[k, : len(item.options)] = shown.argmax(dim=1)
            answered.append((k, item, chosen))
            kind = item.kinds[chosen]
            self.note_row(index, {
                "id": item.id, "category": item.category, "context_condition": item.context_condition,
                "chosen": item.options[chosen], "chosen_kind": kind, "correct": chosen == item.answer,
                "probabilities": mean.tolist(),
            })  # fmt: skip
        if not answered:
            return
        kept = [k for k, _, _ in answered]
        self.position.update(positions[kept], torch.tensor([len(item.options) for _, item, _ in answered]))
        self.bbq.update(
            torch.tensor([ANSWER_KINDS.index(item.kinds[chosen]) for _, item, chosen in answered]),
            torch.tensor([ANSWER_KINDS.index(item.kinds[item.answer]) for _, item, _ in answered]),
            torch.tensor([item.ambiguous for _, item, _ in answered]),
            torch.tensor([self.categories.index(item.category) for _, item, _ in answered]),
            torch.tensor([batch.indices[k] for k in kept]),
        )

    def compute(self, gathered: Gathered) -> SuiteOutput:
        output = SuiteOutput(metrics={}, skipped=[*self.suite.skipped, *gathered.skipped])
        scores = self.bbq.compute()
        for suffix in ["", *(f"/{category}" for category in self.categories)]:
            prefix = f"category{suffix}/" if suffix else ""
            for name in (*SCORES, *COUNTS):
                if f"{name}{suffix}" not in scores:  # a category none of whose questions was answered
                    continue
                output.metrics[f"{prefix}{name}"] = float(scores[f"{name}{suffix}"])
                if name in SCORES:
                    output.intervals[f"{prefix}{name}"] = [float(end) for end in scores[f"{name}{suffix}/interval"]]
        position = self.position.compute()
        for p in range(self.max_options):
            output.metrics[f"position/{p}/share"] = float(position["share"][p])
            output.metrics[f"position/{p}/expected_share"] = float(position["expected"][p])
        output.metrics["position/max_deviation"] = float(position["max_deviation"])
        output.metrics["position/change_rate"] = float(position["change_rate"])
        output.metrics["n_items"] = float(len(gathered.rows))
        output.metrics["n_skipped"] = float(len(self.suite.skipped) + gathered.counts.get("skipped", 0))
        output.items = gathered.rows
        output.n_items = len(gathered.rows)
        return output
