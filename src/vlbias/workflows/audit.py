"""``vlbias audit``: every suite a model's capabilities allow, on every data set found under a folder and on
BiasWorld, then the report. One command from a checkpoint to a readable audit.

The model is loaded once. Each suite then runs as ``vlbias measure`` would run it (same
:func:`~vlbias.suites.run.build_suite` / :func:`~vlbias.suites.run.run_suite`, same results schema), and
writes ``<out>/results/<suite>-<dataset>/<suite>.json`` with its item table. ``<out>/audit.json`` lists every
(suite, data set) with its status, and the report of these files goes to ``<out>/report``
(:func:`vlbias.report.build_report` shows the audit table from ``audit.json``). The folder is written as a unit
(:data:`AUDIT_FOLDER`, :class:`vlbias.atomic.OutputFolder`): whole beside ``<out>``, then put in its place in one
step, so a reader, or an audit killed at any moment, finds the earlier audit whole or the new one whole. ``<out>``
must be new, empty or an earlier audit's folder (checked before the model loads); a folder holding anything else
is refused, never replaced.

**Probes.** A suite whose probe is an option (:data:`PROBE_OPTIONS`) takes the first capability the model has,
in the order given there (e.g. mmbias: ``embed``, else ``match``); the others need their one capability.

**Data sets.** A data set is ``data_root`` itself when it holds a reader's expected file directly, else each of
its immediate sub-folders that holds one (:data:`DATA_MARKERS`): ``textual_phrases.json`` (MMBias),
``VLStereoSet.csv`` (VLStereoSet), ``*.jsonl`` test specs at any depth (SEAT, Grounded-WEAT/SEAT; the root
only with specs directly in it), ``annotations.csv`` (VL-Bias), a folder named after an entity of the
shipped entity-association spec (its image layout), and a caption file for ``retrieval_bias``: a Karpathy split
JSON (``dataset_*.json``, e.g. ``dataset_coco.json``) or, where there is none, an ALBEF/LAVIS test-split
annotation JSON (``*_test.json``, e.g. ``coco_karpathy_test.json``), its images under the file's folder unless
``suite_options`` give ``image_root``; a face-attribute folder in its release layout
(:func:`~vlbias.data.face_datasets.detect_face_dataset`) for ``gallery_skew`` (FairFace, CelebA or UTKFace) and for
``zero_shot_fairness`` (FairFace or CelebA), whose task is then the data set's first (race on FairFace, the attribute
task on CelebA) unless ``suite_options`` name one; ``bias_qa`` data (a ``*.jsonl`` question file whose lines hold
``options`` and ``kinds``, :mod:`vlbias.data.bias_qa`, each file a data set; a folder of SB-Bench's Parquet shards or
with VLBiasBench's ``close-ended/json/``), ``counterfactual_answers`` data (a ``*.jsonl`` question-set file whose
lines hold ``set`` and ``options``, :mod:`vlbias.data.counterfactual_questions`, each file a data set; a PAIRS folder;
each GenderBias-VL base/cf pair), the layouts of :mod:`vlbias.data.chat_question_layouts`, and an ``open_generation``
prompt file (the question-set format, ``options`` optional: each question-set file is one too). A data set is named
after its folder
(and its file, when a folder holds several).

**Status** of each (suite, data set): ``measured``; ``not applicable`` (the model lacks the capability);
``data absent`` (no folder holds the suite's files, or its reader refused them with an
:class:`~vlbias.errors.InputError`, e.g. VLStereoSet without its image folder); ``failed`` (the run raised: the
error's first line). A suite is listed once per data source that applies to it: BiasWorld where it reads BiasWorld
stimuli, each data set found, and one ``data absent`` line where a data root was given and holds none of its data
sets, or where the suite measured nothing else (no data root given and no BiasWorld stimuli, or they failed).

**Quick by default** (:data:`QUICK_STATISTICS`, :data:`QUICK_OPTIONS`): 1,000 permutations and 200 bootstrap
resamples in every suite (the statistics each suite uses) and CounterBias attacks of 3 PGD steps, and with ``tiny``
a tiny text model for entity association (no hub).
``full=True`` keeps the suites' own defaults, the papers' settings (10,000 permutations, 1,000 resamples,
10 PGD steps). ``suite_options`` (``{suite: {option: value}}``) go over either.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import vlbias
from vlbias.atomic import OutputFolder
from vlbias.data.bias_qa import is_bias_qa_file
from vlbias.data.biasworld import BiasWorld
from vlbias.data.chat_question_layouts import (
    BIAS_QA_LAYOUTS,
    SETS_LAYOUTS,
    bias_qa_sources,
    question_set_sources,
)
from vlbias.data.counterfactual_questions import is_counterfactual_questions_file, is_generation_prompts_file
from vlbias.data.entity_association import read_spec
from vlbias.data.face_datasets import EXPECTED as FACE_DATA
from vlbias.data.face_datasets import detect_face_dataset
from vlbias.data.mmbias import PHRASES_FILE
from vlbias.data.vl_bias import ANNOTATIONS
from vlbias.data.vlstereoset import CSV_NAME
from vlbias.errors import CapabilityError, ConfigError, InputError, VlbiasError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.report import build_report
from vlbias.results import write_results
from vlbias.runtime.threads import torch_threads
from vlbias.suites.base import Suite
from vlbias.suites.options import check_suite_options, with_statistics_preset
from vlbias.suites.registry import list_suites, suite_class
from vlbias.suites.run import build_suite, run_suite
from vlbias.suites.zero_shot_fairness_options import face_data_kind
from vlbias.workflows.loaded_model import check_model_choice, load_model, refuse_empty, run_config, seed_everything
from vlbias.workflows.options import AuditOptions

logger = logging.getLogger(__name__)

MEASURED, NOT_APPLICABLE, DATA_ABSENT, FAILED = "measured", "not applicable", "data absent", "failed"
AUDIT_FOLDER = OutputFolder("vlbias audit", "audit.json", frozenset({"audit.json", "results", "report"}))

# suite -> (the option that picks its probe, {capability: option value} in order of preference)
PROBE_OPTIONS: dict[str, tuple[str, dict[Capability, str]]] = {
    "mmbias": ("probe", {Capability.EMBED: "embed", Capability.MATCH: "match"}),
    "vlstereoset": ("probe", {Capability.EMBED: "embed", Capability.MATCH: "match"}),
    "weat": ("source", {Capability.TOKEN_STATES: "token_states", Capability.EMBED: "embed"}),
}

#: Without ``full``: the statistics preset of every suite (:class:`~vlbias.options.StatisticsOptions` fields; each
#: suite takes those it uses), and the other quick options per suite.
QUICK_STATISTICS: dict[str, int] = {"n_permutations": 1_000, "n_bootstrap": 200}
QUICK_OPTIONS: dict[str, dict] = {"counterbias": {"attack": {"steps": 3}}}


def _holds(name: str) -> Callable[[Path, Path], list[Path]]:
    """The test of a folder holding the file ``name``: the folder is the data set."""
    return lambda folder, root: [folder] if (folder / name).is_file() else []


def _specs(folder: Path, root: Path) -> list[Path]:
    """A folder of SEAT/Grounded-WEAT ``*.jsonl`` specs (question files of ``bias_qa`` and
    ``counterfactual_answers`` and generation prompts of ``open_generation`` are not specs)."""
    specs = folder.glob("*.jsonl") if folder == root else folder.rglob("*.jsonl")
    questions = (is_bias_qa_file, is_counterfactual_questions_file, is_generation_prompts_file)
    return [folder] if any(not any(check(path) for check in questions) for path in specs) else []


def _question_files(folder: Path, root: Path) -> list[Path]:
    """``bias_qa`` data sets in ``folder`` (:func:`~vlbias.data.chat_question_layouts.bias_qa_sources`)."""
    return bias_qa_sources(folder)


def _counterfactual_files(folder: Path, root: Path) -> list[Path]:
    """``counterfactual_answers`` data sets in ``folder``
    (:func:`~vlbias.data.chat_question_layouts.question_set_sources`)."""
    return question_set_sources(folder)


def _generation_files(folder: Path, root: Path) -> list[Path]:
    """``open_generation`` prompt files in ``folder`` (:func:`~vlbias.data.counterfactual_questions.
    is_generation_prompts_file`: counterfactual question-set files among them): each is a data set."""
    return [path for path in sorted(folder.glob("*.jsonl")) if is_generation_prompts_file(path)]


def _entity_folders(folder: Path, root: Path) -> list[Path]:
    return [folder] if any((folder / entity).is_dir() for entity in read_spec().entities) else []


def _face_folders(folder: Path, root: Path) -> list[Path]:
    """A FairFace, CelebA or UTKFace folder in its release layout."""
    return [folder] if detect_face_dataset(folder) else []


def _classified_face_folders(folder: Path, root: Path) -> list[Path]:
    """A FairFace or CelebA folder: the face data sets whose labels the zero-shot fairness tasks classify."""
    return [folder] if face_data_kind(folder) else []


def _caption_files(folder: Path, root: Path) -> list[Path]:
    """Karpathy split files in ``folder``, else its ALBEF/LAVIS test-split files: each is a data set."""
    return sorted(folder.glob("dataset_*.json")) or sorted(folder.glob("*_test.json"))


# suite -> (what its reader expects, the data paths a folder holds for it, given (folder, data root))
DATA_MARKERS: dict[str, tuple[str, Callable[[Path, Path], list[Path]]]] = {
    "mmbias": (PHRASES_FILE, _holds(PHRASES_FILE)),
    "vlstereoset": (CSV_NAME, _holds(CSV_NAME)),
    "weat": ("*.jsonl test specs", _specs),
    "counterbias": (ANNOTATIONS, _holds(ANNOTATIONS)),
    "entity_association": ("<entity>/<group>/ image folders", _entity_folders),
    "retrieval_bias": ("a Karpathy dataset_*.json or an ALBEF/LAVIS *_test.json caption file", _caption_files),
    "zero_shot_fairness": (
        "FairFace's fairface_label_<split>.csv or CelebA's list_attr_celeba.txt",
        _classified_face_folders,
    ),
    "gallery_skew": (FACE_DATA, _face_folders),
    "bias_qa": (f"{BIAS_QA_LAYOUTS} (vlbias.data.chat_question_layouts)", _question_files),
    "counterfactual_answers": (f"{SETS_LAYOUTS} (vlbias.data.chat_question_layouts)", _counterfactual_files),
    "open_generation": (
        "a *.jsonl file of image sets with a prompt (vlbias.data.counterfactual_questions, options optional)",
        _generation_files,
    ),
}


@dataclass
class Entry:
    """One (suite, data set) of an audit: its status, why (when not measured), the probe option used and the
    results file (relative to the audit's folder)."""

    suite: str
    dataset: str
    status: str
    reason: str = ""
    options: dict = field(default_factory=dict)
    results: str | None = None


def find_datasets(suite: str, data_root: Path | None) -> list[tuple[str, Path]]:
    """``(name, path)`` of every data set under ``data_root`` that ``suite``'s reader can read (module docstring):
    the folder, or the file in it that the suite reads."""
    if data_root is None or suite not in DATA_MARKERS:
        return []
    _, locate = DATA_MARKERS[suite]
    at_root = locate(data_root, data_root)
    folders = [data_root] if at_root else [f for f in sorted(data_root.iterdir()) if f.is_dir()]
    found = []
    for folder in folders:
        paths = at_root if folder == data_root else locate(folder, data_root)
        found += [(folder.name if len(paths) == 1 else f"{folder.name}-{path.stem}", path) for path in paths]
    return found


def probe_option(suite: str, adapter: ModelAdapter) -> dict | None:
    """The option that makes ``suite`` use a capability ``adapter`` has (``{}`` for a one-probe suite that
    fits), or ``None`` when it has none the suite can use."""
    if suite in PROBE_OPTIONS:
        option, values = PROBE_OPTIONS[suite]
        usable = [value for capability, value in values.items() if capability in adapter.capabilities]
        return {option: usable[0]} if usable else None
    needed = suite_class(suite).capability  # a suite whose probe is an option unknown here is refused when it runs
    return None if isinstance(needed, Capability) and needed not in adapter.capabilities else {}


def _needed(suite: str) -> str:
    if suite in PROBE_OPTIONS:
        return " or ".join(repr(capability.value) for capability in PROBE_OPTIONS[suite][1])
    return repr(suite_class(suite).capability.value)


def _reads_biasworld(suite: str) -> bool:
    return suite_class(suite).from_biasworld.__func__ is not Suite.from_biasworld.__func__


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    line = text[0] if text else ""
    return line if isinstance(err, VlbiasError) else f"{type(err).__name__}: {line}"


def audit(options: AuditOptions) -> Path:
    """Audit ``options.model`` (module docstring); write ``<out>/results/``, ``<out>/audit.json`` and
    ``<out>/report``; return the path of ``audit.json``. ``options.suites`` limits the suites (default all
    registered)."""
    suites = list_suites() if options.suites is None else list(options.suites)
    unknown = sorted(set(suites) - set(list_suites()))
    if unknown:
        raise ConfigError(f"Expected `suites` from {', '.join(list_suites())} but got unknown {unknown}.")
    suite_options = dict(options.suite_options)
    strange = sorted(set(suite_options) - set(list_suites()))
    if strange or not all(isinstance(value, dict) for value in suite_options.values()):
        raise ConfigError(
            f"Expected `suite_options` as {{suite: {{option: value}}}} with suites from {', '.join(list_suites())} "
            f"but got {suite_options!r}."
        )
    idle = sorted(set(suite_options) - set(suites))
    if idle:
        raise ConfigError(
            f"`suite_options` given for suite(s) {idle} that this audit does not run (--suites {suites}): add them "
            "to --suites or remove their options."
        )
    root = None if options.data_root is None else Path(options.data_root)
    if root is not None and not root.is_dir():
        raise ConfigError(f"Data root {str(root)!r} is not a directory; expected a folder of public data sets.")
    check_model_choice(options)
    chosen = {suite: _chosen_options(suite, options.full, suite_options.get(suite, {})) for suite in suites}
    for suite, mapping in chosen.items():  # every suite's options refused now, before the model loads
        check_suite_options(suite, mapping, tiny=options.tiny)
    out = AUDIT_FOLDER.check(options.out)
    world = BiasWorld(**dataclasses.asdict(options.biasworld))
    with torch_threads(options.threads) as threads:
        adapter = load_model(options)
        config = {**run_config(options, adapter, threads), "audit": True, "full": options.full}

        def write(folder: Path) -> None:
            entries = []
            for suite in suites:
                entries += _audit_suite(suite, adapter, chosen[suite], root, world, folder, options.seed, config)
            summary = {
                "model": options.model,
                "checkpoint": options.checkpoint,
                "tiny": options.tiny,
                "data_root": None if root is None else str(root),
                "full": options.full,
                "seed": options.seed,
                "vlbias_version": vlbias.__version__,
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "entries": [asdict(entry) for entry in entries],
            }
            (folder / "audit.json").write_text(json.dumps(summary, indent=2))
            measured = [folder / entry.results for entry in entries if entry.results is not None]
            build_report([folder / "audit.json", *measured], folder / "report")

        return AUDIT_FOLDER.replace(out, write) / "audit.json"


def _chosen_options(suite: str, full: bool, given: dict) -> dict:
    """The options an audit gives ``suite``: the user's, over the quick settings unless ``full``."""
    if full:
        return dict(given)
    return with_statistics_preset(suite, {**QUICK_OPTIONS.get(suite, {}), **given}, QUICK_STATISTICS)


def _audit_suite(
    suite: str,
    adapter: ModelAdapter,
    options: dict,
    root: Path | None,
    world: BiasWorld,
    out: Path,
    seed: int,
    config: dict,
) -> list[Entry]:
    """The entries of one suite: each data set it can read, measured or with the reason it was not."""
    probe = probe_option(suite, adapter)
    if probe is None:
        have = ", ".join(sorted(c.value for c in adapter.capabilities))
        reason = f"needs capability {_needed(suite)}; model {adapter.name!r} has {have}"
        return [Entry(suite, "-", NOT_APPLICABLE, reason)]
    options = {**probe, **options}
    entries = []
    if _reads_biasworld(suite):
        entries.append(_measure_one(suite, "biasworld", world, adapter, options, out, seed, config))
    found = find_datasets(suite, root)
    for name, folder in found:
        entries.append(_measure_one(suite, name, folder, adapter, options, out, seed, config))
    if found or root is None and any(entry.status == MEASURED for entry in entries):
        return entries  # a suite measured on BiasWorld, with no data root asked for, lacks nothing
    if suite not in DATA_MARKERS:
        where = f"vlbias audit knows no public data format of suite {suite!r}"
    elif root is None:
        where = "no data root given"
    else:
        where = f"no folder of {str(root)!r} holds {DATA_MARKERS[suite][0]}"
    if not _reads_biasworld(suite):
        where = f"{where}, and the suite reads no BiasWorld stimuli"
    entries.append(Entry(suite, "-", DATA_ABSENT, where, options=probe))
    return entries


def _measure_one(
    suite: str,
    dataset: str,
    data: Path | BiasWorld,
    adapter: ModelAdapter,
    options: dict,
    out: Path,
    seed: int,
    config: dict,
) -> Entry:
    """Build and run ``suite`` on ``data`` as ``vlbias measure`` does, write its results; the entry says what
    happened (a refusal of the model is ``not applicable``, of the data ``data absent``, anything else ``failed``)."""
    shown = {key: value for key, value in options.items() if key in ("probe", "source")}
    where = dataset if dataset == "biasworld" else str(data)
    try:
        built = build_suite(check_suite_options(suite, options, tiny=config["tiny"]), data)
        seed_everything(seed)
        measured_config = {**config, "suite": suite, "data": where, "suite_options": options}
        results, items = run_suite(
            built, adapter, model=config["model"], checkpoint=config["checkpoint"], seed=seed, config=measured_config
        )
        refuse_empty(results, where)
        path = write_results(out / "results" / f"{suite}-{dataset}", results, items)
        built.write_beside(path, items)
    except CapabilityError as err:
        return Entry(suite, dataset, NOT_APPLICABLE, _one_line(err), shown)
    except InputError as err:
        return Entry(suite, dataset, DATA_ABSENT, _one_line(err), shown)
    except Exception as err:  # one suite's failure is one line of the audit, not the end of it
        logger.debug("%s on %s failed", suite, dataset, exc_info=True)
        return Entry(suite, dataset, FAILED, _one_line(err), shown)
    return Entry(suite, dataset, MEASURED, "", shown, path.relative_to(out).as_posix())
