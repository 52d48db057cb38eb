"""open_clip adapter: the protocol checks are in test_protocol.py; here the pair score, open_clip's own tokenizer and
preprocessing, and every way of loading a checkpoint (a state-dict file, a saved directory, a tag or hub id offline)."""

import dataclasses
import json
import re

import numpy as np
import open_clip
import pytest
import torch
from open_clip.transform import PreprocessCfg, image_transform_v2
from PIL import Image
from safetensors.torch import save_file

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.models.families.open_clip import OpenCLIPAdapter, tiny_model_config
from vlbias.models.registry import load
from vlbias.results import read_results

NAME = "open_clip"
TEXTS = ["a man is cooking.", "the woman who is driving.", "someone."]


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


@pytest.fixture(scope="module")
def batch(model):
    pixels = model.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(1)))
    return pixels, model.prepare_texts(TEXTS)


def embeddings(adapter, pixels, tokens):
    with torch.no_grad():
        return adapter.embed_images(pixels), adapter.embed_texts(tokens)


def test_match_is_the_scaled_cosine_of_the_embeddings(model, batch):
    """MATCH is ``exp(logit_scale) * cos(v, t)`` of each pair of the (normalised) EMBED outputs, and the diagonal of
    open_clip's own ``get_logits`` image-by-text matrix."""
    pixels, tokens = batch
    images, texts = embeddings(model, pixels, tokens)
    torch.testing.assert_close(images.norm(dim=-1), torch.ones(3))
    with torch.no_grad():
        scores = model.match_logits(pixels, tokens)
        matrix = model.model.get_logits(pixels, tokens["input_ids"])[0]
    torch.testing.assert_close(scores, model.model.logit_scale.exp() * (images * texts).sum(dim=-1))
    torch.testing.assert_close(scores, matrix.diagonal())
    assert model.model.logit_scale.exp().item() == pytest.approx(1 / 0.07)  # open_clip's initial temperature


def test_match_adds_the_logit_bias_of_a_sigmoid_model(batch):
    """An open_clip model trained with the sigmoid loss has a ``logit_bias`` ``b``: MATCH is ``exp(tau) cos + b``, as
    open_clip's ``get_logits``, a log-odds (``match_score`` ``sigmoid``; a CLIP without a bias: ``softmax``)."""
    adapter = OpenCLIPAdapter.tiny()
    assert adapter.match_score == "softmax"
    adapter.model.logit_bias = torch.nn.Parameter(torch.tensor(-10.0))
    pixels, tokens = batch
    images, texts = embeddings(adapter, pixels, tokens)
    with torch.no_grad():
        scores = adapter.match_logits(pixels, tokens)
    torch.testing.assert_close(scores, adapter.model.logit_scale.exp() * (images * texts).sum(dim=-1) - 10.0)
    assert adapter.match_score == "sigmoid"
    torch.testing.assert_close(scores, adapter.direct_call(Capability.MATCH, pixels, tokens))


def test_texts_are_read_by_open_clips_tokenizer_and_long_ones_cut_with_a_warning(model):
    tokens = model.prepare_texts(TEXTS)
    torch.testing.assert_close(tokens["input_ids"], open_clip.SimpleTokenizer(context_length=32)(TEXTS))
    assert list(tokens) == ["input_ids"]
    long = " ".join(["cooking"] * 40)  # 40 word tokens + start and end: 42 > 32
    with pytest.warns(UserWarning, match="1 text.* exceed open_clip's maximum of 32 tokens .* by 10 tokens"):
        cut = model.prepare_texts([long])["input_ids"]
    assert cut.shape == (1, 32) and cut[0, -1].item() == open_clip.SimpleTokenizer().eot_token_id


