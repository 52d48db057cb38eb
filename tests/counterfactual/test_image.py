"""Image counterfactuals: the targeted attack of Eq. 3 through torchattacks, and its cache."""

import pytest
import torch

from vlbias.counterfactual.image import (
    AttackConfig,
    BiasWordLogits,
    CounterfactualImages,
    normalise,
    unit_pixels,
)
from vlbias.data.biasworld import BiasWorld
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.models import inference
from vlbias.models.registry import load

BIAS = ["man", "woman"]


@pytest.fixture(scope="module")
def albef():
    return load("albef", tiny=True, device="cpu")


@pytest.fixture(scope="module")
def pixels_and_groups(albef):
    world = BiasWorld(eval_per_combination=1)
    groups = torch.tensor([BIAS.index(item.group) for item in world.items("test")])
    return unit_pixels(albef, world.images("test").float() / 255.0), groups


def test_unit_pixels_round_trip_the_adapter_normalisation(albef, pixels_and_groups):
    pixels, _ = pixels_and_groups
    images = BiasWorld(eval_per_combination=1).images("test").float() / 255.0
    assert pixels.min() >= 0 and pixels.max() <= 1
    torch.testing.assert_close(normalise(albef, pixels), albef.prepare_images(images), atol=1e-5, rtol=0)


@pytest.mark.parametrize("method", ["pgd", "fgsm"])
def test_attack_moves_bias_probability_toward_counterfactual_within_eps(albef, pixels_and_groups, method):
    pixels, groups = pixels_and_groups
    counter = 1 - groups
    eps = 8 / 255
    generator = CounterfactualImages(albef, BIAS, AttackConfig(method=method, eps=eps, alpha=2 / 255, steps=10))
    result = generator.generate(pixels, counter)
    rows = torch.arange(len(pixels))
    before = generator.logits.probabilities(pixels)[rows, counter]
    after = generator.logits.probabilities(result.pixels)[rows, counter]
    assert (result.pixels - pixels).abs().max() <= eps + 1e-6
    assert result.pixels.min() >= 0 and result.pixels.max() <= 1
    assert (after > before).all(), (before, after)
    assert after.mean() > before.mean() + 0.1, (before.mean(), after.mean())
    assert not albef.training  # the attack leaves the adapter's mode as it was
    assert all(p.requires_grad for p in albef.parameters())


def test_attack_runs_in_the_measurements_autocast_dtype(albef, pixels_and_groups, monkeypatch):
    """Where measurements autocast (bfloat16 on CUDA; here CPU is made to, as CI has no GPU) the
    attack does too: its forward passes run in bfloat16, it still moves P(B | V) toward B' within
    eps, and its images are cached under another key than float32 attacks'."""
    pixels, groups = pixels_and_groups
    config = AttackConfig(eps=8 / 255, alpha=2 / 255, steps=10)
    float32_key = CounterfactualImages(albef, BIAS, config).cache_key(pixels[0], "woman")
    monkeypatch.setattr(inference, "autocast_dtype", lambda device: torch.bfloat16)
    generator = CounterfactualImages(albef, BIAS, config)
    assert generator.cache_key(pixels[0], "woman") != float32_key

    dtypes = set()
    hook = albef.model.text_encoder.cls.predictions.decoder.register_forward_hook(
        lambda m, i, out: dtypes.add(out.dtype)
    )
    try:
        result = generator.generate(pixels[:8], 1 - groups[:8])
    finally:
        hook.remove()
    assert dtypes == {torch.bfloat16}
    rows = torch.arange(8)
    with inference.mixed_precision("cpu"):
        before = generator.logits.probabilities(pixels[:8])[rows, 1 - groups[:8]]
        after = generator.logits.probabilities(result.pixels)[rows, 1 - groups[:8]]
    assert (result.pixels - pixels[:8]).abs().max() <= 8 / 255 + 1e-6
    assert after.mean() > before.mean() + 0.1, (before.mean(), after.mean())


