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
are here too. Chat VLMs have training-free debiasers on an interface of their own
(:mod:`~vlbias.mitigation.chat_debiaser`, registered in :mod:`~vlbias.mitigation.chat_registry`): an instruction
prefix (:mod:`~vlbias.mitigation.instruction_prefix`), activation steering
(:mod:`~vlbias.mitigation.activation_steering`) and contextual calibration (Zhao et al., 2021;
:mod:`~vlbias.mitigation.contextual_calibration`). The names below are imported when first asked for, so importing a
torch-free module of this package (the registries, :mod:`~vlbias.mitigation.removal_count`) imports no torch.
"""

import importlib

#: name -> the module that defines it.
_WHERE = {
    "ChatDebiaser": "chat_debiaser",
    "fit_chat_debiaser": "chat_debiaser",
    "chat_debiaser_class": "chat_registry",
    "list_chat_debiasers": "chat_registry",
    "load_steering": "activation_steering",
    "Debiaser": "debiaser",
    "FitData": "debiaser",
    "load_debiaser": "debiaser",
    "effect_size_without": "leave_one_out",
    "leave_one_out_effect_sizes": "leave_one_out",
    "apply_projection": "projection",
    "orthogonal_projection": "projection",
    "BiasTest": "pruning",
    "PruningResult": "pruning",
    "mutual_information": "pruning",
    "prune_dimensions": "pruning",
    "select_dimensions": "pruning",
    "debiaser_class": "registry",
    "list_debiasers": "registry",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
