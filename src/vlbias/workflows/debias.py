"""``vlbias debias``: fit post-hoc debiasers (:mod:`vlbias.mitigation.registry`) on one EMBED model and measure what
they change, bias and accuracy together.

The service behind the subcommand, in the order it runs:

1. every choice is checked before any data or model is read: the device and the model's options, each method's
   name (an unknown one is refused with the registered ones) and its options (checked against the method's options
   dataclass, an unknown key named), each suite's options, a prompt file's keys, and each method's ``NEEDS``
   against the fields the data gives (:func:`~vlbias.mitigation.fit_data.fields_given`): a method that needs one
   the data does not give is refused naming the field (in the compare mode with ``'all'``, it is listed in the
   table as not fitted, with that reason);
2. the suites are built on ``suite_data`` (BiasWorld's ``test`` split unless a suite's ``split`` says otherwise)
   and must probe embeddings (EMBED); a suite measured on the BiasWorld split the methods are fitted on is
   measured, with a warning (:func:`~vlbias.mitigation.outputs.same_selection`);
3. the model is loaded and the fitting data built (:mod:`vlbias.mitigation.fit_data`: BiasWorld's ``split``,
   ``val`` by default, or a prompt file);
4. per fold (``folds`` BiasWorld worlds, of seeds ``biasworld.seed``, ``+1``, ...; the run's seed moves with
   them), the model is measured by each suite, and its zero-shot accuracy on the world's ``test`` activities
   (:func:`~vlbias.workflows.comparison.accuracy_with_interval`) and, where ``captions`` names a caption corpus
   (:mod:`vlbias.workflows.caption_corpus`: the fold's world's ``test`` split, or a file's), its retrieval R@K
   (:func:`~vlbias.workflows.comparison.recall_with_intervals`); then a new debiaser of each method is fitted on
   the fold's data (torch's generators seeded with the fold's seed before each fit, so a method's fit does not
   depend on which ran before it) and measured the same way, through
   :class:`~vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings`, its accuracy and R@K from the transformed image and text
   embeddings; each of ``trained_models`` (a model debiased by training, such as a prompt array) is loaded and
   measured the same way as the model itself; every method sees the same folds;
5. the output folder is written as a unit (:mod:`vlbias.workflows.debias_outputs`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from vlbias.data.biasworld import ACTIVITIES, BiasWorld, activity_phrases
from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.debiased_embeddings import DebiasedEmbeddings
from vlbias.mitigation.debiaser import Debiaser, FitData, RemovedSpanError
from vlbias.mitigation.fit_data import biasworld_fit_data, fields_given, file_fit_data
from vlbias.mitigation.outputs import same_selection, selection
from vlbias.mitigation.registry import debiaser_class
from vlbias.mitigation.tradeoff import ACCURACY
from vlbias.models.base import Capability, ModelAdapter, require_capability
from vlbias.models.catalog import adapter_class
from vlbias.models.embedding import text_encoder, unit_image_embeddings
from vlbias.options import check_options
from vlbias.report.pareto import headline_bias
from vlbias.results import Results
from vlbias.runtime.environment import environment
from vlbias.runtime.threads import torch_threads
from vlbias.suites.base import Suite
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite
from vlbias.workflows.caption_corpus import BIASWORLD_CAPTIONS, CaptionCorpus, biasworld_captions, file_captions
from vlbias.workflows.comparison import (
    NO_METHOD,
    Interval,
    accuracy_with_interval,
    comparison_rows,
    fold_means,
    plot_comparison,
    recall_with_intervals,
)
from vlbias.workflows.debias_outputs import (
    DEBIAS_FOLDER,
    write_debias_folder,
    write_debiased_model,
    write_measurements,
)
from vlbias.workflows.loaded_model import check_model_choice, load_model, refuse_empty, run_config
from vlbias.workflows.options import DebiasOptions

logger = logging.getLogger(__name__)


def checked_debiasers(options: DebiasOptions) -> dict[str, Debiaser]:
    """A new, unfitted debiaser per method of ``options``, its options checked against its ``OPTIONS`` dataclass."""
    methods = options.methods
    if options.compare:
        unknown = sorted(set(options.method_options) - set(methods))
        if unknown:
            raise ConfigError(f"`method_options` names methods that are not compared: {unknown}; compared: {methods}.")
    debiasers = {}
    for method in methods:
        cls = debiaser_class(method)  # an unknown name is refused with the registered ones
        given = options.method_options.get(method) if options.compare else options.method_options
        checked = check_options(given, cls.OPTIONS, f"debiaser {method!r} option")
        debiasers[method] = cls(cls.OPTIONS(**checked))
    return debiasers


@dataclass(frozen=True)
class TrainedModel:
    """A model debiased by training, a row of the compare mode (``trained_models``).

    Args:
        model: Its adapter name (an EMBED model, e.g. ``prompt_array``).
        checkpoint: Its weights (e.g. the ``model/`` folder ``vlbias fit`` exports).
    """

    model: str
    checkpoint: str


def checked_trained_models(options: DebiasOptions) -> dict[str, DebiasOptions]:
    """Per row name of ``options.trained_models``, ``options`` with that model's choice (not tiny, no model
    options): each spec checked against :class:`TrainedModel`, its name against the methods' and ``none``."""
    models = {}
    for name, spec in options.trained_models.items():
        if name == NO_METHOD or name in options.methods:
            raise ConfigError(f"`trained_models` row {name!r} has the name of a method or of {NO_METHOD!r}: rename it.")
        checked = check_options(spec, TrainedModel, f"trained model {name!r} option")
        missing = [key for key in ("model", "checkpoint") if key not in checked]
        if missing:
            raise ConfigError(f"`trained_models` row {name!r} needs `{missing[0]}` (given: {sorted(checked)}).")
        choice = dataclasses.replace(options, model=checked["model"], checkpoint=checked["checkpoint"], tiny=False)
        models[name] = dataclasses.replace(choice, model_options={})
        check_model_choice(models[name])
    return models


