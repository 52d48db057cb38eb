"""FSDP (``configs/trainer/fsdp.yaml``): the config's strategy and its wrap policy; an image method of FairVLP
refused under it; and (slow) ALBEF retrieval fine-tuning and FairVLP-L on 2 CPU processes over gloo, the same
logged loss after every step and the same bias measured by the callback as under DDP, a checkpoint written under
FSDP loading back with DDP's weights, and the export holding the whole model; and ALBEF retrieval fine-tuning
compiled (``configs/trainer/gpu_fast.yaml``'s ``TrainingSpeed(compile=True)``) under DDP, the same losses and bias
as eager under DDP."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch.strategies import FSDPStrategy
from torch.testing import assert_close

from tests.modules.fsdp_runs import STEPS, fsdp_strategy
from vlbias.errors import ConfigError
from vlbias.models.catalog import models_with
from vlbias.models.families.albef_modeling import ALBEFLayer
from vlbias.models.registry import load
from vlbias.modules import FairVLP, FairVLPMethod, RetrievalFinetuning

ROOT = Path(__file__).resolve().parents[2]
#: ALBEF's masked-LM head, less its decoder (tied to the word embeddings): retrieval fine-tuning leaves it unused
MLM_HEAD = "adapter.model.text_encoder.cls.predictions.transform."


def test_the_config_shards_every_transformer_layer_of_albef():
    strategy = fsdp_strategy("lightning.pytorch.strategies.FSDPStrategy")
    assert type(strategy) is FSDPStrategy and strategy._state_dict_type == "full"
    policy = strategy.kwargs["auto_wrap_policy"]
    adapter = load("albef", tiny=True)
    wrapped = [module for module in adapter.modules() if type(module) in policy._module_classes]
    layers = [module for module in adapter.modules() if isinstance(module, ALBEFLayer)]
    assert layers and all(any(layer is module for module in wrapped) for layer in layers)
    assert len(wrapped) > len(layers)  # the vision transformer's blocks too


@pytest.mark.parametrize("family", models_with("answer"))
def test_the_config_shards_every_layer_of_each_chat_family(family):
    policy = fsdp_strategy("lightning.pytorch.strategies.FSDPStrategy").kwargs["auto_wrap_policy"]
    model = load(family, tiny=True).model
    wrapped = {id(module) for module in model.modules() if type(module) in policy._module_classes}
    decoder = model.get_decoder().layers
    assert decoder and all(id(layer) in wrapped for layer in decoder)
    assert len(wrapped) > len(decoder)  # the vision tower's layers too


def test_an_image_method_is_refused_under_fsdp(monkeypatch):
    module = FairVLP(method=FairVLPMethod("visual_swap", attack={"steps": 1}), groups=["man", "woman"])
    monkeypatch.setattr(module, "_trainer", type("Trainer", (), {"strategy": FSDPStrategy()})())
    with pytest.raises(ConfigError, match="'visual_swap' attacks images.*strategy: ddp.*fairvlp_l"):
        module.configure_model()


@pytest.mark.slow  # one launch of 2 processes, 7 fits of 3 steps, one compiled: ~4 min on 2 idle cores
def test_fsdp_and_a_compiled_model_train_as_ddp_and_the_fsdp_checkpoint_loads_back(tmp_path):
    with socket.socket() as free:  # a free port for the rendezvous
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "NODE_RANK": "0"}
    # both ranks started at once, as torchrun does (Lightning then starts none): they import in parallel
    ranks = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.modules.fsdp_runs", str(tmp_path)],
            cwd=ROOT,
            env={**env, "LOCAL_RANK": str(rank)},
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        errors = [rank.communicate(timeout=600)[1] for rank in ranks]
    finally:  # a rank left waiting for the other (one failed at start) does not outlive the test
        for rank in ranks:
            rank.kill()
    assert all(rank.returncode == 0 for rank in ranks), "\n".join(error[-3000:] for error in errors)
    logged = json.loads((tmp_path / "logged.json").read_text())
    for case in ("retrieval", "fairvlp", "chat"):
        ddp, fsdp = logged[f"{case}-ddp"], logged[f"{case}-fsdp"]
        assert len(ddp["losses"]) == len(fsdp["losses"]) == STEPS
        assert fsdp["losses"] == pytest.approx(ddp["losses"], abs=1e-5), case
        assert ddp["bias"] and fsdp["bias"] == pytest.approx(ddp["bias"], abs=1e-5), case
    compiled, ddp = logged["retrieval-ddp_compiled"], logged["retrieval-ddp"]  # gpu_fast.yaml's compile, under DDP
    assert compiled["losses"] == pytest.approx(ddp["losses"], abs=1e-4)
    assert compiled["bias"] == pytest.approx(ddp["bias"], abs=1e-4)
    ddp_weights = torch.load(tmp_path / "retrieval-ddp.ckpt", weights_only=True)["state_dict"]
    module = RetrievalFinetuning.load_from_checkpoint(tmp_path / "retrieval-fsdp.ckpt")
    weights = module.state_dict()
    assert weights.keys() == ddp_weights.keys()
    # FSDP gives the unused head zero gradients where DDP gives none: AdamW (lr 1e-3) decays it (0.01) every step
    decay = (1 - 1e-3 * 0.01) ** STEPS
    for name, value in weights.items():
        assert_close(value, ddp_weights[name] * (decay if name.startswith(MLM_HEAD) else 1), atol=1e-5, rtol=0)
    exported = load("albef", checkpoint=str(tmp_path / "retrieval-fsdp" / "version_0" / "model"))
    for name, value in exported.state_dict().items():
        assert_close(value, module.adapter.state_dict()[name], atol=0, rtol=0)
    fairvlp = FairVLP.load_from_checkpoint(tmp_path / "fairvlp-fsdp.ckpt")
    assert fairvlp.method.name == "fairvlp_l"
    fairvlp_ddp = torch.load(tmp_path / "fairvlp-ddp.ckpt", weights_only=True)["state_dict"]
    for name, value in fairvlp.state_dict().items():
        assert_close(value, fairvlp_ddp[name], atol=1e-5, rtol=0)
