"""Every registered debiaser, and DebiasCLIP's trained prompt array, against no method on BiasWorld's planted bias,
over seeds (``scripts/debias_table.py``; the tables of ``docs/results/debiasing.md``).

The protocol, fixed before any number was seen:

* per seed, the quickstart model (a tiny CLIP, ``configs/experiment/quickstart.yaml``) is trained on BiasWorld with
  planted bias ``strength`` (0.9) and that seed, and saved;
* DebiasCLIP's prompt array (``configs/experiment/debiasclip_biasworld.yaml``, :mod:`vlbias.modules.prompt_array`)
  is trained on that saved CLIP, in the same world (its ``train`` split, the image-caption pairs with their gender
  a training corpus gives; the seed the same), and exported;
* ``vlbias debias --method all`` (:func:`vlbias.workflows.debias.debias`) fits every registered method on the world's ``val``
  split (the same data and seed for every method: :mod:`vlbias.mitigation.fit_data`), and measures the model before
  and after each, and the prompt array (``trained_models``), on the world's balanced ``test`` split: the MMBias
  cross-modal effect size of man vs woman images against man- vs woman-stereotyped activities (``mmbias``), the
  gender skew of what neutral activity queries retrieve (``retrieval_bias``), the zero-shot activity classifier's
  accuracy per gender (``zero_shot_fairness``), the zero-shot activity accuracy over all test images, and retrieval
  R@1/5/10 on the test split's images and their own captions (``captions: biasworld``);
* every method is in the table whatever its rank; a method that cannot be fitted on BiasWorld's data is listed with
  the reason. Each number is the mean over seeds with the standard deviation and the t-interval of that mean over
  the seeds (:func:`~vlbias.metrics.functional.t_interval.t_interval`), so the interval is over independently
  trained models, not over the items of one.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.experiments.biasworld_runs import experiment_config, fit_on_biasworld
from vlbias.metrics.functional.t_interval import t_interval
from vlbias.workflows.debias import debias
from vlbias.workflows.options import DebiasOptions

SUITES = ("mmbias", "retrieval_bias", "zero_shot_fairness")
#: The row of the trained prompt array.
PROMPT_ARRAY = "prompt_array"
#: column -> (the comparison row's key, what it measures); bias first, then accuracy.
COLUMNS = {
    "MMBias d": ("mmbias/man_vs_woman/stereotyped_activities/effect_size", "cross-modal effect size, 0 is fair"),
    "MaxSkew@10": ("retrieval_bias/all/max_skew@10", "gender skew of neutral activity queries' top 10, 0 is fair"),
    "gender gap": ("zero_shot_fairness/gender/worst_group_gap", "zero-shot accuracy: mean minus worst gender"),
    "accuracy": ("zero_shot_accuracy", "zero-shot activity accuracy, all test images"),
}
#: The retrieval table's columns: text retrieval (an image's own caption) and image retrieval (a caption's own image).
RECALL_COLUMNS = {
    **{
        f"TR R@{k}": (f"retrieval_recall/txt_r{k}", f"text retrieval: an image's own caption in its top {k}")
        for k in (1, 5, 10)
    },
    **{
        f"IR R@{k}": (f"retrieval_recall/img_r{k}", f"image retrieval: a caption's own image in its top {k}")
        for k in (1, 5, 10)
    },
}
STATISTICS = {"mmbias": {"statistics": {"n_permutations": 2000, "n_bootstrap": 500}}}


def train_prompt_array(checkpoint: Path, strength: float, seed: int, run_dir: Path) -> Path:
    """DebiasCLIP's prompt array (``configs/experiment/debiasclip_biasworld.yaml``) trained on the CLIP saved at
    ``checkpoint``, in the world of ``strength`` and ``seed``; returns the folder of the exported
    :class:`~vlbias.models.families.prompt_array.PromptArrayCLIP`."""
    spec = {"name": "clip", "checkpoint": str(checkpoint), "tiny": False, "tiny_sizes": None}
    overrides = ["--model.init_args.model", json.dumps(spec)]
    cli = fit_on_biasworld(experiment_config("debiasclip_biasworld"), strength, seed, run_dir / "fit", overrides)
    exported = run_dir / "model"
    cli.model.adapter.save_pretrained(exported)
    return exported


def seed_rows(seed: int, strength: float, run_dir: Path) -> list[dict]:
    """The comparison rows of one seed: the quickstart model trained at ``strength`` with ``seed``, the prompt array
    trained on it, then every method fitted and measured on that seed's world, the prompt array measured beside
    them. Prints the seconds each stage took."""
    start = time.perf_counter()
    cli = fit_on_biasworld(experiment_config("quickstart"), strength, seed, run_dir / "fit")
    checkpoint = run_dir / "model"
    cli.model.adapter.save_pretrained(checkpoint)
    world = BiasWorldOptions(**cli.datamodule.world.config)  # the world the model was trained in
    trained = time.perf_counter()
    prompt_array = train_prompt_array(checkpoint, strength, seed, run_dir / PROMPT_ARRAY)
    prompted = time.perf_counter()
    options = DebiasOptions(
        method="all",
        trained_models={PROMPT_ARRAY: {"model": "prompt_array", "checkpoint": str(prompt_array)}},
        model="clip",
        checkpoint=str(checkpoint),
        seed=seed,
        out=str(run_dir / "debias"),
        suites=list(SUITES),
        suite_options=STATISTICS,
        captions="biasworld",
        biasworld=world,
    )
    rows = debias(options)["comparison"]
    print(
        f"seed {seed}: CLIP trained in {trained - start:.0f} s, prompt array in {prompted - trained:.0f} s, "
        f"methods fitted and measured in {time.perf_counter() - prompted:.0f} s",
        flush=True,
    )
    return rows


def summarise(rows: Mapping[int, list[dict]]) -> list[dict]:
    """Per method (in the order of the first seed's rows): each column's values (of :data:`COLUMNS` and
    :data:`RECALL_COLUMNS`) over the seeds where the method was fitted (``n_seeds``), and why it was not fitted
    where it was not."""
    methods = [row["method"] for row in next(iter(rows.values()))]
    table = []
    for method in methods:
        found = [row for seed_rows in rows.values() for row in seed_rows if row["method"] == method]
        entry: dict[str, object] = {"method": method, "not_fitted": found[0].get("not_fitted") or ""}
        for column, (key, _) in {**COLUMNS, **RECALL_COLUMNS}.items():
            values = [float(row[key]) for row in found if _number(row.get(key))]
            entry[column] = values
        entry["n_seeds"] = len(entry["accuracy"])
        table.append(entry)
    return table


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "—"
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:+.3f}"
    low, high = t_interval(torch.tensor(values)).tolist()
    return f"{mean:+.3f} ± {statistics.stdev(values):.3f} [{low:+.3f}, {high:+.3f}]"


def print_table(table: Sequence[Mapping[str, object]], columns: Mapping[str, tuple[str, str]]) -> None:
    """``table``'s (:func:`summarise`) ``columns`` as a Markdown table, mean ± sd [95% t-interval over seeds] each,
    then what each column measures."""
    print("| method | " + " | ".join(columns) + " | seeds |")
    print("|---|" + "---|" * len(columns) + "---:|")
    for entry in table:
        cells = [_cell(entry[column]) for column in columns]
        note = f" (not fitted: {entry['not_fitted']})" if entry["not_fitted"] else ""
        print(f"| {entry['method']}{note} | " + " | ".join(cells) + f" | {entry['n_seeds']} |")
    print("\n" + "\n".join(f"- {column}: {what} (`{key}`)" for column, (key, what) in columns.items()))


def debias_table(seeds: Sequence[int] = (0, 1, 2, 3, 4), strength: float = 0.9, out: str | None = None) -> list:
    """Train, fit every method and measure, per seed; print the per-method tables of bias and accuracy, and of
    retrieval R@K (mean ± sd [95% t-interval over seeds]). Returns the summary rows.

    Args:
        seeds: Seeds: one trained model, one BiasWorld world and one fit of every method each.
        strength: BiasWorld's planted bias strength in training.
        out: Folder to keep each seed's run in (a temporary folder when not given).
    """
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(out or temporary)
        rows = {seed: seed_rows(seed, strength, root / f"seed{seed}") for seed in seeds}
    table = summarise(rows)
    print(f"\nBiasWorld, planted bias {strength}, seeds {list(seeds)}: mean ± sd [95% t-interval over seeds]\n")
    print_table(table, COLUMNS)
    print("\nRetrieval on the test split's images and their own captions:\n")
    print_table(table, RECALL_COLUMNS)
    return table
