"""The options of the gallery-skew suite (:mod:`vlbias.suites.gallery_skew`), declared in a module of their own
(:mod:`vlbias.suites.options` finds them by name). Imports no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from jsonargparse.typing import ClosedUnitInterval, PositiveInt

from vlbias.errors import ConfigError
from vlbias.suites.ranking_options import RankingOptions

#: The shipped query sets (``src/vlbias/resources/gallery_queries/<name>.yaml``, each naming its source), and
#: BiasWorld's activity phrases.
QuerySet = Literal["neutral", "debiasclip", "bendvlm", "bendvlm_hair", "activities"]


@dataclass(frozen=True)
class GallerySkewOptions(RankingOptions):
    """Skew of what text queries retrieve from an attribute-labelled image gallery (``vlbias.suites.gallery_skew``).

    Args:
        queries: a shipped query set (neutral, debiasclip, bendvlm, bendvlm_hair; activities on BiasWorld), a list of
            queries, or {group: [query, ...]} (default: activities on BiasWorld, neutral on a face data set).
        attributes: the labelled attributes to measure skew over (default every one of gender, race, age, tone the
            gallery has; race x gender and tone x gender are added where both are measured).
        split: split of FairFace (train, val) or CelebA (train, val, test) (default val for FairFace, test for
            CelebA; UTKFace has none).
        share: BiasWorld's planted share of each activity's stereotyped gender among its images.
        per_activity: BiasWorld's gallery images per activity.
    """

    SUITE: ClassVar[str] = "gallery_skew"
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("share", "per_activity")
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("split",)

    queries: QuerySet | list[str] | dict[str, list[str]] | None = None
    attributes: list[str] | None = None
    split: Literal["train", "val", "test"] | None = None
    share: ClosedUnitInterval = 0.7
    per_activity: PositiveInt = 30

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.attributes is not None and not self.attributes:
            raise ConfigError("Expected `attributes` to name at least one attribute but got []")
        queries = self.queries
        if isinstance(queries, list | dict):
            grouped = queries if isinstance(queries, dict) else {"queries": queries}
            if not grouped or any(isinstance(texts, str) or not texts for texts in grouped.values()):
                raise ConfigError(
                    f"Expected `queries` to be a query set's name, a non-empty list of texts or {{group: [texts]}} "
                    f"but got {queries!r}"
                )
