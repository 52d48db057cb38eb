"""SFID (Jung et al., 2024) against a transcription of its three steps, its special cases, the refusals, and a
planted attribute it makes unpredictable."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.debiaser import FitData, load_debiaser
from vlbias.mitigation.registry import debiaser_class
from vlbias.mitigation.sfid import SFID, SFIDOptions
from vlbias.runtime.threads import torch_threads

DIM = 12


def _planted(n, seed, strength=1.0, dim=DIM):
    """Unit embeddings whose dimensions 0-2 carry the attribute (labels 'f'/'m', alternating) with ``strength``."""
    g = torch.Generator().manual_seed(seed)
    labels = ["m" if i % 2 else "f" for i in range(n)]
    signs = torch.tensor([1.0 if label == "m" else -1.0 for label in labels], dtype=torch.float64)
    z = torch.randn(n, dim, dtype=torch.float64, generator=g)
    z[:, :3] += strength * signs[:, None]
    return F.normalize(z, dim=-1), labels


def _sfid_by_hand(z, labels, x, k, threshold, n_estimators, held_out, seed):
    """Sec. 4 of the paper step by step, with the split the module documents."""
    generator = torch.Generator().manual_seed(seed)
    train, held = [], []
    for group in dict.fromkeys(labels):
        members = [i for i, label in enumerate(labels) if label == group]
        order = [members[j] for j in torch.randperm(len(members), generator=generator).tolist()]
        n_held = max(1, round(held_out * len(members)))
        held += order[:n_held]
        train += order[n_held:]
    train, held = sorted(train), sorted(held)
    y = np.array([list(dict.fromkeys(labels)).index(label) for label in labels])
    forest = RandomForestClassifier(n_estimators=n_estimators, random_state=seed).fit(z.numpy()[train], y[train])
    important = np.argsort(forest.feature_importances_, kind="stable")[-k:]  # step 1: top-k Gini importance
    low = [i for i, p in zip(held, forest.predict_proba(z.numpy()[held]).max(axis=1), strict=True) if p < threshold]
    mean = z[low].mean(dim=0)  # step 2: mean of the low-confidence held-out samples
    out = x.clone()
    out[:, torch.from_numpy(important.copy())] = mean[torch.from_numpy(important.copy())]  # step 3: impute
    return out / out.norm(dim=1, keepdim=True)


def test_sfid_equals_the_three_steps_for_images_and_texts():
    images, image_labels = _planted(80, 0)
    texts, text_labels = _planted(40, 1, strength=0.5)
    prompts = {value: texts[[i for i, label in enumerate(text_labels) if label == value]] for value in ("f", "m")}
    options = SFIDOptions(k=4, threshold=0.8, n_estimators=20, held_out=0.25, seed=3)
    debiaser = SFID(options).fit(
        FitData(reference_images=images, reference_labels=image_labels, attribute_prompts=prompts)
    )
    x = _planted(5, 2)[0]
    expected_images = _sfid_by_hand(images, image_labels, x, 4, 0.8, 20, 0.25, 3)
    torch.testing.assert_close(debiaser.transform_images(x), expected_images, rtol=0, atol=1e-10)
    prompt_labels = ["f"] * prompts["f"].shape[0] + ["m"] * prompts["m"].shape[0]
    expected_texts = _sfid_by_hand(torch.cat([prompts["f"], prompts["m"]]), prompt_labels, x, 4, 0.8, 20, 0.25, 3)
    torch.testing.assert_close(debiaser.transform_texts(x), expected_texts, rtol=0, atol=1e-10)
    assert debiaser.linear_map("image") is None and debiaser.linear_map("text") is None


def test_imputing_every_dimension_maps_every_embedding_to_the_low_confidence_mean():
    images, labels = _planted(60, 4)
    options = SFIDOptions(k=DIM, threshold=1.0, n_estimators=10, modalities=("image",))
    debiaser = SFID(options).fit(FitData(reference_images=images, reference_labels=labels))
    out = debiaser.transform_images(_planted(3, 5)[0])
    torch.testing.assert_close(out, out[:1].expand(3, -1), rtol=0, atol=1e-12)


def test_modalities_narrow_what_is_needed_and_changed():
    images, labels = _planted(40, 6)
    debiaser = SFID(SFIDOptions(modalities=("image",), k=2, n_estimators=5, threshold=1.0))
    assert debiaser.NEEDS == ("reference_images", "reference_labels") and debiaser.MODIFIES == {"image"}
    debiaser.fit(FitData(reference_images=images, reference_labels=labels))
    x = _planted(2, 7)[0]
    assert torch.equal(debiaser.transform_texts(x), x)
    assert not torch.equal(debiaser.transform_images(x), x)


def test_missing_data_and_bad_options_are_refused_by_name():
    images, labels = _planted(20, 8)
    with pytest.raises(
        InputError,
        match="needs reference_images, reference_labels, attribute_prompts to fit but got no attribute_prompts",
    ):
        SFID().fit(FitData(reference_images=images, reference_labels=labels))
    with pytest.raises(InputError, match="got no reference_images, reference_labels"):
        SFID(SFIDOptions(modalities=("image",))).fit(FitData())
    with pytest.raises(InputError, match="at least two groups"):
        SFID(SFIDOptions(modalities=("image",))).fit(FitData(reference_images=images, reference_labels=["a"] * 20))
    with pytest.raises(InputError, match="`k` at most the dimension 12"):
        SFID(SFIDOptions(k=13, modalities=("image",))).fit(FitData(reference_images=images, reference_labels=labels))
    with pytest.raises(InputError, match="at least two reference images of group 'x' .* got 1 reference images: give"):
        SFID(SFIDOptions(k=2, modalities=("image",))).fit(
            FitData(reference_images=images[:11], reference_labels=labels[:10] + ["x"])
        )
    # one attribute prompt per value and a gallery of many references: the prompts are what was counted
    one_prompt = {"Male": images[:1], "Female": images[1:2]}
    with pytest.raises(
        InputError,
        match=r"two attribute prompts of group 'Male' .* but got 1 attribute prompts: SFID fits the text embeddings on "
        r"the attribute prompts, not on the reference images: give at least two prompts of each value",
    ):
        SFID(SFIDOptions(k=2)).fit(
            FitData(reference_images=images, reference_labels=labels, attribute_prompts=one_prompt)
        )
    strong, strong_labels = _planted(40, 9, strength=5.0)
    with pytest.raises(InputError, match="below `threshold` 0.01"):
        SFID(SFIDOptions(k=2, threshold=0.01, modalities=("image",))).fit(
            FitData(reference_images=strong, reference_labels=strong_labels)
        )
    for bad in ({"k": 0}, {"threshold": 0.0}, {"held_out": 1.0}, {"modalities": ("audio",)}, {"modalities": ()}):
        with pytest.raises(ConfigError):
            SFIDOptions(**bad)
    debiaser = SFID(SFIDOptions(k=2, n_estimators=5, threshold=1.0, modalities=("image",)))
    debiaser.fit(FitData(reference_images=images, reference_labels=labels))
    with pytest.raises(InputError, match="fitted dimension 12 but got 5"):
        debiaser.transform_images(_planted(2, 10, dim=5)[0])


def test_a_planted_attribute_is_no_longer_predictable_after_sfid():
    images, labels = _planted(400, 11, strength=1.0)
    y = np.array([label == "m" for label in labels])
    options = SFIDOptions(k=3, threshold=0.7, n_estimators=50, modalities=("image",))
    debiaser = SFID(options).fit(FitData(reference_images=images[:200], reference_labels=labels[:200]))
    assert set(debiaser.fitted_state()["image_dims"].tolist()) == {0, 1, 2}  # the forest finds the planted dimensions

    def probe_accuracy(z):
        probe = LogisticRegression().fit(z[200:300].numpy(), y[200:300])
        return probe.score(z[300:].numpy(), y[300:])

    assert probe_accuracy(images) > 0.9
    assert probe_accuracy(debiaser.transform_images(images)) < 0.65


def test_save_and_load_round_trip(tmp_path):
    images, labels = _planted(40, 12)
    texts, text_labels = _planted(20, 13)
    prompts = {value: texts[[i for i, label in enumerate(text_labels) if label == value]] for value in ("f", "m")}
    debiaser = SFID(SFIDOptions(k=3, n_estimators=5, threshold=1.0)).fit(
        FitData(reference_images=images, reference_labels=labels, attribute_prompts=prompts)
    )
    loaded = load_debiaser(debiaser.save(tmp_path / "sfid"))
    assert isinstance(loaded, SFID) and loaded.options == debiaser.options and loaded.MODIFIES == {"image", "text"}
    x = _planted(3, 14)[0]
    torch.testing.assert_close(loaded.transform_images(x), debiaser.transform_images(x), rtol=0, atol=0)
    torch.testing.assert_close(loaded.transform_texts(x), debiaser.transform_texts(x), rtol=0, atol=0)
    assert debiaser_class("sfid") is SFID


def test_the_forest_on_two_threads_fits_what_one_thread_fits():
    """The trees are fitted on torch's threads (each tree's random state is drawn first), so the thread count changes
    no fitted number."""
    images, labels = _planted(80, 8)
    options = SFIDOptions(k=3, threshold=0.9, n_estimators=8, modalities=("image",))
    states = []
    for threads in (1, 2):
        with torch_threads(threads):
            states.append(SFID(options).fit(FitData(reference_images=images, reference_labels=labels)).fitted_state())
    for name, value in states[0].items():
        torch.testing.assert_close(states[1][name], value, rtol=0, atol=0)
