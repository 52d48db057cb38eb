"""Embeddings with some dimensions pruned (MMBias, Janghorbani & de Melo, 2023, Sec. 6, Algorithm 1).

:class:`PrunedEmbeddings` wraps any EMBED adapter and keeps only the dimensions that
:func:`vlbias.mitigation.pruning.prune_dimensions` kept (``result.kept``): each image and text embedding
becomes :math:`z_K / |z_K|`, the kept coordinates re-normalised, so its cosines are those that
Algorithm 1 scored. Pruning is the linear map :math:`M` = the kept rows of the identity (:func:`row_selection`), so
a family that folds a linear map into its projection weights (:meth:`~vlbias.models.base.ModelAdapter.export_linear`:
CLIP, open_clip) writes the same model in its own format, ``adapter.export_linear(M, M, out_dir)``: the rows of the
removed dimensions are cut out of both projections (``projection_dim = D - N``), and the family's own loader gives the
pruned embeddings with no vlbias code.

Example:
    >>> model = PrunedEmbeddings(CLIPAdapter.tiny(), kept_dims=[0, 5, 9])
    >>> model.embed_texts(model.prepare_texts(["a man is cooking"])).shape
    torch.Size([1, 3])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import InputError
from vlbias.models.base import ModelAdapter, registered_capabilities
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.tiny_sizes import TinySizes
from vlbias.models.wrapped import TransformedEmbeddings

#: The file beside the inner adapter's directory that names the inner model and the kept dimensions.
PRUNED_FILE = "pruned_embeddings.json"


def checked_dimensions(dims: Sequence[int] | Tensor, dim: int, what: str) -> Tensor:
    """``dims`` (the ``what`` dimensions: "kept", "removed") as an ascending ``long`` tensor; refuses anything but a
    1-D list of distinct integers in ``[0, dim)`` (an empty list is accepted here; callers add their own rule)."""
    given = torch.as_tensor(dims)
    integers = not given.is_floating_point() and given.dtype != torch.bool
    if given.ndim != 1 or (given.numel() and not integers):
        raise InputError(f"Expected the {what} dimensions as a 1-D list of integer dimensions but got {dims!r}")
    outside = given[(given < 0) | (given >= dim)]
    if outside.numel():
        raise InputError(f"Expected {what} dimensions in [0, {dim}) but got {outside.tolist()}")
    if given.unique().numel() != given.numel():
        raise InputError(f"Expected distinct {what} dimensions but got repeats in {given.tolist()}")
    return given.long().sort().values


def checked_kept_dims(kept_dims: Sequence[int] | Tensor, dim: int) -> Tensor:
    """``kept_dims`` as an ascending ``long`` tensor (:func:`checked_dimensions`), and not empty."""
    if torch.as_tensor(kept_dims).numel() == 0:
        raise InputError(f"Expected `kept_dims` to be a non-empty 1-D list of integer dimensions but got {kept_dims!r}")
    return checked_dimensions(kept_dims, dim, "kept")


def row_selection(kept_dims: Sequence[int] | Tensor, dim: int) -> Tensor:
    """The ``(len(kept_dims), dim)`` float64 matrix whose rows are the identity's rows ``kept_dims``
    (:func:`checked_kept_dims`): the linear map of pruning the other dimensions.

    Example:
        >>> row_selection([0, 2], 3).tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return torch.eye(dim, dtype=torch.float64)[checked_kept_dims(kept_dims, dim)]


def _embedding_dim(adapter: ModelAdapter) -> int:
    """D of an EMBED adapter, read off one text embedding (EMBED gives images and texts the same D)."""
    with torch.no_grad():
        return adapter.embed_texts(adapter.prepare_texts(["a"])).shape[1]


class PrunedEmbeddings(TransformedEmbeddings):
    """An EMBED adapter whose image and text embeddings keep only ``kept_dims``, re-normalised.

    Preprocessing, tokenizer and device are the inner adapter's. ``save_pretrained(directory)`` writes the
    inner adapter to ``directory/inner`` and :data:`PRUNED_FILE` (inner model name, kept dimensions,
    full dimension); :meth:`from_pretrained` reads both back through the catalog
    (:class:`~vlbias.models.wrapped.WrappedAdapter`).
    """

    name = "pruned"
    capabilities = registered_capabilities(name)
    FIELDS_FILE = PRUNED_FILE

    def __init__(self, inner: ModelAdapter, kept_dims: Sequence[int] | Tensor) -> None:
        super().__init__(inner)
        self.embedding_dim = _embedding_dim(inner)
        self.register_buffer("kept_dims", checked_kept_dims(kept_dims, self.embedding_dim), persistent=False)

    def prune(self, embeddings: Tensor) -> Tensor:
        """``(B, D)`` embeddings -> ``(B, len(kept_dims))``: the kept coordinates, re-normalised."""
        return F.normalize(embeddings.index_select(1, self.kept_dims), dim=-1)

    def transform_images(self, embeddings: Tensor) -> Tensor:
        return self.prune(embeddings)

    def transform_texts(self, embeddings: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        return self.prune(embeddings)

    def saved_fields(self) -> dict[str, object]:
        return {"embedding_dim": self.embedding_dim, "kept_dims": self.kept_dims.tolist()}

    @classmethod
    def _from_saved(cls, directory: Path, fields: dict) -> PrunedEmbeddings:
        model = cls(cls.load_inner(directory, fields), fields["kept_dims"])
        if model.embedding_dim != fields["embedding_dim"]:
            raise InputError(
                f"{str(directory / PRUNED_FILE)!r} was written for {fields['embedding_dim']}-dimensional embeddings "
                f"but the inner {fields['inner']!r} model gives {model.embedding_dim}"
            )
        return model

    @classmethod
    def tiny(cls, seed: int = 0, tokenizer: object | None = None, sizes: TinySizes | None = None) -> PrunedEmbeddings:
        """A tiny random CLIP of ``sizes`` (:meth:`CLIPAdapter.tiny`; by default 64 dimensions) that keeps its
        even-numbered dimensions."""
        inner = CLIPAdapter.tiny(seed, tokenizer, sizes)
        return cls(inner, torch.arange(0, inner.model.config.projection_dim, 2))
