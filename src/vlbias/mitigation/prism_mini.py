r"""PRISM-mini: image embeddings projected away from the span of spurious-attribute text embeddings (Molahasani,
Motamedi, Greenspan, Kim & Etemad, ICCV 2025, "PRISM: Reducing Spurious Implicit Biases in Vision-Language Models
with LLM-Guided Embedding Projection"), the closed-form, training-free variant of PRISM.

The spurious attributes (an LLM names them from the class prompts; here they are given, as ``attribute_prompts``:
"man", "woman" for CelebA's hair colour, "water", "land" for Waterbirds) are embedded by the text encoder, normalised,
and are the columns of :math:`V`; every image embedding is projected onto the orthogonal complement of their span,
:math:`x' = P x / |P x|` with :math:`P = I - V (V^\top V)^{-1} V^\top = I - V V^{+}`, and the class prompts are left
as they are. Source of the equation: the paper's text could not be read through this project's tools (only its
abstract); the method is transcribed from the authors' released code (``MahdiyarMM/PRISM``,
``utils.orth_transforamtion_calculation``, applied to the image embeddings in ``classify_images``), whose README
calls it "a closed-form orthogonal projection against identified bias directions". Choice: the projected image
embedding is re-normalised (the code compares it unnormalised with the class prompts, which ranks the classes of
one image identically). :math:`V V^{+}` is computed as in Orth-Proj
(:func:`~vlbias.mitigation.projection.orthogonal_projection`), so a rank-deficient set of attribute embeddings stays
exact where :math:`(V^\top V)^{-1}` does not exist. It is Orth-Proj (:class:`~vlbias.mitigation.orth_proj.OrthProj`)
applied to the other modality.

Example:
    >>> import torch
    >>> from vlbias.mitigation.debiaser import FitData
    >>> prompts = {"water": torch.tensor([[1.0, 1.0, 0.0]]), "land": torch.tensor([[1.0, 1.0, 0.0]])}
    >>> debiaser = PrismMini().fit(FitData(attribute_prompts=prompts))
    >>> debiaser.transform_images(torch.tensor([[1.0, 0.0, 1.0]]))
    tensor([[ 0.4082, -0.4082,  0.8165]])
"""

from __future__ import annotations

from vlbias.mitigation.orth_proj import OrthProj


class PrismMini(OrthProj):
    """PRISM-mini (module docstring): image embeddings projected onto the orthogonal complement of the spurious
    attribute embeddings' span; linear (:meth:`linear_map` gives :math:`P`); options as Orth-Proj's."""

    name = "prism_mini"
    MODIFIES = frozenset({"image"})
