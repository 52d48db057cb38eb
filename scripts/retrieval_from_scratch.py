"""Retrieval fine-tuning of tiny models from random weights on BiasWorld: does each model and seed learn?

    python scripts/retrieval_from_scratch.py                                  # albef, blip x seeds 0 1 2, 15 epochs
    python scripts/retrieval_from_scratch.py --models albef --seeds 1 --epochs 30 --learning_rate 1e-3

Per (model, seed): every seed set, BiasWorld at bias strength 0.0 (2,048 training items, 64-pixel images, 48 val
images), :class:`vlbias.modules.RetrievalFinetuning` from a tiny random model (learning rate 3e-3, ``k_test`` 16,
batch 32), validated once after the last epoch: the settings of the slow test
``tests/modules/test_retrieval.py::test_albef_and_blip_rise_above_chance_and_their_exports_reload``. Printed: a
row per run (val TR/IR R@1 and the mean recall, in percent, and the val ITC loss), then the chance level of the
mean recall, (1 + 5 + 10) / 3 / 48. A run whose ITC collapsed to uniform scores sits at chance.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence

import lightning as L
import torch

from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.modules import RetrievalFinetuning
from vlbias.sanity import run_table

DATA = {"bias_strength": 0.0, "n_train": 2048, "eval_per_combination": 4, "image_size": 64, "batch_size": 32}
VAL_IMAGES = 48


def run(model: str, seed: int, epochs: int, learning_rate: float = 3e-3) -> dict:
    """One fit from random weights; the val metrics after the last epoch, recalls in percent."""
    torch.set_num_threads(1)
    L.seed_everything(seed)
    data = BiasWorldDataModule(**DATA, seed=seed)
    module = RetrievalFinetuning(model=model, learning_rate=learning_rate, k_test=16, seed=seed)
    with tempfile.TemporaryDirectory() as directory:
        trainer = L.Trainer(
            default_root_dir=directory, accelerator="cpu", devices=1, max_epochs=epochs,
            check_val_every_n_epoch=epochs, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False,
        )  # fmt: skip
        trainer.fit(module, data)
    logged = trainer.callback_metrics
    recalls = {key: 100 * float(logged[f"val/{key}"]) for key in ("tr_r1", "ir_r1", "r_mean")}
    return {
        "model": model,
        "seed": seed,
        "epochs": epochs,
        "learning_rate": learning_rate,
        **recalls,
        "itc_loss": float(logged["val/loss"]),
    }


def _show(row: dict) -> None:
    print(
        f"| {row['model']} | {row['seed']} | {row['epochs']} | {row['learning_rate']:g} | {row['tr_r1']:.1f} | {row['ir_r1']:.1f} "
        f"| {row['r_mean']:.1f} | {row['itc_loss']:.3f} |",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["albef", "blip"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--learning_rate", type=float, default=3e-3)
    parser.add_argument("--workers", type=int, default=1, help="Runs at once (processes, one torch thread each).")
    args = parser.parse_args(argv)
    print("| model | seed | epochs | learning rate | val TR R@1 | val IR R@1 | val R mean | val ITC loss |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    jobs = [(model, seed, args.epochs, args.learning_rate) for model in args.models for seed in args.seeds]
    rows = run_table(run, jobs, args.workers, _show, None)
    print(f"\nchance: R mean {100 * (1 + 5 + 10) / 3 / VAL_IMAGES:.1f}, R@1 {100 / VAL_IMAGES:.1f}")
    return rows


if __name__ == "__main__":
    main()
