"""``vlbias measure``: run one suite on one model and write the results schema."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from jsonargparse.typing import PositiveInt

from vlbias.errors import InputError
from vlbias.models.base import require_capability
from vlbias.models.catalog import adapter_class
from vlbias.models.inference import autocast_name
from vlbias.models.registry import check_device, check_model_options, load
from vlbias.options import Seed, check_options
from vlbias.results import Results, ensure_writable, write_results
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite
from vlbias.threads import torch_threads


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (what Lightning's ``seed_everything`` seeds,
    without importing Lightning)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def measure(
    suite: str,
    model: str,
    data: str | Path,
    out: str | Path,
    checkpoint: str | None = None,
    tiny: bool = False,
    model_options: dict | None = None,
    seed: Seed = 0,
    device: str | None = None,
    suite_options: dict | None = None,
    biasworld: dict | None = None,
    threads: PositiveInt | None = None,
) -> Path:
    """Measure ``model`` with ``suite`` on ``data``; write ``<out>/<suite>.json`` and its item
    table; return the JSON path. ``threads``: torch's threads (``None``: the CPUs this process may use over the
    processes on the node), recorded.

    Every option is checked before any data or model is loaded (``seed``, ``threads``, ``device``, the model's,
    the suite's and BiasWorld's options; :mod:`vlbias.options`). A run where nothing could be measured (no item
    measured, or no metric) raises :class:`~vlbias.errors.InputError` with the skip reasons and writes nothing.
    """
    checked = check_options({"seed": seed, "threads": threads}, measure, "option")
    seed, threads = checked["seed"], checked["threads"]
    check_device(device)
    check_model_options(model, model_options, tiny)
    with torch_threads(threads) as threads:
        out = ensure_writable(out)
        built = build_suite(check_suite_options(suite, suite_options, tiny=tiny), data, biasworld)
        require_capability(
            adapter_class(model), built.capability, built.name, built.capability_hint
        )  # before loading weights
        seed_everything(seed)
        adapter = load(model, checkpoint=checkpoint, tiny=tiny, device=device, options=model_options)
        config = {
            "suite": suite,
            "model": model,
            "checkpoint": checkpoint,
            "tiny": tiny,
            "model_options": model_options or {},
            "data": str(data),
            "device": str(adapter.device),
            "autocast": autocast_name(adapter.device),  # what measurements and attacks autocast to; None: they do not
            "suite_options": suite_options or {},
            "biasworld": biasworld or {},
            "threads": threads,
            "sentence_pooling": getattr(adapter, "pooling", None),  # sentence_bert: the pooling it resolved to
        }
        results, items = run_suite(built, adapter, model=model, checkpoint=checkpoint, seed=seed, config=config)
        refuse_empty(results, data)
        return write_results(out, results, items)


def refuse_empty(results: Results, data: str | Path) -> None:
    """The one rule for every suite: a run that measured no item, or gave no metric, is an error naming the
    most common skip reasons, and nothing is written."""
    if results.n_items and results.metrics:
        return
    reasons = Counter(entry.get("reason", "?") for entry in results.skipped).most_common(3)
    listed = "; ".join(f"{count}x {reason}" for reason, count in reasons) or "no item was skipped either"
    raise InputError(
        f"Suite {results.suite!r} measured nothing on data {str(data)!r} ({results.n_items} items measured, "
        f"{len(results.metrics)} metrics, {len(results.skipped)} skipped: {listed}); no results written."
    )
