"""VisualBERT adapter: the protocol checks are in test_protocol.py; here VisualBERT
specifics: region sources, the match logit's sign, no image, bad checkpoints."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import BertModel, VisualBertConfig, VisualBertForPreTraining

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.models.families.visualbert import VisualBERTAdapter
from vlbias.models.regions import GridFeatures, RegionFeatures
from vlbias.models.registry import load

NAME = "visualbert"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


def test_prepare_images_gives_grid_regions(model):
    regions = model.prepare_images(torch.rand(2, 3, 64, 64))
    assert isinstance(regions, RegionFeatures)
    assert regions.features.shape == (2, 4, model.visual_dim) and regions.features.dtype == torch.float32


def test_match_logit_is_log_odds_of_the_matching_label(model):
    """The library's sentence-image loss with label 0 ("matches") is softplus(-logit)."""
    regions = model.prepare_images(torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    tokens = model.prepare_texts(["a man is cooking.", "someone."])
    with torch.no_grad():
        logits = model.match_logits(regions, tokens)
        labels = F.pad(tokens["input_ids"], (0, regions.features.shape[1]), value=-100)
        output = model.model(
            **tokens,
            visual_embeds=regions.features,
            visual_attention_mask=regions.mask,
            labels=labels,
            sentence_image_labels=torch.zeros(2, dtype=torch.long),
        )
        mlm_loss = F.cross_entropy(output.prediction_logits.flatten(0, 1), labels.flatten())
    torch.testing.assert_close(output.loss - mlm_loss, F.softplus(-logits).mean())


def test_no_image_is_text_alone(model):
    tokens = model.prepare_texts(["the man is [MASK]."])
    assert model.no_image(1) is None
    with torch.no_grad():
        ours = model.fill_mask_logits(None, tokens)
        theirs = model.model(**tokens).prediction_logits
        with_image = model.fill_mask_logits(model.prepare_images(torch.rand(1, 3, 64, 64)), tokens)
    torch.testing.assert_close(ours, theirs)
    assert not torch.allclose(ours, with_image)


def test_boxes_are_not_read(model):
    regions = model.prepare_images(torch.rand(1, 3, 64, 64))
    moved = RegionFeatures(regions.features, torch.rand_like(regions.boxes), regions.mask, regions.object_ids)
    tokens = model.prepare_texts(["a woman sewing."])
    with torch.no_grad():
        torch.testing.assert_close(
            model.token_states(moved, tokens), model.token_states(regions, tokens), rtol=0, atol=0
        )


def test_precomputed_regions_from_npz(tmp_path):
    rng = np.random.default_rng(0)
    for name, count in (("img_a", 3), ("img_b", 5)):
        boxes = np.array([[0, 0, 10, 10]] * count, dtype=np.float32)
        np.savez(
            tmp_path / f"{name}.npz",
            features=rng.normal(size=(count, 16)).astype(np.float32),
            boxes=boxes,
            image_h=20,
            image_w=40,
        )
    model = VisualBERTAdapter.tiny(region_features=tmp_path).eval()
    regions = model.prepare_images(["/images/img_a.jpg", "img_b"])
    assert regions.features.shape == (2, 5, 16) and regions.mask.sum(1).tolist() == [3, 5]
    torch.testing.assert_close(regions.boxes[0, 0], torch.tensor([0.0, 0.0, 0.25, 0.5]))
    with pytest.raises(
        InputError, match=r"'img_c' has no region features in .*\(it holds 2 image\(s\): 'img_a', 'img_b'\)"
    ):
        model.prepare_images(["img_c.jpg"])
    with pytest.raises(InputError, match="pass image paths"):
        model.prepare_images(torch.rand(1, 3, 64, 64))


def test_saved_model_loads_with_a_feature_store(model, tmp_path):
    model.save_pretrained(tmp_path / "checkpoint")
    features = tmp_path / "features"
    features.mkdir()
    np.savez(
        features / "img.npz",
        features=np.ones((2, 16), np.float32),
        boxes=np.zeros((2, 4), np.float32),
        image_h=10,
        image_w=10,
    )
    restored = VisualBERTAdapter.from_pretrained(tmp_path / "checkpoint", region_features=features).eval()
    assert restored.grid is None
    regions = restored.prepare_images(["img.png"])
    tokens = model.prepare_texts(["a man."])
    with torch.no_grad():
        torch.testing.assert_close(restored.match_logits(regions, tokens), model.match_logits(regions, tokens))


def test_wrong_region_dimension_is_refused(model, tmp_path):
    np.savez(
        tmp_path / "img.npz",
        features=np.ones((2, 2048), np.float32),
        boxes=np.zeros((2, 4), np.float32),
        image_h=10,
        image_w=10,
    )
    store_model = VisualBERTAdapter.tiny(region_features=tmp_path)
    with pytest.raises(
        InputError, match=r"hold 2048-d region features but model 'visualbert' expects 16-d \(visual_embedding_dim\)"
    ):
        store_model.prepare_images(["img"])
    with pytest.raises(InputError, match="given RegionFeatures hold 8-d"):
        model.prepare_images(RegionFeatures.blank(1, 8))
    grid = GridFeatures.create("resnet10t", pretrained=False, grid_size=2, image_size=64)  # 512 channels
    with pytest.raises(ConfigError, match=r"'resnet10t' gives 512-d features but model 'visualbert' expects 16-d"):
        VisualBERTAdapter(model.model, model.tokenizer, grid=grid)


def test_checkpoint_with_missing_and_unexpected_keys_is_refused(model, tmp_path):
    model.save_pretrained(tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights.pop("visual_bert.embeddings.visual_projection.weight")
    weights["visual_bert.embeddings.extra.weight"] = torch.zeros(1)
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(
        InputError,
        match=r"missing key\(s\): visual_bert\.embeddings\.visual_projection\.weight.*"
        r"unexpected key\(s\): visual_bert\.embeddings\.extra\.weight",
    ):
        load(NAME, checkpoint=tmp_path, device="cpu")


def test_no_image_with_real_bert_weights_is_that_bert(minilm_dir, minilm_tokenizer):
    """VisualBERT's text stream is BERT: loaded with the real MiniLM-L6 weights, its text-only
    token states are MiniLM's own, through the adapter and the real 30,522-token vocabulary."""
    bert = BertModel.from_pretrained(str(minilm_dir)).eval()
    c = bert.config
    config = VisualBertConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        max_position_embeddings=c.max_position_embeddings,
        layer_norm_eps=c.layer_norm_eps,
        pad_token_id=c.pad_token_id,
        visual_embedding_dim=16,
    )
    visual_bert = VisualBertForPreTraining(config)
    missing, unexpected = visual_bert.load_state_dict(
        {f"visual_bert.{k}": v for k, v in bert.state_dict().items()}, strict=False
    )
    assert not unexpected and all(k.startswith(("cls.", "visual_bert.embeddings.visual_")) for k in missing)
    adapter = VisualBERTAdapter(visual_bert, minilm_tokenizer, **VisualBERTAdapter.tiny_regions(16, None)).eval()
    tokens = adapter.prepare_texts(["the woman is carrying a briefcase.", "a man."])
    with torch.no_grad():
        torch.testing.assert_close(adapter.token_states(adapter.no_image(2), tokens), bert(**tokens).last_hidden_state)


def test_grid_backbone_stays_in_eval_mode(model):
    model.train()
    try:
        assert model.model.training and not model.grid.training
    finally:
        model.eval()


def test_capabilities_and_registry():
    assert {Capability.FILL_MASK, Capability.MATCH, Capability.TOKEN_STATES} == set(VisualBERTAdapter.capabilities)
    assert type(load(NAME, tiny=True, device="cpu")) is VisualBERTAdapter
