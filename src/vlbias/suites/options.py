"""Every suite's options (``--suite_options``, the callback's ``options:``) and BiasWorld's (``--biasworld.*``),
each declared once, on a frozen dataclass, with its type, range, default and help text (its ``Args:`` line).

:func:`check_suite_options` turns a user's mapping into a suite's options object before any data or model is
loaded: unknown and moved keys (:mod:`vlbias.renamed`) are refused by name, each value is checked against its type
(:mod:`vlbias.options`), the nested ``statistics`` mapping changes the suite's own default
:class:`~vlbias.options.StatisticsOptions` field by field, and the dataclass's ``__post_init__`` checks the rules
between fields. Suites take the object (``CounterBiasSuite(items, data_config, options)``) and check again only
what needs their data (a lexicon, a gallery's size). ``BIASWORLD_ONLY`` / ``PATH_ONLY`` name the options of one
data source (:meth:`SuiteOptions.check_source`). This module imports no torch: ``vlbias measure --help`` lists these
options from here.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import docstring_parser
from jsonargparse.typing import NonNegativeInt, PositiveInt
from jsonargparse.typing import restricted_number_type as _restricted

from vlbias.errors import ConfigError
from vlbias.lazy_table import LazyTable
from vlbias.models.catalog import model_capabilities
from vlbias.options import PositiveUnitInterval, StatisticsOptions, check_options, describe
from vlbias.renamed import renamed_hint

Split = Literal["train", "val", "test"]
Probe = Literal["embed", "match"]
OnMissing = Literal["skip", "stop"]
Strategy = Literal["mean_all_masked", "refuse"]  # vlbias.models.masked_words.STRATEGIES
#: A softmax temperature: logits / T stay finite in float64 for |logit| up to 1e3 (1e-300 overflows).
Temperature = _restricted("Temperature", float, [(">=", 1e-3), ("<=", 1e3)])

#: Why a suite's statistics field is fixed: no permutation test; percentile intervals only; both.
NO_PERMUTATION_TEST = "it runs no permutation test"
PERCENTILE_ONLY = "its intervals are percentile bootstrap intervals"
PERCENTILE_BOOTSTRAP_ONLY = {
    "n_permutations": NO_PERMUTATION_TEST,
    "exact_limit": NO_PERMUTATION_TEST,
    "interval_method": PERCENTILE_ONLY,
}


@dataclass(frozen=True)
class SuiteOptions:
    """What every suite's options have: the suite's name (``SUITE``), the options of one data source
    (``BIASWORLD_ONLY``, ``PATH_ONLY``), and a ``statistics`` field, declared by each suite (or its base, as
    :class:`~vlbias.suites.ranking_options.RankingOptions`) with the suite's defaults and listed last in
    ``--help``, whose fields listed in ``FIXED_STATISTICS`` (field -> why) the suite does not use or cannot change:
    those are refused when set away from the suite's default."""

    SUITE: ClassVar[str]
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ()
    PATH_ONLY: ClassVar[tuple[str, ...]] = ()
    FIXED_STATISTICS: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        default = self.default_statistics()
        for name, why in self.FIXED_STATISTICS.items():
            value, fixed = getattr(self.statistics, name), getattr(default, name)
            if value != fixed:
                raise ConfigError(
                    f"Suite {self.SUITE!r} takes no statistics option `{name}` other than {fixed!r} ({why}) but got "
                    f"{value!r}: remove it."
                )

    @classmethod
    def default_statistics(cls) -> StatisticsOptions:
        """This suite's default statistics."""
        return cls.__dataclass_fields__["statistics"].default

    def with_statistics(self, **fields: object) -> Self:
        """These options with the statistics ``fields`` changed (the suite's other statistics kept).

        Example:
            >>> VLStereoSetOptions().with_statistics(n_bootstrap=200).statistics.n_bootstrap
            200
        """
        return replace(self, statistics=replace(self.statistics, **fields))

    def recorded_statistics(self) -> dict[str, object]:
        """The statistics fields this suite uses, as recorded in its results' ``config``."""
        return {
            field.name: getattr(self.statistics, field.name)
            for field in dataclasses.fields(StatisticsOptions)
            if field.name not in self.FIXED_STATISTICS
        }

    def check_source(self, biasworld: bool) -> None:
        """Refuse options of the other data source set away from their defaults (those of a data path when the data is
        BiasWorld, and the other way round); the shipped configs list them at their defaults."""
        other = self.PATH_ONLY if biasworld else self.BIASWORLD_ONLY
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        misplaced = [name for name in other if getattr(self, name) != defaults[name]]
        if misplaced:
            applies = "a data path (not --data biasworld)" if biasworld else "BiasWorld data (--data biasworld)"
            raise ConfigError(
                f"Suite {self.SUITE!r} option(s) {misplaced} apply to {applies} only: remove them or set them to their "
                f"defaults ({', '.join(f'{name}: {defaults[name]!r}' for name in misplaced)})."
            )

    @classmethod
    def with_tiny_models(cls, options: dict) -> dict:
        """``options`` (a checked mapping) under ``--tiny``: every model the suite loads besides the measured one is
        tiny too."""
        return options


