"""``vlbias measure``: run one suite on one model and write the results schema."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import seed_everything

from vlbias.data.biasworld import BiasWorld
from vlbias.errors import ConfigError
from vlbias.models import load, require_capability
from vlbias.models.base import ModelAdapter
from vlbias.models.inference import autocast_name
from vlbias.models.registry import adapter_class
from vlbias.results import Results, ensure_writable, write_results
from vlbias.suites import Suite, suite_class


def build_suite(name: str, data: str | Path | BiasWorld, options: dict | None = None, biasworld: dict | None = None) -> Suite:
    """Suite ``name`` over ``data``: ``"biasworld"`` (built from ``biasworld`` options), a
    :class:`BiasWorld`, or a directory or file in the suite's public format."""
    cls, options = suite_class(name), options or {}
    if isinstance(data, BiasWorld):
        return cls.from_biasworld(data, **options)
    if str(data) == "biasworld":
        return cls.from_biasworld(BiasWorld(**(biasworld or {})), **options)
    path = Path(data)
    if not path.exists():
        raise ConfigError(f"Data path {str(path)!r} does not exist; expected a directory or file in the {name!r} format or 'biasworld'.")
    return cls.from_path(path, **options)


def run_suite(suite: Suite, adapter: ModelAdapter, *, model: str, checkpoint: str | None, seed: int, config: dict) -> tuple[Results, list[dict]]:
    """Run ``suite`` on ``adapter`` (refusing a model without the suite's capability before any
    compute) and wrap its output in :class:`Results`."""
    require_capability(adapter, suite.capability, suite.name, suite.capability_hint)
    output = suite.run(adapter, seed=seed)
    results = Results(
        suite=suite.name,
        model=model,
        checkpoint=checkpoint,
        config={**config, "suite_config": suite.config},
        seed=seed,
        n_items=output.n_items,
        metrics=output.metrics,
        intervals=output.intervals,
        p_values=output.p_values,
        skipped=output.skipped,
    )
    return results, output.items


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
) -> Path:
    """Measure ``model`` with ``suite`` on ``data``; write ``<out>/<suite>.json`` and its item
    table; return the JSON path. Bad arguments fail before the model is loaded."""
    out = ensure_writable(out)
    built = build_suite(suite, data, suite_options, biasworld)
    require_capability(adapter_class(model), built.capability, built.name, built.capability_hint)  # before loading weights
    seed_everything(seed, verbose=False)
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
    }
    results, items = run_suite(built, adapter, model=model, checkpoint=checkpoint, seed=seed, config=config)
    return write_results(out, results, items)
