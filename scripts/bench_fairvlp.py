"""Step time of every FairVLP method against ``vanilla`` in the same run (tiny ALBEF, CPU by default).

    python scripts/bench_fairvlp.py                       # the config's sizes, 8 timed steps per method
    python scripts/bench_fairvlp.py --steps 4 --batch_size 16

Every method is built from ``configs/experiment/fairvlp_biasworld.yaml``'s model options, and one
training step (forward, backward, optimizer step) is timed per method in turn, round after round, so a
change in machine load hits every method alike; the mean over rounds is reported (a periodic attack counts in full), with its ratio to
``vanilla``. ``fairvlp`` is timed under each image-counterfactual policy; the policy of the config is
the default one. The targets: ``fairvlp_l`` <= 2.2x and ``fairvlp`` (default policy) <= 2.5x vanilla.
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
from vlbias.modules.fairvlp import METHODS, FairVLP

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "experiment" / "fairvlp_biasworld.yaml"
POLICY_RUNS = (("every_step", 1), ("every_n_steps", 4), ("cached", 32))


class _Timed(FairVLP):
    """FairVLP stepped without a trainer: ``step`` stands for the trainer's global step (the policies read it)."""

    step = 0

    @property
    def global_step(self) -> int:
        return self.step


def _variants(options: dict) -> dict[str, dict]:
    """Label -> module options: every method with the config's policy, and ``fairvlp`` under each policy."""
    default = f"{options['image_counterfactuals']}(k={options['k']})"
    variants = {f"{m} [{default}]" if METHODS[m] and METHODS[m].image else m: {**options, "method": m} for m in METHODS}
    for policy, k in POLICY_RUNS:
        label = f"fairvlp [{policy}(k={k})]"
        variants.setdefault(label, {**options, "method": "fairvlp", "image_counterfactuals": policy, "k": k})
    return variants


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="Timed rounds (one step per method each).")
    parser.add_argument("--batch_size", type=int, default=None, help="Default: the config's batch size.")
    parser.add_argument("--threads", type=int, default=1, help="torch threads.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(CONFIG.read_text())
    options = config["model"]["init_args"]
    batch_size = args.batch_size or config["data"]["init_args"]["batch_size"]
    world = BiasWorld(bias_strength=0.9, n_train=batch_size * (args.steps + 2), eval_per_combination=1)
    dataset = world.dataset("train")
    batches = [
        torch.utils.data.default_collate([dataset[i] for i in range(s * batch_size, (s + 1) * batch_size)])
        for s in range(args.steps + 2)
    ]
    runs = {}
    for label, init in _variants(options).items():
        module = _Timed(**init)
        module.log = lambda *_, **__: None  # no trainer: time the step alone
        runs[label] = (module, torch.optim.AdamW(module.parameters(), lr=1e-4), [])
    for step, batch in enumerate(batches):
        for module, optimizer, times in runs.values():
            module.step = step
            start = time.perf_counter()
            loss = module.training_step(batch, step)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step >= 2:  # two warm-up rounds
                times.append(time.perf_counter() - start)
    base = statistics.mean(runs["vanilla"][2])
    rows = [
        {"method": label, "ms": 1000 * statistics.mean(t), "ratio": statistics.mean(t) / base}
        for label, (_, _, t) in runs.items()
    ]
    print(f"CPU, batch {batch_size}, {args.steps} timed steps per method, torch threads {args.threads}\n")
    print("| method [image policy] | mean step ms | x vanilla |\n|---|---:|---:|")
    for row in rows:
        print(f"| {row['method']} | {row['ms']:.0f} | {row['ratio']:.2f} |")
    return rows


if __name__ == "__main__":
    main()
