"""What the options of the ranking suites (``retrieval_bias``, ``gallery_skew``) share, declared once: the
protocol, the cut-offs K and their check against the gallery. Imports no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from jsonargparse.typing import PositiveInt

from vlbias.errors import ConfigError
from vlbias.options import RankingProtocolName, StatisticsOptions
from vlbias.suites.options import PERCENTILE_BOOTSTRAP_ONLY, SuiteOptions


@dataclass(frozen=True)
class RankingOptions(SuiteOptions):
    """What the options of the ranking suites (``retrieval_bias``, ``gallery_skew``) share: the protocol, the
    cut-offs K and their check against the gallery, the batch size and percentile bootstrap statistics.

    Args:
        protocol: the MaxSkew/KL/NDKL conventions (desired shares, K, zero share, ties, skew form; gallery_skew: folds)
            of a source (vlbias.metrics.ranking_protocols): geyik (Geyik et al., 2019), debiasclip, bendvlm or sfid.
        k: the cut-off K, or several (default the protocol's K; a K above the images ranked is refused, the protocol's
            is lowered to them and flagged in the results).
        batch_size: images or queries per forward pass.
        statistics: percentile bootstrap intervals, resampling the queries.
    """

    FIXED_STATISTICS: ClassVar[dict[str, str]] = PERCENTILE_BOOTSTRAP_ONLY

    protocol: RankingProtocolName = "geyik"
    k: PositiveInt | list[PositiveInt] | None = None
    batch_size: PositiveInt = 64
    statistics: StatisticsOptions = StatisticsOptions()

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.k, list) and not self.k:
            raise ConfigError("Expected `k` to be a positive integer or a non-empty list of them but got []")

    def cut_offs(self, protocol_k: int, limit: int, ranked: str) -> tuple[int, ...]:
        """The cut-offs K, sorted, each once: ``k`` as given, each at most ``limit`` (the images a query ranks,
        ``ranked`` in words: ``"the gallery size, 6 annotated images of angles"``), else refused in one line naming
        K, the protocol and ``ranked``; without ``k``, the protocol's K, lowered to ``limit`` where it is above
        (:meth:`protocol_k_lowered`: the suite flags it in its results).

        Example:
            >>> RankingOptions(protocol="debiasclip").cut_offs(1000, 120, "the gallery size, 120 images")
            (120,)
            >>> RankingOptions(k=[200, 10]).cut_offs(10, 120, "the gallery size, 120 images")
            Traceback (most recent call last):
            vlbias.errors.ConfigError: Expected `k` to be at most the gallery size, 120 images, but got 200 (protocol 'geyik')
        """
        if self.k is None:
            return (min(protocol_k, limit),)
        ks = tuple(sorted({int(value) for value in ([self.k] if isinstance(self.k, int) else self.k)}))
        if ks[-1] > limit:
            raise ConfigError(f"Expected `k` to be at most {ranked}, but got {ks[-1]} (protocol {self.protocol!r})")
        return ks

    def protocol_k_lowered(self, protocol_k: int, limit: int) -> bool:
        """Whether :meth:`cut_offs` lowered the protocol's K to the ``limit`` images ranked: each query's top K is then
        every image, so its MaxSkew, MinSkew, KL and Bias measure the gallery's shares, not the ranking."""
        return self.k is None and protocol_k > limit
