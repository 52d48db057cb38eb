"""PrunedEmbeddings (an EMBED adapter keeping some dimensions) and the pruned CLIP and open_clip exports (pruning as
the linear map of the kept rows, ``export_linear``)."""

import copy
import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F
from transformers import CLIPModel

from vlbias.errors import CapabilityError, InputError
from vlbias.models.base import Capability
from vlbias.models.families.bert import BertAdapter
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.families.pruned import PRUNED_FILE, PrunedEmbeddings, row_selection

TEXTS = ["a man is cooking.", "the woman who is driving in a picture.", "someone sewing."]
KEPT = [0, 3, 4, 10, 17, 31, 40, 63]


@pytest.fixture(scope="module")
def clip():
    return CLIPAdapter.tiny(seed=0).eval()


@pytest.fixture(scope="module")
def pixels(clip):
    return clip.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(0)))


def embeddings(model, pixels):
    with torch.no_grad():
        return model.embed_images(pixels), model.embed_texts(model.prepare_texts(TEXTS))


def test_keeps_the_chosen_coordinates_renormalised(clip, pixels):
    pruned = PrunedEmbeddings(clip, KEPT)
    full_images, full_texts = embeddings(clip, pixels)
    images, texts = embeddings(pruned, pixels)
    assert images.shape == texts.shape == (3, len(KEPT))
    torch.testing.assert_close(images, F.normalize(full_images[:, KEPT], dim=-1))
    torch.testing.assert_close(texts, F.normalize(full_texts[:, KEPT], dim=-1))
    with torch.no_grad():
        direct = pruned.direct_call(Capability.EMBED, pixels, pruned.prepare_texts(TEXTS))
    torch.testing.assert_close(direct[0], images, rtol=0, atol=1e-6)
    torch.testing.assert_close(direct[1], texts, rtol=0, atol=1e-6)


def test_tiny_keeps_the_even_dimensions_and_is_deterministic(pixels):
    first, second = PrunedEmbeddings.tiny(seed=0).eval(), PrunedEmbeddings.tiny(seed=0).eval()
    assert first.kept_dims.tolist() == list(range(0, 64, 2))
    for a, b in zip(embeddings(first, pixels), embeddings(second, pixels)):
        assert a.shape == (3, 32)
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_save_load_round_trip(clip, pixels, tmp_path):
    pruned = PrunedEmbeddings(clip, KEPT)
    pruned.save_pretrained(tmp_path)
    assert json.loads((tmp_path / PRUNED_FILE).read_text()) == {"inner": "clip", "embedding_dim": 64, "kept_dims": KEPT}
    restored = PrunedEmbeddings.from_pretrained(tmp_path).eval()
    for before, after in zip(embeddings(pruned, pixels), embeddings(restored, pixels)):
        torch.testing.assert_close(before, after, rtol=0, atol=0)


def test_exported_clip_model_gives_the_pruned_embeddings(clip, pixels, tmp_path):
    clip.export_linear(row_selection(KEPT, 64), row_selection(KEPT, 64), tmp_path)
    model = CLIPModel.from_pretrained(tmp_path).eval()  # plain transformers, no vlbias code
    assert model.config.projection_dim == len(KEPT)
    with torch.no_grad():
        out = model(pixel_values=pixels, **clip.prepare_texts(TEXTS))
    images, texts = embeddings(PrunedEmbeddings(clip, KEPT), pixels)
    torch.testing.assert_close(out.image_embeds, images, rtol=0, atol=1e-6)
    torch.testing.assert_close(out.text_embeds, texts, rtol=0, atol=1e-6)
    assert clip.model.config.projection_dim == 64  # the adapter itself is unchanged


def test_bad_kept_dims_and_inner_models_are_refused(clip, tmp_path):
    with pytest.raises(InputError, match=r"kept dimensions in \[0, 64\) but got \[64\]"):
        PrunedEmbeddings(clip, [0, 64])
    with pytest.raises(InputError, match=r"distinct kept dimensions but got repeats in \[1, 1\]"):
        row_selection([1, 1], 64)
    with pytest.raises(InputError, match=r"non-empty 1-D list of integer dimensions but got \[\]"):
        PrunedEmbeddings(clip, [])
    with pytest.raises(CapabilityError, match="'bert' lacks it"):
        PrunedEmbeddings(BertAdapter.tiny(), [0])
    with pytest.raises(InputError, match=f"has no {PRUNED_FILE}"):
        PrunedEmbeddings.from_pretrained(tmp_path)  # a directory without it


@pytest.fixture(scope="module")
def resnet_open_clip():
    """A tiny open_clip CLIP with a ResNet image tower (its embedding from ``attnpool.c_proj``), a text projection
    with a bias (an ``nn.Linear``) and a logit bias, as a sigmoid-loss open_clip model has."""
    import open_clip
    from open_clip.transform import PreprocessCfg

    from vlbias.models.families.open_clip import OpenCLIPAdapter, tiny_model_config
    from vlbias.models.families.open_clip_tokens import OpenCLIPTokenizer
    from vlbias.models.tiny_sizes import TinyEmbeddingSizes

    torch.manual_seed(0)
    tokenize = open_clip.SimpleTokenizer(context_length=32)
    config = tiny_model_config(TinyEmbeddingSizes(), tokenize.vocab_size)
    config["vision_cfg"] = {"layers": [1, 1, 1, 1], "width": 8, "image_size": 64}
    config["text_cfg"]["proj_bias"] = True
    config["init_logit_bias"] = -10.0
    model = open_clip.CLIP(**config)
    open_clip.model.set_model_preprocess_cfg(model, dataclasses.asdict(PreprocessCfg(size=64)))
    return OpenCLIPAdapter(model, config, OpenCLIPTokenizer(tokenize)).eval()


def test_open_clip_export_folds_linear_projections_and_keeps_the_logit_scale_and_bias(resnet_open_clip, tmp_path):
    import open_clip

    kept = [0, 2, 5, 11, 30]
    resnet_open_clip.export_linear(row_selection(kept, 32), row_selection(kept, 32), tmp_path)
    model = open_clip.create_model_from_pretrained(f"local-dir:{tmp_path}", return_transform=False).eval()
    pruned = PrunedEmbeddings(resnet_open_clip, kept)
    pixels = pruned.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    tokens = pruned.prepare_texts(TEXTS)
    with torch.no_grad():
        images, texts = pruned.embed_images(pixels), pruned.embed_texts(tokens)
        torch.testing.assert_close(model.encode_image(pixels, normalize=True), images, rtol=0, atol=1e-6)
        torch.testing.assert_close(model.encode_text(tokens["input_ids"], normalize=True), texts, rtol=0, atol=1e-6)
        logits = model.get_logits(pixels, tokens["input_ids"])[0].diagonal()
    assert model.logit_bias.item() == resnet_open_clip.model.logit_bias.item() == -10.0
    assert model.logit_scale.item() == resnet_open_clip.model.logit_scale.item()
    expected = resnet_open_clip.model.logit_scale.exp() * (images * texts).sum(-1) + resnet_open_clip.model.logit_bias
    torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)
    assert resnet_open_clip.model.text_projection.out_features == 32  # the adapter itself is unchanged


def test_an_open_clip_tower_without_a_linear_projection_is_refused_by_name(resnet_open_clip):
    from vlbias.mitigation.outputs import check_exportable

    adapter = copy.deepcopy(resnet_open_clip)
    adapter.model.text_projection = None
    with pytest.raises(
        InputError, match=r"its text tower has none of the linear embedding projections text_projection"
    ):
        check_exportable(adapter)
