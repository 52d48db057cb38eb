"""Throughput of every registered adapter's capabilities, adapter vs the wrapped model called directly
(``scripts/bench_models.py``).

For each model and each capability it declares, the same pre-tokenised batch goes through
``adapter.run_capability`` (the adapter) and ``adapter.direct_call`` (the library model, no
adapter code), interleaved in one run under :func:`vlbias.models.inference.measuring`: after
``warmup`` calls of each, ``repeats`` pairs, each an adapter call and a direct call back to
back, the order alternating from pair to pair so that drift hits both alike. The adapter's
overhead is the median over pairs of ``t_adapter / t_direct - 1`` (target: at most 5 %): a pair's
two calls see the same machine load, and the median ignores the pairs a descheduling hit, where
a ratio of minima would compare two calls made at different moments. Items per second are from
each side's median time.

An overhead only means something when both sides do the same work. Each side's floating-point
operations (``torch.utils.flop_counter``) and tensor operators (aten calls) are counted once; a row
whose direct call does more than 1 % more FLOPs or 10 % more operators than the adapter is labelled
``direct does more work`` and left out of ``max_overhead``: e.g. FLAVA's documented
``FlavaForPreTraining`` call runs every pre-training head where the adapter runs one, VisualBERT's and
LXMERT's token states come with the pre-training heads, and ViLT's ``ViltEmbeddings.visual_embed``
loops over the images where the adapter embeds the patches in one batched call. ``FLOPs d/a`` and
``ops d/a`` are the direct call's counts over the adapter's.

On CPU torch runs one thread by default (``threads``), which keeps timings stable on a shared
machine; on a loaded one, ``clock="thread"`` times each call by this thread's CPU time, which leaves
out the time other processes hold the core; tiny models take about a millisecond a call, so use ``base_size`` or
real checkpoints, ideally on a GPU, for numbers that mean throughput.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from json import dumps
from typing import Literal

import torch
from jsonargparse.typing import NonNegativeInt, PositiveInt
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from vlbias.errors import ConfigError
from vlbias.experiments.bench.timing import Clock, clock_for, elapsed, interleaved
from vlbias.models.base import Capability
from vlbias.models.catalog import adapter_class, list_models
from vlbias.models.inference import measuring
from vlbias.models.registry import check_device, load
from vlbias.models.tiny_sizes import split_sizes
from vlbias.runtime.threads import torch_threads

# ViT-B / BERT-base sizes, passed to each adapter's ``tiny()`` where its tiny sizes have that field.
BASE_SIZE = {"hidden_size": 768, "num_layers": 12, "image_size": 224, "patch_size": 32, "projection_dim": 512}
# A direct call with this much more FLOPs or tensor operators than the adapter's does other work (more heads, a
# per-image loop): its row says nothing about the adapter's overhead. An adapter doing more counts against it.
FLOPS_TOLERANCE, OPERATORS_TOLERANCE = 0.01, 0.10
TEXTS = ("a photo of a man repairing.", "the woman is cooking.", "a person who is driving in a picture.", "someone.")
MODELS = tuple(list_models())
Model = Literal[MODELS]


def checkpoints_by_name(items: Sequence[str]) -> dict[str, str]:
    """``NAME=PATH`` items as ``{NAME: PATH}``, each NAME a registered model.

    Example:
        >>> checkpoints_by_name(["clip=openai/clip-vit-base-patch32"])
        {'clip': 'openai/clip-vit-base-patch32'}
    """
    checkpoints = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or name not in MODELS:
            raise ConfigError(
                f"Expected --checkpoint values NAME=PATH with NAME one of {', '.join(MODELS)} but got {item!r}."
            )
        checkpoints[name] = path
    return checkpoints


def build(name: str, checkpoint: str | None, sizes: dict[str, int], device: str):
    """The adapter, and a note on its weights: the checkpoint, or the sizes its ``tiny()`` took."""
    if checkpoint is not None:
        return load(name, checkpoint=checkpoint, device=device), checkpoint
    applied = split_sizes(adapter_class(name).tiny_sizes, sizes)[0]
    note = "random " + (",".join(f"{key}={value}" for key, value in applied.items()) or "tiny")
    return load(name, tiny=True, device=device, options=applied), note


def batch_for(model, capability: Capability, batch_size: int):
    """Pre-tokenised inputs: random images (or none for a text-only model) and captions."""
    texts = [TEXTS[i % len(TEXTS)] for i in range(batch_size)]
    if capability is Capability.FILL_MASK:
        mask = model.tokenizer.mask_token
        texts = [text.replace(" is ", f" {mask} ", 1) if " is " in text else f"{mask} {text}" for text in texts]
    tokens = model.prepare_texts(texts)
    if model.text_only:
        return None, tokens
    generator = torch.Generator().manual_seed(0)
    return model.prepare_images(torch.rand(batch_size, 3, 64, 64, generator=generator)), tokens


class OperatorCount(TorchDispatchMode):
    """Counts the tensor operators (aten calls) run inside it: each one a kernel and its dispatch."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def work(call) -> tuple[int, int]:
    """Floating-point operations (matrix products, convolutions, attention) and tensor operators of one ``call``."""
    with FlopCounterMode(display=False) as flops, OperatorCount() as operators:
        call()
    return flops.get_total_flops(), operators.count


