"""Every suite's options (``--suite_options``) and BiasWorld's (``--biasworld.*``), declared once with their types,
ranges and defaults, and checked by :func:`check_suite_options` before any data or model is loaded.

Each declaration is a dataclass whose fields are the keyword parameters of the suite's ``from_biasworld`` /
``from_path`` and ``__init__`` that a user sets (``tests/hardening/test_options.py`` holds the two to the same
names and defaults). ``BIASWORLD_ONLY`` / ``PATH_ONLY`` name the options of one data source. This module imports
no torch: ``vlbias measure --help`` lists these options from here.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import docstring_parser
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, NonNegativeInt, OpenUnitInterval, PositiveInt
from jsonargparse.typing import restricted_number_type as _restricted

from vlbias.errors import ConfigError
from vlbias.options import PositiveUnitInterval, Seed, check_options, describe

Split = Literal["train", "val", "test"]
Probe = Literal["embed", "match"]
OnMissing = Literal["skip", "stop"]
Strategy = Literal["mean_all_masked", "refuse"]  # vlbias.models.masked_words.STRATEGIES
IntervalMethod = Literal["percentile", "bca"]  # vlbias.metrics.functional.weat.INTERVAL_METHODS
#: A softmax temperature: logits / T stay finite in float64 for |logit| up to 1e3 (1e-300 overflows).
Temperature = _restricted("Temperature", float, [(">=", 1e-3), ("<=", 1e3)])
ImageSize = _restricted("ImageSize", int, [(">=", 32)])


@dataclass(frozen=True)
class SuiteOptions:
    """The options every suite takes."""

    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ()
    PATH_ONLY: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def with_tiny_models(cls, options: dict) -> dict:
        """``options`` under ``--tiny``: every model the suite loads besides the measured one is tiny too."""
        return options


@dataclass(frozen=True)
class MMBiasOptions(SuiteOptions):
    """MMBias (``vlbias.suites.mmbias``).

    Args:
        split: BiasWorld split to measure.
        phrases: phrase folder, relative to the data directory or absolute.
        images: image folder, relative to the data directory or absolute.
        valence_images: valence image folder, relative to the data directory or absolute.
        pairs: group pairs to test, e.g. [[Christian, Muslim]]; default the paper's Table 2.
        on_missing_images: run on the images present ("skip") or stop.
        probe: cosine of embeddings ("embed") or ITM probabilities ("match").
        experiments: which tests: cross_modal, textual, visual, zero_shot (embed) or itm, zero_shot (match).
        top_k: matches kept per attribute set for itm, and words per zero-shot ranking.
        n_permutations: sampled re-partitions for the p-value (exact when the sets are small).
        n_bootstrap: bootstrap resamples for the interval.
        confidence: interval coverage.
        interval_method: bootstrap interval of the effect sizes, bca (closer to nominal coverage at small sets) or
            percentile.
        batch_size: images, texts or image-text pairs per forward pass.
    """

    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split",)
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("phrases", "images", "valence_images", "pairs", "on_missing_images")

    split: Split = "test"
    phrases: str | None = None
    images: str | None = None
    valence_images: str | None = None
    pairs: list[list[str]] | None = None
    on_missing_images: OnMissing = "skip"
    probe: Probe = "embed"
    experiments: list[Literal["cross_modal", "textual", "visual", "zero_shot", "itm"]] | None = None
    top_k: PositiveInt = 15
    n_permutations: PositiveInt = 10_000
    n_bootstrap: PositiveInt = 1_000
    confidence: OpenUnitInterval = 0.95
    interval_method: IntervalMethod = "bca"
    batch_size: PositiveInt = 64


@dataclass(frozen=True)
class CounterBiasOptions(SuiteOptions):
    """CounterBias (``vlbias.suites.counterbias``).

    Args:
        split: BiasWorld split to measure.
        bias_concepts: the bias concept words; each one's lexicon counterpart must be among them.
        b0: the bias concept(s) of positive sign in Eq. 7.
        templates: Table 1 templates to use (default all four).
        attack: the image attack's options: method, eps, alpha, steps, random_start.
        require_attack_success: skip items whose attack did not make B' the most likely concept.
        unannotated: skip an image without a gender annotation, or take the model's reading.
        min_bias_change: smallest |ΔP(B)| for an item to enter a measure.
        target_normalisation: P(T | V) over the concepts or the vocabulary.
        bias_normalisation: P(B | V) over the concepts or the vocabulary.
        language_baseline: a text-only model for Table 3, {model: bert, checkpoint: ...} or {model: bert, tiny: true}.
        lexicon: swap lexicon YAML file (default the shipped gender lexicon).
        cache_dir: directory of cached counterfactual images.
        batch_size: images attacked and measured together.
        max_rows: most (image, text) rows in one forward pass.
        strategy: multi-piece word strategy.
        n_bootstrap: bootstrap resamples for the intervals.
        n_permutations: sign flips for the p-values.
        confidence: interval coverage.
    """

    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split",)

    split: Split = "test"
    bias_concepts: Sequence[str] = ("man", "woman")
    b0: str | list[str] = "man"
    templates: list[Literal["Sw/O", "Sw/", "Pw/O", "Pw/"]] | None = None
    attack: dict | None = None
    require_attack_success: bool = True
    unannotated: Literal["skip", "model_reading"] = "skip"
    min_bias_change: PositiveUnitInterval = 0.01
    target_normalisation: Literal["concepts", "vocabulary"] = "concepts"
    bias_normalisation: Literal["concepts", "vocabulary"] = "concepts"
    language_baseline: dict | None = None
    lexicon: str | None = None
    cache_dir: str | None = None
    batch_size: PositiveInt = 32
    max_rows: PositiveInt = 512
    strategy: Strategy = "mean_all_masked"
    n_bootstrap: PositiveInt = 1000
    n_permutations: PositiveInt = 10_000
    confidence: OpenUnitInterval = 0.95

    @classmethod
    def with_tiny_models(cls, options: dict) -> dict:
        """The language baseline is a tiny random model of its family (its ``checkpoint`` dropped)."""
        baseline = options.get("language_baseline")
        if not baseline:
            return options
        tiny = {key: value for key, value in baseline.items() if key != "checkpoint"}
        return {**options, "language_baseline": {**tiny, "tiny": True}}


@dataclass(frozen=True)
class VLStereoSetOptions(SuiteOptions):
    """VLStereoSet (``vlbias.suites.vlstereoset``).

    Args:
        image_dir: image folder (default images/ beside the CSV).
        split: BiasWorld split to measure.
        template: BiasWorld caption template.
        unrelated: BiasWorld's unrelated caption word.
        probe: cosine of embeddings ("embed") or ITM logits ("match").
        temperature: softmax temperature; default 1 for match and 0.01 for embed.
        lexicon: neutral lexicon YAML (default the shipped one).
        shift: compute lmss and vlss.
        blank_size: side of the white image I'.
        n_bootstrap: bootstrap resamples per interval.
        confidence: interval coverage.
        batch_size: images per forward pass.
    """

    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split", "template", "unrelated")
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("image_dir",)

    image_dir: str | None = None
    split: Split = "test"
    template: str = "the {group} is {activity}."
    unrelated: str = "photo"
    probe: Probe = "embed"
    temperature: Temperature | None = None
    lexicon: str | None = None
    shift: bool = True
    blank_size: PositiveInt = 224
    n_bootstrap: PositiveInt = 1000
    confidence: OpenUnitInterval = 0.95
    batch_size: PositiveInt = 32


@dataclass(frozen=True)
class WEATOptions(SuiteOptions):
    """SEAT and Grounded-WEAT/SEAT (``vlbias.suites.weat``); specs from a path only.

    Args:
        images: folder of the grounded specs' images (default images/ beside the specs).
        on_missing_images: run on the images present ("skip") or stop.
        embedding: word, sentence, contextual, or auto.
        pooling: model (the model's own sentence pooling: sentence_bert's checkpoint pooling, else cls), cls or
            mean, for word/sentence embeddings from token states.
        source: token_states, or embed (for EMBED models such as clip).
        experiments: grounded experiments to run.
        person_object_ids: detector class ids of people, for 3_mask_image.
        n_permutations: sampled re-partitions for the p-values (default exact where feasible).
        n_bootstrap: bootstrap resamples for the intervals.
        confidence: interval coverage.
        interval_method: bootstrap interval of the effect sizes, bca (closer to nominal coverage at small sets) or
            percentile.
        batch_size: stimuli per forward pass.
    """

    PATH_ONLY: ClassVar[tuple[str, ...]] = ("images",)

    images: str | None = None
    on_missing_images: OnMissing = "skip"
    embedding: Literal["word", "sentence", "contextual", "auto"] = "auto"
    pooling: Literal["model", "cls", "mean"] = "model"
    source: Literal["token_states", "embed"] = "token_states"
    experiments: list[Literal["1", "2", "3_congruence", "3_mask_text", "3_mask_image"]] | None = None
    person_object_ids: Sequence[NonNegativeInt] = ()
    n_permutations: PositiveInt | None = None
    n_bootstrap: PositiveInt = 1_000
    confidence: OpenUnitInterval = 0.95
    interval_method: IntervalMethod = "bca"
    batch_size: PositiveInt = 32


@dataclass(frozen=True)
class EntityAssociationOptions(SuiteOptions):
    """Entity association scores (``vlbias.suites.entity_association``).

    Args:
        spec: spec YAML of templates, entities and agents (default the shipped one).
        split: BiasWorld split to measure.
        text_model: registered FILL_MASK model giving P_L.
        text_checkpoint: its weights (hub id or local directory).
        text_tiny: a tiny random text model instead (always so under --tiny).
        text_options: the text model's own loading options.
        strategy: multi-piece entity strategy.
        batch_size: units per forward pass.
        n_bootstrap: bootstrap resamples for the intervals.
        confidence: interval coverage.
    """

    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split",)
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("spec",)

    spec: str | None = None
    split: Split = "test"
    text_model: str = "bert"
    text_checkpoint: str | None = "bert-base-uncased"
    text_tiny: bool = False
    text_options: dict | None = None
    strategy: Strategy = "mean_all_masked"
    batch_size: PositiveInt = 16
    n_bootstrap: PositiveInt = 1000
    confidence: OpenUnitInterval = 0.95

    @classmethod
    def with_tiny_models(cls, options: dict) -> dict:
        """The text model is tiny (built with the measured model's tokenizer); ``text_tiny: false`` is refused."""
        if options.get("text_tiny") is False:
            raise ConfigError("Suite option `text_tiny: false` contradicts --tiny (every model is tiny under --tiny).")
        return {**options, "text_tiny": True}


@dataclass(frozen=True)
class RetrievalBiasOptions(SuiteOptions):
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
        k: the cut-off K, or several.
        n_bootstrap: bootstrap resamples of the queries for the intervals.
        confidence: interval coverage.
        eps: smoothing inside the skews' log (0: Geyik et al.'s formula).
        batch_size: images or queries per forward pass.
    """

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
    k: PositiveInt | list[PositiveInt] = 10
    n_bootstrap: PositiveInt = 1_000
    confidence: OpenUnitInterval = 0.95
    eps: NonNegativeFloat = 1e-4
    batch_size: PositiveInt = 64


@dataclass(frozen=True)
class BiasWorldOptions:
    """BiasWorld, the synthetic world of --data biasworld (names and defaults of vlbias.data.biasworld.BiasWorld).

    Args:
        bias_strength: share s of stereotyped training items beyond chance.
        n_train: training items.
        eval_per_combination: val/test items per (group, activity).
        image_size: image side in pixels.
        neutral_caption_rate: share of captions that name no group.
        seed: seed of the world.
        hidden_object_rate: share of images drawn without their activity object.
    """

    bias_strength: ClosedUnitInterval = 0.5
    n_train: PositiveInt = 2048
    eval_per_combination: PositiveInt = 32
    image_size: ImageSize = 64
    neutral_caption_rate: ClosedUnitInterval = 0.5
    seed: Seed = 0
    hidden_object_rate: ClosedUnitInterval = 0.0


#: suite name -> its options; one line per suite of :mod:`vlbias.suites.registry`.
SUITE_OPTIONS: dict[str, type[SuiteOptions]] = {
    "counterbias": CounterBiasOptions,
    "entity_association": EntityAssociationOptions,
    "mmbias": MMBiasOptions,
    "retrieval_bias": RetrievalBiasOptions,
    "vlstereoset": VLStereoSetOptions,
    "weat": WEATOptions,
}


def check_suite_options(suite: str, options: dict | None, biasworld: bool, tiny: bool = False) -> dict:
    """``options`` of ``suite`` checked against its declaration (those of BiasWorld data when ``biasworld``, else
    those of a data path; the other source's are dropped when left at their defaults, as the shipped configs
    list them, else refused), converted to their types, and with :meth:`SuiteOptions.with_tiny_models` under
    ``tiny``.

    Example:
        >>> check_suite_options("mmbias", {"n_permutation": 100}, biasworld=True)
        Traceback (most recent call last):
        vlbias.errors.ConfigError: Unknown suite 'mmbias' option `n_permutation`; did you mean `n_permutations`? Accepted: split, probe, experiments, top_k, n_permutations, n_bootstrap, confidence, interval_method, batch_size.
    """
    declaration = SUITE_OPTIONS.get(suite)
    if declaration is None:
        raise ConfigError(f"Unknown suite {suite!r}; expected one of: {', '.join(sorted(SUITE_OPTIONS))}.")
    other_source = declaration.PATH_ONLY if biasworld else declaration.BIASWORLD_ONLY
    if isinstance(options, dict):  # the other source's options are refused, unless left at their defaults
        defaults = {field.name: field.default for field in dataclasses.fields(declaration)}
        misplaced = sorted(name for name in set(options) & set(other_source) if options[name] != defaults[name])
        if misplaced:
            applies = "a data path (not --data biasworld)" if biasworld else "BiasWorld data (--data biasworld)"
            raise ConfigError(
                f"Suite {suite!r} option(s) {misplaced} apply to {applies} only: remove them or set them to their "
                f"defaults ({', '.join(f'{name}: {defaults[name]!r}' for name in misplaced)})."
            )
        options = {name: value for name, value in options.items() if name not in other_source}
    checked = check_options(options, declaration, f"suite {suite!r} option", skip=other_source)
    return declaration.with_tiny_models(checked) if tiny else checked


def options_help(declaration: type) -> list[tuple[str, str]]:
    """``[(name, "doc; accepts ... (default ...)"), ...]`` of a declaration's fields, for ``--help``."""
    docs = {param.arg_name: param.description for param in docstring_parser.parse(declaration.__doc__).params}
    hints = typing.get_type_hints(declaration)
    sources = {name: " BiasWorld only." for name in getattr(declaration, "BIASWORLD_ONLY", ())}
    sources |= {name: " Data path only." for name in getattr(declaration, "PATH_ONLY", ())}
    return [
        (
            field.name,
            f"{docs.get(field.name, '')} Accepts {describe(hints[field.name])} (default {field.default!r})."
            + sources.get(field.name, ""),
        )
        for field in dataclasses.fields(declaration)
    ]
