"""The adapters that wrap an inner model save alike (:mod:`vlbias.models.wrapped`): the inner model in its own format
under ``inner/``, the fields file naming it, the family's own files beside; the registry reads the folder back."""

import json

import pytest
import torch

from vlbias.errors import InputError
from vlbias.models.registry import load
from vlbias.models.wrapped import INNER_DIR, WrappedAdapter

WRAPPERS = ["pruned", "debiased", "prompt_array"]


@pytest.mark.parametrize("name", WRAPPERS)
def test_a_wrapper_saves_its_inner_model_under_inner_and_loads_back(tmp_path, name):
    model = load(name, tiny=True, device="cpu")
    assert isinstance(model, WrappedAdapter)
    model.save_pretrained(tmp_path)
    fields = json.loads((tmp_path / model.FIELDS_FILE).read_text())
    assert fields == {"inner": "clip", **model.saved_fields()}
    assert all((tmp_path / name).is_file() for name in model.SAVED_FILES)
    inner = load("clip", checkpoint=tmp_path / INNER_DIR, device="cpu")
    tokens = model.prepare_texts(["a man is cooking"])
    torch.testing.assert_close(inner.embed_texts(tokens), model.inner.embed_texts(tokens), rtol=0, atol=1e-6)
    restored = load(name, checkpoint=tmp_path, device="cpu")
    torch.testing.assert_close(restored.embed_texts(tokens), model.embed_texts(tokens), rtol=0, atol=1e-6)
    (tmp_path / model.FIELDS_FILE).unlink()
    with pytest.raises(InputError, match=f"for model '{name}' has no {model.FIELDS_FILE}"):
        load(name, checkpoint=tmp_path, device="cpu")
