"""Step time of every FairVLP method against ``vanilla`` in the same run (tiny ALBEF, CPU by default).

    python scripts/bench_fairvlp.py                       # the config's sizes, 16 timed steps per method
    python scripts/bench_fairvlp.py --steps 8 --epoch_batches 2 --batch_size 16

Every method is built from ``configs/experiment/fairvlp_biasworld.yaml``'s model options, and one
training step (forward, backward, optimizer step) is timed per method in turn, round after round, so a
change in machine load hits every method alike; the mean over rounds is reported (a periodic attack counts in
full), with its ratio to ``vanilla`` and the share of the timed steps' images that were attacked. ``fairvlp`` is
timed under each image-counterfactual policy; the policy of the config is the default one. The targets:
``fairvlp_l`` <= 2.2x and ``fairvlp`` (default policy) <= 2.5x vanilla.

The rounds cycle through ``--epoch_batches`` batches, as training cycles through its epochs, so that ``cached``
reads images again: its version length k is scaled to keep the config's number of epochs per version (k 128 at the
config's 32 steps an epoch is 4 epochs: 16 steps over 4 batches). With as many timed steps as a version has, every
periodic policy attacks the share of steps it would in training (``every_n_steps`` k 4 and that ``cached``: a
quarter).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import yaml

from vlbias.data.biasworld import BiasWorld
from vlbias.modules.fairvlp import METHODS, FairVLP, uses_images

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "fairvlp_biasworld.yaml"
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

    def with_policy(policy: str, k: int) -> tuple[str, dict]:
        here = _bench_k(policy, k, steps_per_epoch, epoch_batches)
        label = f"{policy}(k={k}{f', {here} here' if here != k else ''})"
        return label, {**options, "image_counterfactuals": policy, "k": here}

    label, default = with_policy(options["image_counterfactuals"], options["k"])
    variants = {f"{m} [{label}]" if uses_images(m) else m: {**default, "method": m} for m in METHODS}
    for policy, k in POLICY_RUNS:
        label, policy_options = with_policy(policy, k)
        variants.setdefault(f"fairvlp [{label}]", {**policy_options, "method": "fairvlp"})
    return variants


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=16, help="Timed rounds (one step per method each).")
    parser.add_argument("--epoch_batches", type=int, default=4, help="Distinct batches the rounds cycle through.")
    parser.add_argument("--batch_size", type=int, default=None, help="Default: the config's batch size.")
    parser.add_argument("--threads", type=int, default=1, help="torch threads.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(CONFIG.read_text())
    options = config["model"]["init_args"]
    batch_size = args.batch_size or config["data"]["init_args"]["batch_size"]
    steps_per_epoch = config["data"]["init_args"]["n_train"] // config["data"]["init_args"]["batch_size"]
    world = BiasWorld(bias_strength=0.9, n_train=batch_size * args.epoch_batches, eval_per_combination=1)
    dataset = world.dataset("train")
    batches = [
        torch.utils.data.default_collate([dataset[i] for i in range(s * batch_size, (s + 1) * batch_size)])
        for s in range(args.epoch_batches)
    ]
    runs = {}
    for label, init in _variants(options, steps_per_epoch, args.epoch_batches).items():
        module = _Timed(**init)
        attacked: list[float] = []  # per step: the share of the batch's images attacked
        module.log = _recorder(attacked)  # no trainer: the step alone is timed
        runs[label] = (module, torch.optim.AdamW(module.parameters(), lr=1e-4), [], attacked)
    for step in range(args.steps + 2):  # two warm-up rounds
        for module, optimizer, times, attacked in runs.values():
            module.step = step
            attacked.append(0.0)
            start = time.perf_counter()
            loss = module.training_step(batches[step % args.epoch_batches], step)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step >= 2:
                times.append(time.perf_counter() - start)
    base = statistics.mean(runs["vanilla"][2])
    rows = [
        {
            "method": label,
            "ms": 1000 * statistics.mean(times),
            "ratio": statistics.mean(times) / base,
            "attacked": statistics.mean(attacked[2:]),
        }
        for label, (_, _, times, attacked) in runs.items()
    ]
    print(
        f"CPU, batch {batch_size}, {args.steps} timed steps per method cycling through {args.epoch_batches} batches "
        f"(the config: {steps_per_epoch} an epoch), torch threads {args.threads}\n"
    )
    print("| method [image policy] | mean step ms | x vanilla | images attacked |\n|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['method']} | {row['ms']:.0f} | {row['ratio']:.2f} | {row['attacked']:.2f} |")
    return rows


def _recorder(attacked: list[float]):
    """A ``log`` for a module stepped without a trainer: keeps the share of images attacked this step."""

    def log(name: str, value, **_) -> None:
        if name == "train/cf_image_attacked":
            attacked[-1] = float(value)

    return log


if __name__ == "__main__":
    main()
