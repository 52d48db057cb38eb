"""The runs that tests/modules/test_fsdp.py compares: ``python -m tests.modules.fsdp_runs OUT``, one process per
rank, started as torchrun starts them (``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set), two
CPU processes over gloo: ALBEF retrieval fine-tuning (ITC gathered across ranks, ITM with hard negatives, ITM
re-ranking at validation) and FairVLP-L (token-swapped captions, KL, ITC, ITM) on tiny models and BiasWorld, and a
tiny LLaVA's counterfactual-consistency fine-tuning on BiasWorld-QA (bias_qa and counterfactual_answers measured), a
few steps each under DDP and under the strategy of ``configs/trainer/fsdp.yaml``, and the retrieval case again
under DDP with ``configs/trainer/gpu_fast.yaml``'s ``TrainingSpeed(compile=True)`` (each transformer layer
compiled), MMBias measured by :class:`~vlbias.callbacks.BiasSuiteCallback` after the validation epoch. Rank 0
writes every run's logged ``train/loss`` after each step and its logged ``bias/`` numbers to ``OUT/logged.json``,
its checkpoint to ``OUT/<case>-<strategy>.ckpt`` and its export to ``OUT/<case>-<strategy>/version_0/model``."""

import json
import sys
from pathlib import Path

import lightning as L
import torch
import torch._inductor.config
import yaml
from jsonargparse import ArgumentParser
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy
from torch.distributed.fsdp import FullyShardedDataParallel

from vlbias.callbacks import BiasSuiteCallback, TrainingSpeed
from vlbias.data.biasworld import ACTIVITIES
from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.data.biasworld_qa_datamodule import BiasWorldQADataModule
from vlbias.modules import CounterfactualConsistencyTuning, FairVLP, FairVLPMethod, ModelSpec, RetrievalFinetuning

ROOT = Path(__file__).resolve().parents[2]
FSDP_CONFIG = ROOT / "configs" / "trainer" / "fsdp.yaml"
STEPS = 3
MMBIAS = {"statistics": {"n_permutations": 100, "n_bootstrap": 20}}
CHAT_SUITES = ("bias_qa", "counterfactual_answers")
CHAT_STATISTICS = {"statistics": {"n_bootstrap": 20}}
TINY_ALBEF = ModelSpec("albef", tiny=True, tiny_sizes={"image_size": 32, "patch_size": 8})


class CPUFSDPStrategy(FSDPStrategy):
    """Lightning's ``FSDPStrategy`` on the CPU, for this test alone. Lightning 2.6 refuses ``FSDPStrategy`` without
    a GPU (an exact-type check in its accelerator connector, which a subclass passes) and gives torch's FSDP no
    device on the CPU (``device_id=None``), with which FSDP looks for an accelerator and stops; given
    ``device_id=cpu`` torch's FSDP shards and trains on the CPU over gloo. So this wraps the model itself, with
    the same arguments, and leaves the rest (torchmetrics, activation checkpointing) to Lightning."""

    def _setup_model(self, model: torch.nn.Module) -> torch.nn.Module:
        wrapped = FullyShardedDataParallel(
            model,
            cpu_offload=self.cpu_offload,
            mixed_precision=self.mixed_precision_config,
            sharding_strategy=self.sharding_strategy,
            device_id=torch.device("cpu"),
            **self.kwargs,
        )
        self.kwargs.pop("auto_wrap_policy", None)  # applied above; Lightning warns when it finds it on a wrapped model
        return super()._setup_model(wrapped)


def fsdp_strategy(class_path: str) -> FSDPStrategy:
    """The strategy of ``configs/trainer/fsdp.yaml``, its arguments read as LightningCLI reads them, as
    ``class_path``."""
    parser = ArgumentParser()
    parser.add_subclass_arguments(FSDPStrategy, "strategy")
    spec = yaml.safe_load(FSDP_CONFIG.read_text())["trainer"]["strategy"]
    return parser.instantiate(parser.parse_object({"strategy": {**spec, "class_path": class_path}})).strategy


class StepLosses(Callback):
    """The logged ``train/loss`` after every training step, and what the bias callback logged at the end."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.bias: dict[str, float] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append(trainer.callback_metrics["train/loss"].item())

    def on_fit_end(self, trainer, pl_module) -> None:
        self.bias = {key: value.item() for key, value in trainer.callback_metrics.items() if key.startswith("bias/")}


def module(case: str) -> L.LightningModule:
    if case == "retrieval":
        return RetrievalFinetuning(model=TINY_ALBEF, k_test=4)
    if case == "chat":
        return CounterfactualConsistencyTuning(model=ModelSpec("llava", tiny=True))
    return FairVLP(
        method=FairVLPMethod("fairvlp_l"), itc_weight=1.0, model=TINY_ALBEF, groups=["man", "woman"],
        key_words=ACTIVITIES, content_label_key="activity", group_label_key="group",
    )  # fmt: skip


def fit(case: str, strategy: str, out: Path) -> dict[str, object]:
    L.seed_everything(0)
    model = module(case)
    if case == "chat":  # the counterfactual-consistency objective on BiasWorld-QA, its two suites on the val split
        data = BiasWorldQADataModule(n_train=16, eval_per_combination=1, batch_size=4)
        suites = [{"suite": name, "options": {"split": "val", **CHAT_STATISTICS}} for name in CHAT_SUITES]
    else:
        data = BiasWorldDataModule(n_train=48, eval_per_combination=1, image_size=32, batch_size=8, bias_strength=0.9)
        suites = [{"suite": "mmbias", "options": MMBIAS}]
    losses = StepLosses()
    speed = [TrainingSpeed(compile=True)] if strategy == "ddp_compiled" else []
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=fsdp_strategy(f"{__spec__.name}.CPUFSDPStrategy")
        if strategy == "fsdp"
        else DDPStrategy(find_unused_parameters=True),
        max_steps=STEPS,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        logger=CSVLogger(out, name=f"{case}-{strategy}", version=0),
        callbacks=[losses, BiasSuiteCallback(suites=suites), *speed],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, data)
    trainer.save_checkpoint(out / f"{case}-{strategy}.ckpt")
    return {"losses": losses.losses, "bias": losses.bias}


if __name__ == "__main__":
    torch.set_num_threads(1)
    # Inductor draws dropout masks from a generator of its own: drawn as eager draws them, a compiled run's steps
    # compare with an eager run's (eager runs never reach Inductor)
    torch._inductor.config.fallback_random = True
    out = Path(sys.argv[1])
    runs = [(case, strategy) for case in ("retrieval", "fairvlp", "chat") for strategy in ("ddp", "fsdp")]
    runs.append(("retrieval", "ddp_compiled"))
    logged = {f"{case}-{strategy}": fit(case, strategy, out) for case, strategy in runs}
    if torch.distributed.get_rank() == 0:
        (out / "logged.json").write_text(json.dumps(logged))