def test_images_go_through_open_clips_own_preprocessing(model, tmp_path):
    """A PIL image is what open_clip's own eval transform (of the model's ``preprocess_cfg``) makes of it, and the
    saved directory's preprocessing (here a mean, std and size of its own) is what the loaded adapter uses."""
    picture = Image.fromarray(np.random.default_rng(0).integers(0, 255, (48, 40, 3), dtype=np.uint8))
    theirs = image_transform_v2(PreprocessCfg(**model.model.visual.preprocess_cfg), is_train=False)
    torch.testing.assert_close(model.prepare_images([picture]), theirs(picture)[None], rtol=0, atol=0)
    assert model.model.visual.preprocess_cfg["mean"] == open_clip.OPENAI_DATASET_MEAN

    model.save_pretrained(tmp_path)
    config_file = tmp_path / "open_clip_config.json"
    config = json.loads(config_file.read_text())
    config["preprocess_cfg"] |= {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], "resize_mode": "squash"}
    config_file.write_text(json.dumps(config))
    restored = load(NAME, checkpoint=tmp_path, device="cpu")
    _, preprocess = open_clip.create_model_from_pretrained(f"local-dir:{tmp_path}")
    pixels = restored.prepare_images([picture])
    torch.testing.assert_close(pixels, preprocess(picture)[None], rtol=0, atol=0)
    squashed = torch.from_numpy(np.array(picture.resize((32, 32), Image.BICUBIC))).permute(2, 0, 1) / 255
    torch.testing.assert_close(pixels[0], (squashed - 0.5) / 0.25, rtol=0, atol=1e-5)


def test_a_saved_directory_loads_in_open_clip_with_the_same_embeddings(model, batch, tmp_path):
    """``save_pretrained`` writes open_clip's ``local-dir:`` format: open_clip's own loader reads it, and the model
    embeds as the adapter does."""
    pixels, tokens = batch
    model.save_pretrained(tmp_path)
    theirs, _ = open_clip.create_model_from_pretrained(f"local-dir:{tmp_path}")
    with torch.no_grad():
        direct = theirs.encode_image(pixels, normalize=True), theirs.encode_text(tokens["input_ids"], normalize=True)
    for ours, expected in zip(embeddings(model, pixels, tokens), direct):
        torch.testing.assert_close(ours, expected, rtol=0, atol=1e-6)


def test_open_clips_own_local_dir_spelling_loads_the_directory(model, batch, tmp_path):
    """``--checkpoint local-dir:PATH``, as open_clip spells a local directory, loads what ``PATH`` loads; a
    ``local-dir:`` naming no directory is refused by name."""
    model.save_pretrained(tmp_path / "saved")
    pixels, tokens = batch
    loaded = load(NAME, checkpoint=f"local-dir:{tmp_path / 'saved'}", device="cpu")
    for ours, expected in zip(embeddings(loaded, pixels, tokens), embeddings(model, pixels, tokens)):
        torch.testing.assert_close(ours, expected, rtol=0, atol=1e-6)
    with pytest.raises(InputError, match=r"'local-dir:missing' for model 'open_clip' names no directory .*takes a"):
        load(NAME, checkpoint="local-dir:missing", device="cpu")


def test_a_truncated_weights_file_in_a_saved_directory_is_named(model, tmp_path):
    model.save_pretrained(tmp_path)
    weights = tmp_path / "open_clip_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(InputError, match=f"{re.escape(repr(str(weights)))} is not a whole safetensors file"):
        load(NAME, checkpoint=tmp_path, device="cpu")


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_a_state_dict_file_loads_with_its_architecture_and_embeds_identically(model, batch, tmp_path, suffix):
    """``torch.save(model.state_dict())`` (or a safetensors file) of a tiny model, with the model config as a JSON
    architecture file: the loaded adapter embeds as the in-memory one does (1e-6)."""
    architecture = tmp_path / "vlbias-tiny-clip.json"
    architecture.write_text(json.dumps(model.model_config))
    weights = tmp_path / f"weights{suffix}"
    state = {key: value.contiguous() for key, value in model.model.state_dict().items()}
    torch.save(state, weights) if suffix == ".pt" else save_file(state, str(weights))
    restored = load(NAME, checkpoint=weights, device="cpu", options={"architecture": str(architecture)})
    pixels, tokens = batch
    for ours, theirs in zip(embeddings(model, pixels, tokens), embeddings(restored, pixels, tokens)):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_a_state_dict_of_another_architecture_is_refused_by_name(model, tmp_path):
    weights = tmp_path / "weights.pt"
    torch.save(model.model.state_dict(), weights)
    narrow = tmp_path / "vlbias-narrow-clip.json"
    sizes = dataclasses.replace(OpenCLIPAdapter.tiny_sizes, num_layers=1)
    narrow.write_text(json.dumps(tiny_model_config(sizes, vocab_size=49408)))
    with pytest.raises(InputError) as error:
        load(NAME, checkpoint=weights, options={"architecture": str(narrow)})
    message = str(error.value)
    assert "does not load as open_clip architecture 'vlbias-narrow-clip' (Unexpected key(s)" in message
    assert "\n" not in message
    with pytest.raises(InputError, match="does not load as open_clip architecture 'vlbias-narrow-clip'"):
        load(NAME, checkpoint=tmp_path / "vlbias-narrow-clip.json", options={"architecture": str(narrow)})


