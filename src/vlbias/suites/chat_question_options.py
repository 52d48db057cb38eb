"""What the options of the chat-VLM question suites (``bias_qa``, ``counterfactual_answers``) share, declared once:
how an answer option is scored and how a question becomes a prompt. Imports no torch.

A prompt is the suite's template with ``{question}``, ``{options}`` (the options lettered ``A.``, ``B.``, ... one a
line, in the order shown) and the suite's other fields filled in, blank lines left out (so an empty field leaves
none).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from vlbias.errors import ConfigError
from vlbias.suites.options import Split, SuiteOptions

Scoring = Literal["log_prob", "mean_log_prob", "first_token"]
#: The answer letters of the displayed positions (a question has at most this many options).
LETTERS = string.ascii_uppercase
#: The fields every template holds.
REQUIRED_FIELDS = ("question", "options")


@dataclass(frozen=True)
class ChatQuestionOptions(SuiteOptions):
    """The scoring and the prompt of a suite that asks a chat model multiple-choice questions.

    Args:
        scoring: how an option is scored: log_prob (the option text's summed log-probability after the prompt),
            mean_log_prob (its mean per token) or first_token (the probability of the option's letter A, B, C as
            the answer's first token); each prompt's scores become a distribution over its options (softmax, or the
            letters' probabilities renormalised).
        template: the prompt, a format string with {question} and {options} (the options lettered "A. ...", one a
            line) and the suite's other fields (bias_qa: {context}); default: the fields, then "Answer with one of
            the options." (with first_token: "Answer with the letter of one option.").
        split: the BiasWorld-QA split measured when the data is the training run's world (the bias callback's
            'biasworld' beside a BiasWorld-QA datamodule).
    """

    #: Every field a template may hold, in the default template's order (``REQUIRED_FIELDS`` among them).
    TEMPLATE_FIELDS: ClassVar[tuple[str, ...]] = REQUIRED_FIELDS
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split",)

    scoring: Scoring = "log_prob"
    template: str | None = None
    split: Split = "test"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.template is None:
            return
        try:
            fields = [name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None]
        except ValueError as err:
            raise ConfigError(f"Suite option `template` {self.template!r} is not a format string: {err}") from None
        optional = [name for name in self.TEMPLATE_FIELDS if name not in REQUIRED_FIELDS]
        if any(name not in self.TEMPLATE_FIELDS for name in fields) or any(f not in fields for f in REQUIRED_FIELDS):
            also = f" (and optionally {', '.join('{' + name + '}' for name in optional)})" if optional else ""
            raise ConfigError(
                f"Expected `template` to hold {{question}} and {{options}}{also}, and no other field, but got "
                f"{self.template!r}."
            )

    def chosen_template(self) -> str:
        """``template``, or the default of the scoring: each field a line, then what to answer with."""
        if self.template is not None:
            return self.template
        ask = (
            "Answer with the letter of one option."
            if self.scoring == "first_token"
            else "Answer with one of the options."
        )
        return "\n".join([*(f"{{{name}}}" for name in self.TEMPLATE_FIELDS), ask])

    def format_prompt(self, options: Sequence[str], **fields: str) -> str:
        """The prompt of ``options`` in this order and the template's other ``fields``; blank lines left out."""
        listed = "\n".join(f"{LETTERS[k]}. {option}" for k, option in enumerate(options))
        text = self.chosen_template().format(options=listed, **fields)
        return "\n".join(line for line in text.strip().splitlines() if line.strip())
