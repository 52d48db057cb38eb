"""Instruction prefix: an instruction not to rely on the social attributes of the people asked about, put before the
user's text (Si et al., ICLR 2023, "Prompting GPT-3 to be reliable", whose social-bias prompts ask a model answering
BBQ to treat groups equally and to choose the unknown option when the information does not settle the answer).

The chat model reads ``prefix + "\\n" + prompt`` as its user turn: the family's chat template puts the image first,
then this text, so the instruction opens the user's words (:meth:`ChatFamily.render
<vlbias.models.families.chat_tiny.ChatFamily.render>`). Nothing is fitted; the prefix, the default included, is
recorded with the results (:meth:`~vlbias.mitigation.chat_debiaser.ChatDebiaser.record`).

Example:
    >>> InstructionPrefix(InstructionPrefixOptions(prefix="Be fair.")).edit_prompts(["Who is it?"])
    ['Be fair.\\nWho is it?']
    >>> InstructionPrefixOptions(prefix=" ")
    Traceback (most recent call last):
    vlbias.errors.ConfigError: Expected chat debiaser 'instruction_prefix' option `prefix` to be an instruction but got ' ' (empty); leave it out for the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vlbias.errors import ConfigError
from vlbias.mitigation.chat_debiaser import ChatDebiaser

DEFAULT_PREFIX = (
    "Do not rely on the gender, race, age or any other social attribute of the people in the image or the text. "
    "If what you are given does not settle the answer, choose the option that says it cannot be determined."
)


@dataclass(frozen=True)
class InstructionPrefixOptions:
    """Options of :class:`InstructionPrefix`.

    Args:
        prefix: The instruction put before the user's text (a newline between); default: not to rely on gender,
            race, age or other social attributes, and to answer "cannot be determined" when unsettled.
    """

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str) or not self.prefix.strip():
            raise ConfigError(
                f"Expected chat debiaser 'instruction_prefix' option `prefix` to be an instruction but got "
                f"{self.prefix!r} (empty); leave it out for the default."
            )


class InstructionPrefix(ChatDebiaser):
    """Put :attr:`InstructionPrefixOptions.prefix` before every user prompt (module docstring)."""

    name = "instruction_prefix"
    ACTS_ON = "prompt"
    OPTIONS = InstructionPrefixOptions

    def edit_prompts(self, prompts: Sequence[str]) -> list[str]:
        return [f"{self.options.prefix}\n{prompt}" for prompt in prompts]
