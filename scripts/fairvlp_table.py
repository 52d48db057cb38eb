"""The Table 4 equivalent on BiasWorld: every FairVLP method x seeds, trained from the same initialisation
at bias strength 0.9, then CounterBias of the activities and accuracy on the balanced test split.

    python scripts/fairvlp_table.py                                   # 7 methods x seeds 0 1 2, the config's epochs
    python scripts/fairvlp_table.py --seeds 0 --epochs 5 --workers 2  # reduced
    python scripts/fairvlp_table.py --seeds 2 --out s2.json           # one seed; then, with s01.json likewise:
    python scripts/fairvlp_table.py --summary s01.json s2.json        # the tables of both, nothing trained
    python scripts/fairvlp_table.py --summary s01.json --seeds 0      # ... of seed 0's rows only
    python scripts/fairvlp_table.py --split val --seeds 10 11 --methods vanilla fairvlp --alpha 0.25 0.5 0.75 0.9
                                                                      # choose Eq. 16's alpha on the val split
    python scripts/fairvlp_table.py --split val --seeds 10 11 12 --methods vanilla fairvlp \
        --image_counterfactuals every_n_steps:4 every_step cached:128  # and the image-attack policy

Each run is ``vlbias fit --config configs/experiment/fairvlp_biasworld.yaml --model.init_args.method <m>``
with BiasWorld's strength and every seed overridden (no logger, no callbacks; :func:`vlbias.sanity.fit_on_biasworld`),
so the methods of one seed start from the same random initialisation and see the same batches. Then on the
trained model:

* CounterBias (Zhang et al., 2022) with the config callback's options: ``B@V-L``, ``B@V``, ``B@L`` of the
  activities (``activity/<measure>/avg``, percent) and their bootstrap intervals;
* masked-activity accuracy: each test caption that names its activity, the activity masked, argmax over
  the six activities at the mask == the activity;
* ITM accuracy: each test image with its own caption (label 1) and with the caption of its group and the
  next activity (label 0), ``match_logits > 0`` == label;
* image->text R@1: each test image against the twelve captions "a photo of a {group} {activity}." of
  every (group, activity) pair, the best match == its own pair; and its two parts, how often the best match
  names the image's activity and how often its group (a model that stops reading gender from images loses the
  second, one that stops reading the activity the first);
* CounterBias again with ``require_attack_success`` off: every attacked image, each with its B@V-L per template and
  whether its attack succeeded (``images`` in the row, :func:`image_records`). CounterBias measures only the images
  whose attack succeeded, and a model trained on attacked images resists the attack, so a method's B@V-L and
  vanilla's cover different images; the summary's last table compares the two on the images both attacks flipped
  and on every image, seed by seed.

``--alpha`` trains the KL methods (``fairvlp_v``, ``fairvlp_l``, ``fairvlp``) once per value of Eq. 16's alpha
(the paper does not give its value; the config's is the default) and ``--split val`` measures on BiasWorld's
validation split, which has its own images: choose alpha there, on seeds the test table does not use, then report
the test split. ``--image_counterfactuals`` likewise trains the image methods (``visual_swap``, ``fairvlp_v``,
``fairvlp``) once per attack policy, ``POLICY[:k]`` (:mod:`vlbias.counterfactual.training`; ``train s`` gives its
cost), and ``--counterfactual_targets swapped factual`` trains ``fairvlp_l`` and ``fairvlp`` once per target of the
counterfactual branch at a masked bias word (FairVLP's option; Eq. 15 writes the factual word). Rows record all
four, and the machine (:func:`vlbias.environment.environment`): training is sensitive to
float rounding, so one seed at one commit gives other numbers on another CPU.

Runs go to ``--workers`` processes (one torch thread each). Printed: one row per run, then the mean over
seeds per method (± the standard deviation), the change of its mean B@V-L against ``vanilla``'s, and the change
seed by seed (each seed's run against vanilla's run of that seed: one initialisation, the same batches), mean ±
standard deviation over the seeds, and on how many seeds it is lower than vanilla's.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from vlbias.counterfactual.training import POLICIES
from vlbias.data.biasworld import ACTIVITIES, GROUPS
from vlbias.environment import environment
from vlbias.errors import ConfigError
from vlbias.metrics.functional.counterbias import dataset_bias, mean_absolute_bias
from vlbias.models.masked_words import word_log_probs
from vlbias.modules.fairvlp import COUNTERFACTUAL_TARGETS, METHODS, reads_targets, uses_images, uses_kl
from vlbias.sanity import callback_suite_options, fit_on_biasworld, mean_sd, run_table
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, run_suite

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "fairvlp_biasworld.yaml"
MEASURES = ("B@V-L", "B@V", "B@L")
ACCURACIES = ("masked_activity", "itm", "i2t_r1")
RECALL_PARTS = ("i2t_r1", "i2t_r1_activity", "i2t_r1_group")  # R@1; the best caption's activity right; its group


@torch.no_grad()
def accuracies(adapter, world, split: str = "test") -> dict[str, float]:
    """Masked-activity accuracy, ITM accuracy and image->text R@1 on a balanced split (module docstring)."""
    items = world.items(split)
    pixels = adapter.prepare_images(world.images(split).float() / 255.0)
    mask = adapter.tokenizer.mask_token
    named = [
        i
        for i, item in enumerate(items)
        if item.activity in item.caption.split() or f"{item.activity}." in item.caption
    ]
    templates = [items[i].caption.replace(items[i].activity, mask) for i in named]
    scores = word_log_probs(adapter, pixels[named], templates, list(ACTIVITIES))
    truth = torch.tensor([ACTIVITIES.index(items[i].activity) for i in named])
    masked_activity = (scores.argmax(dim=1) == truth).float().mean().item()
    own = [item.caption for item in items]
    other = [
        item.caption.replace(item.activity, ACTIVITIES[(ACTIVITIES.index(item.activity) + 1) % len(ACTIVITIES)])
        for item in items
    ]
    positive = adapter.match_logits(pixels, adapter.prepare_texts(own)) > 0
    negative = adapter.match_logits(pixels, adapter.prepare_texts(other)) <= 0
    itm = torch.cat([positive, negative]).float().mean().item()
    pairs = [(g, a) for g in GROUPS for a in ACTIVITIES]
    candidates = adapter.prepare_texts([f"a photo of a {g} {a}." for g, a in pairs])
    n, c = len(items), len(pairs)
    logits = adapter.match_logits(
        pixels.repeat_interleave(c, dim=0), {k: v.repeat(n, 1) for k, v in candidates.items()}
    ).view(n, c)
    truth = torch.tensor([pairs.index((item.group, item.activity)) for item in items])
    best, a = logits.argmax(dim=1), len(ACTIVITIES)  # a pair's index: its group's index * a + its activity's
    right = {"i2t_r1": best == truth, "i2t_r1_activity": best % a == truth % a, "i2t_r1_group": best // a == truth // a}
    return {"masked_activity": 100 * masked_activity, "itm": 100 * itm} | {
        key: 100 * hits.float().mean().item() for key, hits in right.items()
    }


def image_records(items: Sequence[dict], b0: Sequence[str]) -> dict[str, dict]:
    """Each attacked test image of the activities, measured whether or not its attack succeeded: its activity,
    Eq. 7's direction (+1 where its bias concept is B0), whether its attack succeeded, and its B@V-L (Eq. 6) per
    template (``None`` where Eq. 6 excludes it). From these :func:`bias_on` measures any subset of the images."""
    records: dict[str, dict] = {}
    for row in items:
        if row["group"] != "activity":
            continue
        record = records.setdefault(
            row["item"],
            {
                "target": row["target"],
                "direction": 1 if row["bias"] in b0 else -1,
                "attack_succeeded": row["attack_succeeded"],
                "B@V-L": {},
            },
        )
        value = row["bias_B@V-L"]
        record["B@V-L"][row["template"]] = None if math.isnan(value) else value
    return records


def bias_on(records: dict[str, dict], images: Iterable[str]) -> float:
    """B@V-L of the activities (Table 2, percent) over ``images`` only: per template bias(T) of each activity
    (Eq. 7) and the mean of its absolute values, then the mean over templates, as the suite computes it over the
    images it measures (NaN when no image is given)."""
    images = sorted(images)
    if not images:
        return math.nan
    per_template = []
    for template in records[images[0]]["B@V-L"]:
        bias = torch.tensor([math.nan if (v := records[i]["B@V-L"][template]) is None else v for i in images])
        target = torch.tensor([ACTIVITIES.index(records[i]["target"]) for i in images])
        direction = torch.tensor([records[i]["direction"] for i in images])
        per_target, _ = dataset_bias(bias, target, direction, len(ACTIVITIES))
        per_template.append(mean_absolute_bias(per_target))
    return torch.stack(per_template).nanmean().item()


def _parse_policy(spec: str) -> tuple[str, int | None]:
    """``"every_step"``, ``"every_n_steps:4"``, ``"cached:128"`` -> (policy, k); k ``None`` means the config's."""
    name, _, k = spec.partition(":")
    if name not in POLICIES or (k and not (k.isdigit() and int(k) > 0)):
        raise ConfigError(
            f"Expected --image_counterfactuals values POLICY or POLICY:K with POLICY one of {', '.join(POLICIES)} "
            f"and K a positive integer (steps) but got {spec!r}."
        )
    return name, int(k) if k else None


