"""How many embedding dimensions to remove, declared once: N as a count or as a share of D (:class:`RemovalCount`),
for ``vlbias prune`` (:class:`PruningChoice`, MMBias Algorithm 1's whole choice) and the dimension-removing debiasers
(:class:`vlbias.mitigation.dimension_removal.RemovalOptions`), and the conversion to a count (:func:`removal_count`);
and MMBias Algorithm 1's threshold Θ on the mutual information, for ``vlbias prune`` and the ``mmbias_pruning``
debiaser (:class:`MutualInformationThreshold`).
This module imports no torch, and takes no ``from __future__ import annotations``: the fields' types stay objects, so
a subclass in another module has them checked (:func:`vlbias.options.accepted_types`) without importing their names.
"""

from dataclasses import dataclass
from typing import Literal

from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, OpenUnitInterval, PositiveInt

from vlbias.errors import ConfigError

#: MMBias Algorithm 1's dimension choice (vlbias.mitigation.pruning.STRATEGIES).
PruneStrategy = Literal["ranked", "greedy", "clip_clip"]
#: What the pruning minimises over the tests (vlbias.mitigation.pruning.OBJECTIVES).
PruneObjective = Literal["mean_abs", "max_abs"]


@dataclass(frozen=True, kw_only=True)
class RemovalCount:
    """How many embedding dimensions to remove, N, given as a count or as a share of the embedding dimension D:
    the rule of ``vlbias prune`` (:class:`vlbias.mitigation.removal_count.PruningChoice`) and of the dimension-removing
    debiasers (:class:`vlbias.mitigation.dimension_removal.RemovalOptions`). With neither, 10 % of D.

    Args:
        n_dims: N, the dimensions to remove (or fraction; default a fraction of 0.1).
        fraction: N as a share of the embedding dimension D, rounded (default 0.1 when n_dims is not given).

    Example:
        >>> RemovalCount().count(512), RemovalCount(n_dims=5).count(512)
        (51, 5)
    """

    n_dims: PositiveInt | None = None
    fraction: OpenUnitInterval | None = None

    def __post_init__(self) -> None:
        if self.n_dims is not None and self.fraction is not None:
            raise ConfigError("Give one of `n_dims` (N) and `fraction` (N as a share of D), not both.")
        if self.n_dims is None and self.fraction is None:
            object.__setattr__(self, "fraction", 0.1)
        if self.n_dims is not None and (isinstance(self.n_dims, bool) or not isinstance(self.n_dims, int)):
            raise ConfigError(f"Expected `n_dims` to be an int count but got {self.n_dims!r}")
        if self.fraction is not None and not (isinstance(self.fraction, float) and 0 < self.fraction < 1):
            raise ConfigError(f"Expected `fraction` to be a float in (0, 1) but got {self.fraction!r}")

    def count(self, dim: int) -> int:
        """N for embeddings of ``dim`` dimensions (:func:`removal_count` of the option given, named in a refusal)."""
        if self.n_dims is not None:
            return removal_count(self.n_dims, dim, "n_dims")
        return removal_count(self.fraction, dim, "fraction")


@dataclass(frozen=True, kw_only=True)
class MutualInformationThreshold:
    """Θ of MMBias Algorithm 1 (Sec. 6): the candidate dimensions are those whose mutual information with the labels
    is below Θ, given as a value or as a quantile of the MI; with neither, the 0.9 quantile (the settings of the
    pruning tables). CLIP-clip (strategy ``clip_clip``) ranks every dimension and takes no Θ.

    Args:
        theta: Θ: the candidates have mutual information below it (or theta_quantile; default quantile 0.9).
        theta_quantile: Θ as a quantile of the mutual information (default 0.9 when theta is not given).
    """

    theta: NonNegativeFloat | None = None
    theta_quantile: ClosedUnitInterval | None = None

    def _choose_theta(self, strategy: str) -> None:
        """Refuse both forms, or a Θ for ``clip_clip``; set the default quantile for a strategy that takes Θ (each
        subclass's ``__post_init__`` calls this with its strategy)."""
        if self.theta is not None and self.theta_quantile is not None:
            raise ConfigError("Give one of `theta` (Θ) and `theta_quantile` (Θ as a quantile of the MI), not both.")
        given = self.theta is not None or self.theta_quantile is not None
        if strategy == "clip_clip" and given:
            raise ConfigError("Strategy 'clip_clip' takes no Θ: remove `theta` / `theta_quantile`.")
        if strategy != "clip_clip" and not given:
            object.__setattr__(self, "theta_quantile", 0.9)


@dataclass(frozen=True, kw_only=True)
class PruningChoice(RemovalCount, MutualInformationThreshold):
    """How MMBias Algorithm 1 (Sec. 6) chooses the embedding dimensions to remove: ``vlbias prune`` and
    :class:`~vlbias.modules.pruning.EmbeddingPruning` take these. N is ``n_dims`` or ``fraction``
    (:class:`RemovalCount`: with neither, 10 % of D); Θ is ``theta`` or ``theta_quantile``
    (:class:`MutualInformationThreshold`: with neither, the 0.9 quantile of the mutual
    information, the settings of the docs' tables).

    Args:
        strategy: How the N dimensions are chosen: ranked (Algorithm 1), greedy, or clip_clip (no Θ).
        objective: What the choice minimises over the tests: mean_abs or max_abs of the effect sizes.
        max_dims: The trade-off curve's last N (default 25 % of D).
        step: The trade-off curve's step in N.
    """

    strategy: PruneStrategy = "ranked"
    objective: PruneObjective = "mean_abs"
    max_dims: PositiveInt | None = None
    step: PositiveInt = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        self._choose_theta(self.strategy)


def removal_count(n_remove: int | float, dim: int, name: str = "n_remove") -> int:
    """N as a count (int) or a fraction of ``dim`` (float in (0, 1), rounded), at least 1 and below ``dim``;
    ``name`` is the option's name in the refusal (``vlbias prune`` checks ``n_dims`` or ``fraction`` with it once
    the model, and so D, is known, before any image is embedded).

    Example:
        >>> removal_count(0.1, 512), removal_count(5, 512)
        (51, 5)
    """
    if isinstance(n_remove, bool) or not isinstance(n_remove, (int, float)):
        raise ConfigError(f"Expected `{name}` to be an int count or a float fraction but got {n_remove!r}")
    if isinstance(n_remove, float):
        if not 0 < n_remove < 1:
            raise ConfigError(f"Expected a fraction `{name}` in (0, 1) of the {dim} dimensions but got {n_remove!r}")
        count = round(n_remove * dim)
    else:
        count = n_remove
    if not 1 <= count < dim:
        raise ConfigError(
            f"Expected `{name}` to give a count in [1, {dim - 1}] for D = {dim} but got {n_remove!r} ({count})"
        )
    return count
