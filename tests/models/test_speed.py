"""The speed switches of a model (``vlbias.models.speed``, ``ModelAdapter.enable_gradient_checkpointing``) change
how fast it computes, not what: the same loss and gradients, the layers run again in the backward pass; and which
families' attention runs on torch's ``scaled_dot_product_attention``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.models.conftest import as_tuple, sample_inputs
from vlbias.errors import CapabilityError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.registry import load
from vlbias.models.speed import LAYER_NAME_ENDINGS, compile_layers, to_channels_last

#: Each family that trains in vlbias, and the capability whose forward the test differentiates (ALBEF's MLM runs
#: the image encoder, the text layers and the fusion layers; BLIP's ITM its text encoder with cross-attention).
TRAINED = {
    "clip": Capability.EMBED,
    "siglip": Capability.EMBED,
    "siglip2": Capability.EMBED,
    "open_clip": Capability.EMBED,
    "blip": Capability.MATCH,
    "flava": Capability.FILL_MASK,
    "albef": Capability.FILL_MASK,
    "vilt": Capability.FILL_MASK,
    "bert": Capability.FILL_MASK,
    "visualbert": Capability.FILL_MASK,
    "sentence_bert": Capability.TOKEN_STATES,
    "prompt_array": Capability.EMBED,  # a wrapper: its inner CLIP's layers
}
#: The families whose transformers classes have no SDPA attention (``_supports_sdpa`` is false in transformers 5):
#: their attention is an explicit softmax of a matrix product.
WITHOUT_SDPA = ("blip", "flava", "vilt", "visualbert", "lxmert")


def _layers(adapter: ModelAdapter) -> list[torch.nn.Module]:
    return [module for module in adapter.modules() if type(module).__name__.endswith(LAYER_NAME_ENDINGS)]


def _step(adapter: ModelAdapter, capability: Capability) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
    """One training step's loss and gradients of ``adapter``, and the bytes of the tensors its forward pass kept
    for the backward pass (outside a checkpointed layer, whose own hooks keep its inputs alone); the RNG seeded
    first, so dropout draws the same masks every time."""
    adapter.zero_grad(set_to_none=True)
    pixel_values, texts = sample_inputs(adapter, capability)
    tokens = adapter.prepare_texts(texts)
    kept = [0]

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        kept[0] += tensor.numel() * tensor.element_size()
        return tensor

    torch.manual_seed(0)
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        outputs = as_tuple(adapter.run_capability(capability, pixel_values, tokens))
    loss = sum(output.float().pow(2).mean() for output in outputs)
    loss.backward()
    gradients = {name: p.grad.clone() for name, p in adapter.named_parameters() if p.grad is not None}
    return loss.detach(), gradients, kept[0]


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_gradient_checkpointing_keeps_fewer_activations_and_the_same_loss_and_gradients(name):
    adapter = load(name, tiny=True, device="cpu")
    loss, gradients, kept = _step(adapter.train(), TRAINED[name])
    adapter.enable_gradient_checkpointing()
    checkpointed, checkpointed_gradients, kept_checkpointed = _step(adapter, TRAINED[name])
    assert kept_checkpointed < kept / 2, (kept_checkpointed, kept)
    torch.testing.assert_close(checkpointed, loss, rtol=0, atol=1e-6)
    assert checkpointed_gradients.keys() == gradients.keys() and gradients
    for key, gradient in gradients.items():
        torch.testing.assert_close(checkpointed_gradients[key], gradient, rtol=1e-6, atol=1e-6, msg=key)


def test_a_family_without_gradient_checkpointing_is_refused_by_name():
    with pytest.raises(CapabilityError, match=r"Model 'lxmert' cannot train with `gradient_checkpointing`: "):
        load("lxmert", tiny=True, device="cpu").enable_gradient_checkpointing()
    with pytest.raises(CapabilityError, match=r"Model 'tiny' cannot train with .* no layer of this family\.$"):
        type("Tiny", (ModelAdapter,), {"name": "tiny"})().enable_gradient_checkpointing()


@pytest.mark.parametrize("name", sorted({*TRAINED, "lxmert"} - {"prompt_array"}))
def test_the_training_forward_runs_sdpa_where_the_family_has_it(name, monkeypatch):
    """ALBEF (timm's ViT, its BERT layers, its cached cross-attention), open_clip (``nn.MultiheadAttention``
    without weights) and the transformers families that support it call torch's SDPA, which picks flash or
    memory-efficient kernels on a GPU; the others compute attention themselves."""
    adapter = load(name, tiny=True, device="cpu").train()
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or sdpa(*a, **k))
    capability = TRAINED.get(name, Capability.FILL_MASK)
    pixel_values, texts = sample_inputs(adapter, capability)
    adapter.run_capability(capability, pixel_values, adapter.prepare_texts(texts))
    assert bool(calls) is (name not in WITHOUT_SDPA)


def test_a_loaded_transformers_model_gets_sdpa(tmp_path):
    load("clip", tiny=True, device="cpu").save_pretrained(tmp_path)
    assert load("clip", checkpoint=tmp_path, device="cpu").model.config._attn_implementation == "sdpa"


def test_compile_layers_compiles_each_outermost_layer_once_and_keeps_the_state_dict_keys():
    adapter = load("albef", tiny=True, device="cpu")
    keys = list(adapter.state_dict())
    sizes = adapter.model.config
    layers = sizes.vision_layers + sizes.num_layers  # timm's Blocks and ALBEFLayers, nothing inside them
    assert compile_layers(adapter) == layers
    compiled = [layer for layer in _layers(adapter) if layer._compiled_call_impl is not None]
    assert len(compiled) == layers
    first = compiled[0]._compiled_call_impl
    assert compile_layers(adapter) == layers and compiled[0]._compiled_call_impl is first  # a second call: no change
    assert list(adapter.state_dict()) == keys


def test_channels_last_changes_the_patch_embedding_weight_alone():
    adapter = load("clip", tiny=True, device="cpu")
    pixel_values, texts = sample_inputs(adapter, Capability.EMBED)
    before = adapter.embed_images(pixel_values)
    to_channels_last(adapter)
    four_d = [name for name, p in adapter.named_parameters() if p.ndim == 4]
    assert four_d == ["model.vision_model.embeddings.patch_embedding.weight"]
    weight = adapter.model.vision_model.embeddings.patch_embedding.weight
    assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
    torch.testing.assert_close(adapter.embed_images(pixel_values), before, rtol=0, atol=1e-6)
