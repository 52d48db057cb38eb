"""RoboShot (Adila et al., 2024, Algorithm 1) against a line-by-line transcription, its special cases, the orthonormalised
form of the paper's Sec. 3.2 and its code (the default), and a planted attribute it removes."""

import pytest
import torch
import torch.nn.functional as F

from vlbias.errors import InputError
from vlbias.mitigation.debiaser import FitData, load_debiaser
from vlbias.mitigation.registry import debiaser_class
from vlbias.mitigation.roboshot import RoboShot, RoboShotOptions

DIM = 16
#: Algorithm 1's loops on the insight vectors as given, without Sec. 3.2's orthogonal basis (the default's).
AS_GIVEN = RoboShotOptions(orthonormalise=False)


def _unit(n, seed, dim=DIM):
    return F.normalize(torch.randn(n, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)), dim=-1)


def _algorithm_1(x, harmful, helpful):
    """Algorithm 1 as printed: one row at a time, remove each v^j and renormalise, then add each u^k."""
    out = []
    for row in x:
        for v in harmful:
            row = row - (row @ v) / (v @ v) * v
            row = row / row.norm()
        for u in helpful:
            row = row + (row @ u) / (u @ u) * u
        out.append(row / row.norm())
    return torch.stack(out)


def test_roboshot_equals_algorithm_1_line_by_line():
    prompts = {"man": _unit(3, 0), "woman": _unit(3, 1), "other": _unit(3, 2)}
    pairs = _unit(4, 3).view(2, 2, DIM)
    harmful = [prompts[value][i] - prompts["man"][i] for i in range(3) for value in ("woman", "other")]
    helpful = [pair[0] - pair[1] for pair in pairs]
    x = _unit(7, 4)
    debiaser = RoboShot(AS_GIVEN).fit(FitData(attribute_prompts=prompts, helpful_pairs=pairs))
    expected = _algorithm_1(x, harmful, helpful)
    torch.testing.assert_close(debiaser.transform_images(x), expected, rtol=0, atol=1e-10)
    m = debiaser.linear_map("image")
    torch.testing.assert_close(F.normalize(x @ m.T, dim=-1), expected, rtol=0, atol=1e-10)
    assert debiaser.linear_map("text") is None
    assert torch.equal(debiaser.transform_texts(x), x)


def test_without_helpful_pairs_only_the_harmful_insights_are_removed():
    prompts = {"a": _unit(2, 5), "b": _unit(2, 6)}
    x = _unit(5, 7)
    harmful = [prompts["b"][i] - prompts["a"][i] for i in range(2)]
    out = RoboShot(AS_GIVEN).fit(FitData(attribute_prompts=prompts)).transform_images(x)
    torch.testing.assert_close(out, _algorithm_1(x, harmful, []), rtol=0, atol=1e-10)
    # the last insight removed is exactly gone; an earlier one only as far as the later steps leave it
    assert torch.all((out @ harmful[-1]).abs() < 1e-12)


def test_one_harmful_insight_is_the_orthogonal_projection():
    prompts = {"a": _unit(1, 8), "b": _unit(1, 9)}
    v = prompts["b"][0] - prompts["a"][0]
    expected_m = torch.eye(DIM, dtype=torch.float64) - torch.outer(v, v) / (v @ v)
    debiaser = RoboShot().fit(FitData(attribute_prompts=prompts))
    torch.testing.assert_close(debiaser.linear_map("image"), expected_m, rtol=0, atol=1e-12)


def test_the_default_is_sec_3_2s_orthogonal_basis_as_the_released_codes_qr_loop():
    prompts = {"a": _unit(3, 10), "b": _unit(3, 11)}
    pairs = _unit(4, 12).view(2, 2, DIM)
    harmful = torch.stack([prompts["b"][i] - prompts["a"][i] for i in range(3)])
    helpful = pairs[:, 0] - pairs[:, 1]
    x = _unit(6, 13)
    # the code's loop: QR basis, then x <- x -/+ <x, q> q, renormalised after every step
    q_harmful, _ = torch.linalg.qr(harmful.T)
    q_helpful, _ = torch.linalg.qr(helpful.T)
    expected = x.clone()
    for q in q_harmful.T:
        expected = F.normalize(expected - (expected @ q)[:, None] * q, dim=-1)
    for q in q_helpful.T:
        expected = F.normalize(expected + (expected @ q)[:, None] * q, dim=-1)
    debiaser = RoboShot().fit(FitData(attribute_prompts=prompts, helpful_pairs=pairs))
    torch.testing.assert_close(debiaser.transform_images(x), expected, rtol=0, atol=1e-10)
    as_given = RoboShot(AS_GIVEN).fit(FitData(attribute_prompts=prompts, helpful_pairs=pairs)).transform_images(x)
    assert (as_given - expected).abs().max() > 1e-3  # non-orthogonal insights: the basis matters


