"""Eq. 14-16 by hand on fixed logits."""

import math

import pytest
import torch
from torch.testing import assert_close

from vlbias.errors import ConfigError
from vlbias.objectives import IGNORE_INDEX, counterfactual_kl, fairvlp_loss, masked_lm_loss

# two texts of three positions over a vocabulary of three; position 1 of each is masked
LOGITS_F = torch.tensor([[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0] * 3, [0.0, 1.0, 0.0], [0.0] * 3]])
LOGITS_CF = torch.tensor([[[0.0] * 3, [0.0, 0.0, 0.5], [0.0] * 3], [[0.0] * 3, [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]])
LABELS = torch.tensor([[IGNORE_INDEX, 0, IGNORE_INDEX], [IGNORE_INDEX, 1, IGNORE_INDEX]])
MASKED = LABELS != IGNORE_INDEX


def _softmax(row):
    exp = [math.exp(v) for v in row]
    return [e / sum(exp) for e in exp]


def _kl(p, q):
    return sum(a * (math.log(a) - math.log(b)) for a, b in zip(p, q))


P_F = [_softmax([2.0, 0.0, 0.0]), _softmax([0.0, 1.0, 0.0])]
P_CF = [_softmax([0.0, 0.0, 0.5]), _softmax([0.0, 1.0, 0.0])]
H_F = -(math.log(P_F[0][0]) + math.log(P_F[1][1])) / 2
H_CF = -(math.log(P_CF[0][0]) + math.log(P_CF[1][1])) / 2
KL = (_kl(P_F[0], P_CF[0]) + _kl(P_F[1], P_CF[1])) / 2


def test_kl_is_p_factual_given_p_counterfactual_averaged_over_masked_positions():
    assert_close(counterfactual_kl(LOGITS_F, LOGITS_CF, MASKED).item(), KL)
    reverse = (_kl(P_CF[0], P_F[0]) + _kl(P_CF[1], P_F[1])) / 2
    assert abs(KL - reverse) > 1e-3  # the direction matters on these logits
    assert abs(counterfactual_kl(LOGITS_F, LOGITS_CF, MASKED).item() - reverse) > 1e-3


def test_mlm_cross_entropy_by_hand():
    assert_close(masked_lm_loss(LOGITS_F, LABELS).item(), H_F)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_eq16_by_hand(alpha):
    loss = fairvlp_loss(LOGITS_F, LABELS, LOGITS_CF, LABELS, MASKED, alpha)
    assert_close(loss.total.item(), (1 - alpha) * (H_F + H_CF) + alpha * KL)
    assert_close((loss.mlm_factual.item(), loss.mlm_counterfactual.item(), loss.kl.item()), (H_F, H_CF, KL))


def test_alpha_zero_is_the_plain_two_branch_mlm_and_alpha_one_the_kl_alone():
    assert_close(fairvlp_loss(LOGITS_F, LABELS, LOGITS_CF, LABELS, MASKED, 0.0).total.item(), H_F + H_CF)
    assert_close(fairvlp_loss(LOGITS_F, LABELS, LOGITS_CF, LABELS, MASKED, 1.0).total.item(), KL)


def test_counterfactual_rows_pair_with_their_factual_rows_and_kl_positions_are_chosen():
    rows = torch.tensor([1])  # only text 1 has a counterfactual
    loss = fairvlp_loss(LOGITS_F, LABELS, LOGITS_CF[1:], LABELS[1:], MASKED[1:], 1.0, rows)
    assert_close(loss.kl.item(), _kl(P_F[1], P_CF[1]))
    none = fairvlp_loss(LOGITS_F, LABELS, LOGITS_CF[:0], LABELS[:0], MASKED[:0], 0.5, rows[:0])
    assert none.kl.item() == 0.0 and none.mlm_counterfactual.item() == 0.0
    assert_close(none.total.item(), 0.5 * H_F)


def test_gradients_flow_through_both_branches():
    f, cf = LOGITS_F.clone().requires_grad_(), LOGITS_CF.clone().requires_grad_()
    counterfactual_kl(f, cf, MASKED).backward()
    assert f.grad.abs().sum() > 0 and cf.grad.abs().sum() > 0


@pytest.mark.parametrize("alpha", [-0.1, 1.5, True, "0.5"])
def test_alpha_outside_unit_interval_is_refused(alpha):
    with pytest.raises(ConfigError, match=r"Expected `alpha` in \[0, 1\]"):
        fairvlp_loss(LOGITS_F, LABELS, LOGITS_CF, LABELS, MASKED, alpha)
