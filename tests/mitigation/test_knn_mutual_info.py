"""The vectorised kNN mutual information equals scikit-learn's ``mutual_info_classif``, value for value."""

import numpy as np
import pytest
import torch
from sklearn.feature_selection import mutual_info_classif

from vlbias.errors import InputError
from vlbias.mitigation import knn_mutual_info, mutual_information
from vlbias.mitigation.knn_mutual_info import knn_mutual_information


def sklearn_mi(x: np.ndarray, labels: np.ndarray, k: int, seed: int) -> np.ndarray:
    return mutual_info_classif(x, labels, discrete_features=False, n_neighbors=k, random_state=seed)


def features(rng: np.random.Generator, labels: np.ndarray, dims: int) -> np.ndarray:
    """Columns of varied scale, some shifted by the label so the MI is not all zero."""
    x = rng.standard_normal((len(labels), dims)) * rng.uniform(0.01, 50, dims)
    x[:, : dims // 2] += labels[:, None] * rng.uniform(0, 2, dims // 2)
    return x


CASES = {
    # name: (class sizes, n_neighbors); sizes of 2k + 1 or fewer take scikit-learn's brute-force branch
    "two classes": ([60, 60], 3),
    "three unequal": ([5, 40, 120], 3),
    "six classes": ([30, 25, 20, 15, 10, 9], 2),
    "a class of one": ([1, 50, 70], 3),
    "k above class sizes": ([2, 3, 4, 40], 5),
    "k = 1": ([35, 64], 1),
    "many neighbours": ([80, 90], 12),
}


@pytest.mark.parametrize("name", CASES)
def test_equals_scikit_learn(name):
    sizes, k = CASES[name]
    rng = np.random.default_rng(len(name))
    labels = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))
    x = features(rng, labels, 12)
    for seed in (0, 7):
        np.testing.assert_array_equal(knn_mutual_information(x, labels, k, seed), sklearn_mi(x, labels, k, seed))


def test_equals_scikit_learn_with_ties():
    """Duplicated values (rounded to one decimal, a constant column, repeated rows) only the noise tells apart."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, 150)
    x = np.round(features(rng, labels, 8), 1)
    x[:, 0] = 2.0
    x[100:] = x[:50]
    for k in (1, 3, 6):
        np.testing.assert_array_equal(knn_mutual_information(x, labels, k, 4), sklearn_mi(x, labels, k, 4))


def test_mutual_information_of_tensors_equals_scikit_learn():
    g = torch.Generator().manual_seed(0)
    images = torch.randn(90, 10, generator=g, dtype=torch.float64)
    labels = torch.arange(90) % 3
    images[:, 0] += labels
    expected = sklearn_mi(images.numpy(), labels.numpy(), 3, 5)
    np.testing.assert_array_equal(mutual_information(images, labels, seed=5).numpy(), expected)


def test_work_is_per_class_not_per_feature(monkeypatch):
    """The k-th neighbour search runs once per class (brute force for the small one), whatever the number of
    features: the estimator is vectorised over features, so its cost does not grow by a Python loop over them."""
    calls = []
    for name in ("_sorted_kth", "_brute_force_kth"):
        original = getattr(knn_mutual_info, name)
        monkeypatch.setattr(
            knn_mutual_info, name, lambda values, k, f=original, n=name: calls.append((n, values.shape)) or f(values, k)
        )
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], [40, 50, 6])
    knn_mutual_information(rng.standard_normal((96, 64)), labels, 3, 0)
    assert calls == [("_sorted_kth", (64, 40)), ("_sorted_kth", (64, 50)), ("_brute_force_kth", (64, 6))]


def test_no_class_of_two_is_refused():
    with pytest.raises(InputError, match="each of the 3 classes has one"):
        knn_mutual_information(np.zeros((3, 2)), np.array([0, 1, 2]))
