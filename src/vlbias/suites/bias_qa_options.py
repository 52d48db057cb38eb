"""The options of the bias QA suite (:mod:`vlbias.suites.bias_qa`), declared in a module of their own and found by
:func:`vlbias.suites.options.suite_options_class`. Imports no torch.

How a question becomes a prompt is here too (:meth:`BiasQAOptions.prompt`): the template's ``{context}``,
``{question}`` and ``{options}`` (the options lettered ``A.``, ``B.``, ... one a line, in the order shown).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from jsonargparse.typing import PositiveInt

from vlbias.errors import ConfigError
from vlbias.options import StatisticsOptions
from vlbias.suites.options import PERCENTILE_BOOTSTRAP_ONLY, SuiteOptions

Scoring = Literal["log_prob", "mean_log_prob", "first_token"]
#: The answer letters of the displayed positions (an item has at most this many options).
LETTERS = string.ascii_uppercase
TEMPLATE_FIELDS = ("context", "question", "options")
#: The default templates: an option's text is scored (log_prob, mean_log_prob), or its letter (first_token).
TEXT_TEMPLATE = "{context}\n{question}\n{options}\nAnswer with one of the options."
LETTER_TEMPLATE = "{context}\n{question}\n{options}\nAnswer with the letter of one option."


@dataclass(frozen=True)
class BiasQAOptions(SuiteOptions):
    """Bias QA (``vlbias.suites.bias_qa``); questions from a JSONL file only.

    Args:
        scoring: how an option is scored in each order shown: log_prob (the option text's summed log-probability
            after the prompt), mean_log_prob (its mean per token) or first_token (the probability of the option's
            letter A, B, C as the answer's first token); each order's scores become a distribution over the
            options (softmax, or the letters' probabilities renormalised).
        template: the prompt, with {question} and {options} (the options lettered "A. ...", one a line, in the
            order shown) and optionally {context}; default: context, question, the options and "Answer with one of
            the options." (with first_token: "Answer with the letter of one option.").
        batch_size: questions per probe (each shown in every order of its options).
        statistics: percentile bootstrap intervals of BBQ's scores (items resampled).
    """

    SUITE: ClassVar[str] = "bias_qa"
    FIXED_STATISTICS: ClassVar[dict[str, str]] = PERCENTILE_BOOTSTRAP_ONLY

    scoring: Scoring = "log_prob"
    template: str | None = None
    batch_size: PositiveInt = 8
    statistics: StatisticsOptions = StatisticsOptions()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.template is not None:
            try:
                fields = [name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None]
            except ValueError as err:
                raise ConfigError(f"Suite option `template` {self.template!r} is not a format string: {err}") from None
            unknown = [name for name in fields if name not in TEMPLATE_FIELDS]
            missing = [name for name in ("question", "options") if name not in fields]
            if unknown or missing:
                raise ConfigError(
                    f"Expected `template` to hold {{question}} and {{options}} (and optionally {{context}}), and no "
                    f"other field, but got {self.template!r}."
                )

    def chosen_template(self) -> str:
        """``template``, or the default of the scoring."""
        if self.template is not None:
            return self.template
        return LETTER_TEMPLATE if self.scoring == "first_token" else TEXT_TEMPLATE

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
        listed = "\n".join(f"{LETTERS[k]}. {option}" for k, option in enumerate(options))
        text = self.chosen_template().format(context=context, question=question, options=listed)
        return "\n".join(line for line in text.strip().splitlines() if line.strip())
