"""The options of the counterfactual answers suite (:mod:`vlbias.suites.counterfactual_answers`), declared in a module
of their own and found by :func:`vlbias.suites.options.suite_options_class`. Imports no torch.

How a set's question becomes a prompt is here too (:meth:`CounterfactualAnswersOptions.prompt`): the template's
``{question}`` and ``{options}`` (the options lettered ``A.``, ``B.``, ... one a line, in the file's order).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from jsonargparse.typing import PositiveInt

from vlbias.errors import ConfigError
from vlbias.options import StatisticsOptions
from vlbias.suites.bias_qa_options import LETTERS, Scoring
from vlbias.suites.options import PERCENTILE_ONLY, SuiteOptions

TEMPLATE_FIELDS = ("question", "options")
#: The default templates: an option's text is scored (log_prob, mean_log_prob), or its letter (first_token).
TEXT_TEMPLATE = "{question}\n{options}\nAnswer with one of the options."
LETTER_TEMPLATE = "{question}\n{options}\nAnswer with the letter of one option."


@dataclass(frozen=True)
class CounterfactualAnswersOptions(SuiteOptions):
    """Counterfactual answers (``vlbias.suites.counterfactual_answers``); question sets from a JSONL file only.

    Args:
        scoring: how an option is scored: log_prob (the option text's summed log-probability after the prompt),
            mean_log_prob (its mean per token) or first_token (the probability of the option's letter A, B, C as
            the answer's first token); each image's scores become a distribution over the options (softmax, or
            the letters' probabilities renormalised).
        template: the prompt, with {question} and {options} (the options lettered "A. ...", one a line); default:
            the question, the options and "Answer with one of the options." (with first_token: "Answer with the
            letter of one option.").
        batch_size: sets per probe (each set's images probed together).
        statistics: percentile bootstrap intervals over sets; n_permutations random sign vectors per attribute gap
            test when it is not exact (exact up to 2^24 sign vectors).
    """

    SUITE: ClassVar[str] = "counterfactual_answers"
    FIXED_STATISTICS: ClassVar[dict[str, str]] = {
        "exact_limit": "its sign-flip tests are exact up to 2^24 sign vectors",
        "interval_method": PERCENTILE_ONLY,
    }

    scoring: Scoring = "log_prob"
    template: str | None = None
    batch_size: PositiveInt = 4
    statistics: StatisticsOptions = StatisticsOptions()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.template is not None:
            try:
                fields = [name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None]
            except ValueError as err:
                raise ConfigError(f"Suite option `template` {self.template!r} is not a format string: {err}") from None
            if sorted(set(fields)) != sorted(TEMPLATE_FIELDS):
                raise ConfigError(
                    f"Expected `template` to hold {{question}} and {{options}}, and no other field, but got "
                    f"{self.template!r}."
                )

    def chosen_template(self) -> str:
        """``template``, or the default of the scoring."""
        if self.template is not None:
            return self.template
        return LETTER_TEMPLATE if self.scoring == "first_token" else TEXT_TEMPLATE

    def prompt(self, question: str, options: Sequence[str]) -> str:
        """The prompt of a set's question and ``options``.

        Example:
            >>> print(CounterfactualAnswersOptions().prompt("Is this a doctor or a nurse?", ["a doctor", "a nurse"]))
            Is this a doctor or a nurse?
            A. a doctor
            B. a nurse
            Answer with one of the options.
        """
        listed = "\n".join(f"{LETTERS[k]}. {option}" for k, option in enumerate(options))
        text = self.chosen_template().format(question=question, options=listed)
        return "\n".join(line for line in text.strip().splitlines() if line.strip())
