"""Bias mitigation by post-processing embeddings: MMBias's MI-guided dimension pruning (Sec. 6,
Algorithm 1) and the prompt-projection baseline of Chuang et al. (2023)."""

from vlbias.mitigation.leave_one_out import (
    effect_size_without,
    leave_one_out_effect_sizes,
)
from vlbias.mitigation.projection import apply_projection, orthogonal_projection
from vlbias.mitigation.pruning import (
    BiasTest,
    PruningResult,
    mutual_information,
    prune_dimensions,
    select_dimensions,
)

__all__ = [
    "BiasTest",
    "PruningResult",
    "apply_projection",
    "effect_size_without",
    "leave_one_out_effect_sizes",
    "mutual_information",
    "orthogonal_projection",
    "prune_dimensions",
    "select_dimensions",
]
