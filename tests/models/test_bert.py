"""Text-only BERT adapter: the protocol checks are in test_protocol.py; here BERT specifics."""

import pytest
import torch

from vlbias.errors import CapabilityError, InputError
from vlbias.models.families.bert import BertAdapter
from vlbias.models.registry import load

NAME = "bert"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


def test_an_image_is_refused_not_ignored(model):
    tokens = model.prepare_texts(["the [MASK] is cooking."])
    assert model.no_image(1) is None
    for method in (model.fill_mask_logits, model.token_states):
        with pytest.raises(InputError, match=r"'bert' is text-only but got pixel_values of shape \(1, 3, 8, 8\)"):
            method(torch.zeros(1, 3, 8, 8), tokens)
    with pytest.raises(InputError, match="text-only"):
        model.prepare_images([torch.zeros(3, 8, 8)])


def test_embed_is_refused_naming_models_that_have_it(model):
    with pytest.raises(CapabilityError, match=r"'bert' does not have capability 'embed'.*blip, clip"):
        model.embed_texts(model.prepare_texts(["a man."]))


def test_real_vocabulary_tiny_model_predicts_over_it(minilm_tokenizer):
    model = BertAdapter.tiny(tokenizer=minilm_tokenizer).eval()
    tokens = model.prepare_texts(["he carried a [MASK] to work."])
    assert model.fill_mask_logits(None, tokens).shape == (1, tokens["input_ids"].shape[1], 30522)


def test_real_sentence_encoder_without_mlm_head_is_refused_listing_keys(minilm_dir):
    """MiniLM ships a bare ``BertModel``: loading it as a masked LM must fail, not initialise
    a random MLM head."""
    keys = r"missing key\(s\): cls\.predictions\.bias.*unexpected key\(s\): pooler\.dense"
    with pytest.raises(InputError, match=keys):
        load(NAME, checkpoint=minilm_dir, device="cpu")


def test_real_encoder_weights_give_the_real_token_states(minilm_dir, minilm_tokenizer, tmp_path):
    """MiniLM's pretrained encoder under a (random) MLM head, saved and reloaded through
    ``load``: TOKEN_STATES equal the real ``BertModel``'s last hidden states."""
    from transformers import BertForMaskedLM, BertModel

    encoder = BertModel.from_pretrained(str(minilm_dir)).eval()
    masked_lm = BertForMaskedLM(encoder.config)
    unused = masked_lm.bert.load_state_dict(encoder.state_dict(), strict=False)
    assert not unused.missing_keys and set(unused.unexpected_keys) == {"pooler.dense.weight", "pooler.dense.bias"}
    BertAdapter(masked_lm, minilm_tokenizer).save_pretrained(tmp_path)
    model = load(NAME, checkpoint=tmp_path, device="cpu")
    texts = ["the nurse said that she was tired.", "a hairdresser is cutting hair."]
    tokens = model.prepare_texts(texts)
    with torch.no_grad():
        expected = encoder(**minilm_tokenizer(texts, padding=True, return_tensors="pt")).last_hidden_state
        torch.testing.assert_close(model.token_states(None, tokens), expected)
