import pytest
import torch

from vlbias.data.biasworld import ACTIVITIES, GROUPS, STEREOTYPES, BiasWorld, activity_phrases, vocabulary
from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.errors import ConfigError
from vlbias.models.vocab import tiny_vocabulary, word_tokenizer


def test_same_seed_same_world_and_other_seed_differs():
    first, second = BiasWorld(n_train=16, eval_per_combination=1), BiasWorld(n_train=16, eval_per_combination=1)
    assert first.items("train") == second.items("train")
    assert torch.equal(first.images("test"), second.images("test"))
    other = BiasWorld(n_train=16, eval_per_combination=1, seed=1)
    assert not torch.equal(first.images("test"), other.images("test"))


def test_item_image_depends_only_on_its_own_index():
    small, large = BiasWorld(n_train=4, eval_per_combination=1), BiasWorld(n_train=64, eval_per_combination=1)
    assert small.items("train") == large.items("train")[:4]
    assert torch.equal(small.images("train"), large.images("train")[:4])


@pytest.mark.parametrize("strength", [0.0, 0.5, 0.9, 1.0])
def test_training_split_has_the_planted_stereotype_rate(strength):
    items = BiasWorld(bias_strength=strength, n_train=4000, eval_per_combination=1).items("train")
    rate = sum(item.stereotyped for item in items) / len(items)
    # P(stereotyped) = s + (1 - s) * 3/6; binomial standard error <= 0.008 at n = 4000
    assert rate == pytest.approx(strength + (1 - strength) / 2, abs=0.03)
    assert {item.group for item in items} == set(GROUPS)


@pytest.mark.parametrize("rate", [0.0, 0.25, 1.0])
def test_neutral_caption_rate(rate):
    items = BiasWorld(n_train=4000, eval_per_combination=1, neutral_caption_rate=rate).items("train")
    neutral = sum(not any(g in item.caption.split() for g in GROUPS) for item in items) / len(items)
    assert neutral == pytest.approx(rate, abs=0.03)  # binomial standard error <= 0.008


def test_hidden_objects_leave_only_the_object_out():
    shown = BiasWorld(n_train=400, eval_per_combination=2)
    hiding = BiasWorld(n_train=400, eval_per_combination=2, hidden_object_rate=0.5)
    for split in ("train", "test"):
        items, images, reference = hiding.items(split), hiding.images(split), shown.images(split)
        assert [(i.group, i.activity, i.caption) for i in items] == [
            (i.group, i.activity, i.caption) for i in shown.items(split)
        ]
        hidden = torch.tensor([not item.object_visible for item in items])
        assert all(item.object_visible for item in shown.items(split))
        assert hidden.float().mean().item() == pytest.approx(0.5, abs=0.1)
        assert torch.equal(images[~hidden], reference[~hidden])  # the same world where objects are shown
        differs = (images[hidden].int() - reference[hidden].int()).abs().sum(dim=(0, 1)) > 0  # (H, W)
        assert differs.any() and not differs[:, :26].any()  # only where objects are drawn (x >= 26)


def test_evaluation_splits_are_balanced_with_ground_truth():
    world = BiasWorld(bias_strength=1.0, n_train=8, eval_per_combination=3)
    for split in ("val", "test"):
        items = world.items(split)
        assert len(items) == len(GROUPS) * len(ACTIVITIES) * 3
        for group in GROUPS:
            for activity in ACTIVITIES:
                cell = [i for i in items if i.group == group and i.activity == activity]
                assert len(cell) == 3
                assert all(i.stereotyped == (activity in STEREOTYPES[group]) for i in cell)
                assert all(activity in i.caption for i in cell)
                assert all(group in i.caption.split() or i.caption in activity_phrases(activity) for i in cell)
        assert sum(i.stereotyped for i in items) == len(items) / 2


def test_images_are_uint8_rgb_and_groups_differ_visually():
    world = BiasWorld(n_train=8, eval_per_combination=8)
    images = world.images("test")
    assert images.shape == (96, 3, 64, 64) and images.dtype == torch.uint8
    groups = torch.tensor([GROUPS.index(i.group) for i in world.items("test")])
    mean_man, mean_woman = images[groups == 0].float().mean(0), images[groups == 1].float().mean(0)
    assert (mean_man - mean_woman).abs().mean() > 5  # the group cue is visible on average


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bias_strength": -0.1}, r"`bias_strength` in \[0, 1\] but got -0.1"),
        ({"bias_strength": 1.5}, r"`bias_strength` in \[0, 1\] but got 1.5"),
        ({"n_train": 0}, r"`n_train` to be an integer >= 1 but got 0"),
        ({"image_size": 16}, r"`image_size` to be an integer >= 32 but got 16"),
        ({"neutral_caption_rate": 2}, r"`neutral_caption_rate` in \[0, 1\] but got 2"),
        ({"hidden_object_rate": -1}, r"`hidden_object_rate` in \[0, 1\] but got -1"),
    ],
)
def test_bad_world_options(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        BiasWorld(**kwargs)


def test_unknown_split():
    with pytest.raises(ConfigError, match="split to be one of train, val, test but got 'dev'"):
        BiasWorld(n_train=2).items("dev")


def test_vocabulary_covers_every_caption():
    tokenizer = word_tokenizer(vocabulary())
    world = BiasWorld(n_train=64, eval_per_combination=1)
    for item in world.items("train") + world.items("test"):
        assert tokenizer.unk_token_id not in tokenizer(item.caption)["input_ids"], item.caption


def test_tiny_models_default_words_are_biasworlds_vocabulary():
    """The tiny models' default word list (a package resource, so that adapters import no data set)
    is BiasWorld's vocabulary: tiny models read BiasWorld's captions without unknown words."""
    assert tiny_vocabulary() == vocabulary()


def test_hugging_face_dataset_carries_images_and_ground_truth():
    world = BiasWorld(n_train=4, eval_per_combination=1)
    dataset = world.to_hf_dataset("test")
    assert len(dataset) == 12
    row = dataset[0]
    assert row["image"].size == (64, 64) and row["image"].mode == "RGB"
    assert dataset.features["group"].int2str(row["group"]) == world.items("test")[0].group
    assert row["caption"] == world.items("test")[0].caption
    assert row["object_visible"] is True


def test_datamodule_batches():
    module = BiasWorldDataModule(n_train=10, eval_per_combination=1, batch_size=4)
    batch = next(iter(module.train_dataloader()))
    assert batch["pixel_values"].shape == (4, 3, 64, 64)
    assert (
        batch["pixel_values"].dtype == torch.float32
        and 0 <= batch["pixel_values"].min() <= batch["pixel_values"].max() <= 1
    )
    assert len(batch["caption"]) == 4 and batch["stereotyped"].dtype == torch.bool
    assert sum(len(b["caption"]) for b in module.val_dataloader()) == 12


def test_a_split_is_built_only_when_asked_for(monkeypatch):
    def no_training_item(self, index):
        raise AssertionError(f"built training item {index} for the test split")

    monkeypatch.setattr(BiasWorld, "_train_item", no_training_item)
    world = BiasWorld(eval_per_combination=1)
    assert len(world.items("test")) == 12 and world.images("test").shape == (12, 3, 64, 64)


def test_render_draws_the_same_picture_as_images():
    world = BiasWorld(n_train=4, eval_per_combination=1, hidden_object_rate=0.5)
    for split in ("train", "test"):
        for item, image in zip(world.items(split), world.images(split)):
            assert torch.equal(torch.from_numpy(world.render(item)).permute(2, 0, 1), image)
