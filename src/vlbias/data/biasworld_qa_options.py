"""BiasWorld-QA's options (:mod:`vlbias.data.biasworld_qa`), declared with their types and ranges and checked when
made: a value out of range is refused in one :class:`~vlbias.errors.ConfigError` line naming the option. Torch-free,
so a command line lists them without importing torch."""

from __future__ import annotations

from dataclasses import dataclass

from jsonargparse.typing import ClosedUnitInterval, PositiveInt

from vlbias.data.biasworld_options import ImageSize
from vlbias.options import Seed, accepted_types, check_value


@dataclass(frozen=True)
class BiasWorldQAOptions:
    """BiasWorld-QA: "What is the person doing?" about BiasWorld's pictures, with a planted answer bias.

    Args:
        bias_strength: share s of the ambiguous training questions answered with the stereotyped activity (the rest
            with the counter-stereotyped one): 0.5 plants no bias.
        n_train: training questions.
        ambiguous_rate: share of the training questions whose picture hides the activity object (ambiguous).
        eval_per_combination: val/test questions per (group, stereotyped option, counter option) and variant (ambiguous,
            stereotyped object shown, counter-stereotyped object shown).
        image_size: image side in pixels.
        seed: seed of the world.
    """

    bias_strength: ClosedUnitInterval = 0.5
    n_train: PositiveInt = 2048
    ambiguous_rate: ClosedUnitInterval = 0.5
    identification_rate: ClosedUnitInterval = 0.25
    eval_per_combination: PositiveInt = 2
    image_size: ImageSize = 64
    seed: Seed = 0

    def __post_init__(self) -> None:
        for name, kind in accepted_types(type(self)).items():
            object.__setattr__(self, name, check_value(name, getattr(self, name), kind, "BiasWorld-QA option"))
