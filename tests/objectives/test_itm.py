"""ITM with hard negatives: the draw follows the similarity and never picks a pair that matches."""

import torch

from vlbias.objectives import itm_loss, sample_negatives


def test_negatives_are_drawn_among_allowed_candidates_by_similarity():
    allowed = ~torch.eye(4, dtype=torch.bool)
    allowed[0, 1] = False  # caption 1 also describes image 0
    similarity = torch.zeros(4, 4)
    similarity[0, 2] = 10.0  # image 0 is most confused with caption 2
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_negatives(allowed, similarity, generator) for _ in range(200)])  # (200, 4)
    assert allowed[torch.arange(4).repeat(200, 1), draws].all()
    assert (draws[:, 0] == 2).float().mean() > 0.95


def test_uniform_without_similarity_and_a_fallback_when_nothing_is_allowed():
    allowed = torch.zeros(3, 3, dtype=torch.bool)
    draws = torch.stack([sample_negatives(allowed, None, torch.Generator().manual_seed(s)) for s in range(50)])
    assert (draws != torch.arange(3)).all()  # never the own index
    assert len(set(draws[:, 0].tolist())) == 2


def test_itm_loss_is_binary_cross_entropy():
    logits, labels = torch.tensor([2.0, -1.0]), torch.tensor([1.0, 0.0])
    expected = -(torch.log(torch.sigmoid(torch.tensor(2.0))) + torch.log(1 - torch.sigmoid(torch.tensor(-1.0)))) / 2
    torch.testing.assert_close(itm_loss(logits, labels), expected)
