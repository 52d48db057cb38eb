"""Every checkpoint vlbias writes loads without running pickled code: each torch file (``.pt``, ``.pth``, ``.bin``,
``.ckpt``) with ``torch.load(weights_only=True)``, each ``.safetensors`` file with safetensors, and no other
pickle is written. Checked on what each writer produces from tiny models: every adapter's ``save_pretrained``,
the pruned-CLIP export, ``vlbias prune``'s run directory, and the Lightning checkpoints of every training
module (with the bias callback's state in them)."""

from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from safetensors.torch import load_file

from vlbias.callbacks import BiasSuiteCallback
from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.models.catalog import list_models
from vlbias.models.families.pruned import row_selection
from vlbias.models.registry import load
from vlbias.modules import (
    ContrastivePretraining,
    FairVLP,
    FairVLPMethod,
    MaskedLMPretraining,
    ModelSpec,
    PromptArrayDebiasing,
    RetrievalFinetuning,
)

ROOT = Path(__file__).resolve().parents[1]
TORCH_SUFFIXES = {".pt", ".pth", ".bin", ".ckpt"}
PICKLE_SUFFIXES = {".pkl", ".pickle", ".joblib", ".npy", ".npz"}
TINY = {"image_size": 32, "patch_size": 8}
BIASWORLD_WORDS = dict(
    groups=["man", "woman"],
    key_words=["repairing", "driving", "coding", "cooking", "cleaning", "sewing"],
    content_label_key="activity",
    group_label_key="group",
)


def assert_loads_safely(directory: Path) -> list[Path]:
    """Load every weights file under ``directory`` the safe way; return the files, relative to it."""
    files = sorted(p for p in directory.rglob("*") if p.suffix in TORCH_SUFFIXES | {".safetensors"})
    for path in files:
        if path.suffix == ".safetensors":
            assert load_file(str(path)), path
        else:
            torch.load(path, map_location="cpu", weights_only=True)  # raises UnpicklingError on any object
    assert not [p for p in directory.rglob("*") if p.suffix in PICKLE_SUFFIXES]
    return [p.relative_to(directory) for p in files]


@pytest.mark.parametrize("name", list_models())
def test_every_adapter_export_loads_safely(name, tmp_path):
    load(name, tiny=True, device="cpu").save_pretrained(tmp_path)
    assert assert_loads_safely(tmp_path), f"{name} wrote no weights"
    # a save names models by their registered names, never by a vlbias module path, which moves (models/families/)
    texts = [p for p in tmp_path.rglob("*") if p.suffix in {".json", ".yaml", ".txt"}]
    assert not [p for p in texts if "vlbias." in p.read_text()], name


def test_the_pruned_clip_export_loads_safely(tmp_path):
    keep = row_selection([0, 2, 4, 6], 64)
    load("clip", tiny=True, device="cpu").export_linear(keep, keep, tmp_path)
    assert assert_loads_safely(tmp_path) == [Path("model.safetensors")]


def test_a_prune_run_writes_only_safe_weights(tmp_path, run_cli):
    code, _, err = run_cli(
        ["prune", "--model", "clip", "--tiny", "--data", "biasworld", "--biasworld.eval_per_combination", "2",
         "--fraction", "0.1", "--theta_quantile", "0.9", "--out", str(tmp_path)]
    )  # fmt: skip
    assert code == 0, err
    assert Path("model/inner/model.safetensors") in assert_loads_safely(tmp_path)


@pytest.mark.parametrize(
    "module",
    [
        lambda: ContrastivePretraining(model=ModelSpec("clip", tiny=True, tiny_sizes=TINY)),
        lambda: RetrievalFinetuning(model=ModelSpec("clip", tiny=True, tiny_sizes=TINY), k_test=4, ks=(1, 5)),
        lambda: MaskedLMPretraining(model=ModelSpec("albef", tiny=True, tiny_sizes=TINY), **BIASWORLD_WORDS),
        lambda: FairVLP(
            method=FairVLPMethod(attack={"steps": 1}),
            model=ModelSpec("albef", tiny=True, tiny_sizes=TINY),
            **BIASWORLD_WORDS,
        ),
        lambda: PromptArrayDebiasing(
            queries=["a person cooking.", "a person driving."],
            groups=["man", "woman"],
            model=ModelSpec("clip", tiny=True, tiny_sizes=TINY),
        ),
    ],
    ids=["contrastive", "retrieval", "masked_lm", "fairvlp", "prompt_array"],
)
def test_lightning_checkpoints_load_with_weights_only(module, tmp_path):
    """One epoch of two batches, as ``vlbias fit`` runs it: module and datamodule hyperparameters, optimizer and
    loop states, the bias callback's history and ModelCheckpoint's state all go into the ``.ckpt``."""
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[
            ModelCheckpoint(dirpath=tmp_path / "checkpoints", save_last=True),
            BiasSuiteCallback(["mmbias"], out_dir=str(tmp_path / "bias")),
        ],
    )
    data = BiasWorldDataModule(n_train=16, eval_per_combination=1, image_size=32, batch_size=8)
    trainer.fit(module(), datamodule=data)
    checkpoints = assert_loads_safely(tmp_path / "checkpoints")
    assert Path("last.ckpt") in checkpoints
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert state["hyper_parameters"]["model"]["name"] in ("clip", "albef") and state["datamodule_hyper_parameters"]
    assert any(key.startswith("BiasSuiteCallback") for key in state["callbacks"])


def test_a_vlbias_fit_run_writes_only_safe_weights(tmp_path):
    """The quickstart, shrunk, through the console script: LightningCLI adds its own entries to the
    hyperparameters (``_class_path``, ``_instantiator``), and the run exports the model beside its checkpoint."""
    from vlbias.cli import main

    main(
        ["fit", "--config", str(ROOT / "configs/experiment/quickstart.yaml"), "--trainer.max_epochs", "1",
         "--trainer.logger.init_args.save_dir", str(tmp_path), "--trainer.enable_progress_bar", "false",
         "--data.init_args.n_train", "32", "--data.init_args.eval_per_combination", "1",
         "--data.init_args.batch_size", "16"]
    )  # fmt: skip
    written = assert_loads_safely(tmp_path / "quickstart" / "version_0")
    assert Path("model/model.safetensors") in written and any(p.suffix == ".ckpt" for p in written)