#: MMBias's tests and rankings per probe, on a data path and on BiasWorld, and BiasWorld's default.
MMBIAS_EXPERIMENTS: dict[str, tuple[str, ...]] = {
    "embed": ("cross_modal", "textual", "visual", "zero_shot"),
    "match": ("itm", "zero_shot"),
}
MMBIAS_BIASWORLD_EXPERIMENTS: dict[str, tuple[str, ...]] = {"embed": ("cross_modal", "textual"), "match": ("itm",)}
MMBIAS_BIASWORLD_DEFAULTS: dict[str, tuple[str, ...]] = {"embed": ("cross_modal",), "match": ("itm",)}


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
        probe: cosine of embeddings ("embed") or sigmoid of the pair logits ("match"; results record which pair
            logit as match_score: itm, sigmoid or softmax).
        experiments: which tests: cross_modal, textual, visual, zero_shot (embed) or itm, zero_shot (match);
            default all of the probe's (BiasWorld: cross_modal, or itm).
        top_k: matches kept per attribute set for itm, and words per zero-shot ranking.
        batch_size: images, texts or image-text pairs per forward pass.
        statistics: permutation tests (p-values; exact when the sets are small) and bootstrap intervals of the
            effect sizes (bca: closer to nominal coverage at small sets).
    """

    SUITE: ClassVar[str] = "mmbias"
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
    batch_size: PositiveInt = 64
    statistics: StatisticsOptions = StatisticsOptions(interval_method="bca")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.chosen_experiments(biasworld=False)

    def check_source(self, biasworld: bool) -> None:
        super().check_source(biasworld)
        self.chosen_experiments(biasworld)

    def chosen_experiments(self, biasworld: bool) -> tuple[str, ...]:
        """The experiments to run, each once: ``experiments``, or the probe's default for the data source; refused
        when one does not fit the probe (and, on BiasWorld, its stimuli)."""
        allowed = (MMBIAS_BIASWORLD_EXPERIMENTS if biasworld else MMBIAS_EXPERIMENTS)[self.probe]
        if self.experiments is None:
            return MMBIAS_BIASWORLD_DEFAULTS[self.probe] if biasworld else allowed
        wrong = [kind for kind in self.experiments if kind not in allowed]
        if wrong or not self.experiments:
            where = " on BiasWorld" if biasworld else ""
            raise ConfigError(
                f"Expected suite 'mmbias' option `experiments` to be a non-empty list among {list(allowed)} for probe "
                f"{self.probe!r}{where} but got {list(self.experiments)!r}."
            )
        return tuple(dict.fromkeys(self.experiments))


@dataclass(frozen=True)
class CounterBiasOptions(SuiteOptions):
    """CounterBias (``vlbias.suites.counterbias``).

    Args:
        split: BiasWorld split to measure.
        bias_concepts: the bias concept words; each one's lexicon counterpart must be among them.
        b0: the bias concept(s) of positive sign in Eq. 7: one word (its counterpart is B1), or with more than two
            concepts the B0 side, e.g. [man, boy] for [man, woman, boy, girl].
        templates: Table 1 templates to use (default all four).
        attack: the image attack's options: method, eps, alpha, steps, random_start (its seed is the run's seed).
        require_attack_success: skip items whose attack did not make B' the most likely concept.
        unannotated: skip an image without a gender annotation, or take the model's reading (argmax P(B | V_f)).
        min_bias_change: smallest |ΔP(B)| for an item to enter a measure.
        target_normalisation: P(T | V) over the concepts or the vocabulary.
        bias_normalisation: P(B | V) over the concepts or the vocabulary.
        language_baseline: a text-only model for Table 3, {model: bert, checkpoint: ...} or {model: bert, tiny: true}.
        lexicon: swap lexicon YAML file (default the shipped gender lexicon).
        cache_dir: directory of cached counterfactual images.
        batch_size: images attacked and measured together.
        max_rows: most (image, text) rows in one forward pass.
        strategy: multi-piece word strategy.
        statistics: sign-flip p-values of bias(T) = 0 (every flip when there are at most n_permutations) and
            percentile bootstrap intervals over each target's images.
    """

    SUITE: ClassVar[str] = "counterbias"
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split",)
    FIXED_STATISTICS: ClassVar[dict[str, str]] = {
        "exact_limit": "its sign-flip test counts every flip when there are at most n_permutations",
        "interval_method": PERCENTILE_ONLY,
    }

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
    statistics: StatisticsOptions = StatisticsOptions()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.templates is not None and not self.templates:
            raise ConfigError(
                "Expected suite 'counterbias' option `templates` to name at least one template but got []."
            )
        if self.attack:
            if "seed" in self.attack:
                raise ConfigError("The attack's seed is the run's `--seed`; do not set `attack.seed`.")
            from vlbias.counterfactual.image import AttackConfig  # torch: only when an attack option is given

            AttackConfig(**check_options(self.attack, AttackConfig, "attack option"))
        if self.language_baseline is not None:
            baseline = dict(self.language_baseline)
            unknown = sorted(set(baseline) - {"model", "checkpoint", "tiny", "options"})
            if "model" not in baseline or unknown:
                raise ConfigError(
                    "Expected `language_baseline` to name a `model`, with any of checkpoint, tiny and options "
                    f"({{model: bert, tiny: true}}), but got {self.language_baseline!r}."
                )
            _check_model_options(baseline["model"], baseline.get("options"), bool(baseline.get("tiny")))

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
        probe: cosine of embeddings ("embed") or pair logits ("match"; results record which as match_score: itm,
            sigmoid or softmax).
        temperature: softmax temperature; default 1 for match and 0.01 for embed.
        lexicon: neutral lexicon YAML (default the shipped one).
        shift: compute lmss and vlss.
        blank_size: side of the white image I'.
        batch_size: images per forward pass.
        statistics: percentile bootstrap intervals of the scores.
    """

    SUITE: ClassVar[str] = "vlstereoset"
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split", "template", "unrelated")
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("image_dir",)
    FIXED_STATISTICS: ClassVar[dict[str, str]] = PERCENTILE_BOOTSTRAP_ONLY

    image_dir: str | None = None
    split: Split = "test"
    template: str = "the {group} is {activity}."
    unrelated: str = "photo"
    probe: Probe = "embed"
    temperature: Temperature | None = None
    lexicon: str | None = None
    shift: bool = True
    blank_size: PositiveInt = 224
    batch_size: PositiveInt = 32
    statistics: StatisticsOptions = StatisticsOptions()