def unmet_needs(debiaser: Debiaser, given: frozenset[str], source: str) -> str | None:
    """Why ``debiaser`` cannot be fitted on data ``source``, which gives the :class:`FitData` fields ``given``
    (:func:`~vlbias.mitigation.fit_data.fields_given`): the first field of its ``NEEDS`` missing, named; ``None``
    when it can."""
    missing = [name for name in debiaser.NEEDS if name not in given]
    if not missing:
        return None
    hint = " (give it in a prompt file: see vlbias.mitigation.fit_data)" if source == "biasworld" else ""
    return f"Debiaser {debiaser.name!r} needs `{missing[0]}`, which data {source!r} does not give{hint}."


@dataclass
class Fold:
    """One fold of a run: the world it is measured on, each method's (and ``none``'s) results, the numbers measured
    on its embeddings directly (zero-shot accuracy and R@K, each with its interval), and the debiasers fitted on it."""

    world: dict
    fit_data: FitData
    measured: dict[str, dict[str, tuple[Results, list[dict]]]] = field(default_factory=dict)
    scores: dict[str, dict[str, Interval]] = field(default_factory=dict)
    fitted: dict[str, Debiaser] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # method -> why its fit on this fold's data failed

    def drop(self, method: str) -> None:
        """Leave ``method`` out of this fold's results (it failed on another fold: every row has the same folds)."""
        for held in (self.measured, self.scores, self.fitted):
            held.pop(method, None)

    def rows(self) -> list[dict[str, object]]:
        """:func:`~vlbias.workflows.comparison.comparison_rows` of this fold."""
        results = {method: {suite: r for suite, (r, _) in suites.items()} for method, suites in self.measured.items()}
        return comparison_rows(results, self.scores)


