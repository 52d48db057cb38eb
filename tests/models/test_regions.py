"""Region features: the LXMERT TSV and .npz readers, the region batch, the grid fallback.

Fixture files are written here by hand in each published layout, so the readers are checked
against the format, not against a writer of ours.
"""

import base64

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import load_file, save_file

from vlbias.errors import ConfigError, InputError
from vlbias.models.families.lxmert import LXMERTAdapter
from vlbias.models.families.visualbert import VisualBERTAdapter
from vlbias.models.regions import NO_OBJECT, GridFeatures, RegionFeatures, RegionFeatureStore

DIM = 16


def fake_image(image_id, count, seed, dim=DIM, h=480, w=640):
    rng = np.random.default_rng(seed)
    x1, y1 = rng.uniform(0, w / 2, count), rng.uniform(0, h / 2, count)
    boxes = np.stack([x1, y1, x1 + rng.uniform(1, w / 2, count), y1 + rng.uniform(1, h / 2, count)], 1)
    return dict(
        img_id=image_id,
        img_h=h,
        img_w=w,
        objects_id=rng.integers(0, 1600, count).astype(np.int64),
        objects_conf=rng.uniform(0, 1, count).astype(np.float32),
        attrs_id=rng.integers(0, 400, count).astype(np.int64),
        attrs_conf=rng.uniform(0, 1, count).astype(np.float32),
        num_boxes=count,
        boxes=boxes.astype(np.float32),
        features=rng.uniform(0, 5, (count, dim)).astype(np.float32),
    )


def tsv_line(item):
    """One line of LXMERT's ``*_obj36.tsv``: arrays as base64 of their raw bytes."""
    fields = [item["img_id"], str(item["img_h"]), str(item["img_w"])]
    fields += [
        base64.b64encode(item[key].tobytes()).decode()
        for key in ("objects_id", "objects_conf", "attrs_id", "attrs_conf")
    ]
    fields += [str(item["num_boxes"])] + [
        base64.b64encode(item[key].tobytes()).decode() for key in ("boxes", "features")
    ]
    return "\t".join(fields) + "\n"


@pytest.fixture
def items():
    return [fake_image("COCO_val2014_000000000042", 5, 0), fake_image("COCO_val2014_000000000073", 3, 1)]


@pytest.fixture
def tsv_file(tmp_path, items):
    path = tmp_path / "val2014_obj36.tsv"
    path.write_text("".join(tsv_line(item) for item in items))
    return path


def test_tsv_reader_decodes_each_field(tsv_file, items):
    store = RegionFeatureStore(tsv_file)
    for item in items:
        regions = store[item["img_id"]]
        torch.testing.assert_close(regions.features, torch.from_numpy(item["features"]))
        torch.testing.assert_close(regions.boxes, torch.from_numpy(item["boxes"]))
        assert regions.object_ids.tolist() == item["objects_id"].tolist()
        assert (regions.image_h, regions.image_w) == (480, 640)
        expected = item["boxes"] / np.array([640, 480, 640, 480], dtype=np.float32)
        torch.testing.assert_close(regions.normalised_boxes(), torch.from_numpy(expected))


def test_npz_reader_with_both_key_conventions(tmp_path, items):
    first, second = items
    np.savez(
        tmp_path / f"{first['img_id']}.npz",
        features=first["features"],
        boxes=first["boxes"],
        image_h=480,
        image_w=640,
        objects_id=first["objects_id"],
    )
    np.savez(tmp_path / f"{second['img_id']}.npz", x=second["features"], bbox=second["boxes"], image_h=480, image_w=640)
    store = RegionFeatureStore(tmp_path)
    regions = store[first["img_id"]]
    torch.testing.assert_close(regions.features, torch.from_numpy(first["features"]))
    assert regions.object_ids.tolist() == first["objects_id"].tolist()
    other = store[second["img_id"]]
    torch.testing.assert_close(other.boxes, torch.from_numpy(second["boxes"]))
    assert other.object_ids.tolist() == [NO_OBJECT] * 3


def test_npz_without_features_names_the_file_and_its_keys(tmp_path, items):
    np.savez(tmp_path / "img1.npz", boxes=items[0]["boxes"], image_h=480, image_w=640)
    with pytest.raises(InputError, match=r"img1\.npz.*lacks array 'features'.*it has: boxes, image_h, image_w"):
        RegionFeatureStore(tmp_path)["img1"]


