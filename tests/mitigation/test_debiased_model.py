"""DebiasedEmbeddings (an EMBED adapter whose embeddings a fitted debiaser transforms) and the export of a linear
debiaser into each family's own format, read back by a process that imports no vlbias."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from vlbias.errors import CapabilityError, InputError
from vlbias.mitigation.debiased_embeddings import DEBIASED_FILE, DebiasedEmbeddings
from vlbias.mitigation.debiaser import Debiaser, FitData
from vlbias.mitigation.orth_proj import OrthProj
from vlbias.models.base import Capability
from vlbias.models.families.bert import BertAdapter
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.families.siglip import SigLIPAdapter

TEXTS = ["a man is cooking.", "the woman who is driving in a picture.", "someone sewing."]
PROMPTS = {"man": ["a photo of a man", "a man"], "woman": ["a photo of a woman", "a woman"]}


def fitted_orth_proj(adapter):
    with torch.no_grad():
        prompts = {value: adapter.embed_texts(adapter.prepare_texts(texts)) for value, texts in PROMPTS.items()}
    return OrthProj().fit(FitData(attribute_prompts=prompts))


def embeddings(model, pixels, texts=TEXTS):
    with torch.no_grad():
        return model.embed_images(pixels), model.embed_texts(model.prepare_texts(texts))


@pytest.fixture(scope="module")
def clip():
    return CLIPAdapter.tiny(seed=0).eval()


@pytest.fixture(scope="module")
def open_clip_model():
    from vlbias.models.families.open_clip import OpenCLIPAdapter

    return OpenCLIPAdapter.tiny(seed=0).eval()


def pixels_of(adapter):
    return adapter.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(0)))


def test_embeddings_are_the_debiasers_transforms_of_the_inner_ones(clip):
    debiaser = fitted_orth_proj(clip)
    model = DebiasedEmbeddings(clip, debiaser)
    pixels = pixels_of(clip)
    full_images, full_texts = embeddings(clip, pixels)
    images, texts = embeddings(model, pixels)
    assert torch.equal(images, full_images)  # Orth-Proj leaves images as they are
    projection = debiaser.linear_map("text")
    torch.testing.assert_close(texts, F.normalize(full_texts @ projection.T, dim=-1), rtol=0, atol=1e-6)
    with torch.no_grad():
        direct = model.direct_call(Capability.EMBED, pixels, model.prepare_texts(TEXTS))
    torch.testing.assert_close(direct[1], texts, rtol=0, atol=1e-6)


def test_save_load_round_trip_and_tiny(clip, tmp_path):
    model = DebiasedEmbeddings(clip, fitted_orth_proj(clip))
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / DEBIASED_FILE).read_text()) == {"inner": "clip", "inner_dim": 64, "embedding_dim": 64}
    restored = DebiasedEmbeddings.from_pretrained(tmp_path).eval()
    assert isinstance(restored.debiaser, OrthProj)
    pixels = pixels_of(clip)
    for before, after in zip(embeddings(model, pixels), embeddings(restored, pixels)):
        torch.testing.assert_close(before, after, rtol=0, atol=0)
    first, second = DebiasedEmbeddings.tiny(seed=0).eval(), DebiasedEmbeddings.tiny(seed=0).eval()
    for a, b in zip(embeddings(first, pixels), embeddings(second, pixels)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


class _RecordTexts(Debiaser):
    """Test debiaser that reads texts: records them and returns the embeddings unchanged."""

    name = "record_texts"
    NEEDS = ()
    MODIFIES = frozenset({"text"})
    READS_TEXTS = True

    def _fit(self, data):
        self._keep("unused", torch.zeros(1))
        self.seen = []

    def _transform(self, modality, embeddings, texts):
        self.seen.append(list(texts))
        return embeddings


def test_texts_reach_a_debiaser_that_reads_them_whatever_the_batch(clip):
    model = DebiasedEmbeddings(clip, _RecordTexts().fit(FitData()))
    tokens = model.prepare_texts(TEXTS)  # padded to the longest of the three
    model.debiaser.seen.clear()
    with torch.no_grad():
        model.embed_texts({key: value[[2, 0]] for key, value in tokens.items()})
        model.embed_texts(clip.prepare_texts(TEXTS[:1]))  # the same text, padded otherwise, by the inner adapter
    assert model.debiaser.seen == [[TEXTS[2], TEXTS[0]], [TEXTS[0]]]
    with pytest.raises(InputError, match=r"tokens of row 0 were not prepared by this model"):
        model.embed_texts(clip.prepare_texts(["an unseen text"]))


def test_only_the_most_recently_prepared_texts_are_remembered(clip, monkeypatch):
    """The texts kept for a debiaser that reads them are bounded (``REMEMBERED_TEXTS``, here 2): the least recently
    prepared go first, preparing a text again keeps it, and one call's texts are all kept whatever their number."""
    monkeypatch.setattr("vlbias.mitigation.debiased_embeddings.REMEMBERED_TEXTS", 2)
    model = DebiasedEmbeddings(clip, _RecordTexts().fit(FitData()))
    tokens = [model.prepare_texts([text]) for text in TEXTS]
    assert len(model._texts) == 2
    with torch.no_grad(), pytest.raises(InputError, match=r"row 0 were not prepared .* not among the 2 last prepared"):
        model.embed_texts(tokens[0])
    model.prepare_texts([TEXTS[1]])  # TEXTS[1] is now the most recent, TEXTS[2] the oldest
    model.prepare_texts(["an unseen text"])
    model.debiaser.seen.clear()
    with torch.no_grad():
        model.embed_texts(tokens[1])
        with pytest.raises(InputError, match="row 0 were not prepared"):
            model.embed_texts(tokens[2])
        everything = model.prepare_texts(TEXTS)
        assert len(model._texts) == 3
        model.embed_texts(everything)
    assert model.debiaser.seen == [[TEXTS[1]], TEXTS]