def debias(options: DebiasOptions) -> dict:
    """Fit and measure ``options.method`` (one, a list, or ``'all'``) and write ``options.out`` (module docstring);
    returns the content of ``debias.json``."""
    check_model_choice(options)
    debiasers = checked_debiasers(options)
    trained = checked_trained_models(options)
    unknown = sorted(set(options.suite_options) - set(options.suites))
    if unknown:
        raise ConfigError(f"`suite_options` names suites that do not run: {unknown}; the suites are {options.suites}.")
    suite_options = {s: check_suite_options(s, options.suite_options.get(s), tiny=options.tiny) for s in options.suites}
    refusals = {m: unmet_needs(d, fields_given(options.data), options.data) for m, d in debiasers.items()}
    blocking = [reason for reason in refusals.values() if reason is not None]
    if blocking and options.method != "all":
        raise InputError(blocking[0])
    out = DEBIAS_FOLDER.check(options.out)
    worlds = [
        {**dataclasses.asdict(options.biasworld), "seed": options.biasworld.seed + k} for k in range(options.folds)
    ]
    with torch_threads(options.threads) as threads:
        suites = [
            {name: build_suite(o, options.suite_data, world) for name, o in suite_options.items()} for world in worlds
        ]
        for suite in suites[0].values():
            for model in [options.model, *(choice.model for choice in trained.values())]:
                _check_embedding_suite(suite, model)
            _warn_overlap(options, suite_options[suite.name])
        corpus = _caption_file(options)
        print(f"fitting {', '.join(debiasers)} on {options.data}; writing {out}", flush=True)  # choices all checked
        adapter = load_model(options)
        config = {**run_config(options, adapter, threads), "suite_data": options.suite_data}
        trained_adapters = {name: (choice, load_model(choice)) for name, choice in trained.items()}
        trained_configs = {
            name: {**run_config(choice, model, threads), "suite_data": options.suite_data}
            for name, (choice, model) in trained_adapters.items()
        }
        folds = [Fold(world, _fit_data(options, adapter, world)) for world in worlds]
        for reason in blocking:  # with 'all' only: one method refused is refused alone
            logger.warning(f"warning: {reason} It is listed in the table as not fitted.")
        fitted = {m: d for m, d in debiasers.items() if refusals[m] is None}
        for k, (fold, fold_suites) in enumerate(zip(folds, suites, strict=True)):
            fold_config = {**config, "biasworld": fold.world}
            world = BiasWorld(**fold.world)
            fold_corpus = biasworld_captions(world) if options.captions == BIASWORLD_CAPTIONS else corpus
            _run_fold(fold, world, fold_corpus, fold_suites, adapter, fitted, options, fold_config, options.seed + k)
            for name, (choice, model) in trained_adapters.items():  # measured as the model itself is
                evaluation = _evaluation_inputs(model, world, fold_corpus, options.batch_size)
                fold_config = {**trained_configs[name], "biasworld": fold.world}
                fold.measured[name] = _measure(fold_suites, model, choice, fold_config, options.seed + k)
                fold.scores[name] = _scores(evaluation, None, options.seed + k)
        for fold in folds:  # a method whose fit failed on any fold is in the table as not fitted, with the reason
            for method, reason in fold.failed.items():
                if refusals[method] is None:
                    logger.warning(f"warning: {reason} It is listed in the table as not fitted.")
                refusals[method] = refusals[method] or reason
        for method in [m for m, reason in refusals.items() if reason is not None]:
            for fold in folds:
                fold.drop(method)
        summary = _summary(options, adapter, folds, refusals)

        write_debias_folder(out, summary, lambda folder: _write_parts(folder, options, adapter, folds, summary))
    return summary


def _write_parts(folder: Path, options: DebiasOptions, adapter: ModelAdapter, folds: list[Fold], summary: dict) -> None:
    """Write the run's parts into ``folder`` (:mod:`vlbias.workflows.debias_outputs` lists them)."""
    if not options.compare:
        (method,) = folds[0].fitted
        write_debiased_model(folder, adapter, folds[0].fitted[method])
        write_measurements(folder / "before", folds[0].measured[NO_METHOD])
        write_measurements(folder / "after", folds[0].measured[method])
        return
    for k, fold in enumerate(folds):
        for method, results in fold.measured.items():
            place = folder / "methods" / method / (f"fold{k}" if len(folds) > 1 else "")
            write_measurements(place, results)
            if method in fold.fitted:
                fold.fitted[method].save(place / "debiaser")
    rows = summary["comparison"]
    (folder / "compare.csv").write_text(_table(rows))
    (folder / "compare.png").write_bytes(plot_comparison(rows, headline_bias(rows[0])))
    if len(folds) > 1:
        (folder / "compare_folds.csv").write_text(_table(summary["folds"]))


