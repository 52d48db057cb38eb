"""The Table 5 equivalent on BiasWorld: FairVLP methods x seeds pre-trained at bias strength 0.9, each then
fine-tuned for image-text retrieval with the same settings, and measured for retrieval accuracy and for the
ranking bias of what it retrieves (``scripts/retrieval_table.py``).

FairVLP (Zhang et al., 2022, Sec. 5.2, Table 5) fine-tunes its vanilla- and FairVLP-pre-trained ALBEF on
Flickr30K (1K test) and COCO (5K test) and reports text retrieval (TR) and image retrieval (IR) R@1/5/10:
debiasing costs no accuracy (Flickr30K TR R@1 90.8 for both). Flickr30K and COCO are not available offline,
so this table fine-tunes on BiasWorld instead. Per (method, seed):

1. Pre-training: ``vlbias fit --config configs/experiment/fairvlp_biasworld.yaml --model.init_args.method
   '{name: <m>, ...}'`` (:func:`vlbias.modules.fairvlp.switch_method`)
   at BiasWorld strength ``strength`` (0.9), every seed set to the run's
   (:func:`vlbias.experiments.biasworld_runs.fit_on_biasworld`, as :mod:`vlbias.experiments.fairvlp_table` trains;
   ``pretrain_epochs`` overrides ``max_epochs``). The fit exports the adapter with ``save_pretrained`` to
   ``<run dir>/model`` (:meth:`vlbias.modules.adapter_module.AdapterModule.on_fit_end`).
2. Fine-tuning: ``vlbias fit --config configs/experiment/retrieval_biasworld.yaml --model.init_args.model
   '{name: albef, checkpoint: <run dir>/model, tiny: false}'`` (the exported weights through the
   adapters' loading path, :func:`vlbias.models.registry.load`), the same seed, BiasWorld at strength 0.0
   (``finetune_epochs`` overrides ``max_epochs``): ITC + ITM with hard negatives
   (:class:`vlbias.modules.RetrievalFinetuning`).
3. Measurement on the fine-tuning data's balanced test split: ``trainer.test``, the module's own evaluation (ITC
   similarity, the top ``k_test`` candidates re-scored by ITM): TR and IR R@1/5/10 and the mean of the six
   (``r_mean``), in percent as in the paper; then the ``retrieval_bias`` suite on the fine-tuned adapter (the test
   images ranked for the neutral activity phrases, "a person cooking."): Bias@10 of the activities stereotyped for
   men and of those stereotyped for women with their bootstrap intervals, the mean of their absolute values
   (``abs_bias@10``, no interval: the suite gives none for it), and MaxSkew@10 and NDKL@10 over all queries with
   their intervals (:mod:`vlbias.suites.retrieval_bias`).

Each row records the run's machine (:func:`vlbias.runtime.environment.environment`): training moves with a CPU's float
rounding. Runs go to ``workers`` processes (one torch thread each). Printed first: the test split's reference levels
(:func:`reference_levels`; ``levels_only`` prints them and stops); then one row per run as it ends, then the
mean over seeds per method (± the standard deviation), each method's difference from ``vanilla``'s mean, and the
difference seed by seed (each seed's run against vanilla's run of that seed: one initialisation, the same
batches) with the 95 % t-interval of its mean and on how many seeds it is below vanilla's. ``out`` writes the
rows as JSON; ``summary`` prints the rows and summaries of such files without training.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch
import yaml
from jsonargparse.typing import PositiveInt

from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.errors import InputError
from vlbias.experiments.biasworld_runs import experiment_config, fit_on_biasworld
from vlbias.experiments.fairvlp_table import Method
from vlbias.experiments.tables import mean_sd, mean_sd_interval, read_rows, run_table
from vlbias.modules.fairvlp import switch_method
from vlbias.runtime.environment import environment
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

FINETUNING_STRENGTH = 0.0
K = 10  # the ranking-bias cut-off
RECALLS = tuple(f"{d}_r{k}" for d in ("tr", "ir") for k in (1, 5, 10)) + ("r_mean",)
STEREOTYPE_GROUPS = ("man_stereotyped", "woman_stereotyped")
BIASES = (*(f"{group}/bias@{K}" for group in STEREOTYPE_GROUPS), f"abs_bias@{K}", f"max_skew@{K}", f"ndkl@{K}")


def _epochs(epochs: int | None) -> list[str]:
    return ["--trainer.max_epochs", str(epochs)] if epochs else []


def pretrain(method: str, seed: int, strength: float, epochs: int | None, run_dir: Path) -> Path:
    """Pre-train ``method`` (step 1 of the module docstring); returns the exported adapter's folder."""
    overrides = ["--model.init_args.method", json.dumps(switch_method(method)), *_epochs(epochs)]
    fit_on_biasworld(experiment_config("fairvlp_biasworld"), strength, seed, run_dir, overrides)
    exported = run_dir / "model"
    if not (exported / "config.json").is_file():
        raise InputError(f"Pre-training {method!r} (seed {seed}) exported no model to {str(exported)!r}.")
    return exported