def test_batched_attack_equals_one_image_at_a_time(albef, pixels_and_groups):
    pixels, groups = pixels_and_groups
    generator = CounterfactualImages(albef, BIAS, AttackConfig(eps=0.05, alpha=0.01, steps=3))
    batched = generator.generate(pixels[:4], 1 - groups[:4]).pixels
    single = torch.cat([generator.generate(pixels[i : i + 1], 1 - groups[i : i + 1]).pixels for i in range(4)])
    # sign steps of size alpha: a gradient component that changes sign by rounding moves one pixel by 2 alpha
    assert (batched - single).abs().gt(1e-5).float().mean() < 0.01


def test_cache_hit_returns_identical_pixels_without_attacking(albef, pixels_and_groups, tmp_path, monkeypatch):
    pixels, groups = pixels_and_groups
    config = AttackConfig(eps=0.05, alpha=0.01, steps=2)
    first = CounterfactualImages(albef, BIAS, config, cache_dir=tmp_path).generate(pixels[:3], 1 - groups[:3])
    assert not first.cache_hit.any()
    assert len(list(tmp_path.glob("*.pt"))) == 3

    again = CounterfactualImages(albef, BIAS, config, cache_dir=tmp_path)
    monkeypatch.setattr(again, "_attack", lambda *args: pytest.fail("a cached image was attacked again"))
    second = again.generate(pixels[:3], 1 - groups[:3])
    assert second.cache_hit.all()
    assert torch.equal(first.pixels, second.pixels)


def test_cache_key_depends_on_model_image_attack_and_target(albef, pixels_and_groups):
    pixels, _ = pixels_and_groups
    generator = CounterfactualImages(albef, BIAS, AttackConfig(eps=0.05))
    key = generator.cache_key(pixels[0], "woman")
    assert key == CounterfactualImages(albef, BIAS, AttackConfig(eps=0.05)).cache_key(pixels[0], "woman")
    assert key != generator.cache_key(pixels[1], "woman")
    assert key != generator.cache_key(pixels[0], "man")
    assert key != CounterfactualImages(albef, BIAS, AttackConfig(eps=0.06)).cache_key(pixels[0], "woman")
    other_model = load("albef", tiny=True, device="cpu", options={"seed": 1})
    assert key != CounterfactualImages(other_model, BIAS, AttackConfig(eps=0.05)).cache_key(pixels[0], "woman")


def test_logits_module_is_differentiable_in_pixel_space(albef, pixels_and_groups):
    pixels, _ = pixels_and_groups
    x = pixels[:2].clone().requires_grad_(True)
    BiasWordLogits(albef, BIAS)(x)[:, 1].sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_region_models_and_bad_inputs_are_refused(albef, pixels_and_groups):
    with pytest.raises(CapabilityError, match="cannot be attacked in pixel space"):
        CounterfactualImages(load("visualbert", tiny=True, device="cpu"), BIAS)
    with pytest.raises(ConfigError, match="method"):
        AttackConfig(method="cw")
    with pytest.raises(ConfigError, match="eps"):
        AttackConfig(eps=0)
    with pytest.raises(ConfigError, match="steps"):
        AttackConfig(steps=0)
    pixels, _ = pixels_and_groups
    generator = CounterfactualImages(albef, BIAS, AttackConfig(steps=1))
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        generator.generate(pixels[:1] * 3, torch.tensor([0]))
    with pytest.raises(InputError, match="target index"):
        generator.generate(pixels[:1], torch.tensor([2]))


def test_a_bias_prompt_whose_mask_the_model_cuts_off_is_refused_by_name(albef):
    short = load("albef", tiny=True, device="cpu")
    short.max_text_length = 4  # [CLS] a [MASK] ... : a prompt with words before the mask loses it
    with pytest.raises(ConfigError, match=r"bias prompt 'there is a \[MASK\] in the picture' cannot be read"):
        BiasWordLogits(short, BIAS, prompt="there is a {mask} in the picture")
    BiasWordLogits(albef, BIAS, prompt="there is a {mask} in the picture")  # the model's own maximum reads it
