"""What the suites whose stimuli are parallel image sets share (:class:`~vlbias.data.counterfactual_questions.
CounterfactualSet`: images that differ only in the person shown): ``counterfactual_answers`` and
``open_generation``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from vlbias.data.counterfactual_questions import CounterfactualSet
from vlbias.errors import InputError
from vlbias.suites.base import Suite
from vlbias.suites.options import SuiteOptions


class ImageSetSuite(Suite):
    """A suite over parallel image sets: ``sets`` (the stimuli, never split across ranks), where they were read from
    (``data_config``), the suite's ``options`` and what the reader left out (``skipped``); no set at all is refused,
    naming the first reasons."""

    def __init__(
        self,
        sets: list[CounterfactualSet],
        data_config: dict[str, object],
        options: SuiteOptions,
        skipped: list[dict[str, str]] | None = None,
    ) -> None:
        if not sets:
            raise InputError(f"No set of {data_config.get('data')} has two readable images: {(skipped or [])[:3]}")
        self.sets, self.data_config, self.options = sets, data_config, options
        self.skipped = list(skipped or [])

    def stimuli(self) -> list[CounterfactualSet]:
        return self.sets


def attribute_values(sets: Sequence[CounterfactualSet]) -> dict[str, list[str]]:
    """Each attribute the sets' images name, sorted, with its values, sorted."""
    values: dict[str, set[str]] = defaultdict(set)
    for question_set in sets:
        for image in question_set.images:
            for attribute, value in image.attributes:
                values[attribute].add(value)
    return {attribute: sorted(values[attribute]) for attribute in sorted(values)}
