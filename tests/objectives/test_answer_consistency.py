"""The answer-consistency loss and its gradients against a float64 hand computation (numpy; central finite
differences of it, and KL's closed form), on random distributions and through a tiny LLaVA's cached answer
scoring, and its refusals."""

import types

import numpy as np
import pytest
import torch
from PIL import Image
from torch.testing import assert_close

from vlbias.errors import ConfigError, InputError
from vlbias.models.families.chat_vlm import LlavaAdapter
from vlbias.objectives import answer_consistency_loss

DIVERGENCES = ["kl", "symmetric_kl", "js"]


def _softmax(row: np.ndarray) -> np.ndarray:
    exp = np.exp(row - row.max())
    return exp / exp.sum()


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sum(p * np.log(p / q)))


def hand_loss(factual: np.ndarray, counterfactual: np.ndarray, rows: list[int], divergence: str) -> float:
    """The module's formula, one pair at a time, in float64 numpy."""
    total = 0.0
    for m, n in enumerate(rows):
        p, q = _softmax(factual[n]), _softmax(counterfactual[m])
        if divergence == "kl":
            total += _kl(p, q)
        elif divergence == "symmetric_kl":
            total += _kl(p, q) + _kl(q, p)
        else:
            mean = (p + q) / 2
            total += 0.5 * _kl(p, mean) + 0.5 * _kl(q, mean)
    return total / len(rows)


