"""LXMERT adapter: the protocol checks are in test_protocol.py; here LXMERT
specifics: boxes are read, the match logit's sign, no image, region sources, bad checkpoints."""

import base64

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.models.families.lxmert import LXMERTAdapter
from vlbias.models.regions import GridFeatures, RegionFeatures
from vlbias.models.registry import load

NAME = "lxmert"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


def test_match_logit_is_log_odds_of_the_matching_label(model):
    """The library's matching loss with label 1 ("matches") is softplus(-logit)."""
    regions = model.prepare_images(torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    tokens = model.prepare_texts(["a man is cooking.", "someone."])
    with torch.no_grad():
        logits = model.match_logits(regions, tokens)
        output = model.model(
            **tokens,
            visual_feats=regions.features,
            visual_pos=regions.boxes,
            visual_attention_mask=regions.mask,
            matched_label=torch.ones(2, dtype=torch.long),
        )
    torch.testing.assert_close(output.loss, F.softplus(-logits).mean())


def test_boxes_are_read(model):
    regions = model.prepare_images(torch.rand(1, 3, 64, 64))
    moved = RegionFeatures(regions.features, regions.boxes.flip(-1), regions.mask, regions.object_ids)
    tokens = model.prepare_texts(["a woman sewing."])
    with torch.no_grad():
        assert not torch.allclose(model.token_states(moved, tokens), model.token_states(regions, tokens))


def test_no_image_is_one_whole_image_zero_region(model):
    blank = model.no_image(2)
    assert blank.features.shape == (2, 1, model.visual_dim) and blank.features.abs().sum() == 0
    assert blank.boxes.tolist() == [[[0.0, 0.0, 1.0, 1.0]]] * 2
    tokens = model.prepare_texts(["the man is [MASK].", "a [MASK] is cooking."])
    with torch.no_grad():
        assert model.fill_mask_logits(blank, tokens).shape[:2] == tokens["input_ids"].shape


def test_precomputed_regions_from_lxmert_tsv(tmp_path):
    """A line of LXMERT's obj36 TSV, written field by field."""
    rng = np.random.default_rng(0)
    count = 4
    boxes = np.array([[0, 0, 320, 240], [10, 20, 30, 40], [0, 0, 640, 480], [5, 5, 6, 6]], dtype=np.float32)
    arrays = [
        rng.integers(0, 1600, count),
        rng.uniform(size=count).astype(np.float32),
        rng.integers(0, 400, count),
        rng.uniform(size=count).astype(np.float32),
    ]
    features = rng.normal(size=(count, 16)).astype(np.float32)
    fields = [
        "COCO_val2014_000000000042",
        "480",
        "640",
        *[base64.b64encode(a.tobytes()).decode() for a in arrays],
        str(count),
        base64.b64encode(boxes.tobytes()).decode(),
        base64.b64encode(features.tobytes()).decode(),
    ]
    path = tmp_path / "val2014_obj36.tsv"
    path.write_text("\t".join(fields) + "\n")
    model = LXMERTAdapter.tiny(region_features=path).eval()
    regions = model.prepare_images(["/coco/val2014/COCO_val2014_000000000042.jpg"])
    torch.testing.assert_close(regions.features[0], torch.from_numpy(features))
    torch.testing.assert_close(regions.boxes[0, 0], torch.tensor([0.0, 0.0, 0.5, 0.5]))
    assert regions.object_ids[0].tolist() == arrays[0].tolist()
    with pytest.raises(
        InputError, match=r"'COCO_val2014_000000000073' has no region features in '.*val2014_obj36\.tsv'"
    ):
        model.prepare_images(["COCO_val2014_000000000073.jpg"])


def test_wrong_region_dimension_is_refused(model):
    with pytest.raises(
        InputError,
        match=r"given RegionFeatures hold 2048-d region features but model 'lxmert' expects 16-d \(visual_feat_dim\)",
    ):
        model.prepare_images(RegionFeatures.blank(1, 2048))
    grid = GridFeatures.create("resnet10t", pretrained=False, grid_size=2, image_size=64)  # 512 channels
    with pytest.raises(ConfigError, match=r"gives 512-d features but model 'lxmert' expects 16-d"):
        LXMERTAdapter(model.model, model.tokenizer, grid=grid)


def test_checkpoint_with_missing_and_unexpected_keys_is_refused(model, tmp_path):
    model.save_pretrained(tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights.pop("lxmert.encoder.visn_fc.box_fc.weight")
    weights["lxmert.encoder.extra.weight"] = torch.zeros(1)
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(
        InputError,
        match=r"missing key\(s\): lxmert\.encoder\.visn_fc\.box_fc\.weight.*"
        r"unexpected key\(s\): lxmert\.encoder\.extra\.weight",
    ):
        load(NAME, checkpoint=tmp_path, device="cpu")


def test_capabilities_and_registry(model):
    assert {Capability.FILL_MASK, Capability.MATCH, Capability.TOKEN_STATES} == set(LXMERTAdapter.capabilities)
    assert type(model) is LXMERTAdapter