def _run_fold(
    fold: Fold,
    world: BiasWorld,
    corpus: CaptionCorpus | None,
    suites: Mapping[str, Suite],
    adapter: ModelAdapter,
    debiasers: Mapping[str, Debiaser],
    options: DebiasOptions,
    config: dict,
    seed: int,
) -> None:
    """Measure ``adapter`` on ``fold`` (its ``world``; R@K on ``corpus`` when one is given), then fit a new debiaser of
    each method on its data and measure it."""
    evaluation = _evaluation_inputs(adapter, world, corpus, options.batch_size)
    fold.measured[NO_METHOD] = _measure(suites, adapter, options, config, seed)
    fold.scores[NO_METHOD] = _scores(evaluation, None, seed)
    for method, unfitted in debiasers.items():
        torch.manual_seed(seed)
        try:
            debiaser = type(unfitted)(unfitted.options).fit(fold.fit_data)
        except InputError as err:  # the data cannot fit it (e.g. too few references); one line in the compare mode
            if not options.compare:
                raise
            fold.failed[method] = f"Debiaser {method!r} could not be fitted on world {fold.world['seed']}: {err}"
            continue
        fold.fitted[method] = debiaser
        view = DebiasedEmbeddings(adapter, debiaser)
        fold.measured[method] = _measure(suites, view, options, {**config, "debiaser": method}, seed)
        fold.scores[method] = _scores(evaluation, debiaser, seed)


def _caption_file(options: DebiasOptions) -> CaptionCorpus | None:
    """The caption corpus of a file given as ``captions``, read (and refused by name) before the model is loaded;
    ``None`` for BiasWorld's (one per fold) or none."""
    if options.captions in (None, BIASWORLD_CAPTIONS):
        return None
    return file_captions(options.captions, options.caption_images)


def _fit_data(options: DebiasOptions, adapter: ModelAdapter, world: dict) -> FitData:
    """The fitting data embedded by ``adapter``; a model already debiased whose debiaser removed the span of the
    fitting texts (debiasing its output again on the same prompts) is refused saying so."""
    try:
        if options.data == "biasworld":
            return biasworld_fit_data(adapter, BiasWorld(**world), options.split, options.batch_size)
        return file_fit_data(adapter, options.data, options.batch_size)
    except RemovedSpanError as err:
        if not isinstance(adapter, DebiasedEmbeddings):
            raise
        name = adapter.debiaser.name
        same = " (the method fitted now)" if name in options.methods else ""
        raise InputError(
            f"Model {options.model!r} {options.checkpoint!r} is already debiased by {name!r}{same}: its debiaser "
            f"removed the span of these fitting texts, so it embeds nothing of them ({err}); debias the model it was "
            "made from (its inner model, the checkpoint's inner/ folder) instead, or fit on other data (a prompt "
            "file as --data)."
        ) from err


def _check_embedding_suite(suite: Suite, model: str) -> None:
    """A suite that does not probe embeddings cannot see a debiaser's transform: refused by name."""
    if suite.capability is not Capability.EMBED:
        raise ConfigError(
            f"Suite {suite.name!r} probes {suite.capability.value}, not embeddings, so it cannot measure a debiaser; "
            "give it options that probe embeddings (e.g. probe: embed) or leave it out of `suites`."
        )
    require_capability(adapter_class(model), suite.capability, suite.name, suite.capability_hint)


def _warn_overlap(options: DebiasOptions, suite_options: object) -> None:
    """Warn when a suite measures the BiasWorld split the methods are fitted on."""
    if options.data != "biasworld" or options.suite_data != "biasworld":
        return
    fitted_on = selection({"data": "biasworld", "split": options.split, "seed": options.biasworld.seed})
    where = same_selection(fitted_on, "biasworld", getattr(suite_options, "split", None), options.biasworld.seed)
    if where is not None:
        logger.warning(
            f"warning: suite {suite_options.SUITE!r} measures {where} the debiasers are fitted on: the number "
            "overstates their effect; measure on another split (fit on 'val', measure on 'test')."
        )


def _measure(
    suites: Mapping[str, Suite], adapter: ModelAdapter, options: DebiasOptions, config: dict, seed: int
) -> dict[str, tuple[Results, list[dict]]]:
    """Each suite's results and item table for ``adapter``."""
    measured = {}
    for name, suite in suites.items():
        results, items = run_suite(
            suite,
            adapter,
            model=options.model,
            checkpoint=options.checkpoint,
            seed=seed,
            config={**config, "suite": name, "suite_options": options.suite_options.get(name, {})},
        )
        refuse_empty(results, options.suite_data)
        measured[name] = (results, items)
    return measured


