r"""Contextual calibration of a chat model's answer options (Zhao et al., ICML 2021, "Calibrate Before Use",
Sec. 5): divide out the model's preference for each answer that a *content-free* input reveals.

For one question with options :math:`1..O`, let :math:`\hat p` be the model's distribution over the options for
the real input and :math:`\hat p_{cf}` its distribution for a content-free input of the same question (both
normalised over the options). Zhao et al. set :math:`W = \mathrm{diag}(\hat p_{cf})^{-1}`, :math:`b = 0` in
:math:`\hat q = \mathrm{softmax}(W \hat p + b)`, so that the content-free input's answer becomes uniform; their code
takes the argmax of :math:`W \hat p`. vlbias *renormalises* :math:`W \hat p`:

.. math::  q_o = \frac{\hat p_o / \hat p_{cf,o}}{\sum_{o'} \hat p_{o'} / \hat p_{cf,o'}},

the same answer (argmax) as theirs, and a distribution proportional to :math:`\hat p / \hat p_{cf}` (a softmax of
:math:`W\hat p` would squash probabilities below 1 toward uniform and is not that).

**The content-free input** (one per question, estimated once and kept, :class:`ContentFreeCache`): the real image
replaced by a flat image of mid-gray (every pixel 128 of 255: the mean of the pixel range, which the processors'
normalisation maps close to zero; ``content_free_image``, or ``"black"``) of 224 x 224 pixels, and the question's
*context* replaced by ``"N/A"`` (``content_free_text``, Zhao et al.'s first content-free string). The context is
what the suites put above the question: the question is the line just above the lettered options (``A. ...``, as
:meth:`~vlbias.suites.chat_question_options.ChatQuestionOptions.format_prompt` writes them), the lines above it are
the context (``bias_qa``'s ``{context}``), and the question, options and instructions below are kept. A prompt
without lines above its question (``counterfactual_answers``; a ``bias_qa`` item without context) keeps its text:
the image is then the whole content. (A suite ``template`` that puts a line between the question and the options, or
the context below the question, is read by the same rule: its content-free prompt would keep the wrong lines.) A
question is its content-free prompt and its options in the order shown, so a
``bias_qa`` item's rotations are calibrated each on its own (the calibration removes a preference for a position
too, as Zhao et al.'s removes a recency bias).

**How the suites see it.** ``score_options`` returns calibrated scores :math:`s_o - \log \hat p_{cf,o}` (for the
summed and the per-token log-probability alike, each against its own content-free distribution): no longer an
option's log-probability, but their softmax over the options, what the suites take, is :math:`q`.
``first_token_probs`` returns :math:`q` over the candidates (renormalised: no longer a share of the whole
vocabulary). Free generation has no fixed set of answers to reweigh and is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from PIL import Image
from torch import Tensor

from vlbias.data.images import ImageInput
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.mitigation.chat_debiaser import ChatDebiaser, DebiasedChatVLM
from vlbias.models.base import ModelAdapter
from vlbias.models.families.chat_vlm import ChatVLMAdapter, OptionScores

#: The content-free image's side, in pixels (the processors resize it as any image).
CONTENT_FREE_SIDE = 224
#: The pixel value of each content-free image.
CONTENT_FREE_PIXELS = {"gray": (128, 128, 128), "black": (0, 0, 0)}


@dataclass(frozen=True)
class ContextualCalibrationOptions:
    """Options of :class:`ContextualCalibration`.

    Args:
        content_free_image: The image of the content-free input: gray (every pixel 128, the mean of the pixel
            range) or black, 224 x 224 pixels.
        content_free_text: What replaces the question's context (the prompt's lines above the question) in the
            content-free input.
    """

    content_free_image: Literal["gray", "black"] = "gray"
    content_free_text: str = "N/A"

    def __post_init__(self) -> None:
        if not isinstance(self.content_free_text, str) or not self.content_free_text.strip():
            raise ConfigError(
                f"Expected chat debiaser 'contextual_calibration' option `content_free_text` to be a text such as "
                f"'N/A' but got {self.content_free_text!r}"
            )


def content_free_prompt(prompt: str, text: str = "N/A") -> str:
    """``prompt`` with its context (the lines above the question, the question being the line above the lettered
    option ``A. ...``) replaced by ``text``; unchanged when there is no line above the question.

    Example:
        >>> content_free_prompt("Two people sat.\\nThey talked.\\nWho is it?\\nA. x\\nB. y\\nAnswer.")
        'N/A\\nWho is it?\\nA. x\\nB. y\\nAnswer.'
        >>> content_free_prompt("Who is it?\\nA. x\\nB. y")
        'Who is it?\\nA. x\\nB. y'
    """
    lines = prompt.split("\n")
    first_option = next((k for k, line in enumerate(lines) if line.startswith("A. ")), None)
    if not first_option:  # None: no lettered option; 0: no question above the options
        raise InputError(
            f"Contextual calibration reads a prompt's question as the line above its lettered options ('A. ...') "
            f"and prompt {prompt[:60]!r} has no question line above such options; expected a prompt of the chat "
            "question suites' templates"
        )
    if first_option == 1:
        return prompt
    return "\n".join([text, *lines[first_option - 1 :]])


def calibrated(probabilities: Tensor, content_free: Tensor) -> Tensor:
    """``(N, O)`` :math:`q = (p / p_{cf}) / \\sum (p / p_{cf})` of ``(N, O)`` option probabilities and their
    content-free ones (each row normalised or not: a row's scale cancels).

    Example:
        >>> calibrated(torch.tensor([[0.6, 0.3, 0.1]]), torch.tensor([[0.5, 0.25, 0.25]]))  # 1.2, 1.2, 0.4 over 2.8
        tensor([[0.4286, 0.4286, 0.1429]])
    """
    ratio = probabilities / content_free
    return ratio / ratio.sum(dim=1, keepdim=True)


class ContentFreeCache:
    """The content-free distributions of the questions seen (module docstring), each estimated once: a question
    is its content-free prompt and its options (or answer letters) in the order shown."""

    def __init__(self, options: ContextualCalibrationOptions) -> None:
        self.options = options
        side = (CONTENT_FREE_SIDE, CONTENT_FREE_SIDE)
        self.image = Image.new("RGB", side, CONTENT_FREE_PIXELS[options.content_free_image])
        self.scores: dict[tuple[str, tuple[str, ...]], tuple[Tensor, Tensor]] = {}
        self.first_tokens: dict[tuple[str, tuple[str, ...]], Tensor] = {}

    def _keys(self, prompts: Sequence[str], answers: Sequence[Sequence[str]]) -> list[tuple[str, tuple[str, ...]]]:
        text = self.options.content_free_text
        return [(content_free_prompt(p, text), tuple(a)) for p, a in zip(prompts, answers, strict=True)]

    def option_log_probs(
        self, adapter: ChatVLMAdapter, prompts: Sequence[str], options: Sequence[Sequence[str]]
    ) -> tuple[Tensor, Tensor]:
        """``(N, O)`` log :math:`\\hat p_{cf}` of each prompt's options, from the summed and from the per-token
        log-probabilities (each a log-softmax over the options)."""
        keys = self._keys(prompts, options)
        missing = list(dict.fromkeys(key for key in keys if key not in self.scores))
        if missing:
            found = adapter.score_options([self.image] * len(missing), [k[0] for k in missing], [k[1] for k in missing])
            for k, key in enumerate(missing):
                self.scores[key] = (found.log_prob[k].log_softmax(0), found.mean_log_prob[k].log_softmax(0))
        return tuple(torch.stack([self.scores[key][part] for key in keys]) for part in (0, 1))

    def first_token_probs(self, adapter: ChatVLMAdapter, prompts: Sequence[str], candidates: Sequence[str]) -> Tensor:
        """``(N, C)`` :math:`\\hat p_{cf}` of the candidates' first tokens after each prompt."""
        keys = self._keys(prompts, [candidates] * len(prompts))
        missing = list(dict.fromkeys(key for key in keys if key not in self.first_tokens))
        if missing:
            found = adapter.first_token_probs([self.image] * len(missing), [k[0] for k in missing], list(candidates))
            self.first_tokens.update(zip(missing, found, strict=True))
        return torch.stack([self.first_tokens[key] for key in keys])


class ContextualCalibration(ChatDebiaser):
    """Divide each question's answer probabilities by those of its content-free input (module docstring)."""

    name = "contextual_calibration"
    ACTS_ON = "answer_probabilities"
    OPTIONS = ContextualCalibrationOptions

    def __init__(self, options: ContextualCalibrationOptions | None = None) -> None:
        super().__init__(options)
        self.cache = ContentFreeCache(self.options)

    def wrap(self, adapter: ModelAdapter) -> DebiasedChatVLM:
        """The calibrated model, with a fresh :class:`ContentFreeCache` (content-free answers are the model's own)."""
        self.cache = ContentFreeCache(self.options)
        return super().wrap(adapter)

    def calibrate_scores(
        self,
        adapter: ChatVLMAdapter,
        images: Sequence[ImageInput],
        prompts: Sequence[str],
        options: Sequence[Sequence[str]],
        scores: OptionScores,
    ) -> OptionScores:
        total, mean = self.cache.option_log_probs(adapter, prompts, options)
        return OptionScores(
            scores.log_prob - total.to(scores.log_prob), scores.mean_log_prob - mean.to(scores.log_prob),
            scores.n_tokens,
        )  # fmt: skip

    def calibrate_first_token(
        self,
        adapter: ChatVLMAdapter,
        images: Sequence[ImageInput],
        prompts: Sequence[str],
        candidates: Sequence[str],
        probabilities: Tensor,
    ) -> Tensor:
        content_free = self.cache.first_token_probs(adapter, prompts, candidates)
        return calibrated(probabilities, content_free.to(probabilities))

    def check_generation(self) -> None:
        raise CapabilityError(
            "Chat debiaser 'contextual_calibration' reweighs a question's fixed answer options; free generation has "
            "none to reweigh: measure it with bias_qa or counterfactual_answers"
        )