def test_unknown_architecture_and_tag_are_refused_naming_the_closest(tmp_path):
    with pytest.raises(ConfigError, match=r"Unknown open_clip architecture 'ViT-B-23'; closest: ViT-B-32"):
        load(NAME, checkpoint="laion2b_s34b_b79k", options={"architecture": "ViT-B-23"})
    with pytest.raises(
        ConfigError, match=r"pretrained tag of open_clip architecture 'ViT-B-32'; closest tags: laion2b_s34b_b79k"
    ):
        load(NAME, checkpoint="laion2b_s34b_b97k", options={"architecture": "ViT-B-32"})
    with pytest.raises(ConfigError, match=r"needs its architecture: add --model_options '\{architecture: NAME\}'"):
        load(NAME, checkpoint="laion2b_s34b_b79k")
    with pytest.raises(ConfigError, match="names its architecture in its open_clip_config.json"):
        load(NAME, checkpoint="hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K", options={"architecture": "ViT-B-32"})
    with pytest.raises(InputError, match="holds no open_clip_config.json"):
        load(NAME, checkpoint=tmp_path)


@pytest.mark.parametrize(
    ("checkpoint", "options"),
    [
        ("laion2b_s34b_b79k", {"architecture": "ViT-B-32"}),
        ("hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K", {}),
        ("laion/CLIP-ViT-B-32-laion2B-s34B-b79K", {}),
    ],
)
def test_a_tag_or_hub_id_offline_is_refused_in_one_line(checkpoint, options, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError) as error:
        load(NAME, checkpoint=checkpoint, options=options)
    message = str(error.value)
    assert (
        f"Checkpoint {checkpoint!r} for model 'open_clip' is not in the local cache and could not be downloaded"
        in message
    )
    assert "--checkpoint PATH.safetensors" in message and "\n" not in message


def test_tiny_takes_no_tokenizer_of_another_vocabulary():
    with pytest.raises(ConfigError, match="reads open_clip's own BPE tokenizer"):
        OpenCLIPAdapter.tiny(tokenizer=object())


@pytest.mark.parametrize("name", ["open_clip", "siglip2"])
def test_a_tensor_that_is_no_image_batch_is_refused(name):
    """The families that read tensors through their library's own transforms refuse other shapes by the shared
    check, as the others do."""
    with pytest.raises(InputError, match=r"Expected image tensor of shape \(B, 3, H, W\) but got \(2, 64, 64\)"):
        load(name, tiny=True, device="cpu").prepare_images(torch.rand(2, 64, 64))


def test_measure_reads_a_state_dict_file_with_its_architecture_as_the_model_it_was_saved_from(tmp_path, run_cli):
    """``vlbias measure --checkpoint weights.pt --model_options '{architecture: FILE}'`` of the tiny model's own state
    dict measures exactly what ``--tiny`` measures; an unknown architecture ends the command with one line."""
    tiny = OpenCLIPAdapter.tiny()
    architecture = tmp_path / "vlbias-tiny-clip.json"
    architecture.write_text(json.dumps(tiny.model_config))
    torch.save(tiny.model.state_dict(), tmp_path / "weights.pt")
    argv = ["measure", "--suite", "vlstereoset", "--model", NAME, "--data", "biasworld"]
    argv += ["--biasworld.eval_per_combination", "1", "--suite_options", "{statistics: {n_bootstrap: 20}}"]
    code, _, err = run_cli([*argv, "--tiny", "--out", str(tmp_path / "tiny")])
    assert code == 0, err
    loaded = ["--checkpoint", str(tmp_path / "weights.pt"), "--out", str(tmp_path / "loaded")]
    code, _, err = run_cli([*argv, *loaded, "--model_options", f"{{architecture: {architecture}}}"])
    assert code == 0, err
    expected, results = (read_results(tmp_path / out / "vlstereoset.json") for out in ("tiny", "loaded"))
    assert results.checkpoint == str(tmp_path / "weights.pt") and results.metrics == expected.metrics
    code, _, err = run_cli([*argv, *loaded, "--model_options", "{architecture: ViT-B-23}"])
    assert code == 2 and "Unknown open_clip architecture 'ViT-B-23'; closest: ViT-B-32" in err
    assert len(err.strip().splitlines()) == 1
