r"""Orth-Cal: the calibrated projection of Chuang, Jampani, Li, Torralba & Jegelka (2023), "Debiasing Vision-Language
Models via Biased Prompts", Sec. 3.2.

Orth-Proj's projection :math:`P_0 = I - V V^{+}` away from the attribute prompts (:mod:`vlbias.mitigation.orth_proj`,
Eq. 3-4) alone can leave prompts that differ only in the attribute ("a photo of a male doctor" / "a photo of a
female doctor", the positive pairs :math:`(z_i, z_j) \in S`) apart. The calibration keeps :math:`P` close to
:math:`P_0` while pulling each positive pair together,

.. math::
    \min_P \; \lVert P - P_0 \rVert_F^2 + \frac{\lambda}{|S|} \sum_{(i, j) \in S} \lVert P z_i - P z_j \rVert^2 ,

a least-squares problem whose optimum is closed-form (setting the gradient to zero):

.. math::
    P^* = P_0 \Big( I + \frac{\lambda}{|S|} \sum_{(i, j) \in S} (z_i - z_j)(z_i - z_j)^\top \Big)^{-1} .

Every text embedding becomes :math:`z' = P^* z / |P^* z|`; image embeddings are unchanged. The average over the
pairs (:math:`\lambda / |S|`) is the authors' released code's (``debias_vl``, ``get_M`` divides by ``len(S)``), and
so is the default :math:`\lambda = 1000`. :math:`I + \lambda M` is symmetric positive definite for
:math:`\lambda \ge 0`, so :math:`P^*` always exists (computed with a linear solve, not an explicit inverse); with
:math:`\lambda = 0` it is Orth-Proj's :math:`P_0`. :math:`P^*` is linear but no longer a projection
(:meth:`OrthCal.linear_map` gives it, for export).

Example:
    >>> prompts = {value: torch.tensor([[0.0, 0.0, scale]], dtype=torch.float64) for value, scale in (("a", 1), ("b", 2))}
    >>> pairs = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=torch.float64)
    >>> OrthCal(OrthCalOptions(lam=1.0)).fit(FitData(attribute_prompts=prompts, prompt_pairs=pairs)).linear_map("text")
    tensor([[0.6667, 0.3333, 0.0000],
            [0.3333, 0.6667, 0.0000],
            [0.0000, 0.0000, 0.0000]], dtype=torch.float64)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.debiaser import Debiaser, DebiaserOptions, FitData, Modality, checked_pairs, stacked_prompts
from vlbias.mitigation.projection import orthogonal_projection


@dataclass(frozen=True)
class OrthCalOptions(DebiaserOptions):
    """Args:
    lam: λ, the weight of the positive pairs' discrepancy against the distance to Orth-Proj's projection (0: Orth-Proj
        itself; default 1000, the authors' code's).
    rtol: singular values of the attribute prompt matrix below ``rtol`` times the largest count as zero (default:
        ``D`` times the dtype's machine epsilon, as ``torch.linalg.pinv``).
    """

    lam: float = 1000.0
    rtol: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.lam, bool) or not isinstance(self.lam, (int, float)) or not math.isfinite(self.lam):
            raise ConfigError(f"Expected `lam` (λ) to be a finite number but got {self.lam!r}")
        if self.lam < 0:
            raise ConfigError(f"Expected `lam` (λ) ≥ 0 but got {self.lam!r}")
        if self.rtol is not None and not 0 <= self.rtol < 1:
            raise ConfigError(f"Expected `rtol` in [0, 1) but got {self.rtol!r}")


class OrthCal(Debiaser):
    """Chuang et al. (2023) Sec. 3.2: text embeddings through the calibrated projection :math:`P^*` (module
    docstring); linear (:meth:`linear_map` gives :math:`P^*`)."""

    name = "orth_cal"
    NEEDS = ("attribute_prompts", "prompt_pairs")
    MODIFIES = frozenset({"text"})
    OPTIONS = OrthCalOptions

    def _fit(self, data: FitData) -> None:
        prompts = stacked_prompts(data.attribute_prompts)
        pairs = checked_pairs("prompt_pairs", data.prompt_pairs)
        dim = prompts.shape[1]
        if pairs.shape[2] != dim:
            raise InputError(
                f"Expected `prompt_pairs` of the attribute prompts' dimension {dim} but got {pairs.shape[2]}"
            )
        base = orthogonal_projection(prompts, self.options.rtol)  # P_0 (D, D), symmetric
        differences = (pairs[:, 0] - pairs[:, 1]).to(base.dtype)  # (|S|, D)
        gram = torch.eye(dim, dtype=base.dtype) + self.options.lam * differences.T @ differences / pairs.shape[0]
        self._keep("calibrated", torch.linalg.solve(gram, base).T)  # P_0 G^{-1} = (G^{-1} P_0)^T, G and P_0 symmetric

    def linear_map(self, modality: Modality) -> Tensor | None:
        return self.fitted_state()["calibrated"] if modality in self.MODIFIES else None
