"""What is specific to the ``prompt_array`` adapter (the protocol checks, its save -> load round trip among them,
run in ``test_protocol.py``): where the prompts are read and where the text tower pools, and its refusals."""

import json

import pytest
import torch
import torch.nn.functional as F

from vlbias.errors import InputError
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.families.prompt_array import PROMPT_ARRAY_FILE, PROMPTS_FILE, PromptArrayCLIP
from vlbias.models.registry import load

TEXTS = ["a man is cooking.", "someone sewing.", "the woman who is driving in a picture."]


def test_prompts_are_read_before_the_text_and_pooled_at_its_end_token():
    """Prompts that are the embeddings of real words at positions 0..K-1 give what ``transformers``' CLIP gives for
    the ids [words, text] at positions [0..K-1, 0..T-1]: its pooling, which finds the end-of-text token in the
    ids, lands where the prompted text's end token is (index + K), for texts of every padded length."""
    clip = CLIPAdapter.tiny()
    embeddings = clip.model.text_model.embeddings
    words = torch.tensor(clip.tokenizer(["picture woman"], add_special_tokens=False)["input_ids"][0])
    k = len(words)
    prompts = embeddings.token_embedding(words) + embeddings.position_embedding(torch.arange(k))
    model = PromptArrayCLIP(clip, prompts)
    tokens = model.prepare_texts(TEXTS)
    batch, length = tokens["input_ids"].shape
    with torch.no_grad():
        ours = model.embed_texts(tokens)
        reference = clip.model.get_text_features(
            input_ids=torch.cat([words.expand(batch, -1), tokens["input_ids"]], dim=1),
            attention_mask=torch.cat([torch.ones(batch, k, dtype=torch.long), tokens["attention_mask"]], dim=1),
            position_ids=torch.cat([torch.arange(k), torch.arange(length)]).expand(batch, -1),
        ).pooler_output
    torch.testing.assert_close(ours, F.normalize(reference, dim=-1), rtol=0, atol=1e-6)
    with torch.no_grad():  # and not where the unprompted CLIP would pool: the prompts change every text
        assert (ours - clip.embed_texts(clip.prepare_texts(TEXTS))).abs().max() > 1e-3


def test_texts_are_cut_k_tokens_shorter_than_the_inner_clip_reads():
    model = PromptArrayCLIP.tiny()
    assert model.max_text_length == model.inner.max_text_length - model.n_prompts
    with pytest.warns(UserWarning, match="truncated"):
        tokens = model.prepare_texts([" ".join(["someone"] * 40)])
    assert tokens["input_ids"].shape[1] == model.max_text_length
    assert model.embed_texts(tokens).shape == (1, 64)


def test_gradients_reach_the_prompts_alone_when_the_clip_is_frozen():
    model = PromptArrayCLIP(CLIPAdapter.tiny().requires_grad_(False), torch.randn(3, 64))
    model.embed_texts(model.prepare_texts(TEXTS)).sum().backward()
    assert model.prompts.grad is not None and model.prompts.grad.abs().sum() > 0
    assert [name for name, p in model.named_parameters() if p.requires_grad] == ["prompts"]


def test_saved_and_loaded_it_gives_the_same_embeddings(tmp_path):
    model = PromptArrayCLIP(CLIPAdapter.tiny(seed=3), torch.randn(4, 64))
    model.save_pretrained(tmp_path)
    restored = load("prompt_array", checkpoint=tmp_path, device="cpu")
    assert restored.n_prompts == 4
    pixels = model.prepare_images(torch.rand(2, 3, 64, 64))
    with torch.no_grad():
        torch.testing.assert_close(
            restored.embed_texts(restored.prepare_texts(TEXTS)),
            model.embed_texts(model.prepare_texts(TEXTS)),
            rtol=0,
            atol=0,
        )
        torch.testing.assert_close(restored.embed_images(pixels), model.embed_images(pixels), rtol=0, atol=0)


def test_bad_arrays_and_checkpoints_are_refused_by_name(tmp_path):
    with pytest.raises(InputError, match=r"shape \(K, 64\) .* but got \(2, 63\)"):
        PromptArrayCLIP(CLIPAdapter.tiny(), torch.zeros(2, 63))
    with pytest.raises(InputError, match=r"model 'clip'\) but got model 'open_clip'"):
        PromptArrayCLIP(load("open_clip", tiny=True, device="cpu"), torch.zeros(2, 64))
    PromptArrayCLIP.tiny().save_pretrained(tmp_path)
    (tmp_path / PROMPT_ARRAY_FILE).write_text(json.dumps({"inner": "clip", "n_prompts": 3, "hidden_size": 64}))
    with pytest.raises(InputError, match=r"should hold 'prompts' of shape \[3, 64\] but has shape \(2, 64\)"):
        PromptArrayCLIP.from_pretrained(tmp_path)
    (tmp_path / PROMPTS_FILE).unlink()
    with pytest.raises(InputError, match=f"has no {PROMPTS_FILE}"):
        load("prompt_array", checkpoint=tmp_path, device="cpu")
