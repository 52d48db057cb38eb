"""Write a pruning run's directory, every file and folder atomically.

``<out>/model/`` (:class:`~vlbias.models.pruned.PrunedEmbeddings`, loadable by
``vlbias measure --model pruned --checkpoint <out>/model``), for a CLIP model also ``<out>/clip/`` (a standard
``transformers.CLIPModel`` directory, :func:`~vlbias.models.pruned.export_pruned_clip`), ``<out>/prune.json``,
``<out>/tradeoff.csv`` and ``<out>/tradeoff.png``. Files go through :func:`vlbias.atomic.atomic_write`; a
folder is written beside its target under a temporary name and renamed into place, so a reader finds the
old folder or the whole new one (a replaced old folder is moved aside first, then deleted).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from vlbias.atomic import atomic_write
from vlbias.mitigation.tradeoff import plot_tradeoff
from vlbias.models.base import ModelAdapter
from vlbias.models.clip import CLIPAdapter
from vlbias.models.pruned import PrunedEmbeddings, export_pruned_clip
from vlbias.results import ensure_writable


def atomic_directory(target: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(folder)`` on a fresh temporary folder beside ``target``, then rename it to ``target``."""
    temporary = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    umask = os.umask(0)
    os.umask(umask)
    temporary.chmod(0o777 & ~umask)  # mkdtemp makes it private; the folder is meant to be shared like any other
    try:
        write(temporary)
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
            os.replace(target, old / target.name)
            os.replace(temporary, target)
            shutil.rmtree(old)
        else:
            os.replace(temporary, target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def write_pruning_outputs(
    out: str | Path, adapter: ModelAdapter, summary: dict, rows: Sequence[dict], chosen: int
) -> Path:
    """Write the run directory ``out`` (see the module); ``summary`` is ``prune.json``'s content (its
    ``kept`` the dimensions to keep), ``rows`` the trade-off table. Returns the path of ``prune.json``."""
    out = ensure_writable(out)
    kept = summary["kept"]
    atomic_directory(out / "model", lambda folder: PrunedEmbeddings(adapter, kept).save_pretrained(folder))
    if isinstance(adapter, CLIPAdapter):
        atomic_directory(out / "clip", lambda folder: export_pruned_clip(adapter, kept, folder))
    table = pd.DataFrame(list(rows))
    table["chosen"] = table["n_removed"] == chosen
    atomic_write(out / "tradeoff.csv", lambda handle: handle.write(table.to_csv(index=False).encode()))
    title = f"{summary['model']}: {summary['strategy']} pruning"
    png = plot_tradeoff(rows, chosen, title)
    atomic_write(out / "tradeoff.png", lambda handle: handle.write(png))
    path = out / "prune.json"
    payload = json.dumps(summary, indent=2, allow_nan=False).encode()
    atomic_write(path, lambda handle: handle.write(payload))
    return path
