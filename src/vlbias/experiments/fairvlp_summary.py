"""The FairVLP table's summaries (:mod:`vlbias.experiments.fairvlp_table`), printed from its rows: per method (and
per setting swept) the mean over seeds and the change against ``vanilla``, of the means and seed by seed; where
image->text R@1 is lost; and B@V-L against vanilla's on the same images."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from vlbias.experiments.fairvlp_measures import bias_on
from vlbias.experiments.tables import mean_sd, mean_sd_interval

MEASURES = ("B@V-L", "B@V", "B@L")
ACCURACIES = ("masked_activity", "itm", "i2t_r1")
RECALL_PARTS = ("i2t_r1", "i2t_r1_activity", "i2t_r1_group")  # R@1; the best caption's activity right; its group
#: A method's settings that a table may sweep, and their names in its labels.
VARIANTS = {"alpha": "alpha", "image_counterfactuals": "image", "counterfactual_targets": "targets"}


def named(row: dict, keys: Sequence[str]) -> str:
    """The row's method with its settings ``keys`` (of :data:`VARIANTS`): ``fairvlp (alpha 0.5, image cached:128)``."""
    settings = [f"{VARIANTS[key]} {row.get(key)}" for key in keys]
    return f"{row['method']} ({', '.join(settings)})" if settings else row["method"]


def _label(row: dict, swept: set[tuple[str, str]]) -> str:
    """The method, with each setting (of :data:`VARIANTS`) the rows hold the method at several values of."""
    return named(row, [key for key in VARIANTS if (row["method"], key) in swept])


def _in_order(labels: Sequence[str], methods: Sequence[str]) -> list[str]:
    """The distinct labels, by method in the order of ``methods``, then alphabetically (one summary line each)."""
    return sorted(set(labels), key=lambda label: (methods.index(label.split()[0]), label))


def print_summary(rows: list[dict], methods: Sequence[str]) -> None:
    """The mean over seeds per method (± the standard deviation), the change of its mean B@V-L against
    ``vanilla``'s, and the change seed by seed (each seed's run against vanilla's run of that seed: one
    initialisation, the same batches), mean ± standard deviation over the seeds with the 95 % t-interval of the
    mean, and on how many seeds it is lower than vanilla's; then the tables of :func:`_recall_parts` and
    :func:`_same_images`."""
    methods = list(methods)
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
        per_seed = f"{mean_sd_interval(paired, digits=0)} %" if paired else "n/a"
        lower = f"{sum(p < 0 for p in paired)} of {len(paired)}" if paired else "n/a"
        cells = " | ".join(mean_sd([r[key] for r in runs]) for key in (*MEASURES, *ACCURACIES))
        print(f"| {label} | {len(runs)} | {cells} | {change} | {per_seed} | {lower} |")
    _recall_parts(rows, labels, methods)
    _same_images(rows, labels, methods)


def _recall_parts(rows: list[dict], labels: list[str], methods: Sequence[str]) -> None:
    """Where image->text R@1 is lost: how often the best caption names the image's activity and how often its group,
    each method's mean and its change against vanilla seed by seed, in points (with the 95 % t-interval of the mean
    change). Rows from before the parts were kept (they have no ``i2t_r1_group``) are left out."""
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
            cells.append(mean_sd_interval(paired, digits=1) if paired else "n/a")
        print(f"| {label} | {len(runs)} | {' | '.join(cells)} |")


def _same_images(rows: list[dict], labels: list[str], methods: Sequence[str]) -> None:
    """B@V-L against vanilla's on the same images. CounterBias measures only the images whose attack succeeded, and a
    model trained on attacked images resists the attack, so its B@V-L and vanilla's cover different images. Here,
    seed by seed (with the 95 % t-interval of the mean change): both models on the images both attacks flipped, and
    both on every attacked image. Rows from before the image records were kept (no ``images``) are left out."""
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
            cells += [mean_sd(columns[name]), mean_sd(columns[f"{name}_vanilla"]), f"{mean_sd_interval(changes, 0)} %"]
            cells.append(f"{sum(c < 0 for c in changes)} of {len(changes)}")
        print(f"| {label} | {len(columns['both'])} | {' | '.join(cells)} |")