#: WEAT's grounded experiments (Ross et al., 2021, Sec. 4.1-4.3).
WEAT_EXPERIMENTS = ("1", "2", "3_congruence", "3_mask_text", "3_mask_image")


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
        experiments: grounded experiments to run; default all but 3_mask_image, added with person_object_ids.
        person_object_ids: detector class ids of people, for 3_mask_image.
        batch_size: stimuli per forward pass.
        statistics: permutation tests of every row (exact_limit: re-partitions of X ∪ Y counted exactly; the
            3_congruence sign-flip test counts up to 2^24 sign vectors exactly) and bootstrap intervals of the effect
            sizes (bca: closer to nominal coverage at small sets).
    """

    SUITE: ClassVar[str] = "weat"
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("images",)

    images: str | None = None
    on_missing_images: OnMissing = "skip"
    embedding: Literal["word", "sentence", "contextual", "auto"] = "auto"
    pooling: Literal["model", "cls", "mean"] = "model"
    source: Literal["token_states", "embed"] = "token_states"
    experiments: list[Literal["1", "2", "3_congruence", "3_mask_text", "3_mask_image"]] | None = None
    person_object_ids: Sequence[NonNegativeInt] = ()
    batch_size: PositiveInt = 32
    #: 99,999 re-partitions: with the observed one, May et al.'s 100,000 samples.
    statistics: StatisticsOptions = StatisticsOptions(n_permutations=99_999, interval_method="bca")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source == "embed" and self.embedding == "contextual":
            raise ConfigError("Option `embedding='contextual'` needs token states; `source='embed'` has none.")
        if "3_mask_image" in self.chosen_experiments() and not self.person_object_ids:
            raise ConfigError(
                "Experiment '3_mask_image' needs option `person_object_ids` (detector class ids of people)."
            )

    def chosen_experiments(self) -> list[str]:
        """``experiments``, or by default every experiment but ``3_mask_image`` (added with ``person_object_ids``)."""
        if self.experiments is not None:
            return [str(experiment) for experiment in self.experiments]
        return [e for e in WEAT_EXPERIMENTS if e != "3_mask_image" or self.person_object_ids]


@dataclass(frozen=True)
class EntityAssociationOptions(SuiteOptions):
    """Entity association scores (``vlbias.suites.entity_association``).

    Args:
        spec: spec YAML of templates, entities and agents (default the shipped one).
        split: BiasWorld split to measure.
        text_model: registered FILL_MASK model giving P_L.
        text_checkpoint: its weights (hub id or local directory).
        text_tiny: a tiny random text model instead, built with the measured model's tokenizer (always so under
            --tiny).
        text_options: the text model's own loading options.
        strategy: multi-piece entity strategy.
        batch_size: units per forward pass.
        statistics: percentile bootstrap intervals of B_L and B_V (images resampled).
    """

    SUITE: ClassVar[str] = "entity_association"
    BIASWORLD_ONLY: ClassVar[tuple[str, ...]] = ("split",)
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("spec",)
    FIXED_STATISTICS: ClassVar[dict[str, str]] = PERCENTILE_BOOTSTRAP_ONLY

    spec: str | None = None
    split: Split = "test"
    text_model: str = "bert"
    text_checkpoint: str | None = "bert-base-uncased"
    text_tiny: bool = False
    text_options: dict | None = None
    strategy: Strategy = "mean_all_masked"
    batch_size: PositiveInt = 16
    statistics: StatisticsOptions = StatisticsOptions()

    def __post_init__(self) -> None:
        super().__post_init__()
        if "fill_mask" not in model_capabilities(self.text_model):
            raise ConfigError(
                f"Suite option `text_model` must be a model with capability 'fill_mask' but {self.text_model!r} lacks it."
            )
        if not self.text_tiny and self.text_checkpoint is None:
            raise ConfigError(
                "Suite option `text_checkpoint` (e.g. 'bert-base-uncased') or `text_tiny: true` is needed for P_L."
            )
        _check_model_options(self.text_model, self.text_options, self.text_tiny)

    @classmethod
    def with_tiny_models(cls, options: dict) -> dict:
        """The text model is tiny (built with the measured model's tokenizer); ``text_tiny: false`` is refused."""
        if options.get("text_tiny") is False:
            raise ConfigError("Suite option `text_tiny: false` contradicts --tiny (every model is tiny under --tiny).")
        return {**options, "text_tiny": True}


#: suite name -> its options declared in this module.
_DECLARED_HERE: dict[str, type[SuiteOptions]] = {d.SUITE: d for d in (
    CounterBiasOptions, EntityAssociationOptions, MMBiasOptions, VLStereoSetOptions, WEATOptions,
)}  # fmt: skip
#: suite name -> its options declared in a module of their own (imported when asked for, as it imports this one);
#: one line per suite.
_DECLARED_APART = LazyTable("suite", {
    "bias_qa": "vlbias.suites.bias_qa_options:BiasQAOptions",
    "counterfactual_answers": "vlbias.suites.counterfactual_answers_options:CounterfactualAnswersOptions",
    "gallery_skew": "vlbias.suites.gallery_skew_options:GallerySkewOptions",
    "open_generation": "vlbias.suites.open_generation_options:OpenGenerationOptions",
    "retrieval_bias": "vlbias.suites.retrieval_bias_options:RetrievalBiasOptions",
    "zero_shot_fairness": "vlbias.suites.zero_shot_fairness_options:ZeroShotFairnessOptions",
})  # fmt: skip


def suite_options_classes() -> dict[str, type[SuiteOptions]]:
    """Every suite's options declaration, by suite name, sorted by name."""
    found = _DECLARED_HERE | {name: _DECLARED_APART.get(name) for name in _DECLARED_APART.names()}
    return dict(sorted(found.items()))


def is_biasworld(data: object) -> bool:
    """Whether ``data`` names BiasWorld (``"biasworld"``) or is a world, not a path in a suite's public format."""
    return not isinstance(data, str | Path) or str(data) == "biasworld"


def suite_options_class(suite: str) -> type[SuiteOptions]:
    """The options declaration of ``suite``; an unknown suite is refused with the known ones."""
    declared = suite_options_classes()
    if suite not in declared:
        raise ConfigError(f"Unknown suite {suite!r}; expected one of: {', '.join(declared)}.")
    return declared[suite]


def check_suite_options(suite: str, options: Mapping[str, Any] | None, tiny: bool = False) -> SuiteOptions:
    """``options`` of ``suite`` (a user's mapping) checked against the suite's declaration and turned into its options
    object (the nested ``statistics`` mapping over the suite's default statistics), with
    :meth:`SuiteOptions.with_tiny_models` under ``tiny``. Refused, with one line: an unknown key (with the closest
    accepted ones, nested statistics fields included), a key that moved (naming its new place), a value of the
    wrong type or range, a statistics field the suite does not use, a broken rule between fields.

    Example:
        >>> check_suite_options("mmbias", {"n_permutations": 100})
        Traceback (most recent call last):
        vlbias.errors.ConfigError: Suite 'mmbias' option `n_permutations` moved to `statistics.n_permutations`: write {statistics: {n_permutations: 100}}.
        >>> check_suite_options("vlstereoset", {"statistics": {"n_bootstrap": 200}}).statistics.n_bootstrap
        200
    """
    declaration = suite_options_class(suite)
    if not isinstance(options, Mapping | None):
        raise ConfigError(f"Expected the suite {suite!r} options as a mapping {{name: value}} but got {options!r}.")
    options = dict(options or {})
    accepted = [field.name for field in dataclasses.fields(declaration)]
    for name in options:
        if name not in accepted:
            _refuse_unknown(suite, name, options[name], accepted)
    statistics = options.pop("statistics", None)
    checked = check_options(options, declaration, f"suite {suite!r} option")
    if tiny:
        checked = declaration.with_tiny_models(checked)
    return declaration(**checked, statistics=_statistics(suite, declaration, statistics))


def _refuse_unknown(suite: str, name: object, value: object, accepted: list[str]) -> None:
    moved = renamed_hint(f"suite_options.{name}")
    if moved is not None:
        new = moved.removeprefix("suite_options.")
        example = json.dumps(value, default=str)
        for part in reversed(new.split(".")):
            example = f"{{{part}: {example}}}"
        raise ConfigError(f"Suite {suite!r} option `{name}` moved to `{new}`: write {example}.")
    candidates = accepted + [f"statistics.{field.name}" for field in dataclasses.fields(StatisticsOptions)]
    close = difflib.get_close_matches(str(name), candidates, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else "."
    raise ConfigError(f"Unknown suite {suite!r} option `{name}`{hint} Accepted: {', '.join(accepted)}.")


def _statistics(suite: str, declaration: type[SuiteOptions], given: object) -> StatisticsOptions:
    """The suite's default statistics with the fields ``given`` (a mapping, checked) changed."""
    default = declaration.default_statistics()
    if given is None:
        return default
    return replace(default, **check_options(given, StatisticsOptions, f"suite {suite!r} statistics option"))


def with_statistics_preset(suite: str, options: Mapping[str, Any], preset: Mapping[str, object]) -> dict[str, Any]:
    """``options`` of ``suite`` (a mapping) with the ``preset`` statistics fields the suite uses (it leaves out the
    others, e.g. ``n_permutations`` for a suite without a permutation test) under the options' own ``statistics``.

    Example:
        >>> with_statistics_preset("vlstereoset", {"statistics": {"n_bootstrap": 50}},
        ...                        {"n_permutations": 1000, "n_bootstrap": 200, "confidence": 0.9})
        {'statistics': {'n_bootstrap': 50, 'confidence': 0.9}}
    """
    fixed = suite_options_class(suite).FIXED_STATISTICS
    used = {name: value for name, value in preset.items() if name not in fixed}
    given = options.get("statistics") or {}
    if not isinstance(given, Mapping):  # refused by the check, as given
        return dict(options)
    return {**options, "statistics": {**used, **given}}


def options_help(declaration: type) -> list[tuple[str, str]]:
    """``[(name, "doc Accepts ... (default ...)."), ...]`` of a declaration's fields, for ``--help``; a suite's
    ``statistics`` as one line per field it uses (``statistics.n_bootstrap``), with the suite's defaults."""
    lines = []
    fields = sorted(dataclasses.fields(declaration), key=lambda field: field.name == "statistics")  # statistics last
    for field in fields:
        if field.name != "statistics":
            lines.append((field.name, _help(declaration, field.name, field.default)))
            continue
        for nested in dataclasses.fields(StatisticsOptions):
            if nested.name not in declaration.FIXED_STATISTICS:
                text = _help(StatisticsOptions, nested.name, getattr(field.default, nested.name))
                lines.append((f"statistics.{nested.name}", text))
    return lines


def field_docs(declaration: type) -> dict[str, str]:
    """``{field: its Args line}`` of a declaration, each read from the docstring of the class that declares the field
    (a base's, as :class:`~vlbias.suites.ranking_options.RankingOptions`')."""
    return {
        param.arg_name: param.description
        for klass in reversed(declaration.__mro__)
        for param in docstring_parser.parse(klass.__doc__ or "").params
    }


def _help(declaration: type, name: str, default: object) -> str:
    docs = field_docs(declaration)
    kind = typing.get_type_hints(declaration)[name]
    source = {name: " BiasWorld only." for name in getattr(declaration, "BIASWORLD_ONLY", ())}
    source |= {name: " Data path only." for name in getattr(declaration, "PATH_ONLY", ())}
    return f"{docs.get(name, '')} Accepts {describe(kind)} (default {default!r}).{source.get(name, '')}"


def _check_model_options(model: str, options: dict | None, tiny: bool) -> None:
    """The loading options of a model a suite loads besides the measured one (a baseline, a text model), checked
    where the suite's options are made, as the measured model's are at the command's door."""
    if options:
        from vlbias.models.registry import check_model_options  # torch: only when such options are given

        check_model_options(model, options, tiny)
