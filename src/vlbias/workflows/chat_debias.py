"""``vlbias debias`` on a chat VLM: fit its training-free debiasers (:mod:`vlbias.mitigation.chat_registry`) and
measure what they change with the chat suites, on the same questions for every method.

In the order it runs:

1. every choice is checked before the model is loaded: each method's name and options (against its ``OPTIONS``
   dataclass), each suite's options, the suites' capability (ANSWER: ``bias_qa``, ``counterfactual_answers``),
   the counterfactual question file ``data`` (read; what activation steering is fitted on) and each suite's
   question file under ``suite_data`` (the file itself, or in a folder the one file the suite's reader finds, as
   ``vlbias audit`` finds it);
2. the model is loaded and measured by each suite (row ``none``);
3. each method is fitted (:func:`~vlbias.mitigation.chat_debiaser.fit_chat_debiaser`; torch's generators seeded
   with the run's seed before each) and the model it makes (:meth:`~vlbias.mitigation.chat_debiaser.ChatDebiaser.
   wrap`) measured the same way. In the compare mode a method the data cannot fit (one line) is listed as not
   fitted with the reason;
4. the output folder is written as a unit (:mod:`vlbias.workflows.debias_outputs`): one method's ``before/``,
   ``after/`` and ``debiaser/`` (its :meth:`~vlbias.mitigation.chat_debiaser.ChatDebiaser.save`: activation
   steering's export, which :func:`~vlbias.mitigation.activation_steering.load_steering` reads back onto the base
   model), or the compare mode's ``methods/<method>/`` and ``compare.csv``; ``debias.json`` records every method
   with every option (the instruction's text included), the data, the suites and the seed.
"""

from __future__ import annotations

from pathlib import Path

import torch

from vlbias.data.counterfactual_questions import read_counterfactual_questions
from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.chat_debiaser import ChatDebiaser, fit_chat_debiaser
from vlbias.mitigation.chat_registry import chat_debiaser_class
from vlbias.models.base import Capability, ModelAdapter
from vlbias.options import check_options
from vlbias.runtime.environment import environment
from vlbias.runtime.threads import torch_threads
from vlbias.suites.base import Suite
from vlbias.suites.options import check_suite_options
from vlbias.suites.registry import suite_class
from vlbias.suites.run import build_suite
from vlbias.workflows.audit import find_datasets
from vlbias.workflows.comparison import NO_METHOD, comparison_rows
from vlbias.workflows.debias_fold import measure_suites
from vlbias.workflows.debias_outputs import DEBIAS_FOLDER, table_csv, write_debias_folder, write_measurements
from vlbias.workflows.loaded_model import load_model, run_config
from vlbias.workflows.options import DebiasOptions


def chat_debias(options: DebiasOptions) -> dict:
    """Fit and measure ``options.method`` on the chat model ``options.model`` and write ``options.out`` (module
    docstring); returns the content of ``debias.json``."""
    unknown = sorted(set(options.method_options) - set(options.methods)) if options.compare else []
    if unknown:
        raise ConfigError(
            f"`method_options` names methods that are not compared: {unknown}; compared: {options.methods}."
        )
    method_options = {m: checked_method_options(m, options) for m in options.methods}
    suites = chat_suites(options)
    sets, skipped = read_counterfactual_questions(options.data)
    out = DEBIAS_FOLDER.check(options.out)
    with torch_threads(options.threads) as threads:
        print(f"fitting {', '.join(options.methods)} on {options.data}; writing {out}", flush=True)
        adapter = load_model(options)
        config = {**run_config(options, adapter, threads), "suite_data": options.suite_data}
        measured = {NO_METHOD: measure_suites(suites, adapter, options, config, options.seed)}
        fitted: dict[str, ChatDebiaser] = {}
        not_fitted: dict[str, str] = {}
        for method in options.methods:
            torch.manual_seed(options.seed)
            try:
                debiaser = fit_chat_debiaser(method, adapter, sets, method_options[method])
            except InputError as err:  # the data cannot fit it; one line in the compare mode
                if not options.compare:
                    raise
                not_fitted[method] = f"Chat debiaser {method!r} could not be fitted on {options.data!r}: {err}"
                continue
            fitted[method] = debiaser
            method_config = {**config, "debiaser": debiaser.record()}
            measured[method] = measure_suites(suites, debiaser.wrap(adapter), options, method_config, options.seed)
        summary = _summary(options, adapter, measured, fitted, not_fitted, {"n_sets": len(sets), "skipped": skipped})

        def write(folder: Path) -> None:
            if not options.compare:
                (method,) = fitted
                fitted[method].save(folder / "debiaser")
                write_measurements(folder / "before", measured[NO_METHOD])
                write_measurements(folder / "after", measured[method])
                return
            for method, results in measured.items():
                write_measurements(folder / "methods" / method, results)
            (folder / "compare.csv").write_text(table_csv(summary["comparison"]))

        write_debias_folder(out, summary, write)
    return summary


