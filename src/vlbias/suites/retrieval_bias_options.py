"""The options of the retrieval-bias suite (:mod:`vlbias.suites.retrieval_bias`), declared in a module of their own
(:mod:`vlbias.suites.options` finds them by name). Imports no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from jsonargparse.typing import NonNegativeFloat

from vlbias.errors import ConfigError
from vlbias.suites.options import Split
from vlbias.suites.ranking_options import RankingOptions


@dataclass(frozen=True)
class RetrievalBiasOptions(RankingOptions):
    """Ranking bias of retrieval (``vlbias.suites.retrieval_bias``).

    Args:
        split: split of BiasWorld or of the caption file.
        queries_from: BiasWorld queries: the activities' neutral phrases, or the split's captions neutralised.
        lexicon: neutral lexicon YAML (default the shipped one).
        image_root: folder of the caption file's images (default the file's folder).
        prompts: queries to use instead of the neutralised captions: a list, or {group: [prompt, ...]}.
        gender_words: swap lexicon whose pairs read [men's word, women's word] (default the shipped one).
        verify_images: decode every image up front.
        cache_dir: the datasets cache of the parsed caption file.
        eps: the smoothing of the protocol's zero handling (default the protocol's ε; 0 with geyik: Geyik et al.'s
            formula).
    """

    SUITE: ClassVar[str] = "retrieval_bias"
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("queries_from",)
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("image_root", "prompts", "gender_words", "verify_images", "cache_dir")

    split: Split = "test"
    queries_from: Literal["activities", "captions"] = "activities"
    lexicon: str | None = None
    image_root: str | None = None
    prompts: list[str] | dict[str, list[str]] | None = None
    gender_words: str | None = None
    verify_images: bool = False
    cache_dir: str | None = None
    eps: NonNegativeFloat | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        prompts = self.prompts
        if prompts is not None:
            grouped = prompts if isinstance(prompts, dict) else {"prompts": prompts}
            if not grouped or any(isinstance(texts, str) or not texts for texts in grouped.values()):
                raise ConfigError(
                    f"Expected `prompts` to be a non-empty list of texts or {{group: [texts]}} but got {prompts!r}"
                )
