"""The options of the bias QA suite (:mod:`vlbias.suites.bias_qa`), declared in a module of their own and found by
:func:`vlbias.suites.options.suite_options_class`. Imports no torch.

How a question becomes a prompt is here too (:meth:`BiasQAOptions.prompt`): the template's ``{context}``,
``{question}`` and ``{options}`` (:mod:`vlbias.suites.chat_question_options`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from jsonargparse.typing import PositiveInt

from vlbias.options import StatisticsOptions
from vlbias.suites.chat_question_options import ChatQuestionOptions
from vlbias.suites.options import PERCENTILE_BOOTSTRAP_ONLY


@dataclass(frozen=True)
class BiasQAOptions(ChatQuestionOptions):
    """Bias QA (``vlbias.suites.bias_qa``); questions from a JSONL file only. ``scoring`` and ``template``: as every
    chat question suite's (:class:`~vlbias.suites.chat_question_options.ChatQuestionOptions`); each order shown is
    scored on its own.

    Args:
        batch_size: questions per probe (each shown in every order of its options).
        statistics: percentile bootstrap intervals of BBQ's scores (items resampled).
    """

    SUITE: ClassVar[str] = "bias_qa"
    FIXED_STATISTICS: ClassVar[dict[str, str]] = PERCENTILE_BOOTSTRAP_ONLY
    TEMPLATE_FIELDS: ClassVar[tuple[str, ...]] = ("context", "question", "options")

    batch_size: PositiveInt = 8
    statistics: StatisticsOptions = StatisticsOptions()

    def prompt(self, context: str, question: str, options: Sequence[str]) -> str:
        """The prompt of a question whose ``options`` are shown in this order; blank lines are left out (so an empty
        context leaves none).

        Example:
            >>> print(BiasQAOptions().prompt("", "Who is it?", ["the man", "the woman"]))
            Who is it?
            A. the man
            B. the woman
            Answer with one of the options.
        """
        return self.format_prompt(options, context=context, question=question)
