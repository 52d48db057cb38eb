"""A model card (``README.md`` in the Hugging Face card layout) beside every exported checkpoint, so that a
debiased model travels with its evidence: base model, method and options, data, the bias metrics and the
accuracy before and after (with intervals where the results hold them), seed and vlbias version.

The card is YAML front matter (``library_name``, ``tags``, ``base_model`` when the base is a hub id; no
``license``, which vlbias cannot know) followed by Markdown sections. It recomputes nothing:

* :func:`pruning_card` reads a ``vlbias prune`` summary (``prune.json``): effect sizes and zero-shot accuracy
  before and after removing the chosen dimensions (the summary holds no intervals);
* :func:`training_card` reads a fit's run directory: the first and last epochs of the
  :class:`~vlbias.callbacks.BiasSuiteCallback` results (``.../epoch=NNN/<suite>.json``, metrics with their
  intervals) and, at the same epochs, the ``val/...`` metrics other than losses of ``metrics.csv`` (a CSV
  logger).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

import vlbias
from vlbias.atomic import atomic_write
from vlbias.errors import SchemaError
from vlbias.report.render import Heading, Table, Text, markdown
from vlbias.report.sources import epoch_table, read_numeric_csv
from vlbias.report.tables import number
from vlbias.results import is_count, read_results

CARD_NAME = "README.md"


@dataclass
class Change:
    """One metric before and after: values and ``[low, high]`` intervals (``None`` where there is none)."""

    name: str
    before: float | None
    after: float | None
    before_interval: list[float] | None = None
    after_interval: list[float] | None = None


@dataclass
class ModelCard:
    """What a card says. ``before`` and ``after`` name the two columns (e.g. ``epoch 0`` and ``epoch 11``);
    ``sources`` are the files the numbers come from."""

    title: str
    model: str
    base_model: str | None
    method: str
    options: dict
    data: dict
    seed: int | None
    bias: list[Change]
    accuracy: list[Change]
    before: str
    after: str
    sources: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)


def _interval(interval: list[float] | None) -> str:
    return "n/a" if not interval else f"[{number(interval[0])}, {number(interval[1])}]"


def _changes(title: str, changes: list[Change], card: ModelCard) -> list:
    if not changes:
        return [Heading(title), Text("None recorded at export.")]
    headers = ["metric", card.before, "interval", card.after, "interval"]
    rows = [
        [c.name, number(c.before), _interval(c.before_interval), number(c.after), _interval(c.after_interval)]
        for c in changes
    ]
    return [Heading(title), Table(headers, rows)]


def _hub_id(checkpoint: str | None) -> str | None:
    """``checkpoint`` when it names a hub model (not a local path), else ``None``."""
    return None if checkpoint is None or os.path.exists(checkpoint) else checkpoint


def _value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def card_text(card: ModelCard, library_name: str = "vlbias", usage: str | None = None) -> str:
    """The card as ``README.md`` text: YAML front matter, then the sections; ``usage`` is the line that
    loads the folder (default ``vlbias measure --model <model> --checkpoint <this folder> ...``)."""
    front = {"library_name": library_name, "tags": ["vlbias", "social-bias", *card.tags]}
    hub_id = _hub_id(card.base_model)
    if hub_id is not None:
        front["base_model"] = hub_id
    base = card.base_model or "a tiny random model, for tests"
    usage = usage or f"vlbias measure --model {card.model} --checkpoint <this folder> --suite <suite> --out <dir>"
    blocks = [
        Heading(card.title, 1),
        Text(f"{card.method} applied to model {card.model!r} with vlbias; the numbers are those of the Sources."),
        Heading("Model details"),
        Table(
            ["field", "value"],
            [
                ["base model", f"{card.model} ({base})"],
                ["method", card.method],
                ["seed", str(card.seed)],
                ["vlbias version", vlbias.__version__],
            ],
        ),
        Heading("Method options"),
        Table(["option", "value"], [[key, _value(value)] for key, value in card.options.items()]),
        Heading("Data"),
        Table(["field", "value"], [[key, _value(value)] for key, value in card.data.items()]),
        *_changes("Bias before and after", card.bias, card),
        *_changes("Accuracy before and after", card.accuracy, card),
        Heading("How to load"),
        Text(usage),
        Heading("Sources"),
        Text(", ".join(card.sources) or "none"),
    ]
    header = yaml.safe_dump(front, sort_keys=False)
    return f"---\n{header}---\n\n{markdown(blocks)}"


def write_model_card(
    directory: str | Path, card: ModelCard, library_name: str = "vlbias", usage: str | None = None
) -> Path:
    """Write ``<directory>/README.md`` (:func:`card_text`) atomically; return its path."""
    path = Path(directory) / CARD_NAME
    text = card_text(card, library_name, usage).encode()
    atomic_write(path, lambda handle: handle.write(text))
    return path


PRUNING_OPTIONS = ("strategy", "objective", "n_dims", "fraction", "n_remove", "theta", "theta_quantile", "mi_labels")


def pruning_card(summary: dict) -> ModelCard:
    """The card of a ``vlbias prune`` run from its ``prune.json`` content."""
    before, after = summary["effect_sizes_before"], summary["effect_sizes_after"]
    accuracy = summary["zero_shot_accuracy"]
    options = {key: summary.get(key) for key in PRUNING_OPTIONS}
    options |= {"removed": summary["removed"], "embedding_dim": summary["embedding_dim"]}
    return ModelCard(
        title=f"{summary['model']} with {summary['n_remove']} embedding dimensions pruned",
        model=summary["model"],
        base_model=None if summary.get("tiny") else summary.get("checkpoint"),
        method="MI-guided embedding-dimension pruning (MMBias Sec. 6, Algorithm 1)",
        options=options,
        data=dict(summary["data"]),
        seed=summary.get("seed"),
        bias=[Change(f"{test}/effect_size", value, after.get(test)) for test, value in before.items()],
        accuracy=[Change("zero_shot_accuracy", accuracy["before"], accuracy["after"])],
        before="before pruning",
        after="after pruning",
        sources=["prune.json"],
        tags=["debiasing", "embedding-pruning", summary["model"]],
    )


def _epoch_results(run_dir: Path) -> dict[int, list[Path]]:
    """The BiasSuiteCallback results under ``run_dir`` by epoch: ``{epoch: [<suite>.json, ...]}``."""
    found: dict[int, list[Path]] = {}
    for folder in sorted(run_dir.rglob("epoch=*")):
        epoch = folder.name.removeprefix("epoch=")
        if folder.is_dir() and epoch.isdigit():
            files = [p for p in sorted(folder.glob("*.json")) if p.with_suffix(".items.parquet").is_file()]
            found.setdefault(int(epoch), []).extend(files)
    return {epoch: files for epoch, files in found.items() if files}


def _bias_changes(first: list[Path], last: list[Path]) -> list[Change]:
    """Every bias metric (not the counts, :func:`~vlbias.results.is_count`) of the last epoch's results, with the
    first epoch's value of the same file name."""
    earlier = {path.name: read_results(path) for path in first}
    changes = []
    for path in last:
        now, then = read_results(path), earlier.get(path.name)
        prefix = path.name.removesuffix(".json")
        for metric, value in now.metrics.items():
            if is_count(metric):
                continue
            changes.append(
                Change(
                    f"{prefix}/{metric}",
                    None if then is None else then.metrics.get(metric),
                    value,
                    None if then is None else then.intervals.get(metric),
                    now.intervals.get(metric),
                )
            )
    return changes


