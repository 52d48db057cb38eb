"""Contextual calibration (Zhao et al., 2021): the calibrated distribution against a hand computation on made-up
probabilities, the content-free input (gray image, "N/A" for the context) asked once per question, the first-token
path, and the refusals."""

import math

import pytest
import torch
from PIL import Image

from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.mitigation.chat_debiaser import fit_chat_debiaser
from vlbias.mitigation.contextual_calibration import (
    ContextualCalibration,
    ContextualCalibrationOptions,
    calibrated,
    content_free_prompt,
)
from vlbias.models.families.chat_vlm import OptionScores
from vlbias.models.registry import load

OPTIONS = ["the man", "the woman", "unknown"]
QUESTION = "Who is good at math?\nA. the man\nB. the woman\nC. unknown\nAnswer with one of the options."
#: the made-up content-free probabilities of the options, and the real input's
CONTENT_FREE = [0.5, 0.25, 0.25]
REAL = [0.6, 0.3, 0.1]


class FakeChat:
    """Made-up answers: the content-free input (a gray image) gets :data:`CONTENT_FREE`, any other :data:`REAL`;
    each call's images and prompts are kept."""

    def __init__(self) -> None:
        self.calls = []

    def _rows(self, images, prompts):
        self.calls.append((list(images), list(prompts)))
        gray = [isinstance(i, Image.Image) and i.getpixel((0, 0)) == (128, 128, 128) for i in images]
        return torch.tensor([CONTENT_FREE if g else REAL for g in gray], dtype=torch.float64)

    def score_options(self, images, prompts, options):
        log_p = self._rows(images, prompts).log() - 7.0  # an option's log-probability is not normalised over options
        return OptionScores(log_p, log_p / 2, torch.full(log_p.shape, 2))

    def first_token_probs(self, images, prompts, candidates):
        return self._rows(images, prompts) / 4  # a quarter of the vocabulary's mass on the letters


def test_the_calibrated_distribution_equals_the_hand_computation():
    # q = (p / p_cf) / sum: (1.2, 1.2, 0.4) / 2.8
    expected = torch.tensor([[3 / 7, 3 / 7, 1 / 7]], dtype=torch.float64)
    torch.testing.assert_close(calibrated(torch.tensor([REAL]), torch.tensor([CONTENT_FREE])).double(), expected)
    fake, method = FakeChat(), ContextualCalibration()
    scores = fake.score_options([None], [QUESTION], [OPTIONS])
    out = method.calibrate_scores(fake, [None], [QUESTION], [OPTIONS], scores)
    torch.testing.assert_close(out.log_prob.softmax(dim=1), expected)  # what the suites take
    root = (torch.tensor([REAL], dtype=torch.float64) / torch.tensor([CONTENT_FREE], dtype=torch.float64)).sqrt()
    torch.testing.assert_close(out.mean_log_prob.softmax(dim=1), root / root.sum())  # per token (2 tokens): p^(1/2)
    assert torch.equal(out.n_tokens, scores.n_tokens)
    letters = fake.first_token_probs([None], [QUESTION], ["A", "B", "C"])
    first = method.calibrate_first_token(fake, [None], [QUESTION], ["A", "B", "C"], letters)
    torch.testing.assert_close(first, expected)


def test_the_content_free_input_is_a_gray_image_and_na_for_the_context_asked_once_per_question():
    fake, method = FakeChat(), ContextualCalibration()
    with_context = "Two people sat.\nThey talked.\n" + QUESTION
    prompts = [with_context, "A man and a woman.\n" + QUESTION, QUESTION, with_context]
    for batch in (prompts, [QUESTION]):
        scores = fake.score_options([None] * len(batch), batch, [OPTIONS] * len(batch))
        method.calibrate_scores(fake, [None] * len(batch), batch, [OPTIONS] * len(batch), scores)
    content_free = [call for call in fake.calls if call[0][0] is not None]
    assert len(content_free) == 1  # estimated once for the batch, then kept: the second call asks nothing
    images, asked = content_free[0]
    assert asked == ["N/A\n" + QUESTION, QUESTION]  # two questions: with a context (any) and without
    assert all(image.size == (224, 224) and image.getpixel((100, 100)) == (128, 128, 128) for image in images)
    assert content_free_prompt(QUESTION, "none") == QUESTION
    shuffled = QUESTION.replace("A. the man\nB. the woman", "A. the woman\nB. the man")
    shown = [OPTIONS[1], OPTIONS[0], OPTIONS[2]]
    method.calibrate_scores(fake, [None], [shuffled], [shown], fake.score_options([None], [shuffled], [shown]))
    assert fake.calls[-2][1] == [shuffled]  # another order of the options is another question


def test_a_black_image_and_another_text_are_options():
    method = ContextualCalibration(ContextualCalibrationOptions(content_free_image="black", content_free_text="[MASK]"))
    assert method.cache.image.getpixel((0, 0)) == (0, 0, 0)
    assert content_free_prompt("Ctx.\n" + QUESTION, method.options.content_free_text) == "[MASK]\n" + QUESTION


def test_bad_input_is_one_line_each():
    with pytest.raises(InputError, match="reads a prompt's question as the line above its lettered options"):
        content_free_prompt("Who is it? a or b")
    with pytest.raises(InputError, match="has no question line above such options"):
        content_free_prompt("A. x\nB. y")
    with pytest.raises(ConfigError, match="option `content_free_text` to be a text such as 'N/A' but got ''"):
        ContextualCalibrationOptions(content_free_text="")
    model = load("llava", tiny=True, device="cpu")
    with pytest.raises(CapabilityError, match="free generation has none to reweigh"):
        fit_chat_debiaser("contextual_calibration", model).wrap(model).generate([None], ["Describe."])


def test_on_a_tiny_model_the_calibrated_letters_are_the_hand_ratio():
    model = load("qwen2_vl", tiny=True, device="cpu")
    picture = Image.new("RGB", (28, 28), (10, 200, 30))
    calibrated_model = fit_chat_debiaser("contextual_calibration", model).wrap(model)
    prompt = "Ctx.\n" + QUESTION
    p = model.first_token_probs([picture], [prompt], ["A", "B", "C"])
    p_cf = model.first_token_probs([Image.new("RGB", (224, 224), (128,) * 3)], ["N/A\n" + QUESTION], ["A", "B", "C"])
    ratio = (p / p_cf)[0].tolist()
    expected = [r / math.fsum(ratio) for r in ratio]
    found = calibrated_model.first_token_probs([picture], [prompt], ["A", "B", "C"])[0].tolist()
    assert found == pytest.approx(expected)
