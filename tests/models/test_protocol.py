"""The protocol checks (``adapter_checks``, see conftest) on every registered adapter and each
capability it declares: shapes and dtypes, determinism, batch-invariance, equality with the
wrapped model called directly, and a save -> load round trip. A new adapter is checked as soon as
it is registered; its own test file holds only what is specific to it."""

import functools

import pytest
import torch
from torch import Tensor

from tests.models.conftest import sample_inputs
from vlbias.errors import InputError
from vlbias.models.base import Capability, at_positions
from vlbias.models.catalog import adapter_class, list_models
from vlbias.models.registry import load

#: ANSWER reads images and prompts through the model's own processor, not prepared pixels and tokens: its protocol
#: checks (the same five) are in ``test_chat_vlm.py``.
CASES = [
    (name, capability)
    for name in list_models()
    for capability in sorted(adapter_class(name).capabilities)
    if capability is not Capability.ANSWER
]
CHECKS = ("shapes_and_dtypes", "deterministic", "batch_invariant", "equals_direct_call", "save_load_round_trip")


@functools.cache
def tiny(name: str):
    return load(name, tiny=True, device="cpu")


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize(("name", "capability"), CASES, ids=[f"{n}-{c.value}" for n, c in CASES])
def test_adapter_protocol(name, capability, check, adapter_checks, tmp_path):
    extra = (tmp_path,) if check == "save_load_round_trip" else ()
    getattr(adapter_checks, check)(tiny(name), capability, *extra)


FILL_MASK_MODELS = [name for name, capability in CASES if capability is Capability.FILL_MASK]
MATCH_MODELS = [name for name, capability in CASES if capability is Capability.MATCH]


@pytest.mark.parametrize("name", FILL_MASK_MODELS)
def test_paired_rows_equal_the_gathered_rows(name):
    """``paired_fill_mask_logits`` (which two-stream adapters compute encoding each distinct image and
    text once) equals ``fill_mask_logits`` of the gathered rows: repeated texts with each row's own
    "no image"; repeated texts and images, read unequally often; an image that no row reads; and,
    with ``positions``, those logits at two positions per row."""
    adapter = tiny(name)
    pixel_values, texts = sample_inputs(adapter, Capability.FILL_MASK)
    tokens = adapter.prepare_texts(texts)
    text_rows = torch.tensor([0, 2, 2, 1, 3, 0, 1])
    positions = torch.tensor([[1, 0], [2, 1], [1, 1], [0, 3], [3, 2], [2, 2], [1, 3]])
    gathered = {key: value[text_rows] for key, value in tokens.items()}
    blank = adapter.no_image(len(text_rows))
    with torch.no_grad():
        expected = adapter.fill_mask_logits(blank, gathered)
        torch.testing.assert_close(
            adapter.paired_fill_mask_logits(blank, tokens, None, text_rows), expected, rtol=0, atol=1e-5
        )
        paired = adapter.paired_fill_mask_logits(blank, tokens, None, text_rows, positions)
        torch.testing.assert_close(paired, at_positions(expected, positions), rtol=0, atol=1e-5)
        if isinstance(pixel_values, Tensor):
            for image_rows in (torch.tensor([1, 1, 0, 3, 3, 2, 0]), torch.tensor([3, 0, 0, 3, 1, 1, 0])):
                expected = adapter.fill_mask_logits(pixel_values[image_rows], gathered)
                paired = adapter.paired_fill_mask_logits(pixel_values, tokens, image_rows, text_rows)
                torch.testing.assert_close(paired, expected, rtol=0, atol=1e-5)
                paired = adapter.paired_fill_mask_logits(pixel_values, tokens, image_rows, text_rows, positions)
                torch.testing.assert_close(paired, at_positions(expected, positions), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", [n for n in FILL_MASK_MODELS if not adapter_class(n).text_only])
def test_paired_rows_need_one_image_per_row(name):
    """Two images, or two image rows, for three rows are refused by name, by the one check of the base class
    before any family's computation."""
    adapter = tiny(name)
    pixel_values, texts = sample_inputs(adapter, Capability.FILL_MASK)
    tokens = adapter.prepare_texts(texts)
    with pytest.raises(InputError, match="one image per row but got 2 images and 3 rows"):
        adapter.paired_fill_mask_logits(pixel_values[0:2], tokens, None, torch.tensor([0, 1, 2]))
    with pytest.raises(InputError, match="one image per row but got 2 image rows and 3 rows"):
        adapter.paired_fill_mask_logits(pixel_values, tokens, torch.tensor([0, 1]), torch.tensor([0, 1, 2]))


@pytest.mark.parametrize("name", MATCH_MODELS)
def test_paired_match_logits_equal_the_gathered_pairs(name):
    """``paired_match_logits`` (ALBEF encodes each distinct image and text once) equals ``match_logits`` of the
    gathered pairs, with images and texts read unequally often and batches that split the pairs unevenly."""
    adapter = tiny(name)
    pixel_values, texts = sample_inputs(adapter, Capability.MATCH)
    if not hasattr(pixel_values, "index_select"):
        pytest.skip(f"{name} reads region features, which cannot be gathered")
    tokens = adapter.prepare_texts(texts)
    image_rows, text_rows = torch.tensor([1, 1, 0, 3, 3, 2, 0]), torch.tensor([0, 2, 2, 1, 3, 0, 1])
    with torch.no_grad():
        expected = adapter.match_logits(
            pixel_values.index_select(0, image_rows), {key: value[text_rows] for key, value in tokens.items()}
        )
        paired = adapter.paired_match_logits(pixel_values, tokens, image_rows, text_rows, batch_size=3)
    torch.testing.assert_close(paired, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", MATCH_MODELS)
def test_match_score_says_what_the_pair_logit_is(name):
    """An ITM head's logit is ``itm``; a dual encoder's scaled cosine (``match_follows_embeddings``) is ``sigmoid``
    (trained with the sigmoid loss, with a logit bias) or ``softmax`` (the contrastive softmax, without one)."""
    adapter = tiny(name)
    if not adapter.match_follows_embeddings:
        assert adapter.match_score == "itm"
    else:
        has_bias = getattr(getattr(adapter, "model", None), "logit_bias", None) is not None
        assert adapter.match_score == ("sigmoid" if has_bias else "softmax")
