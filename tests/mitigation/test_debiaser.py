"""The debiaser contract (vlbias.mitigation.debiaser) on Orth-Proj: fit, refuse what is missing, transform, save, load."""

import pytest
import torch
import torch.nn.functional as F

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.debiaser import FitData, load_debiaser
from vlbias.mitigation.orth_proj import OrthProj, OrthProjOptions
from vlbias.mitigation.registry import debiaser_class, list_debiasers


def _prompts(dim=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "man": torch.randn(3, dim, generator=g, dtype=torch.float64),
        "woman": torch.randn(3, dim, generator=g, dtype=torch.float64),
    }


def test_orth_proj_equals_the_projection_formula():
    prompts = _prompts()
    v = torch.cat(list(prompts.values())).T  # (D, k)
    expected_p = torch.eye(32, dtype=torch.float64) - v @ torch.linalg.inv(v.T @ v) @ v.T  # Chuang et al. Eq. 3
    z = F.normalize(torch.randn(5, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1)), dim=-1)
    debiaser = OrthProj().fit(FitData(attribute_prompts=prompts))
    torch.testing.assert_close(debiaser.linear_map("text"), expected_p, rtol=0, atol=1e-10)
    torch.testing.assert_close(debiaser.transform_texts(z), F.normalize(z @ expected_p.T, dim=-1), rtol=0, atol=1e-10)
    assert debiaser.linear_map("image") is None
    assert torch.equal(debiaser.transform_images(z), z)


def test_a_rank_deficient_span_is_projected_exactly():
    direction = torch.tensor([[1.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    debiaser = OrthProj().fit(FitData(attribute_prompts={"a": direction, "b": 2 * direction}))
    out = debiaser.transform_texts(torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=torch.float64))
    assert abs(float(out @ direction.T[:, 0])) < 1e-12
    with pytest.raises(InputError, match=r"Rows \[0\] of the text embeddings lie in the removed span"):
        debiaser.transform_texts(direction)


def test_fit_refuses_missing_data_by_name_and_transform_before_fit():
    with pytest.raises(InputError, match="needs attribute_prompts to fit but got no attribute_prompts"):
        OrthProj().fit(FitData())
    with pytest.raises(ConfigError, match="not fitted"):
        OrthProj().transform_texts(torch.ones(1, 3))


def test_reference_labels_of_one_group_are_refused():
    data = FitData(reference_images=torch.eye(3), reference_labels=["a", "a", "a"])
    with pytest.raises(InputError, match="at least two groups"):
        data.labelled_references()


def test_save_and_load_round_trip(tmp_path):
    debiaser = OrthProj(OrthProjOptions(rtol=1e-6)).fit(FitData(attribute_prompts=_prompts()))
    debiaser.save(tmp_path / "saved")
    loaded = load_debiaser(tmp_path / "saved")
    assert isinstance(loaded, OrthProj) and loaded.options == debiaser.options
    z = F.normalize(torch.randn(4, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2)), dim=-1)
    torch.testing.assert_close(loaded.transform_texts(z), debiaser.transform_texts(z), rtol=0, atol=0)
    with pytest.raises(InputError, match="is not a saved debiaser"):
        load_debiaser(tmp_path)


@pytest.mark.parametrize(
    ("file", "damage", "expected"),
    [
        ("debiaser.json", lambda text: text[: len(text) // 2], r"debiaser\.json' is not valid JSON \("),
        ("debiaser.json", lambda text: text.replace('"method"', '"methd"'), "field `method` holds nothing; expected"),
        ("debiaser.json", lambda text: "[" + text + "]", "debiaser.json' holds a JSON list; expected the JSON object"),
        ("debiaser.json", lambda text: text.replace('"options": {', '"options": [], "x": {'), "`options` holds list"),
        ("debiaser.safetensors", lambda data: data[:100], r"debiaser\.safetensors' is not a whole safetensors file"),
    ],
)
def test_a_damaged_saved_debiaser_is_one_line_naming_the_file(tmp_path, file, damage, expected):
    OrthProj().fit(FitData(attribute_prompts=_prompts())).save(tmp_path / "saved")
    path = tmp_path / "saved" / file
    if file.endswith(".json"):
        path.write_text(damage(path.read_text()))
    else:
        path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(InputError, match=expected) as refused:
        load_debiaser(tmp_path / "saved")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("method", ["prism_mini", "roboshot", "orth_proj", "orth_cal"])
def test_attribute_prompts_of_one_value_are_refused_by_every_method_alike(method):
    """One check (attribute_values): the prompts of one value name no attribute to remove."""
    one_value = {"man": _prompts()["man"]}
    pairs = torch.stack([_prompts()["man"], _prompts()["woman"]], dim=1)
    with pytest.raises(InputError, match=r"attribute_prompts of at least two values .* but got 1: \['man'\]"):
        debiaser_class(method)().fit(FitData(attribute_prompts=one_value, prompt_pairs=pairs))


def test_registry_lists_orth_proj():
    assert "orth_proj" in list_debiasers() and debiaser_class("orth_proj") is OrthProj
