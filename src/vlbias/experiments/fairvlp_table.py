"""The Table 4 equivalent on BiasWorld: every FairVLP method x seeds, trained from the same initialisation
at bias strength 0.9, then CounterBias of the activities and accuracy on the balanced test split
(``scripts/fairvlp_table.py``).

Each run is ``vlbias fit --config configs/experiment/fairvlp_biasworld.yaml --model.init_args.method
'{name: <m>, ...}'`` (:func:`vlbias.modules.fairvlp.switch_method`) with BiasWorld's strength and every seed overridden (no logger, no callbacks;
:func:`vlbias.experiments.biasworld_runs.fit_on_biasworld`), so the methods of one seed start from the same random
initialisation and see the same batches. Then on the trained model:

* CounterBias (Zhang et al., 2022) with the config callback's options: ``B@V-L``, ``B@V``, ``B@L`` of the
  activities (``activity/<measure>/avg``, percent) and their bootstrap intervals;
* masked-activity accuracy, ITM accuracy and image->text R@1 with its two parts
  (:func:`vlbias.experiments.fairvlp_measures.accuracies`);
* CounterBias again with ``require_attack_success`` off: every attacked image, each with its B@V-L per template and
  whether its attack succeeded (``images`` in the row, :func:`~vlbias.experiments.fairvlp_measures.image_records`).
  CounterBias measures only the images whose attack succeeded, and a model trained on attacked images resists the
  attack, so a method's B@V-L and vanilla's cover different images; the summary's last table compares the two on
  the images both attacks flipped and on every image, seed by seed.

``alpha`` trains the KL methods (``fairvlp_v``, ``fairvlp_l``, ``fairvlp``) once per value of Eq. 16's alpha
(the paper does not give its value; the config's is the default) and ``split="val"`` measures on BiasWorld's
validation split, which has its own images: choose alpha there, on seeds the test table does not use, then report
the test split. ``image_counterfactuals`` likewise trains the image methods (``visual_swap``, ``fairvlp_v``,
``fairvlp``) once per attack policy, ``POLICY[:k]`` (:mod:`vlbias.counterfactual.training`; ``train s`` gives its
cost), and ``counterfactual_targets`` (``swapped``, ``factual``) trains ``fairvlp_l`` and ``fairvlp`` once per
target of the counterfactual branch at a masked bias word (FairVLP's option; Eq. 15 writes the factual word). Rows
record all four, and the machine (:func:`vlbias.runtime.environment.environment`): training is sensitive to float rounding,
so one seed at one commit gives other numbers on another CPU.

Runs go to ``workers`` processes (one torch thread each). Printed: one row per run, then the summaries of
:func:`vlbias.experiments.fairvlp_summary.print_summary`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from jsonargparse.typing import PositiveInt

from vlbias.counterfactual.training import POLICIES
from vlbias.errors import ConfigError
from vlbias.experiments.biasworld_runs import callback_suite_options, experiment_config, fit_on_biasworld
from vlbias.experiments.fairvlp_measures import accuracies, image_records
from vlbias.experiments.fairvlp_summary import MEASURES, VARIANTS, named, print_summary
from vlbias.experiments.tables import read_rows, run_table
from vlbias.modules.fairvlp import (
    COUNTERFACTUAL_TARGETS,
    METHODS,
    FairVLPMethod,
    reads_targets,
    switch_method,
    uses_images,
    uses_kl,
)
from vlbias.runtime.environment import environment
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

ALL_METHODS = tuple(METHODS)
Method = Literal[ALL_METHODS]
Target = Literal[COUNTERFACTUAL_TARGETS]


def parse_policy(spec: str) -> tuple[str, int | None]:
    """``"every_step"``, ``"every_n_steps:4"``, ``"cached:128"`` -> (policy, k); k ``None`` means the config's.

    Example:
        >>> parse_policy("cached:128"), parse_policy("every_step")
        (('cached', 128), ('every_step', None))
    """
    name, _, k = spec.partition(":")
    if name not in POLICIES or (k and not (k.isdigit() and int(k) > 0)):
        raise ConfigError(
            f"Expected --image_counterfactuals values POLICY or POLICY:K with POLICY one of {', '.join(POLICIES)} "
            f"and K a positive integer (steps) but got {spec!r}."
        )
    return name, int(k) if k else None


def _policy_spec(method: FairVLPMethod) -> str:
    """The policy a model was trained with, as ``POLICY[:k]`` (``every_step`` reads no k)."""
    name = method.image_counterfactuals
    return name if name == "every_step" else f"{name}:{method.k}"


def train_and_measure(
    method: str,
    seed: int,
    strength: float,
    epochs: int | None,
    alpha: float | None = None,
    split: str = "test",
    image_counterfactuals: str | None = None,
    counterfactual_targets: str | None = None,
) -> dict:
    """One row of the table: ``method`` trained with ``seed`` at bias ``strength`` (``epochs``, ``alpha``,
    ``image_counterfactuals``, ``counterfactual_targets``: ``None`` keeps the config's), measured on ``split``."""
    torch.set_num_threads(1)
    config = experiment_config("fairvlp_biasworld")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        settings: dict[str, object] = {} if alpha is None else {"alpha": alpha}
        if image_counterfactuals is not None:
            name, k = parse_policy(image_counterfactuals)
            settings |= {"image_counterfactuals": name} | ({} if k is None else {"k": k})
        if counterfactual_targets is not None:
            settings["counterfactual_targets"] = counterfactual_targets
        overrides = ["--model.init_args.method", json.dumps(switch_method(method, **settings))]
        overrides += ["--trainer.max_epochs", str(epochs)] if epochs else []
        cli = fit_on_biasworld(config, strength, seed, run_dir, overrides)
    trained = time.perf_counter() - start
    adapter, world = cli.model.adapter, cli.datamodule.world
    options = callback_suite_options(config, "counterbias") | {"split": split}
    suite = build_suite(check_suite_options("counterbias", options), world)
    results, _ = run_suite(suite, adapter, model="albef", checkpoint=None, seed=seed, config={})
    every_image = build_suite(check_suite_options("counterbias", options | {"require_attack_success": False}), world)
    _, items = run_suite(every_image, adapter, model="albef", checkpoint=None, seed=seed, config={})
    row = {
        "method": method,
        "seed": seed,
        "alpha": cli.model.method.alpha if uses_kl(method) else None,
        "image_counterfactuals": _policy_spec(cli.model.method) if uses_images(method) else None,
        "counterfactual_targets": cli.model.method.counterfactual_targets if reads_targets(method) else None,
        "split": split,
        # training is float-sensitive (docs/results/fairvlp.md): the same commit and seed give other numbers on another CPU
        "environment": environment(),
        "train_s": trained,
        "attack_success_rate": results.metrics["attack_success_rate"],
        "images": image_records(items, every_image.b0),
    }
    for measure in MEASURES:
        key = f"activity/{measure}/avg"
        row[measure], row[f"{measure}_interval"] = results.metrics[key], results.intervals.get(key)
    return row | accuracies(adapter, world, split)


def fairvlp_table(
    methods: Sequence[Method] = ALL_METHODS,
    seeds: Sequence[int] | None = None,
    strength: float = 0.9,
    epochs: PositiveInt | None = None,
    alpha: Sequence[float | None] = (None,),
    image_counterfactuals: Sequence[str | None] = (None,),
    counterfactual_targets: Sequence[Target | None] = (None,),
    split: Literal["val", "test"] = "test",
    workers: PositiveInt = 1,
    out: Path | None = None,
    summary: Sequence[Path] | None = None,
) -> list[dict]:
    """Train every FairVLP method x seed on BiasWorld and print its row, then the summaries.

    Returns the rows (with ``summary``, those read).

    Args:
        methods: The methods to train.
        seeds: Default 0 1 2; with --summary, keep these seeds' rows only.
        strength: BiasWorld's bias strength.
        epochs: Override the config's max_epochs.
        alpha: Eq. 16's alpha for the KL methods (default: config's).
        image_counterfactuals: Attack policies POLICY[:k] for the image methods (default: config's), e.g.
            every_step cached:128.
        counterfactual_targets: Targets of the counterfactual branch at a masked bias word, for fairvlp_l and
            fairvlp (default: config's).
        split: BiasWorld split to measure.
        workers: Runs trained at once (processes).
        out: Write the rows to this JSON file (after every run).
        summary: Train nothing: print the tables from the --out files of earlier runs (e.g. seeds split over
            machines).
    """
    for spec in image_counterfactuals:  # a bad policy fails before anything is trained
        if spec is not None:
            parse_policy(spec)
    if summary:
        rows = [row for path in summary for row in read_rows(path)]
        rows = [row for row in rows if seeds is None or row["seed"] in seeds]
        for row in rows:  # rows from before the option was recorded were trained with swapped targets
            if reads_targets(row["method"]):
                row.setdefault("counterfactual_targets", "swapped")
        splits = sorted({row.get("split", "test") for row in rows})
        _header(strength, epochs, sorted({row["seed"] for row in rows}), ", ".join(splits))
        for row in rows:
            _print_row(row)
        print_summary(rows, [m for m in METHODS if any(row["method"] == m for row in rows)])
        return rows
    seeds = [0, 1, 2] if seeds is None else list(seeds)
    jobs = [
        (method, seed, strength, epochs, value, split, spec, targets)
        for seed in seeds
        for method in methods
        for value in (alpha if uses_kl(method) else [None])
        for spec in (image_counterfactuals if uses_images(method) else [None])
        for targets in (counterfactual_targets if reads_targets(method) else [None])
    ]
    _header(strength, epochs, seeds, split)
    rows = run_table(train_and_measure, jobs, workers, _print_row, out)
    print_summary(rows, methods)
    return rows


def _header(strength: float, epochs: int | None, seeds: Sequence[int], split: str) -> None:
    print(
        f"bias strength {strength}, epochs {epochs or 'config'}, seeds {list(seeds)}, measured on the {split} split\n"
    )
    print(
        "| method | seed | "
        + " | ".join(f"{m} [interval]" for m in MEASURES)
        + " | attack success | masked-activity acc | ITM acc | i2t R@1 | train s |"
    )
    print("|---|---:|" + "---|" * len(MEASURES) + "---:|---:|---:|---:|---:|", flush=True)


def _print_row(r: dict) -> None:
    """One run's row, printed as soon as the run ends (a long table shows progress)."""
    measures = " | ".join(
        f"{r[m]:.2f} [{r[f'{m}_interval'][0]:.2f}, {r[f'{m}_interval'][1]:.2f}]"
        if r[f"{m}_interval"]
        else f"{r[m]:.2f}"
        for m in MEASURES
    )
    label = named(r, [key for key in VARIANTS if r.get(key) is not None])
    print(
        f"| {label} | {r['seed']} | {measures} | {r['attack_success_rate']:.2f} | {r['masked_activity']:.1f} "
        f"| {r['itm']:.1f} | {r['i2t_r1']:.1f} | {r['train_s']:.0f} |",
        flush=True,
    )
