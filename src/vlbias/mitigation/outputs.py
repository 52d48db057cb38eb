"""Write a pruning run's folder as a unit (:data:`PRUNE_FOLDER`), and say when a pruned model is measured on the data
its dimensions were chosen on (:func:`selection_overlap`).

``<out>/model/`` (:class:`~vlbias.models.families.pruned.PrunedEmbeddings`, loadable by
``vlbias measure --model pruned --checkpoint <out>/model``, with :data:`SELECTION_FILE`: the data it was pruned on),
for a family that folds a linear map into its own format (:meth:`~vlbias.models.base.ModelAdapter.export_linear`) also
``<out>/<family>/``: ``<out>/clip/`` a standard ``transformers.CLIPModel`` directory, ``<out>/open_clip/`` open_clip's
own ``local-dir:`` format (the family of the innermost model: pruning a ``debiased`` CLIP writes ``<out>/clip/``,
:attr:`~vlbias.models.base.ModelAdapter.export_family`); ``<out>/prune.json``, ``<out>/tradeoff.csv`` and ``<out>/tradeoff.png``. The folder is
written whole beside ``<out>`` and put in its place in one step (:class:`vlbias.atomic.OutputFolder`): a reader, or a
run killed at any moment, finds the old folder whole or the new one whole; a folder that is not an earlier output of
``vlbias prune`` is refused, not replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from vlbias.atomic import OutputFolder
from vlbias.mitigation.tradeoff import plot_tradeoff
from vlbias.models.base import ModelAdapter
from vlbias.models.families.pruned import PrunedEmbeddings, row_selection
from vlbias.models.linear_export import EXPORTING_FAMILIES
from vlbias.results import json_dumps

PRUNE_FOLDER = OutputFolder(
    "vlbias prune",
    "prune.json",
    frozenset({"model", *EXPORTING_FAMILIES, "prune.json", "tradeoff.csv", "tradeoff.png"}),
)
#: The file in ``<out>/model`` naming the data the dimensions were chosen on: ``{"data": "biasworld", "split",
#: "seed"}`` (the world's seed) or ``{"data": <absolute path of an MMBias folder>}``.
SELECTION_FILE = "selected_on.json"


def write_pruning_outputs(
    out: str | Path,
    adapter: ModelAdapter,
    summary: dict,
    rows: Sequence[dict],
    chosen: int,
    files: Mapping[str, bytes] | None = None,
) -> Path:
    """Write the run folder ``out`` as a unit (see the module); ``summary`` is ``prune.json``'s content (its ``kept``
    the dimensions to keep, its ``data`` the data they were chosen on), ``rows`` the trade-off table, ``files``
    more files by path inside the folder (a model card per exported model; one whose folder is not written, such
    as ``clip/`` of a model that is not CLIP, is left out). Returns the path of ``prune.json``."""
    kept = summary["kept"]

    def write(folder: Path) -> None:
        pruned = PrunedEmbeddings(adapter, kept)
        pruned.save_pretrained(folder / "model")
        (folder / "model" / SELECTION_FILE).write_text(json.dumps(selection(summary["data"] or {}), indent=2))
        if adapter.linear_export_refusal() is None:
            keep = row_selection(kept, pruned.embedding_dim)
            adapter.export_linear(keep, keep, folder / adapter.export_family)
        table = pd.DataFrame(list(rows))
        table["chosen"] = table["n_removed"] == chosen
        (folder / "tradeoff.csv").write_text(table.to_csv(index=False))
        title = f"{summary['model']}: {summary['strategy']} pruning"
        (folder / "tradeoff.png").write_bytes(plot_tradeoff(rows, chosen, title))
        (folder / "prune.json").write_text(json_dumps(summary))
        for name, content in (files or {}).items():
            if (folder / name).parent.is_dir():
                (folder / name).write_bytes(content)

    return PRUNE_FOLDER.replace(out, write) / "prune.json"


def check_exportable(adapter: ModelAdapter) -> None:
    """Refuse, before any image is embedded, a model of a family that exports in its own format whose export cannot
    be written (:meth:`~vlbias.models.base.ModelAdapter.check_linear_export`: an open_clip model whose towers do not
    end in a linear projection, a timm or Hugging Face tower); a family without such an export writes ``model/``
    only."""
    if adapter.linear_export_refusal() is None:
        adapter.check_linear_export()


def selection(data: Mapping[str, object]) -> dict[str, object]:
    """What :data:`SELECTION_FILE` records of a run's ``data`` config (``prune.json``'s ``data``; a seed it does not
    give is ``None``, an unknown source ``{}``).

    Example:
        >>> selection({"data": "biasworld", "split": "val", "seed": 0, "n_train": 2048})
        {'data': 'biasworld', 'split': 'val', 'seed': 0}
    """
    source = data.get("data")
    if source == "biasworld":
        return {"data": "biasworld", "split": data.get("split"), "seed": data.get("seed")}
    return {"data": str(Path(source).resolve())} if isinstance(source, str) else {}


def selection_overlap(checkpoint: str | Path, data: str, split: str | None, seed: int) -> str | None:
    """Why measuring the pruned model at ``checkpoint`` on ``data`` (``"biasworld"``'s ``split`` of the world of
    ``seed``, or a data path) judges it on the data its dimensions were chosen on (:func:`same_selection` of its
    :data:`SELECTION_FILE`), or ``None``: another split or world, other data, or a checkpoint without the file.

    Example:
        >>> import tempfile
        >>> model = Path(tempfile.mkdtemp())
        >>> _ = (model / SELECTION_FILE).write_text('{"data": "biasworld", "split": "val", "seed": 0}')
        >>> selection_overlap(model, "biasworld", "test", 0) is None
        True
        >>> print(selection_overlap(model, "biasworld", "val", 0))  # doctest: +ELLIPSIS
        Model ... was pruned on BiasWorld's 'val' split (seed 0), the split it is measured on now: ...
    """
    path = Path(checkpoint) / SELECTION_FILE
    if not path.is_file():
        return None
    where = same_selection(json.loads(path.read_text()), data, split, seed)
    if where is None:
        return None
    return (
        f"Model {str(checkpoint)!r} was pruned on {where} it is measured on now: its dimensions were chosen to lower "
        "this very bias, so the number overstates the effect; measure it on other data (prune chooses on 'val', "
        "measure on 'test')."
    )


def same_selection(chosen: Mapping[str, object], data: str, split: str | None, seed: int) -> str | None:
    """Where a model was fitted or pruned, when ``chosen`` (a :func:`selection`) is the data it is measured on now
    (``"biasworld"``'s ``split`` of the world of ``seed``, or a data path): "BiasWorld's 'val' split (seed 0), the
    split" or "'<path>', the data"; ``None`` when they differ.

    Example:
        >>> same_selection({"data": "biasworld", "split": "val", "seed": 0}, "biasworld", "val", 0)
        "BiasWorld's 'val' split (seed 0), the split"
        >>> same_selection({"data": "biasworld", "split": "val", "seed": 0}, "biasworld", "test", 0) is None
        True
    """
    if data == "biasworld":
        same = chosen.get("data") == "biasworld" and chosen.get("split") == split and chosen.get("seed") in (None, seed)
        where = f"BiasWorld's {split!r} split (seed {seed}), the split"
    else:
        same = chosen.get("data") == str(Path(data).resolve())
        where = f"{data!r}, the data"
    return where if same else None
