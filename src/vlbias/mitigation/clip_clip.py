r"""CLIP-clip (Wang, Liu & Wang, 2021, "Are Gender-Neutral Queries Really Gender-Neutral? Mitigating Gender Bias in
Image Search", Sec. 5): the :math:`N` embedding dimensions that tell most about the protected attribute are clipped.

On attribute-labelled reference images, the mutual information :math:`\operatorname{MI}(v_d, g)` of every image
embedding coordinate :math:`d` with the attribute :math:`g` is estimated
(:func:`~vlbias.mitigation.pruning.mutual_information`, the kNN estimator of Ross, 2014); the :math:`N` dimensions of
the highest MI are removed (:func:`~vlbias.mitigation.pruning.most_informative`) from image and text embeddings
alike, which keep the other :math:`D - N` coordinates, re-normalised (:mod:`vlbias.mitigation.dimension_removal`).

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> images = torch.randn(40, 8, generator=g, dtype=torch.float64)
    >>> labels = ["a", "b"] * 20
    >>> images[1::2, 3] += 4.0  # dimension 3 tells the groups apart
    >>> data = FitData(reference_images=images, reference_labels=labels)
    >>> CLIPClip(RemovalOptions(n_dims=1)).fit(data).fitted_state()["removed"]
    tensor([3])
"""

from __future__ import annotations

from torch import Tensor

from vlbias.mitigation.debiaser import FitData
from vlbias.mitigation.dimension_removal import DimensionRemoval, RemovalOptions, group_codes
from vlbias.mitigation.pruning import most_informative, mutual_information


class CLIPClip(DimensionRemoval):
    """Wang et al. (2021): the ``N`` dimensions of highest mutual information with the attribute, on the reference
    images, removed (module docstring)."""

    name = "clip_clip"
    NEEDS = ("reference_images", "reference_labels")
    OPTIONS = RemovalOptions

    def _removed(self, data: FitData) -> tuple[int, Tensor]:
        images, labels = data.labelled_references()
        mi = mutual_information(images, group_codes("reference_labels", labels, images.shape[0]), self.options.seed)
        return images.shape[1], most_informative(mi, self.options.count(images.shape[1]))
