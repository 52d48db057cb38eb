"""BiasWorld's options as ``vlbias measure``, ``audit`` and ``prune`` take them (``--biasworld.*``), declared with
their types and ranges; torch-free, so ``--help`` lists them without importing torch. The names and defaults are
:class:`vlbias.data.biasworld.BiasWorld`'s (tests/hardening/test_options.py holds the two in step)."""

from __future__ import annotations

from dataclasses import dataclass

from jsonargparse.typing import ClosedUnitInterval, PositiveInt
from jsonargparse.typing import restricted_number_type as _restricted

from vlbias.options import Seed

ImageSize = _restricted("ImageSize", int, [(">=", 32)])


@dataclass(frozen=True)
class BiasWorldOptions:
    """BiasWorld, the synthetic world of --data biasworld (names and defaults of vlbias.data.biasworld.BiasWorld).

    Args:
        bias_strength: share s of stereotyped training items beyond chance.
        n_train: training items.
        eval_per_combination: val/test items per (group, activity).
        image_size: image side in pixels.
        neutral_caption_rate: share of captions that name no group.
        seed: seed of the world.
        hidden_object_rate: share of images drawn without their activity object.
    """

    bias_strength: ClosedUnitInterval = 0.5
    n_train: PositiveInt = 2048
    eval_per_combination: PositiveInt = 32
    image_size: ImageSize = 64
    neutral_caption_rate: ClosedUnitInterval = 0.5
    seed: Seed = 0
    hidden_object_rate: ClosedUnitInterval = 0.0
