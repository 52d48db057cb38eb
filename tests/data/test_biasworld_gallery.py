"""BiasWorld's planted gallery: exact planted shares per activity, balanced tones, determinism from the seed,
distinct skin tones in the pixels, and its settings checked."""

import numpy as np
import pytest
import torch

from vlbias.data.biasworld import ACTIVITIES
from vlbias.data.biasworld_gallery import SKIN_TONES, STEREOTYPED, TONES, PlantedGallery
from vlbias.errors import ConfigError


@pytest.mark.parametrize("share", [0.5, 0.7, 0.9])
def test_each_activity_holds_the_planted_share_of_its_stereotyped_gender_and_balanced_tones(share):
    gallery = PlantedGallery(share=share, per_activity=30, image_size=32).gallery()
    labels = gallery.labels
    assert len(gallery) == 30 * len(ACTIVITIES) and gallery.pixels.dtype == torch.uint8
    for activity in ACTIVITIES:
        shown = [i for i in range(len(gallery)) if labels["activity"][i] == activity]
        stereotyped = [i for i in shown if labels["gender"][i] == STEREOTYPED[activity]]
        assert len(shown) == 30 and len(stereotyped) == round(share * 30)
        for gender_images in (stereotyped, sorted(set(shown) - set(stereotyped))):
            tones = [labels["tone"][i] for i in gender_images]
            assert all(tones.count(tone) == len(tones) // 3 for tone in TONES)  # 15/15, 21/9, 27/3: thirds


def test_the_gallery_is_a_function_of_its_seed():
    first, again = PlantedGallery(seed=3, per_activity=6).gallery(), PlantedGallery(seed=3, per_activity=6).gallery()
    other = PlantedGallery(seed=4, per_activity=6).gallery()
    assert torch.equal(first.pixels, again.pixels) and first.labels == again.labels
    assert first.labels["activity"] != other.labels["activity"]  # another order
    assert sorted(zip(*first.labels.values())) == sorted(zip(*other.labels.values()))  # the same cells


def test_the_skin_tone_is_drawn_in_its_colour():
    gallery = PlantedGallery(per_activity=6).gallery()
    for index in range(6):
        picture = gallery.pixels[index].permute(1, 2, 0).numpy().astype(int)  # (S, S, 3)
        colour = np.array(SKIN_TONES[gallery.labels["tone"][index]])
        near = (np.abs(picture - colour) <= 12).all(axis=2).sum()  # the drawing adds noise in [-12, 12]
        assert near >= 20, (index, near)


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"share": 1.5}, "`share` in \\[0, 1\\]"), ({"per_activity": 0}, "`per_activity` to be an integer >= 1")],
)
def test_bad_settings_are_refused_by_name(settings, message):
    with pytest.raises(ConfigError, match=message):
        PlantedGallery(**settings)
