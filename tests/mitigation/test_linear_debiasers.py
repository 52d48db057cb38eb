"""The linear debiasers (Orth-Cal, PRISM-mini, CLIP-clip, MMBias pruning) against independent transcriptions of their
papers' equations, in float64 to 1e-10, with the closed forms' special cases (a rank-deficient span, λ = 0); their
refusals; save and load; and the export of a dimension removal into CLIP's own format."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.feature_selection import mutual_info_classif

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.clip_clip import CLIPClip
from vlbias.mitigation.debiaser import FitData, load_debiaser
from vlbias.mitigation.dimension_removal import RemovalOptions
from vlbias.mitigation.mmbias_pruning import MMBiasPruning, MMBiasPruningOptions
from vlbias.mitigation.orth_cal import OrthCal, OrthCalOptions
from vlbias.mitigation.orth_proj import OrthProj
from vlbias.mitigation.prism_mini import PrismMini
from vlbias.mitigation.registry import debiaser_class, list_debiasers

DIM = 24
EXACT = dict(rtol=0, atol=1e-10)


def unit(n, seed, dim=DIM):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, dim, generator=g, dtype=torch.float64), dim=-1)


def prompts(seed=0):
    return {"man": unit(3, seed), "woman": unit(3, seed + 1)}


def pairs(count=5, seed=10):
    return unit(2 * count, seed).reshape(count, 2, DIM)


def projection_away(v):
    """Chuang et al. Eq. 3: P_0 = I - V (V^T V)^{-1} V^T, V (D, k) of full column rank."""
    return torch.eye(v.shape[0], dtype=torch.float64) - v @ torch.linalg.inv(v.T @ v) @ v.T


def calibrated(p0, pair_embeddings, lam):
    """Chuang et al. Sec. 3.2: P* = P_0 (I + λ/|S| Σ (z_i - z_j)(z_i - z_j)^T)^{-1}, summed pair by pair."""
    m = torch.zeros(DIM, DIM, dtype=torch.float64)
    for z_i, z_j in pair_embeddings:
        m += torch.outer(z_i - z_j, z_i - z_j)
    return p0 @ torch.linalg.inv(torch.eye(DIM, dtype=torch.float64) + lam / len(pair_embeddings) * m)


# -- Orth-Cal ------------------------------------------------------------------------------------------------------
def test_orth_cal_equals_the_calibrated_projection():
    given = prompts()
    expected = calibrated(projection_away(torch.cat(list(given.values())).T), pairs(), 1000.0)
    debiaser = OrthCal().fit(FitData(attribute_prompts=given, prompt_pairs=pairs()))
    torch.testing.assert_close(debiaser.linear_map("text"), expected, **EXACT)
    z = unit(7, 20)
    torch.testing.assert_close(debiaser.transform_texts(z), F.normalize(z @ expected.T, dim=-1), **EXACT)
    assert debiaser.linear_map("image") is None and torch.equal(debiaser.transform_images(z), z)


def test_orth_cal_pulls_each_positive_pair_together():
    given, positive = prompts(), pairs()
    loose = OrthCal(OrthCalOptions(lam=0.0)).fit(FitData(attribute_prompts=given, prompt_pairs=positive))
    tight = OrthCal(OrthCalOptions(lam=1e4)).fit(FitData(attribute_prompts=given, prompt_pairs=positive))
    gap = {
        name: (m.linear_map("text") @ (positive[:, 0] - positive[:, 1]).T).norm()
        for name, m in [("0", loose), ("1", tight)]
    }
    assert gap["1"] < 0.05 * gap["0"]


def test_orth_cal_with_lambda_zero_is_orth_proj():
    given = prompts()
    orth_cal = OrthCal(OrthCalOptions(lam=0.0)).fit(FitData(attribute_prompts=given, prompt_pairs=pairs()))
    orth_proj = OrthProj().fit(FitData(attribute_prompts=given))
    torch.testing.assert_close(orth_cal.linear_map("text"), orth_proj.linear_map("text"), **EXACT)
    torch.testing.assert_close(orth_cal.linear_map("text"), projection_away(torch.cat(list(given.values())).T), **EXACT)


def test_orth_cal_on_a_rank_deficient_span_projects_the_independent_directions():
    independent = unit(2, 30)  # two directions; the third prompt is their sum, the fourth a repeat
    given = {"a": independent, "b": torch.stack([independent.sum(0), independent[0]])}
    expected = calibrated(projection_away(independent.T), pairs(), 3.0)
    debiaser = OrthCal(OrthCalOptions(lam=3.0)).fit(FitData(attribute_prompts=given, prompt_pairs=pairs()))
    torch.testing.assert_close(debiaser.linear_map("text"), expected, **EXACT)


def test_orth_cal_refuses_missing_and_malformed_inputs():
    with pytest.raises(InputError, match="needs attribute_prompts, prompt_pairs to fit but got no prompt_pairs"):
        OrthCal().fit(FitData(attribute_prompts=prompts()))
    with pytest.raises(InputError, match=r"`prompt_pairs` of shape \(pairs, 2, D\) but got \(5, 24\)"):
        OrthCal().fit(FitData(attribute_prompts=prompts(), prompt_pairs=unit(5, 0)))
    with pytest.raises(InputError, match="attribute prompts' dimension 24 but got 8"):
        OrthCal().fit(FitData(attribute_prompts=prompts(), prompt_pairs=unit(4, 0, dim=8).reshape(2, 2, 8)))
    with pytest.raises(ConfigError, match="`lam`"):
        OrthCalOptions(lam=-1.0)


# -- PRISM-mini ----------------------------------------------------------------------------------------------------
def test_prism_mini_projects_images_away_from_the_spurious_attributes():
    given = prompts(5)
    expected = projection_away(torch.cat(list(given.values())).T)
    debiaser = PrismMini().fit(FitData(attribute_prompts=given))
    x = unit(6, 40)
    torch.testing.assert_close(debiaser.transform_images(x), F.normalize(x @ expected, dim=-1), **EXACT)
    assert torch.equal(debiaser.transform_texts(x), x) and debiaser.linear_map("text") is None
    torch.testing.assert_close(debiaser.linear_map("image"), expected, **EXACT)


def test_prism_mini_on_a_rank_deficient_span():
    direction = unit(1, 41)
    debiaser = PrismMini().fit(FitData(attribute_prompts={"water": direction, "land": -2 * direction}))
    torch.testing.assert_close(debiaser.linear_map("image"), projection_away(direction.T), **EXACT)


# -- CLIP-clip and MMBias pruning ------------------------------------------------------------------------------------
def reference(seed=0, n=60):
    """Images of two groups (dimension 2 and 5 carry the group) and two classes (dimension 7 carries the class)."""
    images = unit(n, seed).clone()
    groups = torch.arange(n) % 2
    classes = (torch.arange(n) // 2) % 2
    images[:, 2] += 0.8 * groups
    images[:, 5] -= 0.5 * groups
    images[:, 7] += 0.8 * classes
    return F.normalize(images, dim=-1), ["woman" if g else "man" for g in groups.tolist()], classes.tolist()


def test_clip_clip_removes_the_dimensions_of_highest_mutual_information():
    images, labels, _ = reference()
    debiaser = CLIPClip(RemovalOptions(n_dims=3, seed=4)).fit(FitData(reference_images=images, reference_labels=labels))
    mi = mutual_info_classif(images.numpy(), [labels.index(v) for v in labels], n_neighbors=3, random_state=4)
    removed = np.argsort(-mi, kind="stable")[:3]
    kept = sorted(set(range(DIM)) - set(removed.tolist()))
    assert debiaser.fitted_state()["removed"].tolist() == removed.tolist()
    assert {2, 5} <= set(removed.tolist())
    z = unit(5, 50)
    for transform in (debiaser.transform_images, debiaser.transform_texts):
        torch.testing.assert_close(transform(z), F.normalize(z[:, kept], dim=-1), **EXACT)
    assert debiaser.linear_map("text").shape == (DIM - 3, DIM)


def effect_size(x, y, a, b):
    """MMBias Eq. 1 with cosines, written out: (mean_x s - mean_y s) / std_{w in X ∪ Y} s,
    s(w) = mean_a cos(w, a) - mean_b cos(w, b)."""

    def s(w):
        return np.mean([np.dot(w, v) / np.linalg.norm(w) / np.linalg.norm(v) for v in a]) - np.mean(
            [np.dot(w, v) / np.linalg.norm(w) / np.linalg.norm(v) for v in b]
        )

    sx, sy = [s(w) for w in x], [s(w) for w in y]
    return (np.mean(sx) - np.mean(sy)) / np.std(sx + sy, ddof=1)


def test_mmbias_pruning_is_algorithm_1_on_the_reference_test():
    images, labels, classes = reference(1)
    attributes = {"pleasant": unit(4, 60), "unpleasant": unit(4, 61)}
    attributes["pleasant"][:, 2] += 0.5  # the attribute texts lean on a group dimension
    options = MMBiasPruningOptions(n_dims=2, theta_quantile=0.9, seed=2)
    data = FitData(
        reference_images=images, reference_labels=labels, reference_classes=classes, attribute_prompts=attributes
    )
    debiaser = MMBiasPruning(options).fit(data)

    x, y = images[0::2].numpy(), images[1::2].numpy()  # "man" first, as it first appears
    a, b = attributes["pleasant"].numpy(), attributes["unpleasant"].numpy()
    mi = mutual_info_classif(images.numpy(), classes, n_neighbors=3, random_state=2)
    theta = np.quantile(mi, 0.9)
    psi_all = abs(effect_size(x, y, a, b))
    psi = {d: abs(effect_size(*(m[:, [k for k in range(DIM) if k != d]] for m in (x, y, a, b)))) for d in range(DIM)}
    eligible = [d for d in range(DIM) if mi[d] < theta and psi[d] < psi_all]
    expected = sorted(eligible, key=lambda d: psi[d])[:2]
    assert debiaser.fitted_state()["removed"].tolist() == expected
    kept = [d for d in range(DIM) if d not in expected]
    z = unit(4, 70)
    torch.testing.assert_close(debiaser.transform_images(z), F.normalize(z[:, kept], dim=-1), **EXACT)


def test_dimension_removals_refuse_what_they_cannot_use():
    images, labels, classes = reference()
    with pytest.raises(InputError, match="needs reference_images, reference_labels to fit but got no reference_labels"):
        CLIPClip().fit(FitData(reference_images=images))
    with pytest.raises(InputError, match="at least two groups"):
        CLIPClip().fit(FitData(reference_images=images, reference_labels=["a"] * len(labels)))
    three = FitData(
        reference_images=images,
        reference_labels=[str(i % 3) for i in range(len(labels))],
        reference_classes=classes,
        attribute_prompts={"p": unit(2, 1), "u": unit(2, 2)},
    )
    with pytest.raises(InputError, match="exactly two groups"):
        MMBiasPruning().fit(three)
    with pytest.raises(ConfigError, match="`n_dims` to give a count in \\[1, 23\\]"):
        CLIPClip(RemovalOptions(n_dims=24)).fit(FitData(reference_images=images, reference_labels=labels))
    with pytest.raises(ConfigError, match="Give one of `n_dims`"):
        RemovalOptions(n_dims=2, fraction=0.1)
    with pytest.raises(ConfigError, match="one of \\('ranked', 'greedy'\\)"):
        MMBiasPruningOptions(strategy="clip_clip")


# -- every linear debiaser: saved and loaded, registered ------------------------------------------------------------
def fitted(name):
    images, labels, classes = reference()
    data = FitData(
        reference_images=images,
        reference_labels=labels,
        reference_classes=classes,
        attribute_prompts={"pleasant": unit(3, 60), "unpleasant": unit(3, 61)},
        prompt_pairs=pairs(),
    )
    return debiaser_class(name)().fit(data)


@pytest.mark.parametrize("name", ["orth_cal", "prism_mini", "clip_clip", "mmbias_pruning"])
def test_save_load_round_trip(name, tmp_path):
    debiaser = fitted(name)
    debiaser.save(tmp_path / name)
    loaded = load_debiaser(tmp_path / name)
    assert type(loaded) is type(debiaser) and loaded.options == debiaser.options
    z = unit(4, 80)
    for modality in ("image", "text"):
        before, after = debiaser.linear_map(modality), loaded.linear_map(modality)
        assert (before is None) == (after is None) and (before is None or torch.equal(before, after))
    torch.testing.assert_close(loaded.transform_texts(z), debiaser.transform_texts(z), rtol=0, atol=0)
    assert name in list_debiasers()


def test_a_dimension_removal_exports_into_clips_own_format(tmp_path):
    from transformers import CLIPModel

    from vlbias.mitigation.debiased_embeddings import DebiasedEmbeddings
    from vlbias.models.families.clip import CLIPAdapter

    clip = CLIPAdapter.tiny(seed=0).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        images = clip.embed_images(clip.prepare_images(torch.rand(24, 3, 64, 64, generator=g)))
    debiaser = CLIPClip(RemovalOptions(n_dims=6)).fit(FitData(reference_images=images, reference_labels=[0, 1] * 12))
    model = DebiasedEmbeddings(clip, debiaser)
    model.export_linear(None, None, tmp_path)
    exported = CLIPModel.from_pretrained(tmp_path).eval()
    pixels = clip.prepare_images(torch.rand(3, 3, 64, 64, generator=g))
    tokens = clip.prepare_texts(["a man is cooking.", "a woman is driving."])
    with torch.no_grad():
        out = exported(pixel_values=pixels, **tokens)
        expected = model.embed_images(pixels), model.embed_texts(tokens)
    assert exported.config.projection_dim == 58
    torch.testing.assert_close(out.image_embeds, expected[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(out.text_embeds, expected[1], rtol=0, atol=1e-6)
