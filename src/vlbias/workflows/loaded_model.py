"""The model of a one-process measurement (``vlbias measure``, ``vlbias audit``): checked at the door, loaded
once and seeded, and the run configuration every results file of it records (:func:`run_config`).

Both commands come here, so what they check and what their results record cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import torch

from vlbias.errors import InputError
from vlbias.models.base import ModelAdapter
from vlbias.models.inference import autocast_name
from vlbias.models.registry import check_device, check_model_options, load
from vlbias.results import Results
from vlbias.workflows.options import AuditOptions, MeasureOptions


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (what Lightning's ``seed_everything`` seeds,
    without importing Lightning)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def check_model_choice(choice: MeasureOptions | AuditOptions) -> None:
    """The device and the adapter's loading options, refused by name before any data or weights are read."""
    check_device(choice.device)
    check_model_options(choice.model, choice.model_options, choice.tiny)


def load_model(choice: MeasureOptions | AuditOptions) -> ModelAdapter:
    """The chosen model, loaded after seeding everything with the run's seed (a tiny model's weights follow it)."""
    seed_everything(choice.seed)
    return load(
        choice.model, checkpoint=choice.checkpoint, tiny=choice.tiny, device=choice.device, options=choice.model_options
    )


def run_config(choice: MeasureOptions | AuditOptions, adapter: ModelAdapter, threads: int) -> dict:
    """What every results file of the run records of the model and where it ran."""
    return {
        "model": choice.model,
        "checkpoint": choice.checkpoint,
        "tiny": choice.tiny,
        "model_options": choice.model_options,
        "device": str(adapter.device),
        "autocast": autocast_name(adapter.device),  # what measurements and attacks autocast to; None: they do not
        "biasworld": dataclasses.asdict(choice.biasworld),
        "threads": threads,
        "sentence_pooling": getattr(adapter, "pooling", None),  # sentence_bert: the pooling it resolved to
    }


def refuse_empty(results: Results, data: str | Path) -> None:
    """The one rule for every suite (:meth:`~vlbias.results.Results.nothing_measured`): a run that measured no item,
    or gave no metric, is an error naming the most common skip reasons, and nothing is written."""
    reason = results.nothing_measured(data)
    if reason is not None:
        raise InputError(f"{reason}; no results written.")