@pytest.mark.parametrize("layout", ["tsv", "npz"])
def test_missing_image_id_names_the_id_and_the_file(tmp_path, tsv_file, items, layout):
    if layout == "npz":
        np.savez(
            tmp_path / "only.npz", features=items[0]["features"], boxes=items[0]["boxes"], image_h=480, image_w=640
        )
        path = tmp_path
    else:
        path = tsv_file
    store = RegionFeatureStore(path)
    assert "COCO_val2014_000000999999" not in store
    with pytest.raises(InputError, match=rf"'COCO_val2014_000000999999' has no region features in '{path}'"):
        store["COCO_val2014_000000999999"]


def test_tsv_line_with_missing_fields_is_refused(tmp_path, items):
    path = tmp_path / "broken.tsv"
    path.write_text("\t".join(tsv_line(items[0]).split("\t")[:8]) + "\n")
    with pytest.raises(InputError, match=r"Expected 10 tab-separated fields.*broken\.tsv.*got 8"):
        RegionFeatureStore(path)[items[0]["img_id"]]


def test_boxes_outside_the_image_are_refused(tmp_path, items):
    item = dict(items[0], img_w=100)  # boxes were drawn for a 640-pixel-wide image
    path = tmp_path / "small.tsv"
    path.write_text(tsv_line(item))
    with pytest.raises(InputError, match="leave the 100x480 image"):
        RegionFeatureStore(path)[item["img_id"]]


def test_store_path_must_be_a_tsv_or_a_directory(tmp_path):
    with pytest.raises(InputError, match="missing"):
        RegionFeatureStore(tmp_path / "nowhere.tsv")
    other = tmp_path / "features.h5"
    other.write_bytes(b"")
    with pytest.raises(InputError, match="neither"):
        RegionFeatureStore(other)


def test_image_id_is_the_file_stem(tmp_path, tsv_file):
    store = RegionFeatureStore(tsv_file)
    assert store.image_id("/data/coco/COCO_val2014_000000000042.jpg") == "COCO_val2014_000000000042"
    path = tmp_path / "COCO_val2014_000000000073.png"
    Image.new("RGB", (8, 8)).save(path)
    with Image.open(path) as opened:
        assert store.image_id(opened) == "COCO_val2014_000000000073"
    with pytest.raises(InputError, match="in-memory image has no file name"):
        store.image_id(Image.new("RGB", (8, 8)))


def test_stack_pads_and_masks(tsv_file, items):
    store = RegionFeatureStore(tsv_file)
    batch = RegionFeatures.stack([store[item["img_id"]] for item in items])
    assert batch.features.shape == (2, 5, DIM) and batch.boxes.shape == (2, 5, 4)
    assert batch.mask.tolist() == [[1] * 5, [1, 1, 1, 0, 0]]
    assert batch.features[1, 3:].abs().sum() == 0 and batch.object_ids[1, 3:].tolist() == [NO_OBJECT] * 2
    torch.testing.assert_close(batch[1:2].features[0, :3], torch.from_numpy(items[1]["features"]))
    assert len(batch) == 2 and batch.dim == DIM


def test_zero_regions_zeroes_features_and_keeps_boxes(tsv_file, items):
    store = RegionFeatureStore(tsv_file)
    batch = RegionFeatures.stack([store[item["img_id"]] for item in items])
    person = int(items[0]["objects_id"][0])
    masked = batch.zero_regions(batch.object_ids == person)
    assert masked.features[0, 0].abs().sum() == 0
    torch.testing.assert_close(masked.features[0, 1:], batch.features[0, 1:])
    torch.testing.assert_close(masked.boxes, batch.boxes)
    with pytest.raises(InputError, match=r"Expected `where` of shape \(2, 5\)"):
        batch.zero_regions(torch.zeros(2, 3, dtype=torch.bool))


def test_blank_is_one_whole_image_zero_region():
    blank = RegionFeatures.blank(3, DIM)
    assert blank.features.shape == (3, 1, DIM) and blank.features.abs().sum() == 0
    assert blank.boxes.tolist() == [[[0.0, 0.0, 1.0, 1.0]]] * 3 and blank.mask.tolist() == [[1]] * 3


@pytest.fixture(scope="module")
def grid():
    torch.manual_seed(0)
    channels = (4, 8, 8, DIM)
    return GridFeatures.create(
        "resnet10t", pretrained=False, grid_size=2, image_size=64, channels=channels, stem_width=4
    ).eval()