def _policy_argument(spec: str) -> str:
    """argparse's check of one ``--image_counterfactuals`` value: a bad spec fails before anything is trained."""
    try:
        _parse_policy(spec)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return spec


def _policy_spec(hparams) -> str:
    """The policy a model was trained with, as ``POLICY[:k]`` (``every_step`` reads no k)."""
    name = hparams.image_counterfactuals
    return name if name == "every_step" else f"{name}:{hparams.k}"


def run(
    method: str,
    seed: int,
    strength: float,
    epochs: int | None,
    alpha: float | None = None,
    split: str = "test",
    image_counterfactuals: str | None = None,
    counterfactual_targets: str | None = None,
) -> dict:
    torch.set_num_threads(1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        overrides = ["--model.init_args.method", method] + (["--trainer.max_epochs", str(epochs)] if epochs else [])
        overrides += ["--model.init_args.alpha", str(alpha)] if alpha is not None else []
        if image_counterfactuals is not None:
            name, k = _parse_policy(image_counterfactuals)
            overrides += ["--model.init_args.image_counterfactuals", name]
            overrides += ["--model.init_args.k", str(k)] if k is not None else []
        if counterfactual_targets is not None:
            overrides += ["--model.init_args.counterfactual_targets", counterfactual_targets]
        cli = fit_on_biasworld(CONFIG, strength, seed, run_dir, overrides)
    trained = time.perf_counter() - start
    adapter, world = cli.model.adapter, cli.datamodule.world
    options = callback_suite_options(CONFIG, "counterbias") | {"split": split}
    suite = build_suite(check_suite_options("counterbias", options), world)
    results, _ = run_suite(suite, adapter, model="albef", checkpoint=None, seed=seed, config={})
    every_image = build_suite(check_suite_options("counterbias", options | {"require_attack_success": False}), world)
    _, items = run_suite(every_image, adapter, model="albef", checkpoint=None, seed=seed, config={})
    row = {
        "method": method,
        "seed": seed,
        "alpha": cli.model.hparams.alpha if uses_kl(method) else None,
        "image_counterfactuals": _policy_spec(cli.model.hparams) if uses_images(method) else None,
        "counterfactual_targets": cli.model.hparams.counterfactual_targets if reads_targets(method) else None,
        "split": split,
        # training is float-sensitive (README): the same commit and seed give other numbers on another CPU
        "environment": environment(),
        "train_s": trained,
        "attack_success_rate": results.metrics["attack_success_rate"],
        "images": image_records(items, every_image.b0),
    }
    for measure in MEASURES:
        key = f"activity/{measure}/avg"
        row[measure], row[f"{measure}_interval"] = results.metrics[key], results.intervals.get(key)
    return row | accuracies(adapter, world, split)


#: A method's settings that a table may sweep, and their names in its labels.
VARIANTS = {"alpha": "alpha", "image_counterfactuals": "image", "counterfactual_targets": "targets"}


def _named(row: dict, keys: Sequence[str]) -> str:
    """The row's method with its settings ``keys`` (of :data:`VARIANTS`): ``fairvlp (alpha 0.5, image cached:128)``."""
    settings = [f"{VARIANTS[key]} {row.get(key)}" for key in keys]
    return f"{row['method']} ({', '.join(settings)})" if settings else row["method"]


def _label(row: dict, swept: set[tuple[str, str]]) -> str:
    """The method, with each setting (of :data:`VARIANTS`) the rows hold the method at several values of."""
    return _named(row, [key for key in VARIANTS if (row["method"], key) in swept])


def _in_order(labels: Sequence[str], methods: Sequence[str]) -> list[str]:
    """The distinct labels, by method in the order of ``methods``, then alphabetically (one summary line each)."""
    return sorted(set(labels), key=lambda label: (methods.index(label.split()[0]), label))


def _summary(rows: list[dict], methods: Sequence[str]) -> None:
    swept = {
        (method, key)
        for method in methods
        for key in VARIANTS
        if len({r.get(key) for r in rows if r["method"] == method}) > 1
    }
    print(
        "\n| method | seeds | "
        + " | ".join(MEASURES)
        + " | masked-activity acc | ITM acc | i2t R@1 | B@V-L vs vanilla | B@V-L vs vanilla, per seed | seeds lower |"
    )
    print("|---|---:|" + "---:|" * (len(MEASURES) + 6))
    vanilla = {r["seed"]: r["B@V-L"] for r in rows if r["method"] == "vanilla"}
    base = statistics.mean(vanilla.values()) if vanilla else None
    labels = [_label(r, swept) for r in rows]
    for label in _in_order(labels, methods):
        runs = [r for r, own in zip(rows, labels) if own == label]
        change = f"{100 * (statistics.mean(r['B@V-L'] for r in runs) / base - 1):+.0f} %" if base else "n/a"
        # paired: each seed's runs start from one initialisation and see the same batches
        paired = [100 * (r["B@V-L"] / vanilla[r["seed"]] - 1) for r in runs if r["seed"] in vanilla]
        per_seed = f"{mean_sd(paired, digits=0)} %" if paired else "n/a"
        lower = f"{sum(p < 0 for p in paired)} of {len(paired)}" if paired else "n/a"
        cells = " | ".join(mean_sd([r[key] for r in runs]) for key in (*MEASURES, *ACCURACIES))
        print(f"| {label} | {len(runs)} | {cells} | {change} | {per_seed} | {lower} |")
    _recall_parts(rows, labels, methods)
    _same_images(rows, labels, methods)


def _recall_parts(rows: list[dict], labels: list[str], methods: Sequence[str]) -> None:
    """Where image->text R@1 is lost: how often the best caption names the image's activity and how often its group,
    each method's mean and its change against vanilla seed by seed, in points. Rows from before the parts were kept
    (they have no ``i2t_r1_group``) are left out."""
    kept = [(r, label) for r, label in zip(rows, labels) if "i2t_r1_group" in r]
    if not kept:
        return
    vanilla = {r["seed"]: r for r, _ in kept if r["method"] == "vanilla"}
    print(
        "\n| method | seeds | i2t R@1 | its activity right | its group right | R@1 vs vanilla, per seed (points) "
        "| activity right vs vanilla | group right vs vanilla |"
    )
    print("|---|---:|" + "---:|" * 6)
    for label in _in_order([label for _, label in kept], methods):
        runs = [r for r, own in kept if own == label]
        cells = [mean_sd([r[key] for r in runs]) for key in RECALL_PARTS]
        for key in RECALL_PARTS:
            paired = [r[key] - vanilla[r["seed"]][key] for r in runs if r["seed"] in vanilla]
            cells.append(mean_sd(paired, digits=1) if paired else "n/a")
        print(f"| {label} | {len(runs)} | {' | '.join(cells)} |")


def _same_images(rows: list[dict], labels: list[str], methods: Sequence[str]) -> None:
    """B@V-L against vanilla's on the same images. CounterBias measures only the images whose attack succeeded, and a
    model trained on attacked images resists the attack, so its B@V-L and vanilla's cover different images. Here,
    seed by seed: both models on the images both attacks flipped, and both on every attacked image. Rows from before
    the image records were kept (no ``images``) are left out."""
    vanilla = {r["seed"]: r for r in rows if r["method"] == "vanilla" and "images" in r}
    kept = [(r, label) for r, label in zip(rows, labels) if r["method"] != "vanilla" and r["seed"] in vanilla]
    kept = [(r, label) for r, label in kept if "images" in r]
    if not kept:
        return
    print(
        "\n| method | seeds | images both attacks flip | B@V-L on them | vanilla's | change, per seed | seeds lower "
        "| B@V-L on every image | vanilla's | change, per seed | seeds lower |"
    )
    print("|---|---:|" + "---:|" * 9)
    for label in _in_order([label for _, label in kept], methods):
        columns: dict[str, list[float]] = {}
        for r in (r for r, own in kept if own == label):
            own, base = r["images"], vanilla[r["seed"]]["images"]
            both = {i for i in own if own[i]["attack_succeeded"]} & {i for i in base if base[i]["attack_succeeded"]}
            for name, images in (("both", both), ("every", set(own) & set(base))):
                method_bias, vanilla_bias = bias_on(own, images), bias_on(base, images)
                columns.setdefault(f"{name}_n", []).append(len(images))
                columns.setdefault(name, []).append(method_bias)
                columns.setdefault(f"{name}_vanilla", []).append(vanilla_bias)
                columns.setdefault(f"{name}_change", []).append(100 * (method_bias / vanilla_bias - 1))
        cells = [mean_sd(columns["both_n"], digits=0)]
        for name in ("both", "every"):
            changes = columns[f"{name}_change"]
            cells += [mean_sd(columns[name]), mean_sd(columns[f"{name}_vanilla"]), f"{mean_sd(changes, digits=0)} %"]
            cells.append(f"{sum(c < 0 for c in changes)} of {len(changes)}")
        print(f"| {label} | {len(columns['both'])} | {' | '.join(cells)} |")


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="Default 0 1 2; with --summary, keep these seeds' rows only"
    )
    parser.add_argument("--strength", type=float, default=0.9)
    parser.add_argument("--epochs", type=int, default=None, help="Override the config's max_epochs.")
    parser.add_argument(
        "--alpha", type=float, nargs="+", default=[None], help="Eq. 16's alpha for the KL methods (default: config's)"
    )
    parser.add_argument(
        "--image_counterfactuals",
        type=_policy_argument,
        nargs="+",
        default=[None],
        help="Attack policies POLICY[:k] for the image methods (default: config's), e.g. every_step cached:128",
    )
    parser.add_argument(
        "--counterfactual_targets",
        nargs="+",
        choices=COUNTERFACTUAL_TARGETS,
        default=[None],
        help="Targets of the counterfactual branch at a masked bias word, for fairvlp_l and fairvlp (default: config's)",
    )
    parser.add_argument("--split", choices=("val", "test"), default="test", help="BiasWorld split to measure")
    parser.add_argument("--workers", type=int, default=1, help="Runs trained at once (processes).")
    parser.add_argument("--out", type=Path, default=None, help="Write the rows to this JSON file (after every run).")
    parser.add_argument(
        "--summary",
        type=Path,
        nargs="+",
        default=None,
        help="Train nothing: print the tables from the --out files of earlier runs (e.g. seeds split over machines).",
    )
    args = parser.parse_args(argv)
    if args.summary:
        rows = [row for path in args.summary for row in json.loads(path.read_text())]
        rows = [row for row in rows if args.seeds is None or row["seed"] in args.seeds]
        for row in rows:  # rows from before the option was recorded were trained with swapped targets
            if reads_targets(row["method"]):
                row.setdefault("counterfactual_targets", "swapped")
        splits = sorted({row.get("split", "test") for row in rows})
        _header(args.strength, args.epochs, sorted({row["seed"] for row in rows}), ", ".join(splits))
        for row in rows:
            _print_row(row)
        _summary(rows, [m for m in METHODS if any(row["method"] == m for row in rows)])
        return rows
    seeds = [0, 1, 2] if args.seeds is None else args.seeds
    jobs = [
        (method, seed, args.strength, args.epochs, alpha, args.split, spec, targets)
        for seed in seeds
        for method in args.methods
        for alpha in (args.alpha if uses_kl(method) else [None])
        for spec in (args.image_counterfactuals if uses_images(method) else [None])
        for targets in (args.counterfactual_targets if reads_targets(method) else [None])
    ]
    _header(args.strength, args.epochs, seeds, args.split)
    rows = run_table(run, jobs, args.workers, _print_row, args.out)
    _summary(rows, args.methods)
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
    label = _named(r, [key for key in VARIANTS if r.get(key) is not None])
    print(
        f"| {label} | {r['seed']} | {measures} | {r['attack_success_rate']:.2f} | {r['masked_activity']:.1f} "
        f"| {r['itm']:.1f} | {r['i2t_r1']:.1f} | {r['train_s']:.0f} |",
        flush=True,
    )


if __name__ == "__main__":
    main()
