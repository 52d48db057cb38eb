"""Which face-attribute data set a folder holds, told apart by its files, each read by its own reader."""

import warnings

import pytest

from tests.data.faces import write_image
from tests.data.test_celeba import _release as celeba_release
from tests.data.test_fairface import _release as fairface_release
from vlbias.data.face_datasets import detect_face_dataset, read_face_dataset
from vlbias.data.fairface import PADDING_FOLDERS
from vlbias.errors import ConfigError, InputError


def test_each_layout_is_detected_and_read(tmp_path):
    fairface = fairface_release(tmp_path / "fairface")
    celeba = celeba_release(tmp_path / "celeba", folders=True)
    utkface = tmp_path / "utk" / "UTKFace"
    write_image(utkface / "26_1_3_20170119180435537.jpg.chip.jpg")
    (tmp_path / "other").mkdir()
    write_image(tmp_path / "other" / "photo.jpg")
    assert detect_face_dataset(fairface) == "FairFace"
    assert detect_face_dataset(fairface / PADDING_FOLDERS[0.25]) == "FairFace"  # labels beside the image folder
    assert detect_face_dataset(celeba) == "CelebA" and detect_face_dataset(utkface.parent) == "UTKFace"
    assert detect_face_dataset(tmp_path / "other") is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer rows than the releases
        assert read_face_dataset(fairface).split == "val" and read_face_dataset(celeba).split == "test"
    assert len(read_face_dataset(utkface.parent)) == 1
    with pytest.raises(ConfigError, match="UTKFace has no splits"):
        read_face_dataset(utkface.parent, "val")
    with pytest.raises(InputError, match="holds no face-attribute data set; expected a FairFace"):
        read_face_dataset(tmp_path / "other")
