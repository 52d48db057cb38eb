"""The tiny models' sizes: declared once (:mod:`vlbias.models.tiny_sizes`, a family's own subclass for the sizes only
it has), each family's defaults in one ``tiny_sizes`` line, given by name as flat options."""

import dataclasses
import inspect
import subprocess
import sys

import pytest

from vlbias.errors import ConfigError
from vlbias.models.catalog import adapter_class, list_models
from vlbias.models.registry import check_model_options, load
from vlbias.models.tiny_sizes import TinySizes


@pytest.mark.parametrize("name", list_models())
def test_every_family_declares_its_sizes_in_a_documented_dataclass(name):
    """Each size is a field of the family's sizes dataclass, documented in an ``Args:`` line of the class that
    declares it, and no size is also a parameter of ``tiny`` (one declaration per size)."""
    cls = adapter_class(name)
    sizes = cls.tiny_sizes
    assert isinstance(sizes, TinySizes) and dataclasses.is_dataclass(sizes)
    for field in dataclasses.fields(sizes):
        owner = next(k for k in type(sizes).__mro__ if field.name in vars(k).get("__annotations__", {}))
        assert f"        {field.name}: " in owner.__doc__, f"{owner.__name__} does not document {field.name}"
    assert not set(sizes.names()) & set(inspect.signature(cls.tiny).parameters)


def test_sizes_given_by_name_replace_the_familys_defaults():
    """A flat size option changes that size and keeps the family's other defaults (CLIP's 64-pixel images,
    ALBEF's 4 layers), through ``load`` as through ``ModelSpec``."""
    clip = load("clip", tiny=True, options={"projection_dim": 8})
    assert (clip.model.config.projection_dim, clip.model.config.vision_config.image_size) == (8, 64)
    albef = load("albef", tiny=True, options={"fusion_layer": 3})
    assert (albef.model.config.num_layers, albef.model.config.fusion_layer) == (4, 3)
    sentence = load("sentence_bert", tiny=True, options={"hidden_size": 16, "pooling": "mean"})
    assert (sentence.model.config.hidden_size, sentence.pooling) == (16, "mean")
    assert load("pruned", tiny=True, options={"projection_dim": 8}).kept_dims.tolist() == [0, 2, 4, 6]  # even dims


def test_sizes_are_checked_by_name_and_value_at_the_door():
    assert check_model_options("albef", {"fusion_layer": "3", "seed": 2}, tiny=True) == {"fusion_layer": 3, "seed": 2}
    with pytest.raises(ConfigError, match=r"Expected model 'clip' option `hidden_size` to be an integer v>0 but got 0"):
        check_model_options("clip", {"hidden_size": 0}, tiny=True)
    with pytest.raises(
        ConfigError,
        match=r"Model 'bert' does not take option\(s\) \['image_size'\] in tiny \(did you mean `hidden_size`\?\); "
        r"it takes: seed, tokenizer, hidden_size, num_layers, max_text_length\.",
    ):
        check_model_options("bert", {"image_size": 32}, tiny=True)
    with pytest.raises(ConfigError, match=r"'visualbert' does not take option\(s\) \['sizes'\] in tiny"):
        check_model_options("visualbert", {"sizes": {"visual_dim": 8}}, tiny=True)


def test_the_sizes_declaration_imports_no_torch():
    code = "import sys, vlbias.models.tiny_sizes; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