def test_orthonormalised_form_removes_a_rank_deficient_span_exactly():
    direction = _unit(1, 14)
    base = _unit(2, 15)
    prompts = {"a": base, "b": base + torch.cat([direction, 2 * direction])}  # two parallel insights: rank 1
    debiaser = RoboShot(RoboShotOptions(orthonormalise=True)).fit(FitData(attribute_prompts=prompts))
    expected_m = torch.eye(DIM, dtype=torch.float64) - direction.T @ direction
    torch.testing.assert_close(debiaser.linear_map("image"), expected_m, rtol=0, atol=1e-12)


def test_a_planted_attribute_is_no_longer_separable_after_roboshot():
    g = torch.Generator().manual_seed(16)
    attribute = F.normalize(torch.randn(DIM, dtype=torch.float64, generator=g), dim=0)
    task = F.normalize(torch.randn(DIM, dtype=torch.float64, generator=g), dim=0)
    task = F.normalize(task - (task @ attribute) * attribute, dim=0)
    labels = torch.arange(200) % 2
    signs = 2.0 * labels - 1
    images = F.normalize(
        0.3 * torch.randn(200, DIM, dtype=torch.float64, generator=g) + signs[:, None] * attribute + task, dim=-1
    )
    neutral = 0.2 * torch.randn(2, DIM, dtype=torch.float64, generator=g)
    prompts = {"male": F.normalize(neutral + attribute, dim=-1), "female": F.normalize(neutral - attribute, dim=-1)}
    out = RoboShot().fit(FitData(attribute_prompts=prompts)).transform_images(images)

    def gap(z):
        return float((z[labels == 1].mean(0) - z[labels == 0].mean(0)) @ attribute)

    assert gap(images) > 1.0
    assert abs(gap(out)) < 0.1 * gap(images)
    assert float((out @ task).mean()) > float((images @ task).mean())  # the task direction is kept, not removed


def test_bad_insights_are_refused_by_name():
    with pytest.raises(InputError, match="needs attribute_prompts to fit but got no attribute_prompts"):
        RoboShot().fit(FitData(helpful_pairs=_unit(2, 0).view(1, 2, DIM)))
    with pytest.raises(InputError, match="same number of attribute prompts per value"):
        RoboShot().fit(FitData(attribute_prompts={"a": _unit(2, 0), "b": _unit(3, 1)}))
    with pytest.raises(InputError, match="at least two values"):
        RoboShot().fit(FitData(attribute_prompts={"a": _unit(2, 0)}))
    same = _unit(1, 2)
    for options in (RoboShotOptions(), AS_GIVEN):  # the orthonormal basis would silently make it the identity
        with pytest.raises(InputError, match=r"Harmful insights .* \[0\] are zero"):
            RoboShot(options).fit(FitData(attribute_prompts={"a": same, "b": same.clone()}))
    with pytest.raises(InputError, match=r"Helpful pairs \[0\] are zero"):
        RoboShot().fit(
            FitData(attribute_prompts={"a": _unit(1, 0), "b": _unit(1, 1)}, helpful_pairs=same.expand(2, -1)[None])
        )
    with pytest.raises(InputError, match=r"helpful_pairs of shape \(h, 2, D\)"):
        RoboShot().fit(FitData(attribute_prompts={"a": _unit(1, 0), "b": _unit(1, 1)}, helpful_pairs=_unit(2, 3)))


def test_save_and_load_round_trip(tmp_path):
    data = FitData(attribute_prompts={"a": _unit(2, 20), "b": _unit(2, 21)}, helpful_pairs=_unit(2, 22).view(1, 2, DIM))
    debiaser = RoboShot(RoboShotOptions(orthonormalise=True, rtol=1e-8)).fit(data)
    loaded = load_debiaser(debiaser.save(tmp_path / "roboshot"))
    assert isinstance(loaded, RoboShot) and loaded.options == debiaser.options
    x = _unit(3, 23)
    torch.testing.assert_close(loaded.transform_images(x), debiaser.transform_images(x), rtol=0, atol=0)
    assert debiaser_class("roboshot") is RoboShot
