"""``vlbias measure``: run one suite on one model and write the results schema."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from vlbias.models import load, require_capability
from vlbias.models.inference import autocast_name
from vlbias.models.registry import adapter_class
from vlbias.results import ensure_writable, write_results
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
    seed: int = 0,
    device: str | None = None,
    suite_options: dict | None = None,
    biasworld: dict | None = None,
    threads: int | None = None,
) -> Path:
    """Measure ``model`` with ``suite`` on ``data``; write ``<out>/<suite>.json`` and its item
    table; return the JSON path. Bad arguments fail before the model is loaded. ``threads``: torch's
    threads (``None``: the CPUs this process may use over the processes on the node), recorded."""
    with torch_threads(threads) as threads:
        out = ensure_writable(out)
        built = build_suite(suite, data, suite_options, biasworld)
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
        }
        results, items = run_suite(built, adapter, model=model, checkpoint=checkpoint, seed=seed, config=config)
        return write_results(out, results, items)