def bench(model, weights: str, capability: Capability, batch_size: int, repeats: int, warmup: int, clock) -> dict:
    """One row: the adapter and the direct call on one capability, timed in interleaved pairs."""
    pixel_values, tokens = batch_for(model, capability, batch_size)
    calls = {
        "adapter": lambda: model.run_capability(capability, pixel_values, tokens),
        "direct": lambda: model.direct_call(capability, pixel_values, tokens),
    }
    with measuring(model.device):
        (adapter_flops, adapter_ops), (direct_flops, direct_ops) = (work(call) for call in calls.values())
        for _ in range(warmup):
            for call in calls.values():
                call()
        # pairs, alternating which goes first, so drift hits both alike
        times = interleaved(calls, repeats, lambda label: elapsed(calls[label], model.device, clock))
    ratios = [adapter / direct for adapter, direct in zip(times["adapter"], times["direct"])]
    flops_ratio = direct_flops / adapter_flops if adapter_flops else 1.0
    return {
        "model": model.name,
        "weights": weights,
        "capability": capability.value,
        "batch_size": batch_size,
        "adapter_items_per_s": batch_size / statistics.median(times["adapter"]),
        "direct_items_per_s": batch_size / statistics.median(times["direct"]),
        "overhead": statistics.median(ratios) - 1.0,
        "direct_flops_ratio": flops_ratio,
        "direct_operators_ratio": direct_ops / adapter_ops,
        # the direct call does more work than the adapter: its extra time is not the adapter's overhead
        "more_direct_work": flops_ratio > 1 + FLOPS_TOLERANCE or direct_ops / adapter_ops > 1 + OPERATORS_TOLERANCE,
    }


def _print_table(rows: list[dict], device: str, batch_size: int, warmup: int, repeats: int, clock: str) -> None:
    threads = f" threads={torch.get_num_threads()}" if torch.device(device).type == "cpu" else ""
    print(
        f"device={device}{threads} batch={batch_size} warmup={warmup} repeats={repeats} "
        f"clock={clock} "
        f"torch={torch.__version__}; overhead = median over interleaved pairs of t_adapter / t_direct - 1"
    )
    print(
        f"{'model':<13} {'capability':<13} {'adapter it/s':>13} {'direct it/s':>12} {'overhead':>9} "
        f"{'FLOPs d/a':>10} {'ops d/a':>8}  weights"
    )
    for row in rows:
        note = "  (direct does more work: not an adapter overhead)" if row["more_direct_work"] else ""
        print(
            f"{row['model']:<13} {row['capability']:<13} {row['adapter_items_per_s']:>13.1f} "
            f"{row['direct_items_per_s']:>12.1f} {row['overhead']:>+9.1%} {row['direct_flops_ratio']:>10.3f} "
            f"{row['direct_operators_ratio']:>8.2f}  {row['weights']}{note}"
        )


def bench_models(
    models: Sequence[Model] = MODELS,
    checkpoint: Sequence[str] = (),
    base_size: bool = False,
    device: str | None = None,
    batch_size: PositiveInt = 16,
    repeats: PositiveInt = 20,
    warmup: NonNegativeInt = 3,
    max_overhead: float | None = None,
    json: bool = False,
    threads: int = 1,
    clock: Clock = "wall",
) -> int:
    """Time every capability of each model, adapter against direct call, and print the rows.

    Returns the exit status: 1 when an overhead exceeds ``max_overhead``, else 0.

    Args:
        models: Models to time.
        checkpoint: NAME=PATH: real weights for some models (hub id or local directory); others stay tiny.
        base_size: Random models at ViT-B/BERT-base sizes.
        device: Torch device (default: cuda when there is one, else cpu).
        batch_size: Items per call.
        repeats: Timed pairs of calls per capability.
        warmup: Untimed calls of each side first.
        max_overhead: Exit with status 1 if any overhead exceeds this fraction (e.g. 0.05).
        json: Print one JSON list instead of a table.
        threads: CPU threads for torch (default 1: on a shared CPU, a pool of several threads stalls for ~100 ms
            whenever one of them is descheduled).
        clock: wall: elapsed time; thread: this thread's CPU time, which leaves out the time other processes hold
            the core (a loaded machine), valid on CPU with --threads 1 only.
    """
    device = str(check_device(device))
    timer = clock_for(clock, threads, device)
    checkpoints = checkpoints_by_name(checkpoint)
    sizes = BASE_SIZE if base_size else {}
    with torch_threads(threads if torch.device(device).type == "cpu" else torch.get_num_threads()):
        rows = []
        for name in models:
            model, weights = build(name, checkpoints.get(name), sizes, device)
            for capability in sorted(model.capabilities):
                rows.append(bench(model, weights, capability, batch_size, repeats, warmup, timer))
            del model
        if json:
            print(dumps(rows, indent=2))
        else:
            _print_table(rows, device, batch_size, warmup, repeats, clock)
    comparable = [row for row in rows if not row["more_direct_work"]]
    worst = max(comparable, key=lambda row: row["overhead"], default=None)
    if max_overhead is not None and worst is not None and worst["overhead"] > max_overhead:
        print(
            f"overhead {worst['overhead']:.1%} of {worst['model']}/{worst['capability']} exceeds {max_overhead:.1%}",
            file=sys.stderr,
        )
        return 1
    return 0