def checked_method_options(method: str, options: DebiasOptions) -> object:
    """``method``'s options dataclass, from ``method_options`` (per method in the compare mode)."""
    cls = chat_debiaser_class(method)
    given = options.method_options.get(method) if options.compare else options.method_options
    return cls.OPTIONS(**check_options(given, cls.OPTIONS, f"chat debiaser {method!r} option"))


def chat_suites(options: DebiasOptions) -> dict[str, Suite]:
    """Each suite of ``options`` built on its question file under ``suite_data``; a suite that does not ask a chat
    model questions (capability ANSWER) is refused by name."""
    unknown = sorted(set(options.suite_options) - set(options.suites))
    if unknown:
        raise ConfigError(f"`suite_options` names suites that do not run: {unknown}; the suites are {options.suites}.")
    for name in options.suites:
        if suite_class(name).capability is not Capability.ANSWER:  # a class attribute for the chat suites
            raise ConfigError(
                f"Suite {name!r} does not ask a chat model questions, so it cannot measure a chat debiaser; give "
                "bias_qa or counterfactual_answers as `suites`."
            )
    return {
        name: build_suite(check_suite_options(name, options.suite_options.get(name)), suite_file(name, options))
        for name in options.suites
    }


def suite_file(suite: str, options: DebiasOptions) -> Path:
    """``suite_data`` when it is a file, else the one file of ``suite``'s format found in that folder."""
    data = Path(options.suite_data)
    if not data.is_dir():
        return data
    found = [path for _, path in find_datasets(suite, data)]
    if len(found) != 1:
        what = "none" if not found else ", ".join(str(path) for path in found)
        raise InputError(
            f"`suite_data` {str(data)!r}: expected one question file of suite {suite!r} in it but found {what}; "
            "give the file."
        )
    return found[0]


def _summary(
    options: DebiasOptions,
    adapter: ModelAdapter,
    measured: dict[str, dict],
    fitted: dict[str, ChatDebiaser],
    not_fitted: dict[str, str],
    data: dict[str, object],
) -> dict:
    """``debias.json``'s content: ``comparison`` the rows of ``compare.csv`` (:func:`comparison_rows`), then a row
    per method not fitted, with the reason."""
    import vlbias

    results = {method: {suite: r for suite, (r, _) in suites.items()} for method, suites in measured.items()}
    rows = comparison_rows(results, {method: {} for method in results})
    rows += [{"method": method, "not_fitted": reason} for method, reason in not_fitted.items()]
    return {
        "methods": {method: debiaser.record() for method, debiaser in fitted.items()},
        "not_fitted": not_fitted,
        "model": options.model,
        "checkpoint": options.checkpoint,
        "tiny": options.tiny,
        "data": {"data": options.data, **data},
        "suite_data": options.suite_data,
        "suites": options.suites,
        "suite_options": options.suite_options,
        "seed": options.seed,
        "vlbias_version": vlbias.__version__,
        "environment": environment(adapter.device),
        "comparison": rows,
    }