def finite_difference(function, values: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central differences of scalar ``function`` at every entry of ``values``."""
    gradient = np.zeros_like(values)
    for index in np.ndindex(values.shape):
        up, down = values.copy(), values.copy()
        up[index] += step
        down[index] -= step
        gradient[index] = (function(up) - function(down)) / (2 * step)
    return gradient


def random_scores(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """3 factual rows, 5 counterfactual rows (factual row 0 has three counterfactuals, row 2 none) over 4 answers,
    log-scores not normalised (as an option's sequence log-probabilities are not)."""
    generator = torch.Generator().manual_seed(seed)
    factual = 2 * torch.randn(3, 4, generator=generator, dtype=torch.float64) - 3
    counterfactual = 2 * torch.randn(5, 4, generator=generator, dtype=torch.float64) - 3
    return factual, counterfactual, [0, 0, 1, 0, 1]


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_the_loss_and_its_gradients_equal_a_float64_hand_computation(divergence):
    factual, counterfactual, rows = random_scores()
    factual.requires_grad_(True)
    counterfactual.requires_grad_(True)
    loss = answer_consistency_loss(factual, counterfactual, torch.tensor(rows), divergence)
    loss.backward()
    f, cf = factual.detach().numpy(), counterfactual.detach().numpy()
    assert loss.dtype == torch.float64
    assert abs(loss.item() - hand_loss(f, cf, rows, divergence)) < 1e-12
    expected_f = finite_difference(lambda x: hand_loss(x, cf, rows, divergence), f)
    expected_cf = finite_difference(lambda x: hand_loss(f, x, rows, divergence), cf)
    assert_close(factual.grad.numpy(), expected_f, rtol=0, atol=1e-6)
    assert_close(counterfactual.grad.numpy(), expected_cf, rtol=0, atol=1e-6)
    assert np.abs(expected_f[2]).max() == 0 and np.abs(expected_f[:2]).max() > 1e-3  # row 2 has no pair


def test_kl_gradients_are_the_closed_form():
    """d KL(P||Q) / d(cf logits) = Q - P; d KL(P||Q) / d(f logits) = P (log P - log Q - KL); each pair / M."""
    factual, counterfactual, rows = random_scores(1)
    factual.requires_grad_(True)
    counterfactual.requires_grad_(True)
    answer_consistency_loss(factual, counterfactual, torch.tensor(rows)).backward()
    expected_f, expected_cf = np.zeros((3, 4)), np.zeros((5, 4))
    for m, n in enumerate(rows):
        p, q = _softmax(factual[n].detach().numpy()), _softmax(counterfactual[m].detach().numpy())
        expected_cf[m] = (q - p) / len(rows)
        expected_f[n] += p * (np.log(p / q) - _kl(p, q)) / len(rows)
    assert_close(factual.grad.numpy(), expected_f, rtol=0, atol=1e-12)
    assert_close(counterfactual.grad.numpy(), expected_cf, rtol=0, atol=1e-12)


@pytest.mark.parametrize("divergence", DIVERGENCES)
def test_a_one_sided_gradient_flows_through_that_side_only_with_the_same_value(divergence):
    gradients = {}
    for side in ("both", "factual", "counterfactual"):
        factual, counterfactual, rows = random_scores(2)
        factual.requires_grad_(True)
        counterfactual.requires_grad_(True)
        loss = answer_consistency_loss(factual, counterfactual, torch.tensor(rows), divergence, side)
        loss.backward()
        gradients[side] = (loss.item(), factual.grad, counterfactual.grad)
    both, factual_side, counterfactual_side = gradients["both"], gradients["factual"], gradients["counterfactual"]
    assert both[0] == factual_side[0] == counterfactual_side[0]
    assert_close(factual_side[1], both[1], rtol=0, atol=0)
    assert factual_side[2] is None or not factual_side[2].any()
    assert_close(counterfactual_side[2], both[2], rtol=0, atol=0)
    assert counterfactual_side[1] is None or not counterfactual_side[1].any()


def test_scores_are_renormalised_and_the_divergences_keep_their_known_properties():
    factual, counterfactual, rows = random_scores(3)
    pairs = torch.tensor(rows)
    shifted = answer_consistency_loss(factual + torch.randn(3, 1, dtype=torch.float64), counterfactual - 7, pairs)
    assert_close(shifted, answer_consistency_loss(factual, counterfactual, pairs), rtol=0, atol=1e-12)
    assert answer_consistency_loss(factual, factual).item() == 0.0
    kl = answer_consistency_loss(factual, counterfactual, pairs, "kl")
    reverse = answer_consistency_loss(counterfactual, factual[rows], None, "kl")
    assert_close(answer_consistency_loss(factual, counterfactual, pairs, "symmetric_kl"), kl + reverse)
    certain = torch.tensor([[0.0, -1e4]], dtype=torch.float64)
    assert_close(answer_consistency_loss(certain, certain.flip(1), divergence="js").item(), float(np.log(2)))
    assert answer_consistency_loss(factual.float(), counterfactual.float(), pairs).dtype == torch.float32


def test_bad_input_is_refused_in_one_line():
    factual, counterfactual, rows = random_scores()
    with pytest.raises(ConfigError, match=r"`divergence` to be one of \['kl', 'symmetric_kl', 'js'\] but got 'l2'"):
        answer_consistency_loss(factual, counterfactual, torch.tensor(rows), "l2")
    with pytest.raises(ConfigError, match=r"`gradient` to be one of \['both', 'factual', 'counterfactual'\]"):
        answer_consistency_loss(factual, counterfactual, torch.tensor(rows), gradient="neither")
    with pytest.raises(InputError, match=r"shapes \(N, K\) and \(M, K\).* got \(3, 4\) and \(5, 3\)"):
        answer_consistency_loss(factual, counterfactual[:, :3], torch.tensor(rows))
    with pytest.raises(InputError, match="at least one counterfactual answer distribution but got none"):
        answer_consistency_loss(factual, counterfactual[:0], torch.tensor([], dtype=torch.long))
    with pytest.raises(InputError, match="one counterfactual row per factual row without `factual_rows`"):
        answer_consistency_loss(factual, counterfactual)
    with pytest.raises(InputError, match=r"`factual_rows` in \[0, 3\) but got \[0, 1, 3\]"):
        answer_consistency_loss(factual, counterfactual, torch.tensor([0, 0, 1, 3, 1]))
    with pytest.raises(InputError, match=r"`factual_rows` of shape \(5,\)"):
        answer_consistency_loss(factual, counterfactual, torch.tensor([0, 1]))
    with pytest.raises(InputError, match=r"one integer per counterfactual row, but got shape \(5,\) of torch.bool"):
        answer_consistency_loss(factual, counterfactual, torch.ones(5, dtype=torch.bool))
    with pytest.raises(InputError, match="finite counterfactual answer scores"):
        answer_consistency_loss(factual, counterfactual.clone().fill_(float("nan")), torch.tensor(rows))


# -- through a tiny chat VLM ------------------------------------------------------------------
PROMPTS = ["Who is cooking?", "Is this person a doctor? Answer yes or no."]
OPTIONS = [["the man", "a woman", "unknown"], ["yes", "no!", "n/a"]]  # equal lengths: comparable scores


def _images(seeds: list[int]) -> list[Image.Image]:
    return [Image.fromarray(np.random.default_rng(s).integers(0, 256, (20 + s, 24, 3), dtype=np.uint8)) for s in seeds]


def _rms_norm_in_its_dtype(self, hidden: torch.Tensor) -> torch.Tensor:
    """Llama's RMSNorm as transformers writes it, less its cast to float32 (whatever the dtype): that rounding, 1e-7
    relative, would swamp the finite differences."""
    return self.weight * hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)


@pytest.fixture(scope="module")
def llava64():
    """The tiny LLaVA in float64 throughout (its RMSNorms too), its matrices drawn at std 0.2 (ten times
    transformers' initialisation), so that the image moves the answers: at the initial scale the loss is ~1e-5 and
    the gradients too small to check."""
    adapter = LlavaAdapter.tiny(seed=3)
    adapter.model.double()
    for module in adapter.model.modules():
        if type(module).__name__ == "LlamaRMSNorm":
            module.forward = types.MethodType(_rms_norm_in_its_dtype, module)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for weight in adapter.model.parameters():
            if weight.ndim == 2:
                weight.copy_(0.2 * torch.randn(weight.shape, generator=generator, dtype=weight.dtype))
    return adapter


def _checked_parameters(adapter) -> dict[str, tuple[torch.nn.Parameter, tuple[int, int]]]:
    """A few weights across the model (language model, vision tower, projector, head) and one entry of each."""
    model = adapter.model.model
    return {
        "language q_proj": (model.language_model.layers[0].self_attn.q_proj.weight, (1, 2)),
        "language v_proj": (model.language_model.layers[1].self_attn.v_proj.weight, (0, 5)),
        "vision q_proj": (model.vision_tower.encoder.layers[0].self_attn.q_proj.weight, (3, 1)),
        "projector": (model.multi_modal_projector.linear_1.weight, (2, 7)),
        "lm_head": (adapter.model.lm_head.weight, (80, 4)),
    }


@pytest.mark.parametrize(
    ("over", "divergence", "gradient"), [("options", "kl", "both"), ("next_token", "js", "counterfactual")]
)
def test_loss_gradients_through_a_tiny_chat_model_equal_float64_finite_differences(llava64, over, divergence, gradient):
    """Two questions, factual images 0-1, counterfactual images 2-4 (question 0 has two): the loss over the options'
    sequence log-probabilities (the cached scoring path) or the next token, its value against the hand formula on the
    model's scores, and its gradient at a few weights against central differences of the float64 loss (with the
    factual side held where only the counterfactual side takes the gradient)."""
    rows = [0, 0, 1]
    factual_images, counterfactual_images = _images([0, 1]), _images([2, 3, 4])

    def scores(images, prompts, options):
        if over == "options":
            return llava64.option_log_probs(images, prompts, options).log_prob
        return llava64.next_token_logits(images, prompts)

    def loss_value(fixed_factual: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
        factual = scores(factual_images, PROMPTS, OPTIONS) if fixed_factual is None else fixed_factual
        counterfactual = scores(counterfactual_images, [PROMPTS[r] for r in rows], [OPTIONS[r] for r in rows])
        hand = hand_loss(factual.detach().numpy(), counterfactual.detach().numpy(), rows, divergence)
        loss = answer_consistency_loss(factual, counterfactual, torch.tensor(rows), divergence, gradient)
        return loss, hand

    checked = _checked_parameters(llava64)
    llava64.model.zero_grad()
    loss, hand = loss_value()
    # a one-sided gradient is the loss's derivative with the other side held: difference the loss with it held
    held = scores(factual_images, PROMPTS, OPTIONS).detach() if gradient == "counterfactual" else None
    assert loss.dtype == torch.float64 and loss.item() > 1e-2
    assert abs(loss.item() - hand) < 1e-12
    loss.backward()
    step = 1e-5
    for name, (weight, index) in checked.items():
        original = weight.data[index].item()
        with torch.no_grad():
            weight.data[index] = original + step
            up = loss_value(held)[0].item()
            weight.data[index] = original - step
            down = loss_value(held)[0].item()
            weight.data[index] = original
        expected = (up - down) / (2 * step)
        actual = weight.grad[index].item()
        assert abs(actual - expected) < 1e-6 * abs(expected) + 1e-9, (name, actual, expected)  # 1e-6 relative
        assert abs(expected) > 1e-8, name  # the entry matters to the loss, so the check can fail


def test_the_differentiable_scoring_is_the_suites_scoring_with_gradients():
    adapter = LlavaAdapter.tiny()
    images = _images([0, 1])
    with_gradients = adapter.option_log_probs(images, PROMPTS, OPTIONS)
    assert with_gradients.log_prob.requires_grad
    scored = adapter.score_options(images, PROMPTS, OPTIONS)
    assert not scored.log_prob.requires_grad
    assert_close(with_gradients.log_prob.detach(), scored.log_prob, rtol=0, atol=0)
    logits = adapter.next_token_logits(images, PROMPTS)
    assert logits.requires_grad and logits.shape == (2, len(adapter.tokenizer))
