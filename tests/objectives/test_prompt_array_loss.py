"""DebiasCLIP's prompt-array losses (``vlbias.objectives.prompt_array``) against a hand computation in float64."""

import math

import pytest
import torch

from vlbias.errors import InputError
from vlbias.objectives import adversary_loss, prompt_array_loss

LOGITS = [[2.0, -1.0, 0.5], [0.0, 0.3, -0.7], [1.5, 1.5, -2.0], [-0.2, 0.1, 3.0]]
ATTRIBUTES = [0, 2, 1, 2]


def cross_entropy_by_hand() -> float:
    """-(1/B) sum_i log softmax(l_i)[a_i], one term at a time."""
    terms = [math.log(sum(math.exp(v) for v in row)) - row[a] for row, a in zip(LOGITS, ATTRIBUTES)]
    return sum(terms) / len(terms)


def test_the_adversary_loss_is_the_mean_cross_entropy():
    loss = adversary_loss(torch.tensor(LOGITS, dtype=torch.float64), torch.tensor(ATTRIBUTES))
    assert loss.item() == pytest.approx(cross_entropy_by_hand(), abs=1e-12)


@pytest.mark.parametrize("lam", [0.0, 0.25, 3.0])
def test_the_prompts_minimise_the_negated_adversary_loss_plus_lambda_contrastive(lam):
    contrastive = torch.tensor(1.7, dtype=torch.float64)
    parts = prompt_array_loss(torch.tensor(LOGITS, dtype=torch.float64), torch.tensor(ATTRIBUTES), contrastive, lam)
    assert parts.adversarial.item() == pytest.approx(cross_entropy_by_hand(), abs=1e-12)
    assert parts.contrastive.item() == 1.7
    assert parts.total.item() == pytest.approx(-cross_entropy_by_hand() + lam * 1.7, abs=1e-12)


def test_the_prompts_gradient_raises_the_adversary_loss():
    """A step down L_P (lambda 0) moves the logits up the adversary's cross-entropy."""
    logits = torch.tensor(LOGITS, dtype=torch.float64, requires_grad=True)
    prompt_array_loss(logits, torch.tensor(ATTRIBUTES), torch.tensor(0.0), 0.0).total.backward()
    stepped = logits.detach() - 0.1 * logits.grad
    assert adversary_loss(stepped, torch.tensor(ATTRIBUTES)) > adversary_loss(logits.detach(), torch.tensor(ATTRIBUTES))


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(InputError, match=r"attributes in \[0, 3\) but got \[3\]"):
        adversary_loss(torch.zeros(2, 3), torch.tensor([0, 3]))
    with pytest.raises(InputError, match=r"logits \(B, G\) and attributes \(B,\) but got \(2, 3\) and \(3,\)"):
        adversary_loss(torch.zeros(2, 3), torch.tensor([0, 1, 2]))
    with pytest.raises(InputError, match="`lam` to be >= 0 but got -1"):
        prompt_array_loss(torch.zeros(2, 3), torch.tensor([0, 1]), torch.tensor(0.0), -1)