def finetune(checkpoint: Path, seed: int, epochs: int | None, run_dir: Path):
    """Fine-tune the adapter exported to ``checkpoint`` for retrieval (step 2); returns the CLI."""
    spec = {"name": "albef", "checkpoint": str(checkpoint), "tiny": False, "tiny_sizes": None}
    overrides = ["--model.init_args.model", json.dumps(spec), *_epochs(epochs)]
    config = experiment_config("retrieval_biasworld")
    return fit_on_biasworld(config, FINETUNING_STRENGTH, seed, run_dir, overrides)


def recalls(cli) -> dict[str, float]:
    """TR/IR R@1/5/10 and their mean on the test split, in percent (``trainer.test``, the module's evaluation)."""
    (logged,) = cli.trainer.test(cli.model, cli.datamodule, verbose=False)
    return {key: 100 * logged[f"test/{key}"] for key in RECALLS}


def ranking_bias(cli, seed: int) -> dict[str, object]:
    """The ``retrieval_bias`` suite on the fine-tuned adapter over the test images (step 3): each statistic of
    :data:`BIASES` and, where the suite gives one, its interval under ``<statistic>_interval``."""
    suite = build_suite(check_suite_options("retrieval_bias", {"k": K}), cli.datamodule.world)
    results, _ = run_suite(suite, cli.model.adapter, model="albef", checkpoint=None, seed=seed, config={})
    keys = {f"{group}/bias@{K}": f"group/{group}/bias@{K}" for group in STEREOTYPE_GROUPS}
    keys |= {f"max_skew@{K}": f"all/max_skew@{K}", f"ndkl@{K}": f"all/ndkl@{K}"}
    row = {}
    for name, key in keys.items():
        row[name], row[f"{name}_interval"] = results.metrics[key], results.intervals.get(key)
    row[f"abs_bias@{K}"] = statistics.mean(abs(row[f"{group}/bias@{K}"]) for group in STEREOTYPE_GROUPS)
    row[f"abs_bias@{K}_interval"] = None
    return row


def pretrain_finetune_measure(
    method: str, seed: int, strength: float, pretrain_epochs: int | None, finetune_epochs: int | None
) -> dict:
    """One (method, seed): pre-train, fine-tune, measure; with the seconds each stage took."""
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        checkpoint = pretrain(method, seed, strength, pretrain_epochs, Path(tmp) / "pretrain")
        pretrained = time.perf_counter()
        cli = finetune(checkpoint, seed, finetune_epochs, Path(tmp) / "finetune")
        finetuned = time.perf_counter()
        row = {"method": method, "seed": seed} | recalls(cli) | ranking_bias(cli, seed)
    seconds = {"pretrain_s": pretrained - start, "finetune_s": finetuned - pretrained}
    return row | seconds | {"measure_s": time.perf_counter() - finetuned, "environment": environment()}


def reference_levels(seed: int) -> dict[str, float]:
    """The fine-tuning test split's reference levels for ``seed`` (its data are drawn with the run's seed), in
    percent: chance R@1 of image retrieval (one over the images), and the highest TR R@1/5/10 any model can reach.
    BiasWorld's captions repeat ("a person cooking."): copies score alike, ties count against the query
    (:mod:`vlbias.modules.retrieval`), so an image's text retrieval is a hit at K only when its caption and every
    copy of it fit in the top K."""
    options = yaml.safe_load(experiment_config("retrieval_biasworld").read_text())["data"]["init_args"]
    data = BiasWorldDataModule(**options | {"seed": seed, "bias_strength": FINETUNING_STRENGTH})
    captions = [item.caption for item in data.world.items("test")]
    copies = Counter(captions)
    levels = {"images": len(captions), "ir_r1_chance": 100 / len(captions)}
    return levels | {f"tr_r{k}_ceiling": 100 * statistics.mean(copies[c] <= k for c in captions) for k in (1, 5, 10)}


