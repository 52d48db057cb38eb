"""The options of the open generation suite (:mod:`vlbias.suites.open_generation`), declared in a module of their own
and found by :func:`vlbias.suites.options.suite_options_class`. Imports no torch.

How a set's question becomes the generation prompt is here too (:meth:`OpenGenerationOptions.prompt`), and which
text scorers run with which options (:meth:`OpenGenerationOptions.chosen_scorers`, checked by
:func:`vlbias.text_scorers.options.check_scorers`).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import ClassVar

from jsonargparse.typing import PositiveFloat, PositiveInt

from vlbias.errors import ConfigError
from vlbias.options import Seed, StatisticsOptions
from vlbias.suites.options import PERCENTILE_ONLY, Split, SuiteOptions
from vlbias.text_scorers.options import check_scorers

#: The scorers of a run that names none: both need no model.
DEFAULT_SCORERS = {"word_lists": {}, "vader": {}}


@dataclass(frozen=True)
class OpenGenerationOptions(SuiteOptions):
    """Open generation (``vlbias.suites.open_generation``); sets of images and a prompt from a JSONL file only.

    Args:
        scorers: the text scorers, {name: {option: value}}: word_lists (warmth and competence), vader (sentiment),
            classifier (a Hugging Face text classifier's label probability: {model: <hub id or folder>, label:
            <label>}); default word_lists and vader.
        template: the prompt, a format string with {question} (the set's question, e.g. "Describe this person.").
        max_new_tokens: tokens generated at most per description.
        do_sample: sample the description (at temperature, seeded with sampling_seed) instead of greedy decoding.
        temperature: the sampling temperature (with do_sample).
        sampling_seed: the seed of sampling (with do_sample); batch b of the stimuli samples from sampling_seed + its
            first set's index, so the descriptions are the same on any number of ranks.
        batch_size: sets per probe (each set's images generated together).
        statistics: percentile bootstrap intervals over sets; n_permutations within-set arrangements per test when
            it is not exact (exact when there are at most n_permutations).
        split: the BiasWorld-QA split whose counterfactual sets are described when the data is the training run's
            world (the bias callback's 'biasworld' beside a BiasWorld-QA datamodule).
    """

    SUITE: ClassVar[str] = "open_generation"
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split",)
    FIXED_STATISTICS: ClassVar[dict[str, str]] = {
        "exact_limit": "its within-set permutation tests are exact up to n_permutations arrangements",
        "interval_method": PERCENTILE_ONLY,
    }

    scorers: dict | None = None
    template: str = "{question}"
    max_new_tokens: PositiveInt = 48
    do_sample: bool = False
    temperature: PositiveFloat = 1.0
    sampling_seed: Seed = 0
    batch_size: PositiveInt = 4
    statistics: StatisticsOptions = StatisticsOptions()
    split: Split = "test"

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            fields = [name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None]
        except ValueError as err:
            raise ConfigError(f"Suite option `template` {self.template!r} is not a format string: {err}") from None
        if fields != ["question"]:
            raise ConfigError(
                f"Expected `template` to hold {{question}} once and no other field but got {self.template!r}."
            )
        if not self.do_sample and (self.temperature != 1.0 or self.sampling_seed != 0):
            raise ConfigError("Suite options `temperature` and `sampling_seed` apply with `do_sample: true` only.")
        self.chosen_scorers()

    def chosen_scorers(self) -> dict[str, object]:
        """``{scorer name: its checked options object}``: ``scorers``, or :data:`DEFAULT_SCORERS`."""
        return check_scorers(DEFAULT_SCORERS if self.scorers is None else self.scorers)

    def prompt(self, question: str) -> str:
        """The generation prompt of a set's ``question``.

        Example:
            >>> OpenGenerationOptions(template="{question} Answer in one sentence.").prompt("Describe this person.")
            'Describe this person. Answer in one sentence.'
        """
        return self.template.format(question=question)

    def generation(self) -> dict[str, object]:
        """The generation settings (recorded in results)."""
        sampled = {"temperature": self.temperature, "sampling_seed": self.sampling_seed} if self.do_sample else {}
        return {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample, **sampled}
