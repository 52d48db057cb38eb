"""Bias mitigation by post-processing embeddings.

Post-hoc debiasers share one interface (:mod:`vlbias.mitigation.debiaser`: fitted on :class:`FitData`, then a
transform of image and/or text embeddings, a matrix when linear, saved and loaded as one folder), registered by name
(:func:`list_debiasers`, :func:`debiaser_class`), one module per method: Orth-Proj and Orth-Cal (Chuang et al., 2023;
:mod:`~vlbias.mitigation.orth_proj`, :mod:`~vlbias.mitigation.orth_cal`), PRISM-mini (Molahasani et al., 2025;
:mod:`~vlbias.mitigation.prism_mini`), RoboShot (Adila et al., 2024; :mod:`~vlbias.mitigation.roboshot`), SFID
(Jung et al., 2024; :mod:`~vlbias.mitigation.sfid`), BendVLM (Gerych et al., 2024; :mod:`~vlbias.mitigation.bend_vlm`),
CLIP-clip (Wang et al., 2021; :mod:`~vlbias.mitigation.clip_clip`) and MMBias
pruning (Janghorbani & de Melo, 2023, Algorithm 1; :mod:`~vlbias.mitigation.mmbias_pruning`). A debiased model is
:class:`vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings`; a linear one exports in its family's own format
(:meth:`vlbias.models.base.ModelAdapter.export_linear`). MMBias's MI-guided dimension pruning itself
(:mod:`~vlbias.mitigation.pruning`, ``vlbias prune``) and the prompt projection (:mod:`~vlbias.mitigation.projection`)
are here too.
"""

from vlbias.mitigation.debiaser import Debiaser, FitData, load_debiaser
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
from vlbias.mitigation.registry import debiaser_class, list_debiasers

__all__ = [
    "BiasTest",
    "Debiaser",
    "FitData",
    "PruningResult",
    "apply_projection",
    "debiaser_class",
    "effect_size_without",
    "leave_one_out_effect_sizes",
    "list_debiasers",
    "load_debiaser",
    "mutual_information",
    "orthogonal_projection",
    "prune_dimensions",
    "select_dimensions",
]