def retrieval_table(
    methods: Sequence[Method] = ("vanilla", "fairvlp"),
    seeds: Sequence[int] | None = None,
    strength: float = 0.9,
    pretrain_epochs: PositiveInt | None = None,
    finetune_epochs: PositiveInt | None = None,
    workers: PositiveInt = 1,
    out: Path | None = None,
    levels_only: bool = False,
    summary: Sequence[Path] | None = None,
) -> list[dict]:
    """Pre-train each FairVLP method x seed, fine-tune it for retrieval and print its accuracy and ranking bias,
    then the summaries.

    Returns the rows (none with ``levels_only``; with ``summary``, those read).

    Args:
        methods: The pre-training methods to compare.
        seeds: Seeds to run (pre-training and fine-tuning); default 0 1 2; with --summary, keep these seeds' rows
            only.
        strength: BiasWorld's bias strength in pre-training.
        pretrain_epochs: Override pre-training's max_epochs.
        finetune_epochs: Override fine-tuning's max_epochs.
        workers: Runs at once (processes).
        out: Write the rows to this JSON file (after every run).
        levels_only: Print the test splits' reference levels; stop.
        summary: Train nothing: print the tables from the rows that earlier runs wrote with --out.
    """
    if summary:
        rows = [row for path in summary for row in read_rows(path)]
        rows = [row for row in rows if seeds is None or row["seed"] in seeds]
        _header()
        for row in rows:
            _print_row(row)
        _summary(rows, [m for m in methods if any(row["method"] == m for row in rows)])
        return rows
    methods, seeds = list(methods), [0, 1, 2] if seeds is None else list(seeds)
    _print_levels(seeds)
    if levels_only:
        return []
    jobs = [(m, s, strength, pretrain_epochs, finetune_epochs) for s in seeds for m in methods]
    print(
        f"pre-training: bias strength {strength}, epochs {pretrain_epochs or 'config'}; fine-tuning: bias "
        f"strength {FINETUNING_STRENGTH}, epochs {finetune_epochs or 'config'}; seeds {seeds}; "
        f"R@K in percent\n"
    )
    _header()
    rows = run_table(pretrain_finetune_measure, jobs, workers, _print_row, out)
    _summary(rows, methods)
    return rows


def _print_levels(seeds: Sequence[int]) -> None:
    for seed in seeds:
        levels = reference_levels(seed)
        ceilings = ", ".join(f"{levels[f'tr_r{k}_ceiling']:.1f}" for k in (1, 5, 10))
        print(
            f"test split, seed {seed}: {levels['images']} images, IR R@1 by chance {levels['ir_r1_chance']:.1f}; "
            f"highest TR R@1/5/10 (repeated captions tie) {ceilings}"
        )
    print()


def _digits(key: str) -> int:
    """Decimals shown: R@K in percent to 2, the ranking-bias statistics (at most 1 or ln 2 in size) to 3."""
    return 2 if key in RECALLS else 3


def _cell(r: dict, key: str) -> str:
    interval = r[f"{key}_interval"]
    return f"{r[key]:+.3f} [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else f"{r[key]:+.3f}"


def _header() -> None:
    names = " | ".join(key.replace("_", " ").upper() for key in RECALLS[:-1])
    print(f"| method | seed | {names} | R mean | " + " | ".join(BIASES) + " | pretrain s | finetune s | measure s |")
    print("|---|---:|" + "---:|" * len(RECALLS) + "---|" * len(BIASES) + "---:|---:|---:|", flush=True)


def _print_row(r: dict) -> None:
    """One run's row, printed as soon as the run ends (a long table shows progress)."""
    accuracy = " | ".join(f"{r[key]:.1f}" for key in RECALLS)
    bias = " | ".join(_cell(r, key) for key in BIASES)
    seconds = f"{r['pretrain_s']:.0f} | {r['finetune_s']:.0f} | {r['measure_s']:.0f}"
    print(f"| {r['method']} | {r['seed']} | {accuracy} | {bias} | {seconds} |", flush=True)


def _summary(rows: list[dict], methods: Sequence[str]) -> None:
    """Mean ± sd over seeds per method, then each method's mean minus vanilla's (when vanilla ran)."""
    keys = (*RECALLS, *BIASES)
    print("\n| method | seeds | " + " | ".join(keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    means = {}
    for method in methods:
        runs = [r for r in rows if r["method"] == method]
        means[method] = {key: statistics.mean(r[key] for r in runs) for key in keys}
        cells = " | ".join(mean_sd([r[key] for r in runs], _digits(key)) for key in keys)
        print(f"| {method} | {len(runs)} | {cells} |")
    if "vanilla" not in means:
        return
    print("\n| method − vanilla | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for method in methods:
        if method != "vanilla":
            diff = " | ".join(f"{means[method][key] - means['vanilla'][key]:+.{_digits(key)}f}" for key in keys)
            print(f"| {method} | {diff} |")
    # paired: each seed's runs start from one initialisation and see the same batches
    vanilla = {r["seed"]: r for r in rows if r["method"] == "vanilla"}
    print("\n| method − vanilla, per seed | seeds | " + " | ".join(keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    for method in methods:
        runs = [r for r in rows if r["method"] == method and r["seed"] in vanilla and method != "vanilla"]
        if runs:
            cells = " | ".join(_paired(runs, vanilla, key) for key in keys)
            print(f"| {method} | {len(runs)} | {cells} |")


def _paired(runs: list[dict], vanilla: dict[int, dict], key: str) -> str:
    """``"mean ± sd [low, high], k lower"``: the run's ``key`` minus vanilla's run of the same seed, over the seeds,
    with the 95 % t-interval of its mean (:func:`~vlbias.experiments.tables.mean_sd_interval`), and on how many seeds
    it is below vanilla's."""
    differences = [r[key] - vanilla[r["seed"]][key] for r in runs]
    return f"{mean_sd_interval(differences, _digits(key))}, {sum(d < 0 for d in differences)} lower"
