"""``vlbias measure``: run one suite on one model and write the results schema."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from vlbias.mitigation.outputs import selection_overlap
from vlbias.models.base import require_capability
from vlbias.models.catalog import adapter_class
from vlbias.results import ensure_writable, write_results
from vlbias.runtime.threads import torch_threads
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite
from vlbias.workflows.loaded_model import check_model_choice, load_model, refuse_empty, run_config
from vlbias.workflows.options import MeasureOptions

logger = logging.getLogger(__name__)


def measure(options: MeasureOptions) -> Path:
    """Measure ``options.model`` with ``options.suite`` on ``options.data``; write ``<out>/<suite>.json`` and its
    item table; return the JSON path.

    Every option is checked before any data or model is loaded (the device, the model's, the suite's and
    BiasWorld's options); then the suite's data is read and the model's capability checked before its weights.
    A run where nothing could be measured (no item measured, or no metric) raises
    :class:`~vlbias.errors.InputError` with the skip reasons and writes nothing. A pruned model measured on the
    split or data its dimensions were chosen on is measured, with a warning
    (:func:`~vlbias.mitigation.outputs.selection_overlap`).
    """
    check_model_choice(options)
    suite_options = check_suite_options(options.suite, options.suite_options, tiny=options.tiny)
    with torch_threads(options.threads) as threads:
        out = ensure_writable(options.out)
        built = build_suite(suite_options, options.data, dataclasses.asdict(options.biasworld))
        require_capability(adapter_class(options.model), built.capability, built.name, built.capability_hint)
        if options.model == "pruned" and options.checkpoint:
            split = getattr(suite_options, "split", None)
            overlap = selection_overlap(options.checkpoint, options.data, split, options.biasworld.seed)
            if overlap is not None:
                logger.warning(f"warning: {overlap}")
        adapter = load_model(options)
        config = {
            **run_config(options, adapter, threads),
            "suite": options.suite,
            "data": options.data,
            "suite_options": options.suite_options,
        }
        results, items = run_suite(
            built, adapter, model=options.model, checkpoint=options.checkpoint, seed=options.seed, config=config
        )
        refuse_empty(results, options.data)
        path = write_results(out, results, items)
        built.write_beside(path, items)
        return path