def _evaluation_inputs(adapter: ModelAdapter, world: BiasWorld, corpus: CaptionCorpus | None, batch_size: int) -> dict:
    """BiasWorld's ``test`` images and activity prompts embedded by ``adapter``, with the prompts' classes and the
    images' labels: what the zero-shot accuracy of every method is computed on; and under ``corpus`` the caption
    corpus embedded by ``adapter`` (:meth:`~vlbias.workflows.caption_corpus.CaptionCorpus.embed`), for R@K."""
    texts = [phrase for activity in ACTIVITIES for phrase in activity_phrases(activity)]
    classes = [k for k, activity in enumerate(ACTIVITIES) for _ in activity_phrases(activity)]
    return {
        "images": unit_image_embeddings(adapter, world.images("test"), batch_size),
        "texts": texts,
        "prompts": text_encoder(adapter)(texts),
        "classes": torch.tensor(classes),
        "labels": torch.tensor([ACTIVITIES.index(item.activity) for item in world.items("test")]),
        "corpus": None if corpus is None else corpus.embed(adapter, batch_size),
    }


def _scores(evaluation: dict, debiaser: Debiaser | None, seed: int) -> dict[str, Interval]:
    """The zero-shot accuracy and, with a caption corpus, the R@K of ``evaluation``'s embeddings, transformed by
    ``debiaser`` when one is given."""
    images, prompts = evaluation["images"], evaluation["prompts"]
    if debiaser is not None:
        images, prompts = debiaser.transform_images(images), debiaser.transform_texts(prompts, evaluation["texts"])
    scores = {ACCURACY: accuracy_with_interval(images, prompts, evaluation["classes"], evaluation["labels"], seed)}
    corpus = evaluation["corpus"]
    if corpus is not None:
        images, captions = corpus["images"], corpus["captions"]
        if debiaser is not None:
            images, captions = debiaser.transform_images(images), debiaser.transform_texts(captions, corpus["texts"])
        scores |= recall_with_intervals(images, captions, corpus["caption_to_image"], seed)
    return scores


def _summary(
    options: DebiasOptions, adapter: ModelAdapter, folds: list[Fold], refusals: Mapping[str, str | None]
) -> dict:
    """``debias.json``'s content: ``comparison`` holds the rows of ``compare.csv`` (one fold's, or the means over
    the folds, :func:`~vlbias.workflows.comparison.fold_means`), ``folds`` each fold's rows."""
    import vlbias

    per_fold = [{"fold": k, **row} for k, fold in enumerate(folds) for row in fold.rows()]
    rows = folds[0].rows() if len(folds) == 1 else fold_means([fold.rows() for fold in folds], options.seed)
    rows += [{"method": method, "not_fitted": reason} for method, reason in refusals.items() if reason is not None]
    return {
        "methods": {
            method: {
                "method": method,
                "options": dataclasses.asdict(debiaser.options),
                "needs": list(debiaser.NEEDS),
                "modifies": sorted(debiaser.MODIFIES),
                "state": {name: list(t.shape) for name, t in debiaser.fitted_state().items()},
                "linear": {m: debiaser.linear_map(m) is not None for m in sorted(debiaser.MODIFIES)},
            }
            for method, debiaser in folds[0].fitted.items()
        },
        "not_fitted": {method: reason for method, reason in refusals.items() if reason is not None},
        "trained_models": options.trained_models,
        "model": options.model,
        "checkpoint": options.checkpoint,
        "tiny": options.tiny,
        "data": dict(folds[0].fit_data.description or {}),
        "suite_data": options.suite_data,
        "suites": options.suites,
        "suite_options": options.suite_options,
        "captions": options.captions,
        "caption_images": options.caption_images,
        "seed": options.seed,
        "biasworld": dataclasses.asdict(options.biasworld),
        "n_folds": len(folds),
        "fold_worlds": [fold.world["seed"] for fold in folds],
        "vlbias_version": vlbias.__version__,
        "environment": environment(adapter.device),
        "comparison": rows,
        "folds": per_fold,
    }


def _table(rows: list[dict]) -> str:
    import pandas as pd

    return pd.DataFrame(rows).to_csv(index=False)
