r"""Entity-association scores of Srinivasan & Bisk (2022), "Worst of Both Worlds", Sec. 3.2 and 5.

The paper's displayed equations are unnumbered; we number them in order of appearance:

* (1) :math:`P_{L/VL}(E|g) = P([MASK] = E \mid g \text{ in input})` (Sec. 3.2)
* (2) :math:`S(E, g) = \ln \frac{P(E|g)}{P(E|g_N)}`, the association score; Table 1 gives the
  normaliser of each bias source: :math:`S_{PT} = \ln P_{VL}(E|g) / P_L(E|g)` (text model),
  :math:`S_L(E, g|I) = \ln P_{VL}(E|g, I) / P_{VL}(E|p, I)` (agent replaced by *person*),
  :math:`S_V = \ln \hat P_{VL}(E|I_g) / P_{VL}(E)` (no image)
* (3) :math:`S_L(E, g) = \mathbb{E}_{I \sim I_E}[S_L(E, g|I)]`
* (4) :math:`\hat P_{VL}(E|I_g) = \mathbb{E}_{I \sim I_g}[P_{VL}(E|I)]`, caption with the neutral agent
* (5) :math:`B(E) = S(E, f) - S(E, m)`, positive = female-biased
* (6), (7) Sec. 5: the text-only language score :math:`S_L(E, m/f) = \ln P_{VL}(E|m/f) / P_{VL}(E|p)`
  and :math:`B_L(E) = \ln P_{VL}(E|f) / P_{VL}(E|m)`, i.e. (2) and (5) without an image.

Every function takes natural-log probabilities (``log P``), as
:func:`vlbias.models.masked_words.word_log_probs` returns them: a full-vocabulary softmax at the
mask, and for an entity of several word pieces the mean of its pieces' log-probabilities. So
``S_PT``, ``S_L`` and ``B`` are differences of these scores, and in (4) the image average is of
``exp(score)`` (the geometric mean of the pieces' probabilities; the probability itself for a
one-piece entity), computed stably as ``logsumexp - ln N``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.metrics.functional.bootstrap import mirrored_strict_interval, resampled_means
from vlbias.metrics.functional.checks import check_bootstrap
from vlbias.options import DEFAULT_STATISTICS


def _same_shape(first: Tensor, second: Tensor, names: tuple[str, str]) -> None:
    if first.shape != second.shape:
        raise InputError(
            f"Expected arguments `{names[0]}` and `{names[1]}` to have the same shape "
            f"but got {tuple(first.shape)} and {tuple(second.shape)}."
        )


def _non_empty(values: Tensor, name: str, dim: int) -> None:
    if values.ndim == 0 or values.shape[dim] == 0:
        raise InputError(
            f"Expected argument `{name}` to hold at least one image along dim {dim} but got shape {tuple(values.shape)}."
        )


def pretraining_association(log_p_vl: Tensor, log_p_l: Tensor) -> Tensor:
    r"""Pre-training association shift :math:`S_{PT}(E, g) = \ln P_{VL}(E|g) - \ln P_L(E|g)`
    (Eq. 2 with the normaliser of Table 1, row 1), elementwise.

    Args:
        log_p_vl: ``log P_VL(E|g)`` of the vision-language model given text only (no image).
        log_p_l: ``log P_L(E|g)`` of the text-only model, same shape.

    Example:
        >>> pretraining_association(torch.tensor([math.log(0.2)]), torch.tensor([math.log(0.1)]))
        tensor([0.6931])
    """
    _same_shape(log_p_vl, log_p_l, ("log_p_vl", "log_p_l"))
    return log_p_vl - log_p_l


def language_association(log_p_agent: Tensor, log_p_neutral: Tensor, dim: int = 0) -> Tensor:
    r"""Language-context association :math:`S_L(E, g) = \mathbb{E}_{I \sim I_E}
    [\ln P_{VL}(E|g, I) - \ln P_{VL}(E|p, I)]` (Eq. 3 with Eq. 2), the mean over images along ``dim``.

    Args:
        log_p_agent: ``log P_VL(E|g, I)`` per image of ``I_E`` (caption with the gendered agent).
        log_p_neutral: ``log P_VL(E|p, I)`` for the same images (caption with *person*).

    Example:
        >>> language_association(torch.log(torch.tensor([0.4, 0.1])), torch.log(torch.tensor([0.2, 0.1])))
        tensor(0.3466)
    """
    _same_shape(log_p_agent, log_p_neutral, ("log_p_agent", "log_p_neutral"))
    _non_empty(log_p_agent, "log_p_agent", dim)
    return (log_p_agent - log_p_neutral).mean(dim=dim)


def visual_association(log_p_images: Tensor, log_p_no_image: Tensor, dim: int = 0) -> Tensor:
    r"""Visual-context association :math:`S_V(E, g) = \ln \hat P_{VL}(E|I_g) - \ln P_{VL}(E)` with
    :math:`\hat P_{VL}(E|I_g) = \frac{1}{|I_g|} \sum_{I \in I_g} P_{VL}(E|I)` (Eq. 4 with Eq. 2): the
    log of the *mean probability* over the images, not the mean log-probability.

    Args:
        log_p_images: ``log P_VL(E|p, I)`` per image of ``I_g`` along ``dim`` (neutral caption).
        log_p_no_image: ``log P_VL(E|p)`` with the model's "no image" input; the shape of
            ``log_p_images`` without ``dim``.

    Example:
        >>> visual_association(torch.log(torch.tensor([0.3, 0.1])), torch.log(torch.tensor(0.1)))
        tensor(0.6931)
    """
    _non_empty(log_p_images, "log_p_images", dim)
    mean_log_p = torch.logsumexp(log_p_images, dim=dim) - math.log(log_p_images.shape[dim])
    _same_shape(mean_log_p, log_p_no_image, ("log_p_images (without the image dim)", "log_p_no_image"))
    return mean_log_p - log_p_no_image


def bias_score(s_first: Tensor, s_second: Tensor) -> Tensor:
    r""":math:`B(E) = S(E, f) - S(E, m)` (Eq. 5): positive means the entity leans to the first
    group (female in the paper), negative to the second.

    Example:
        >>> bias_score(torch.tensor([0.5, -0.2]), torch.tensor([0.1, 0.3]))
        tensor([ 0.4000, -0.5000])
    """
    _same_shape(s_first, s_second, ("s_first", "s_second"))
    return s_first - s_second


def language_bias_interval(
    log_p_first: Tensor,
    log_p_second: Tensor,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
) -> Tensor:
    r"""Percentile bootstrap interval ``[lo, hi]`` of the image-context language bias
    :math:`B_L(E) = S_L(E, f) - S_L(E, m) = \mathbb{E}_{I \sim I_E}[\ln P_{VL}(E|f, I) - \ln P_{VL}(E|m, I)]`
    (Eq. 3 and 5; the *person* terms cancel), resampling the images of ``I_E`` with replacement.
    The paper reports no intervals; with its 12 images per entity they show how far a score could move.

    Args:
        log_p_first, log_p_second: ``(N,)`` per-image log-scores with the first / second agent.

    Example:
        >>> language_bias_interval(torch.tensor([-1.0, -1.0]), torch.tensor([-2.0, -2.0]), n_bootstrap=10)
        tensor([1., 1.])
    """
    _same_shape(log_p_first, log_p_second, ("log_p_first", "log_p_second"))
    _non_empty(log_p_first, "log_p_first", 0)
    check_bootstrap(n_bootstrap, confidence)
    differences = (log_p_first - log_p_second).double()
    means = resampled_means(differences, n_bootstrap, torch.Generator().manual_seed(seed))
    return mirrored_strict_interval(means, confidence).to(log_p_first.dtype)


def visual_bias_interval(
    log_p_first: Tensor,
    log_p_second: Tensor,
    n_bootstrap: int = DEFAULT_STATISTICS.n_bootstrap,
    confidence: float = DEFAULT_STATISTICS.confidence,
    seed: int = 0,
) -> Tensor:
    r"""Percentile bootstrap interval ``[lo, hi]`` of the visual bias
    :math:`B_V(E) = S_V(E, f) - S_V(E, m) = \ln \hat P_{VL}(E|I_f) - \ln \hat P_{VL}(E|I_m)` (Eq. 4 and 5;
    the no-image terms cancel), resampling ``I_f`` and ``I_m`` separately with replacement.

    Args:
        log_p_first: ``(N_f,)`` log-scores of the neutral caption with each image of ``I_f``.
        log_p_second: ``(N_m,)`` the same for ``I_m``.

    Example:
        >>> visual_bias_interval(torch.tensor([-1.0]), torch.tensor([-2.0, -2.0]), n_bootstrap=10)
        tensor([1., 1.])
    """
    _non_empty(log_p_first, "log_p_first", 0)
    _non_empty(log_p_second, "log_p_second", 0)
    check_bootstrap(n_bootstrap, confidence)
    generator = torch.Generator().manual_seed(seed)

    def resampled(values: Tensor) -> Tensor:  # (n_bootstrap,) log of the mean probability
        rows = torch.randint(len(values), (n_bootstrap, len(values)), generator=generator)
        return torch.logsumexp(values.double()[rows], dim=-1) - math.log(len(values))

    return mirrored_strict_interval(resampled(log_p_first) - resampled(log_p_second), confidence).to(log_p_first.dtype)


# -- per-entity accumulation shared with :mod:`vlbias.metrics.entity_association` ---------------
def _check_entity_batch(entity: Tensor, values: tuple[Tensor, ...], names: tuple[str, ...], num_entities: int) -> None:
    if entity.ndim != 1 or entity.dtype not in (torch.int32, torch.int64):
        raise InputError(
            f"Expected argument `entity` to be a 1-d integer tensor but got {entity.dtype} of shape {tuple(entity.shape)}."
        )
    if entity.numel() and (entity.min() < 0 or entity.max() >= num_entities):
        raise InputError(
            f"Expected argument `entity` to hold indices in [0, {num_entities}) but got values in [{int(entity.min())}, {int(entity.max())}]."
        )
    for value, name in zip(values, names):
        _same_shape(entity, value, ("entity", name))


def _difference_sums(
    entity: Tensor, log_p: Tensor, log_p_reference: Tensor, num_entities: int, names: tuple[str, str]
) -> tuple[Tensor, Tensor]:
    """Per-entity sums of ``log_p - log_p_reference`` (``S_L``'s ``log P(E|g, I) - log P(E|p, I)``, ``S_PT``'s
    ``log P_VL(E|g) - log P_L(E|g)``) and row counts, shape ``(num_entities,)``; ``names`` name the two
    arguments in errors."""
    _check_entity_batch(entity, (log_p, log_p_reference), names, num_entities)
    differences = (log_p - log_p_reference).double()
    total = torch.zeros(num_entities, dtype=torch.float64, device=entity.device).index_add_(0, entity, differences)
    count = torch.bincount(entity, minlength=num_entities).to(torch.float64)
    return total, count


def _per_entity_mean(total: Tensor, count: Tensor) -> Tensor:
    """The per-entity mean of :func:`_difference_sums` (``S_L``, Eq. 3; ``S_PT``); NaN for an entity without rows."""
    return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))


def _visual_compute(entity: Tensor, log_p_images: Tensor, log_p_no_image: Tensor, num_entities: int) -> Tensor:
    """``S_V`` per entity (Eq. 4 with Eq. 2) from per-image rows; NaN for an entity without images.
    ``log_p_no_image`` is per row; its mean per entity is the normaliser. Rows are sorted first, so
    the result does not depend on the order in which rows arrived (e.g. gathered from ranks)."""
    result = torch.full((num_entities,), float("nan"), dtype=torch.float64, device=entity.device)
    for index in entity.unique().tolist():
        rows = entity == index
        values = log_p_images[rows].double().sort().values
        result[index] = visual_association(values, log_p_no_image[rows].double().mean())
    return result
