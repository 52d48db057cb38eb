"""Zero-shot accuracy with removed dimensions, and the trade-off rows, against plain recomputations."""

import pytest
import torch
import torch.nn.functional as F

from vlbias.mitigation import BiasTest, effect_size_without
from vlbias.mitigation.tradeoff import ACCURACY, tradeoff_rows
from vlbias.mitigation.zero_shot import zero_shot_accuracy, zero_shot_predictions


def data(seed=0, n=40, dim=12, classes=3, per_class=2):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(n, dim, generator=g, dtype=torch.float64)
    prompts = torch.randn(classes * per_class, dim, generator=g, dtype=torch.float64)
    prompt_classes = torch.arange(classes).repeat_interleave(per_class)
    labels = torch.randint(0, classes, (n,), generator=g)
    return images, prompts, prompt_classes, labels


def naive_predictions(images, prompts, prompt_classes, removed):
    kept = [d for d in range(images.shape[1]) if d not in removed]
    scores = []
    for image in images:
        row = []
        for k in range(int(prompt_classes.max()) + 1):
            members = [F.normalize(p[kept], dim=0) for p, c in zip(prompts, prompt_classes) if c == k]
            centre = F.normalize(torch.stack(members).mean(0), dim=0)
            row.append(float(F.cosine_similarity(image[kept], centre, dim=0)))
        scores.append(row)
    return torch.tensor(scores).argmax(1)


def test_predictions_and_accuracy_equal_a_naive_loop():
    images, prompts, prompt_classes, labels = data()
    for removed in ([], [0, 5, 7]):
        expected = naive_predictions(images, prompts, prompt_classes, removed)
        assert torch.equal(zero_shot_predictions(images, prompts, prompt_classes, removed), expected)
        accuracy = zero_shot_accuracy(images, prompts, prompt_classes, labels, removed)
        assert accuracy == pytest.approx(float((expected == labels).double().mean()))


def test_tradeoff_rows_follow_the_order_and_include_the_chosen_n():
    images, prompts, prompt_classes, labels = data(dim=10)
    g = torch.Generator().manual_seed(1)
    a, b = (torch.randn(4, 10, generator=g, dtype=torch.float64) for _ in range(2))
    test = BiasTest("t", images[:20], images[20:], a, b)
    order = [3, 1, 8, 0, 6]
    rows = tradeoff_rows([test], images, labels, prompts, prompt_classes, order, chosen=3, step=2)
    assert [row["n_removed"] for row in rows] == [0, 2, 3, 4, 5]
    for row in rows:
        removed = torch.tensor(order[: row["n_removed"]], dtype=torch.long)
        assert row["t/effect_size"] == float(effect_size_without(test.x, test.y, a, b, removed))
        assert row[ACCURACY] == zero_shot_accuracy(images, prompts, prompt_classes, labels, removed)