def test_bad_inner_models_and_checkpoints_are_refused(clip, tmp_path):
    with pytest.raises(CapabilityError, match="'bert' lacks it"):
        DebiasedEmbeddings(BertAdapter.tiny(), fitted_orth_proj(clip))
    with pytest.raises(InputError, match="not fitted"):
        DebiasedEmbeddings(clip, OrthProj())
    with pytest.raises(InputError, match=f"has no {DEBIASED_FILE}"):
        DebiasedEmbeddings.from_pretrained(tmp_path)


class _HalveImages(Debiaser):
    """Test debiaser, linear on the image embeddings: halves them."""

    name = "halve_images"
    NEEDS = ()
    MODIFIES = frozenset({"image"})

    def _fit(self, data):
        self._keep("unused", torch.zeros(1))

    def _transform(self, modality, embeddings, texts):
        return embeddings / 2

    def linear_map(self, modality):
        return torch.eye(32) / 2


def test_families_that_cannot_fold_a_linear_map_are_refused_by_name(clip, tmp_path):
    siglip = SigLIPAdapter.tiny()
    with pytest.raises(CapabilityError, match="'siglip' cannot export .* its image embeddings: .* attention-pooling"):
        siglip.export_linear(torch.eye(32) / 2, None, tmp_path)
    with pytest.raises(CapabilityError, match="inner model 'siglip' cannot: a change of its image embeddings"):
        DebiasedEmbeddings(siglip, _HalveImages().fit(FitData())).export_linear(None, None, tmp_path)
    text_only = DebiasedEmbeddings(siglip, fitted_orth_proj(siglip))
    assert text_only.no_linear_export is None  # its own change folds into the text head
    assert "a change of its image embeddings" in text_only.linear_export_refusal()  # pruning's, of both: refused
    with pytest.raises(CapabilityError, match="a change of its image embeddings"):
        text_only.export_linear(torch.eye(32), None, tmp_path)
    with pytest.raises(CapabilityError, match="'bert' cannot export"):
        BertAdapter.tiny().export_linear(None, None, tmp_path)
    with pytest.raises(CapabilityError, match="'record_texts' changes the text embeddings non-linearly"):
        DebiasedEmbeddings(clip, _RecordTexts().fit(FitData())).export_linear(None, None, tmp_path)
    with pytest.raises(InputError, match=r"one output dimension .* but got 3 and 64"):
        clip.export_linear(torch.eye(64)[:3], None, tmp_path)
    with pytest.raises(InputError, match=r"text map of shape \(out_dim, 64\) but got \(64, 5\)"):
        clip.export_linear(None, torch.ones(64, 5), tmp_path)


#: Loads an exported model with its family's own loader (no vlbias), embeds the saved inputs, writes the embeddings.
FAMILY_LOADER = {
    "clip": """
        from transformers import CLIPModel
        model = CLIPModel.from_pretrained(folder).eval()
        out = model(pixel_values=inputs["pixel_values"], input_ids=inputs["input_ids"],
                    attention_mask=inputs["attention_mask"])
        images, texts = out.image_embeds, out.text_embeds
    """,
    "siglip": """
        from transformers import SiglipModel
        model = SiglipModel.from_pretrained(folder).eval()
        out = model(pixel_values=inputs["pixel_values"], input_ids=inputs["input_ids"])
        images, texts = out.image_embeds, out.text_embeds
    """,
    "open_clip": """
        import open_clip
        model = open_clip.create_model_from_pretrained("local-dir:" + folder, return_transform=False).eval()
        images = model.encode_image(inputs["pixel_values"], normalize=True)
        texts = model.encode_text(inputs["input_ids"], normalize=True)
    """,
}