def _accuracy_changes(table: pd.DataFrame, epochs: tuple[int, int]) -> list[Change]:
    """The values of every ``val/...`` column but losses (accuracies, recalls) of an epoch table at the two
    ``epochs`` (``None`` where that epoch logged none)."""
    rows = table.set_index("epoch")
    changes = []
    for column in (c for c in table.columns if c.startswith("val/") and "loss" not in c):
        before, after = (rows[column].get(epoch) for epoch in epochs)
        before, after = (None if pd.isna(v) else float(v) for v in (before, after))
        if before is not None or after is not None:
            changes.append(Change(column, before, after))
    return changes


def _settings(values: dict, leave_out: tuple[str, ...] = ()) -> dict:
    """``values`` without ``leave_out`` and without LightningCLI's own keys (``_class_path``, ``_instantiator``)."""
    return {key: value for key, value in values.items() if key not in leave_out and not key.startswith("_")}


def training_card(run_dir: str | Path, method: str, hparams: dict, data: dict) -> ModelCard:
    """The card of a fit whose run directory (``trainer.log_dir``) is ``run_dir``: ``method`` (the module's
    class), its ``hparams`` and the datamodule's (``data``; keys starting with ``_``, LightningCLI's, are left
    out); bias and accuracy of the first and last epochs."""
    run_dir = Path(run_dir)
    by_epoch = _epoch_results(run_dir)
    metrics_csv = run_dir / "metrics.csv"
    table, left_out = None, []
    if metrics_csv.is_file():  # cells that are not finite numbers are left out and named among the sources
        read, left_out = read_numeric_csv(metrics_csv)
        table = epoch_table(read, metrics_csv)
    epochs = None
    if by_epoch:
        epochs = (min(by_epoch), max(by_epoch))
    elif table is not None and len(table):
        epochs = (int(table["epoch"].iloc[0]), int(table["epoch"].iloc[-1]))
    bias: list[Change] = []
    sources: list[str] = [f"(metrics.csv {problem})" for problem in left_out]
    if by_epoch:
        try:
            bias = _bias_changes(by_epoch[epochs[0]], by_epoch[epochs[1]])
        except SchemaError as err:  # a card never stops an export; it says what it could not read
            sources.append(f"(bias results not read: {err})")
        else:
            sources += [p.relative_to(run_dir).as_posix() for p in by_epoch[epochs[0]] + by_epoch[epochs[1]]]
    accuracy = _accuracy_changes(table, epochs) if table is not None and epochs is not None else []
    if accuracy:
        sources.append("metrics.csv")
    before, after = ("first epoch", "last epoch") if epochs is None else (f"epoch {epochs[0]}", f"epoch {epochs[1]}")
    model = str(hparams.get("model"))
    return ModelCard(
        title=f"{model} trained with {method}",
        model=model,
        base_model=None if hparams.get("tiny") else hparams.get("checkpoint"),
        method=method,
        options=_settings(hparams, leave_out=("model", "checkpoint")),
        data=_settings(data),
        seed=hparams.get("seed"),
        bias=bias,
        accuracy=accuracy,
        before=before,
        after=after,
        sources=sorted(dict.fromkeys(sources)),
        tags=["vision-language", method, model],
    )
