r"""A linear change of the embeddings folded into a model's own projection weights, for the families whose towers end in
a linear map to the embedding (:meth:`vlbias.models.base.ModelAdapter.export_linear`).

A tower's embedding is :math:`e = W h (+ b)`, the pooled state :math:`h` through its projection :math:`W`
``(D, width)``, then normalised. A debiaser whose transform of that modality is :math:`z \mapsto M z / |M z|` with
``M`` ``(out_dim, D)`` (:meth:`vlbias.mitigation.debiaser.Debiaser.linear_map`) gives the same unit vector as the
projection :math:`W' = M W` (and :math:`b' = M b`), since :math:`M (e / |e|) / |M (e / |e|)| = M e / |M e|`. Pruning
is the special case of ``M`` = the kept rows of the identity (:func:`vlbias.models.families.pruned.row_selection`). Both
modalities share one embedding space, so their maps must have the same ``out_dim``; ``None`` is the identity of a
modality left as it is.

Example:
    >>> image, text = checked_linear_maps(None, torch.ones(3, 3), 3)
    >>> image.tolist(), text.dtype
    ([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], torch.float64)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from vlbias.errors import InputError

#: The families that export a linear change in their own format (``no_linear_export`` is ``None``; SigLIP's of the text
#: embeddings only); a command writes that export to ``<out>/<family>/``, so these are the folder names its output may
#: hold.
EXPORTING_FAMILIES = ("clip", "open_clip", "siglip", "siglip2")


def checked_linear_maps(image_map: Tensor | None, text_map: Tensor | None, dim: int) -> tuple[Tensor, Tensor]:
    """``(image_map, text_map)`` as float64 ``(out_dim, dim)`` matrices, ``None`` made the identity; refuses a map
    that is not a finite 2-D matrix over ``dim`` dimensions, and two maps of different ``out_dim`` (the two modalities
    share one embedding space)."""
    maps = []
    for modality, matrix in (("image", image_map), ("text", text_map)):
        if matrix is None:
            maps.append(torch.eye(dim, dtype=torch.float64))
            continue
        matrix = torch.as_tensor(matrix).detach().cpu()
        if matrix.ndim != 2 or matrix.shape[1] != dim or matrix.shape[0] < 1:
            raise InputError(f"Expected the {modality} map of shape (out_dim, {dim}) but got {tuple(matrix.shape)}")
        if not torch.isfinite(matrix).all():
            raise InputError(f"Expected a finite {modality} map but it holds NaN or infinite values")
        maps.append(matrix.double())
    if maps[0].shape[0] != maps[1].shape[0]:
        raise InputError(
            f"Expected image and text maps of one output dimension (one embedding space) but got "
            f"{maps[0].shape[0]} and {maps[1].shape[0]}"
        )
    return maps[0], maps[1]


def folded_linear(projection: nn.Linear, matrix: Tensor) -> nn.Linear:
    """``projection`` (``x -> W x + b``, ``D`` outputs) followed by ``matrix`` ``(out_dim, D)``: ``W' = M W``,
    ``b' = M b``, computed in float64 and stored in the projection's dtype and device."""
    weight = projection.weight
    folded = nn.Linear(
        projection.in_features, matrix.shape[0], bias=projection.bias is not None, device=weight.device
    ).to(weight.dtype)
    with torch.no_grad():
        folded.weight.copy_(matrix.to(weight.device) @ weight.double())
        if projection.bias is not None:
            folded.bias.copy_(matrix.to(weight.device) @ projection.bias.double())
    return folded


def folded_columns(projection: Tensor, matrix: Tensor) -> nn.Parameter:
    """A ``(width, D)`` projection applied as ``x @ P`` (open_clip's ViT and text towers) followed by ``matrix``
    ``(out_dim, D)``: ``P' = P M^T`` ``(width, out_dim)``, computed in float64, in the projection's dtype."""
    return nn.Parameter((projection.detach().double() @ matrix.to(projection.device).T).to(projection.dtype))
