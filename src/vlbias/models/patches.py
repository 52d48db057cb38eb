"""Patch projection as one matrix product: the ``Conv2d`` of ViT-style models, faster to differentiate.

A convolution whose stride equals its kernel (no padding, dilation or groups) reads non-overlapping
patches, so ``conv(x)`` is a linear map of each flattened patch. Computed that way it gives the same
sums in another order (equal up to float rounding), and its backward, which the counterfactual-image
attack takes at every step, is several times faster on CPU than the convolution's.

Example:
    >>> import torch
    >>> conv = nn.Conv2d(3, 8, kernel_size=4, stride=4)
    >>> x = torch.rand(2, 3, 8, 8)
    >>> torch.allclose(project_patches(conv, x), conv(x), atol=1e-6)
    True
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def reads_patches(conv: nn.Conv2d) -> bool:
    """Whether ``conv`` reads non-overlapping patches (stride = kernel, no padding, dilation or groups)."""
    return conv.kernel_size == conv.stride and conv.padding == (0, 0) and conv.dilation == (1, 1) and conv.groups == 1


def project_patches(conv: nn.Conv2d, pixel_values: Tensor) -> Tensor:
    """``conv(pixel_values)`` ``(B, D, h, w)``, as one matrix product over the flattened patches when
    ``conv`` reads non-overlapping patches (rows and columns beyond the last whole patch are dropped,
    as the convolution drops them); otherwise the convolution itself."""
    if not reads_patches(conv):
        return conv(pixel_values)
    p, q = conv.kernel_size
    batch_size, channels, height, width = pixel_values.shape
    h, w = height // p, width // q
    patches = pixel_values[:, :, : h * p, : w * q].reshape(batch_size, channels, h, p, w, q)
    patches = patches.permute(0, 2, 4, 1, 3, 5).reshape(batch_size, h, w, channels * p * q)
    projected = F.linear(patches, conv.weight.flatten(1), conv.bias)  # (B, h, w, D)
    return projected.permute(0, 3, 1, 2)


class PatchProjection(nn.Conv2d):
    """A drop-in ``Conv2d`` (same parameters and state-dict keys) computed by :func:`project_patches`."""

    @classmethod
    def replacing(cls, conv: nn.Conv2d) -> PatchProjection:
        """A :class:`PatchProjection` holding ``conv``'s own parameters (not copies)."""
        projection = cls(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            bias=conv.bias is not None,
            device="meta",
        )
        projection.weight, projection.bias = conv.weight, conv.bias
        return projection

    def forward(self, pixel_values: Tensor) -> Tensor:
        return project_patches(self, pixel_values)
