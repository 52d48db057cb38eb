"""Step 1 and 2 of ``vlbias debias`` (:mod:`vlbias.workflows.debias`): every choice checked before any data or model
is read, and the suites built, into one :class:`DebiasPlan`."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.debiaser import Debiaser
from vlbias.mitigation.fit_data import fields_given
from vlbias.mitigation.outputs import same_selection, selection
from vlbias.mitigation.registry import debiaser_class
from vlbias.models.base import Capability, require_capability
from vlbias.models.catalog import adapter_class
from vlbias.options import check_options
from vlbias.suites.base import Suite
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite
from vlbias.workflows.caption_corpus import BIASWORLD_CAPTIONS, CaptionCorpus, file_captions
from vlbias.workflows.comparison import NO_METHOD
from vlbias.workflows.debias_outputs import DEBIAS_FOLDER
from vlbias.workflows.loaded_model import check_model_choice
from vlbias.workflows.options import DebiasOptions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainedModel:
    """A model debiased by training, a row of the compare mode (``trained_models``).

    Args:
        model: Its adapter name (an EMBED model, e.g. ``prompt_array``).
        checkpoint: Its weights (e.g. the ``model/`` folder ``vlbias fit`` exports).
    """

    model: str
    checkpoint: str


@dataclass
class DebiasPlan:
    """What a checked ``vlbias debias`` run will do: ``debiasers`` (new, unfitted, one per method), ``refusals`` (per
    method, why the data cannot fit it, or ``None``), ``trained`` (per ``trained_models`` row, the options that load
    it), ``worlds`` (each fold's BiasWorld config), ``suites`` (each fold's built suites), ``corpus`` (a caption file's
    corpus, or ``None``) and ``out`` (the checked output folder)."""

    out: Path
    debiasers: dict[str, Debiaser]
    refusals: dict[str, str | None]
    trained: dict[str, DebiasOptions]
    worlds: list[dict]
    suites: list[dict[str, Suite]]
    corpus: CaptionCorpus | None

    @property
    def fittable(self) -> dict[str, Debiaser]:
        """The debiasers the data can fit."""
        return {method: d for method, d in self.debiasers.items() if self.refusals[method] is None}


def plan_debias(options: DebiasOptions) -> DebiasPlan:
    """Check every choice of ``options`` and build the suites (the module docstring of
    :mod:`vlbias.workflows.debias`, steps 1 and 2); a method the data cannot fit is refused naming the field, or with
    ``'all'`` kept in ``refusals`` (warned and listed as not fitted)."""
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
    suites = [
        {name: build_suite(o, options.suite_data, world) for name, o in suite_options.items()} for world in worlds
    ]
    for suite in suites[0].values():
        for model in [options.model, *(choice.model for choice in trained.values())]:
            check_embedding_suite(suite, model)
        warn_overlap(options, suite_options[suite.name])
    corpus = None  # BiasWorld's captions are one corpus per fold (made there); a file's is read, or refused, now
    if options.captions not in (None, BIASWORLD_CAPTIONS):
        corpus = file_captions(options.captions, options.caption_images)
    return DebiasPlan(out, debiasers, refusals, trained, worlds, suites, corpus)


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


def check_embedding_suite(suite: Suite, model: str) -> None:
    """A suite that does not probe embeddings cannot see a debiaser's transform: refused by name."""
    if suite.capability is not Capability.EMBED:
        raise ConfigError(
            f"Suite {suite.name!r} probes {suite.capability.value}, not embeddings, so it cannot measure a debiaser; "
            "give it options that probe embeddings (e.g. probe: embed) or leave it out of `suites`."
        )
    require_capability(adapter_class(model), suite.capability, suite.name, suite.capability_hint)


def warn_overlap(options: DebiasOptions, suite_options: object) -> None:
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
