"""Tables of runs: every run of a table in worker processes, its rows shown and saved as they end, and read back for
a summary; the runs of a planted-bias table, one per bias strength and seed; and the ``mean ± sd`` cells of the
tables' summaries."""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from vlbias.atomic import atomic_write
from vlbias.errors import InputError
from vlbias.metrics.functional.t_interval import t_interval


def run_table(
    run: Callable[..., dict], jobs: Sequence[tuple], workers: int, show: Callable[[dict], None], out: Path | None
) -> list[dict]:
    """``run(*job)`` for every job in ``workers`` processes, in order; each row is shown (``show``) as soon as it
    ends and, with ``out``, all rows so far are written there as JSON after every run (atomically), so a long
    table stopped half-way keeps what it measured."""
    rows: list[dict] = []
    with ProcessPoolExecutor(workers) as pool:
        for row in pool.map(run, *zip(*jobs)):
            rows.append(row)
            show(row)
            if out is not None:
                atomic_write(out, lambda handle: handle.write(json.dumps(rows, indent=1).encode()))
    return rows


def read_rows(path: Path) -> list[dict]:
    """The rows that :func:`run_table` wrote to ``path`` (a table script's ``--out``), for its ``--summary``; a file
    that is not such a list is refused with one line that names it."""
    try:
        rows = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise InputError(
            f"Expected a rows file written by --out at {path}, but it could not be read: {error}."
        ) from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"method", "seed"} <= r.keys() for r in rows):
        raise InputError(
            f"Expected {path} to hold the list of run rows that --out writes, each with a method and a seed."
        )
    return rows


def strength_seed_rows(
    measure: Callable[[float, int, str], dict], strengths: Sequence[float], seeds: Sequence[int], progress: bool = False
) -> list[tuple[float, int, dict]]:
    """``(strength, seed, measure(strength, seed, run_dir))`` for every strength x seed, in this process, each model
    exported to a temporary ``run_dir`` (dropped at the end); with ``progress``, each row printed as it ends."""
    rows = []
    with tempfile.TemporaryDirectory() as run_dir:
        for strength in strengths:
            for seed in seeds:
                rows.append((strength, seed, measure(strength, seed, run_dir)))
                if progress:
                    print(f"done: strength {strength}, seed {seed}: {rows[-1][2]}", flush=True)
    return rows


def mean_sd_interval(values: Sequence[float], digits: int = 2) -> str:
    """``"mean ± sd [low, high]"``: :func:`mean_sd` and the 95 % Student-t interval of the mean
    (:func:`~vlbias.metrics.functional.t_interval.t_interval`), for the change of a method against vanilla's run of
    the same seed, over the seeds; the mean alone for one value.

    Example:
        >>> mean_sd_interval([-2.0, 1.0])  # -0.5 ± t(0.975, 1) 2.12 / sqrt(2)
        '-0.50 ± 2.12 [-19.56, +18.56]'
    """
    if len(values) < 2:
        return mean_sd(values, digits)
    low, high = t_interval(torch.tensor(values, dtype=torch.float64)).tolist()
    return f"{mean_sd(values, digits)} [{low:+.{digits}f}, {high:+.{digits}f}]"


def mean_sd(values: Sequence[float], digits: int = 2) -> str:
    """``"mean ± sd"`` of ``values`` (the sample standard deviation) to ``digits`` decimals; the mean alone for one
    value. The tables print their per-method summaries with it.

    Example:
        >>> mean_sd([1.0, 2.0, 4.0]), mean_sd([3.14159], digits=3)
        ('2.33 ± 1.53', '3.142')
    """
    spread = f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.{digits}f}{spread}"