def family_embeddings(family, folder, inputs, tmp_path):
    """The embeddings of the model exported to ``folder``, computed in a process that imports no vlbias."""
    save_file({key: value.contiguous() for key, value in inputs.items()}, str(tmp_path / "inputs.safetensors"))
    script = (
        textwrap.dedent("""
        import sys, torch
        from safetensors.torch import load_file, save_file
        folder, inputs = sys.argv[1], load_file(sys.argv[2])
        with torch.no_grad():
    """)
        + textwrap.indent(textwrap.dedent(FAMILY_LOADER[family]), "    ")
        + textwrap.dedent("""
        assert not [name for name in sys.modules if name.split(".")[0] == "vlbias"]
        save_file({"images": images.contiguous(), "texts": texts.contiguous()}, sys.argv[3])
    """)
    )
    out = tmp_path / "embeddings.safetensors"
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder), str(tmp_path / "inputs.safetensors"), str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    result = load_file(str(out))
    return result["images"], result["texts"]


@pytest.mark.parametrize("family", ["clip", "open_clip", "siglip"])
def test_the_exported_model_gives_the_debiased_embeddings_without_vlbias(family, clip, open_clip_model, tmp_path):
    inner = {"clip": clip, "open_clip": open_clip_model, "siglip": SigLIPAdapter.tiny(seed=0).eval()}[family]
    model = DebiasedEmbeddings(inner, fitted_orth_proj(inner))
    pixels, tokens = pixels_of(inner), model.prepare_texts(TEXTS)
    model.export_linear(None, None, tmp_path / "export")
    inputs = {"pixel_values": pixels, **tokens}
    images, texts = family_embeddings(family, tmp_path / "export", inputs, tmp_path)
    expected_images, expected_texts = embeddings(model, pixels)
    torch.testing.assert_close(images, expected_images, rtol=0, atol=1e-6)
    torch.testing.assert_close(texts, expected_texts, rtol=0, atol=1e-6)


@pytest.mark.slow  # the export itself runs in the default suite: test_the_exported_model_gives_...
@pytest.mark.parametrize("family", ["clip", "open_clip"])
def test_an_export_folds_any_map_of_each_modality_after_the_debiaser(family, clip, open_clip_model, tmp_path):
    inner = clip if family == "clip" else open_clip_model
    model = DebiasedEmbeddings(inner, fitted_orth_proj(inner))
    dim, g = model.embedding_dim, torch.Generator().manual_seed(3)
    image_map, text_map = torch.randn(dim - 5, dim, generator=g), torch.randn(dim - 5, dim, generator=g)
    model.export_linear(image_map, text_map, tmp_path / "export")
    pixels, tokens = pixels_of(inner), model.prepare_texts(TEXTS)
    images, texts = family_embeddings(family, tmp_path / "export", {"pixel_values": pixels, **tokens}, tmp_path)
    debiased_images, debiased_texts = embeddings(model, pixels)
    assert images.shape == (3, dim - 5)
    torch.testing.assert_close(images, F.normalize(debiased_images @ image_map.T, dim=-1), rtol=0, atol=1e-6)
    torch.testing.assert_close(texts, F.normalize(debiased_texts @ text_map.T, dim=-1), rtol=0, atol=1e-6)


def test_the_exporting_families_are_those_whose_adapters_export_a_linear_map():
    """The folder names that prune and debias outputs may hold are the families that export in their own format."""
    from vlbias.models.catalog import adapter_class, list_models
    from vlbias.models.linear_export import EXPORTING_FAMILIES

    exporting = {name for name in list_models() if adapter_class(name).no_linear_export is None}
    assert exporting == set(EXPORTING_FAMILIES)


def test_siglip2_exports_a_text_change_that_its_own_loader_reads(tmp_path):
    from transformers import Siglip2Model

    from vlbias.models.families.siglip2 import SigLIP2Adapter

    siglip2 = SigLIP2Adapter.tiny(seed=0).eval()
    model = DebiasedEmbeddings(siglip2, fitted_orth_proj(siglip2))
    model.export_linear(None, None, tmp_path)
    exported, tokens = Siglip2Model.from_pretrained(tmp_path).eval(), model.prepare_texts(TEXTS)
    with torch.no_grad():
        texts = F.normalize(exported.get_text_features(input_ids=tokens["input_ids"]).pooler_output, dim=-1)
        torch.testing.assert_close(texts, model.embed_texts(tokens), rtol=0, atol=1e-6)