def test_grid_features_are_pooled_cells_of_the_backbone_map(grid):
    images = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    regions = grid(images)
    assert regions.features.shape == (2, 4, DIM) and grid.dim == DIM
    with torch.no_grad():
        feature_map = grid.backbone.forward_features(grid.transform(images))  # (2, DIM, 2, 2) for 64 pixels
    expected = F.adaptive_avg_pool2d(feature_map, 2).flatten(2).transpose(1, 2)
    torch.testing.assert_close(regions.features, expected)
    assert regions.boxes[0].tolist() == [[0, 0, 0.5, 0.5], [0.5, 0, 1, 0.5], [0, 0.5, 0.5, 1], [0.5, 0.5, 1, 1]]
    assert regions.mask.all() and (regions.object_ids == NO_OBJECT).all()


def test_grid_reads_files_like_tensors(grid, tmp_path):
    picture = (torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(2)) * 255).to(torch.uint8)
    path = tmp_path / "picture.png"
    Image.fromarray(picture.permute(1, 2, 0).numpy()).save(path)
    torch.testing.assert_close(grid([path]), grid(picture[None].float() / 255))


def test_grid_save_load_round_trip_and_key_check(grid, tmp_path):
    grid.save(tmp_path)
    restored = GridFeatures.load(tmp_path, "visualbert").eval()
    images = torch.rand(1, 3, 64, 64)
    torch.testing.assert_close(restored(images), grid(images), rtol=0, atol=0)
    weights = load_file(str(tmp_path / GridFeatures.WEIGHTS_FILE))
    weights.pop("conv1.0.weight")
    weights["extra.weight"] = torch.zeros(1)
    save_file(weights, str(tmp_path / GridFeatures.WEIGHTS_FILE))
    with pytest.raises(InputError, match=r"1 missing key\(s\): conv1\.0\.weight; 1 unexpected key\(s\): extra\.weight"):
        GridFeatures.load(tmp_path, "visualbert")


def test_grid_size_must_be_positive():
    with pytest.raises(ConfigError, match="`grid_size` >= 1"):
        GridFeatures.create("resnet10t", pretrained=False, grid_size=0, image_size=64)


def test_grid_backbone_is_frozen_but_passes_gradients_to_pixels(grid):
    pixels = torch.rand(1, 3, 64, 64, requires_grad=True)
    grid(pixels).features.sum().backward()
    assert pixels.grad is not None and pixels.grad.abs().sum() > 0
    assert all(not p.requires_grad for p in grid.parameters())


@pytest.mark.parametrize("adapter_class", [VisualBERTAdapter, LXMERTAdapter], ids=lambda c: c.name)
def test_padded_regions_change_nothing(tmp_path, adapter_class):
    """Region-feature adapters: images with 3 and 5 regions batched together (the first padded to 5) give what each gives
    alone, and what the padding holds does not matter."""
    rng = np.random.default_rng(0)
    for image_id, count in (("img_a", 3), ("img_b", 5)):
        np.savez(
            tmp_path / f"{image_id}.npz",
            features=rng.normal(size=(count, 16)).astype(np.float32),
            boxes=np.tile(np.array([[2, 4, 20, 16]], np.float32), (count, 1)),
            image_h=20,
            image_w=40,
        )
    model = adapter_class.tiny(region_features=tmp_path).eval()
    texts = ["a man is cooking.", "someone."]
    tokens = model.prepare_texts(texts)
    regions = model.prepare_images(["img_a", "img_b"])
    assert regions.mask.tolist() == [[1, 1, 1, 0, 0], [1] * 5]
    noisy = RegionFeatures(
        regions.features.masked_fill(regions.mask[..., None] == 0, 100.0),
        regions.boxes,
        regions.mask,
        regions.object_ids,
    )
    with torch.no_grad():
        logits, states = model.match_logits(regions, tokens), model.token_states(regions, tokens)
        torch.testing.assert_close(model.token_states(noisy, tokens), states, rtol=0, atol=1e-5)
        for b, image_id in enumerate(("img_a", "img_b")):
            alone_regions, alone_tokens = model.prepare_images([image_id]), model.prepare_texts([texts[b]])
            length = alone_tokens["input_ids"].shape[1]
            torch.testing.assert_close(
                logits[b : b + 1], model.match_logits(alone_regions, alone_tokens), rtol=0, atol=1e-5
            )
            torch.testing.assert_close(
                states[b : b + 1, :length], model.token_states(alone_regions, alone_tokens), rtol=0, atol=1e-5
            )
