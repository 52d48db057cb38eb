r"""RoboShot: harmful insight directions removed from image embeddings, helpful ones amplified (Adila, Shin, Cai &
Sala, 2024, "Zero-Shot Robustification of Zero-Shot Models", ICLR, arXiv:2309.04344, Sec. 3.2 and Algorithm 1).

An insight is a pair of texts whose embedding difference is a direction: a *harmful* one carries the spurious
attribute, a *helpful* one the task. The paper asks an LLM for the insights; here they are given as embeddings:

- harmful :math:`v^j`: differences of the attribute prompts, row by row: with the values :math:`a_0, \dots, a_{K-1}`
  of ``attribute_prompts`` (each ``(m, D)``, row :math:`i` of every value the same prompt but for the value),
  :math:`v^{(i, k)} = g(a_k)_i - g(a_0)_i` for :math:`k = 1, \dots, K - 1`, in the order :math:`i` then :math:`k`;
- helpful :math:`u^k`: ``helpful_pairs[k, 0] - helpful_pairs[k, 1]`` (optional; without them only step 1 runs).

Algorithm 1, on every image embedding :math:`x`:

.. math::
    \text{for } j = 1..S:\quad x \leftarrow x - \frac{\langle x, v^j\rangle}{\langle v^j, v^j\rangle} v^j,
    \quad x \leftarrow x / |x| \qquad \text{(lines 2-5: remove harmful insights)}

    \text{for } k = 1..R:\quad x \leftarrow x + \frac{\langle x, u^k\rangle}{\langle u^k, u^k\rangle} u^k
    \qquad \text{(lines 6-8: amplify helpful insights)}

Each step is linear and each renormalisation a positive scale, so the whole is :math:`x' = M x / |M x|` with

.. math::
    M = \prod_{k=R}^{1} \Big(I + \frac{u^k u^{k\top}}{|u^k|^2}\Big) \prod_{j=S}^{1} \Big(I - \frac{v^j v^{j\top}}{|v^j|^2}\Big)

(later steps on the left): :meth:`RoboShot.linear_map` gives :math:`M` for images, so it folds into the image
projection on export. Text embeddings are unchanged (the class prompts of the zero-shot classifier stay as they are).

Sec. 3.2 of the paper makes each insight vector from the LLM's pair of answers,
:math:`v = (g(s_1) - g(s_2)) / |g(s_1) - g(s_2)|` (a scale Algorithm 1 does not see), and then obtains "an
orthogonal basis :math:`v^1, \dots, v^m` separately for harmful and helpful components" of the insight vectors,
on which Algorithm 1 runs (text read from the NeurIPS 2023 submission of the paper, OpenReview Cs74qIBfiq, whose
Sec. 3.2 and Algorithm 1 are as above; the ICLR version was not readable through this project's tools beyond its
abstract). The released code (``run.py`` of SprocketLab/roboshot) does the same with a QR decomposition. On an
orthogonal basis step 1 is the projection onto the orthogonal complement of the insights' span,
:math:`I - Q_v Q_v^\top`, and step 2 is :math:`I + Q_u Q_u^\top`: ``orthonormalise=True`` is that form, the paper's
and the code's, with the basis from the SVD (singular values above ``rtol`` times the largest) so that dependent
insight vectors add no arbitrary direction, as a Householder QR of a rank-deficient matrix would; it is the default.
``orthonormalise=False`` runs Algorithm 1's loops on the insight vectors as given, without that orthogonalisation
(the two agree when the given vectors are already mutually orthogonal).

Example:
    >>> import torch
    >>> prompts = {"man": torch.tensor([[1.0, 0.0, 0.0]]), "woman": torch.tensor([[0.0, 1.0, 0.0]])}
    >>> debiaser = RoboShot().fit(FitData(attribute_prompts=prompts))
    >>> debiaser.transform_images(torch.tensor([[1.0, 0.0, 1.0]]))
    tensor([[0.4082, 0.4082, 0.8165]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_embeddings
from vlbias.mitigation.debiaser import Debiaser, DebiaserOptions, FitData, Modality, attribute_values


@dataclass(frozen=True)
class RoboShotOptions(DebiaserOptions):
    """Args:
    orthonormalise: replace each set of insight vectors by an orthonormal basis of its span first, as the paper
        (Sec. 3.2) and the released code do (default); ``False``: Algorithm 1's loops on the vectors as given.
    rtol: with ``orthonormalise``, singular values below ``rtol`` times the largest count as zero (default: ``D``
        times the dtype's machine epsilon).
    """

    orthonormalise: bool = True
    rtol: float | None = None

    def __post_init__(self) -> None:
        if self.rtol is not None and not 0 <= self.rtol < 1:
            raise ConfigError(f"Expected `rtol` in [0, 1) but got {self.rtol!r}")


def harmful_insights(prompts: dict) -> Tensor:
    """The harmful insight vectors :math:`v^{(i, k)} = g(a_k)_i - g(a_0)_i`, ``(m (K - 1), D)``, row order
    :math:`i` then :math:`k`."""
    values = attribute_values(prompts)
    stacked = [check_embeddings(f"attribute_prompts[{value!r}]", prompts[value]) for value in values]
    counts = {value: t.shape[0] for value, t in zip(values, stacked, strict=True)}
    if len(set(counts.values())) != 1:
        raise InputError(
            f"Expected the same number of attribute prompts per value (row i of each value the same prompt but for "
            f"the value) but got {counts}"
        )
    anchor = stacked[0]
    return torch.stack([t - anchor for t in stacked[1:]], dim=1).flatten(0, 1)  # (m, K-1, D) -> (m (K-1), D)


def helpful_insights(pairs: Tensor) -> Tensor:
    """The helpful insight vectors :math:`u^k` = ``pairs[k, 0] - pairs[k, 1]``, ``(h, D)``."""
    if pairs.ndim != 3 or pairs.shape[1] != 2:
        raise InputError(f"Expected helpful_pairs of shape (h, 2, D) but got {tuple(pairs.shape)}")
    return check_embeddings("helpful_pairs", pairs[:, 0]) - pairs[:, 1].to(pairs[:, 0])


def _nonzero(vectors: Tensor, what: str) -> Tensor:
    """``vectors``, refused when one is zero (its two texts have one embedding: an insight of no direction)."""
    empty = (vectors.norm(dim=1) <= torch.finfo(vectors.dtype).eps).nonzero().squeeze(1)
    if empty.numel():
        raise InputError(f"{what} {empty.tolist()} are zero: the two texts of the insight have the same embedding")
    return vectors


def _sequential(vectors: Tensor, sign: float) -> Tensor:
    r""":math:`\prod_{j=S}^{1} (I + \text{sign}\, v^j v^{j\top} / |v^j|^2)` (Algorithm 1's loop as one matrix)."""
    matrix = torch.eye(vectors.shape[1], dtype=vectors.dtype, device=vectors.device)
    for v in vectors:
        matrix = matrix + sign * torch.outer(v, v @ matrix) / (v @ v)
    return matrix


def _orthonormal(vectors: Tensor, sign: float, rtol: float | None) -> Tensor:
    r""":math:`I + \text{sign}\, Q Q^\top`, :math:`Q` an orthonormal basis of the vectors' span (Sec. 3.2's form)."""
    dim = vectors.shape[1]
    rtol = dim * torch.finfo(vectors.dtype).eps if rtol is None else rtol
    u, s, _ = torch.linalg.svd(vectors.T, full_matrices=False)
    basis = u[:, s > rtol * s.max()]
    return torch.eye(dim, dtype=vectors.dtype, device=vectors.device) + sign * basis @ basis.T


class RoboShot(Debiaser):
    """Adila et al. (2024) Algorithm 1: harmful insight directions (from the attribute prompts) removed from image
    embeddings one at a time, helpful ones (``helpful_pairs``, optional) amplified; linear (:meth:`linear_map`)."""

    name = "roboshot"
    NEEDS = ("attribute_prompts",)
    MODIFIES = frozenset({"image"})
    OPTIONS = RoboShotOptions

    def _fit(self, data: FitData) -> None:
        harmful = _nonzero(
            harmful_insights(dict(data.attribute_prompts)), "Harmful insights (rows i * (K - 1) + k - 1)"
        )
        helpful = None
        if data.helpful_pairs is not None:
            helpful = _nonzero(helpful_insights(data.helpful_pairs), "Helpful pairs").to(harmful)
        if helpful is not None and helpful.shape[1] != harmful.shape[1]:
            raise InputError(
                f"Expected helpful_pairs of dimension {harmful.shape[1]} (the attribute prompts') "
                f"but got {helpful.shape[1]}"
            )
        if self.options.orthonormalise:
            matrix = _orthonormal(harmful, -1.0, self.options.rtol)
            if helpful is not None:
                matrix = _orthonormal(helpful, 1.0, self.options.rtol) @ matrix
        else:
            matrix = _sequential(harmful, -1.0)
            if helpful is not None:
                matrix = _sequential(helpful, 1.0) @ matrix
        self._keep("matrix", matrix)

    def linear_map(self, modality: Modality) -> Tensor | None:
        return self.fitted_state()["matrix"] if modality in self.MODIFIES else None
