"""The options of the counterfactual answers suite (:mod:`vlbias.suites.counterfactual_answers`), declared in a module
of their own and found by :func:`vlbias.suites.options.suite_options_class`. Imports no torch.

How a set's question becomes a prompt is here too (:meth:`CounterfactualAnswersOptions.prompt`): the template's
``{question}`` and ``{options}`` (the options lettered ``A.``, ``B.``, ... one a line, in the file's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from jsonargparse.typing import PositiveInt

from vlbias.options import StatisticsOptions
from vlbias.suites.chat_question_options import ChatQuestionOptions
from vlbias.suites.options import PERCENTILE_ONLY


@dataclass(frozen=True)
class CounterfactualAnswersOptions(ChatQuestionOptions):
    """Counterfactual answers (``vlbias.suites.counterfactual_answers``); question sets from a JSONL file only.
    ``scoring`` and ``template``: as every chat question suite's
    (:class:`~vlbias.suites.chat_question_options.ChatQuestionOptions`); each image is scored on its own.

    Args:
        batch_size: sets per probe (each set's images probed together).
        statistics: percentile bootstrap intervals over sets; n_permutations random sign vectors per attribute gap
            test when it is not exact (exact up to 2^24 sign vectors).
    """

    SUITE: ClassVar[str] = "counterfactual_answers"
    FIXED_STATISTICS: ClassVar[dict[str, str]] = {
        "exact_limit": "its sign-flip tests are exact up to 2^24 sign vectors",
        "interval_method": PERCENTILE_ONLY,
    }

    batch_size: PositiveInt = 4
    statistics: StatisticsOptions = StatisticsOptions()

    def prompt(self, question: str, options: Sequence[str]) -> str:
        """The prompt of a set's question and ``options``.

        Example:
            >>> print(CounterfactualAnswersOptions().prompt("Is this a doctor or a nurse?", ["a doctor", "a nurse"]))
            Is this a doctor or a nurse?
            A. a doctor
            B. a nurse
            Answer with one of the options.
        """
        return self.format_prompt(options, question=question)
