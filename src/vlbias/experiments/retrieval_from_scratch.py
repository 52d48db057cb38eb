"""Retrieval fine-tuning of tiny models from random weights on BiasWorld: does each model and seed learn?
(``scripts/retrieval_from_scratch.py``)

Per (model, seed): every seed set, BiasWorld at bias strength 0.0 (2,048 training items, 64-pixel images, 48 val
images), :class:`vlbias.modules.RetrievalFinetuning` from a tiny random model (learning rate 3e-3, ``k_test`` 16,
batch 32), validated once after the last epoch: the settings of the slow test
``tests/modules/test_retrieval.py::test_albef_and_blip_rise_above_chance_and_their_exports_reload``. Printed: a
row per run (val TR/IR R@1 and the mean recall, in percent, and the val ITC loss), then the chance level of the
mean recall, (1 + 5 + 10) / 3 / 48. A run whose ITC collapsed to uniform scores sits at chance.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Sequence

import lightning as L
import torch
from jsonargparse.typing import PositiveInt

from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.experiments.tables import run_table
from vlbias.modules.model_spec import ModelSpec
from vlbias.modules.retrieval import RetrievalFinetuning

DATA = {"bias_strength": 0.0, "n_train": 2048, "eval_per_combination": 4, "image_size": 64, "batch_size": 32}
VAL_IMAGES = 48


def fit_from_scratch(model: str, seed: int, epochs: int, learning_rate: float = 3e-3) -> dict:
    """One fit from random weights; the val metrics after the last epoch, recalls in percent."""
    torch.set_num_threads(1)
    L.seed_everything(seed)
    data = BiasWorldDataModule(**DATA, seed=seed)
    adamw = functools.partial(torch.optim.AdamW, lr=learning_rate, weight_decay=0.01)
    module = RetrievalFinetuning(model=ModelSpec(model, tiny=True, seed=seed), k_test=16, optimizer=adamw)
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


def retrieval_from_scratch(
    models: Sequence[str] = ("albef", "blip"),
    seeds: Sequence[int] = (0, 1, 2),
    epochs: PositiveInt = 15,
    learning_rate: float = 3e-3,
    workers: PositiveInt = 1,
) -> list[dict]:
    """Fit each model x seed from random weights and print a row each, then the chance levels.

    Returns the rows.

    Args:
        models: Model adapters to fine-tune (tiny, random weights).
        seeds: Seeds to run.
        epochs: Training epochs (validated once, after the last).
        learning_rate: The optimizer's learning rate.
        workers: Runs at once (processes, one torch thread each).
    """
    print("| model | seed | epochs | learning rate | val TR R@1 | val IR R@1 | val R mean | val ITC loss |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    jobs = [(model, seed, epochs, learning_rate) for model in models for seed in seeds]
    rows = run_table(fit_from_scratch, jobs, workers, _show, None)
    print(f"\nchance: R mean {100 * (1 + 5 + 10) / 3 / VAL_IMAGES:.1f}, R@1 {100 / VAL_IMAGES:.1f}")
    return rows
