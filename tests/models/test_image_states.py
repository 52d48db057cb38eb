"""The image and text states a training step shares between its objectives (``ModelAdapter.image_states`` and
``text_states``): each method that reads them equals the method that reads pixels and tokens, in value and in
gradient, for every family that has the capability, and two-stream families run their vision encoder (and ALBEF its
text layers) once for the lot."""

import functools

import pytest
import torch
from torch import Tensor

from tests.models.conftest import sample_inputs
from vlbias.errors import InputError
from vlbias.models.base import Capability
from vlbias.models.catalog import adapter_class, list_models
from vlbias.models.registry import load


def _families(capability: Capability) -> list[str]:
    return [name for name in list_models() if capability in adapter_class(name).capabilities]


@functools.cache
def _tiny(name: str):
    return load(name, tiny=True, device="cpu").eval()  # eval: no dropout, so two computations can agree


def _pixel_inputs(name: str, capability: Capability) -> tuple[Tensor, dict[str, Tensor]]:
    adapter = _tiny(name)
    pixel_values, texts = sample_inputs(adapter, capability)
    if not isinstance(pixel_values, Tensor):
        pytest.skip(f"{name}'s prepared images are not one tensor of pixels (region features, patches, or none)")
    return pixel_values, adapter.prepare_texts(texts)


def _gradients(adapter, loss: Tensor) -> dict[str, Tensor]:
    adapter.zero_grad(set_to_none=True)
    loss.backward()
    return {name: p.grad.clone() for name, p in adapter.named_parameters() if p.grad is not None}


IMAGE_ROWS, TEXT_ROWS = torch.tensor([1, 1, 0, 3, 3, 2, 0]), torch.tensor([0, 2, 2, 1, 3, 0, 1])


@pytest.mark.parametrize("name", _families(Capability.EMBED))
def test_embeddings_of_image_states_equal_embed_images(name):
    adapter = _tiny(name)
    pixel_values, _ = _pixel_inputs(name, Capability.EMBED)
    with torch.no_grad():
        shared = adapter.embed_image_states(adapter.image_states(pixel_values))
        torch.testing.assert_close(shared, adapter.embed_images(pixel_values), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", _families(Capability.EMBED))
def test_embeddings_of_text_states_equal_embed_texts(name):
    adapter = _tiny(name)
    tokens = adapter.prepare_texts(sample_inputs(adapter, Capability.EMBED)[1])
    with torch.no_grad():
        shared = adapter.embed_text_states(adapter.text_states(tokens))
        torch.testing.assert_close(shared, adapter.embed_texts(tokens), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", _families(Capability.MATCH))
def test_match_logits_of_states_equal_the_gathered_pairs_in_value_and_gradient(name):
    adapter = _tiny(name)
    pixel_values, tokens = _pixel_inputs(name, Capability.MATCH)
    gathered = {key: value[TEXT_ROWS] for key, value in tokens.items()}
    expected = adapter.match_logits(pixel_values[IMAGE_ROWS], gathered)
    expected_gradients = _gradients(adapter, expected.square().sum())
    states = adapter.image_states(pixel_values), adapter.text_states(tokens)
    shared = adapter.match_logits_of_states(*states, IMAGE_ROWS, TEXT_ROWS)
    gradients = _gradients(adapter, shared.square().sum())
    torch.testing.assert_close(shared, expected, rtol=0, atol=1e-5)
    assert gradients.keys() == expected_gradients.keys()
    for key, gradient in gradients.items():
        torch.testing.assert_close(gradient, expected_gradients[key], rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize("name", _families(Capability.FILL_MASK))
def test_fill_mask_logits_of_states_equal_the_gathered_images(name):
    adapter = _tiny(name)
    pixel_values, tokens = _pixel_inputs(name, Capability.FILL_MASK)
    gathered = {key: value[TEXT_ROWS] for key, value in tokens.items()}
    with torch.no_grad():
        states = adapter.image_states(pixel_values)
        expected = adapter.fill_mask_logits(pixel_values[IMAGE_ROWS], gathered)
        torch.testing.assert_close(
            adapter.fill_mask_logits_of_states(states, gathered, IMAGE_ROWS), expected, rtol=0, atol=1e-5
        )
        torch.testing.assert_close(
            adapter.fill_mask_logits_of_states(states, tokens),
            adapter.fill_mask_logits(pixel_values, tokens),
            rtol=0,
            atol=1e-5,
        )


@pytest.mark.parametrize(
    ("name", "encoder"), [("albef", "visual_encoder.patch_embed"), ("blip", "vision_model.embeddings")]
)
def test_two_stream_families_encode_each_image_once_for_itm(name, encoder):
    """ITM of 7 pairs over 4 images runs the vision encoder once, on the 4 (ALBEF's pre-training step shares one
    vision pass between ITC, ITM and MLM)."""
    adapter = _tiny(name)
    pixel_values, tokens = _pixel_inputs(name, Capability.MATCH)
    seen: list[int] = []
    hook = adapter.model.get_submodule(encoder).register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(len((args or tuple(kwargs.values()))[0])), with_kwargs=True
    )
    try:
        with torch.no_grad():
            states = adapter.image_states(pixel_values)
            adapter.embed_image_states(states)
            adapter.match_logits_of_states(states, adapter.text_states(tokens), IMAGE_ROWS, TEXT_ROWS)
    finally:
        hook.remove()
    assert seen == [len(pixel_values)]


def test_albef_runs_its_text_layers_once_for_contrast_and_itm():
    """ITC's caption embeddings and ITM of 7 pairs over 4 captions read one pass of the text layers over the 4
    (ALBEF's pre-training step runs them once for ITC and ITM)."""
    adapter = _tiny("albef")
    pixel_values, tokens = _pixel_inputs("albef", Capability.MATCH)
    seen: list[int] = []
    hook = adapter.model.text_encoder.bert.embeddings.register_forward_hook(
        lambda layer, inputs, output: seen.append(len(output))
    )
    try:
        with torch.no_grad():
            text_states = adapter.text_states(tokens)
            adapter.embed_text_states(text_states)
            adapter.match_logits_of_states(adapter.image_states(pixel_values), text_states, IMAGE_ROWS, TEXT_ROWS)
    finally:
        hook.remove()
    assert seen == [len(tokens["input_ids"])]


def test_albef_given_tokens_for_text_states_says_what_it_reads():
    adapter = _tiny("albef")
    pixel_values, tokens = _pixel_inputs("albef", Capability.MATCH)
    with pytest.raises(InputError, match=r"adapter.text_states\(tokens\).*\['attention_mask', 'input_ids'"):
        adapter.match_logits_of_states(adapter.image_states(pixel_values), tokens, IMAGE_ROWS, TEXT_ROWS)
