"""How the chat-VLM question suites turn a model's scores of the options into an answer distribution, in one place.

Each prompt's options are scored (:class:`~vlbias.suites.chat_question_options.ChatQuestionOptions`'s ``scoring``):
by their texts' log-probabilities after the prompt (summed, or the mean per token), made a distribution by a softmax
over the prompt's options; or by their letters' probabilities as the answer's first token, renormalised over the
letters (the rest of the vocabulary left out).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from vlbias.data.images import ImageInput
from vlbias.models.base import ModelAdapter
from vlbias.suites.chat_question_options import LETTERS, Scoring


def answer_distributions(
    adapter: ModelAdapter,
    images: Sequence[ImageInput],
    prompts: Sequence[str],
    options: Sequence[Sequence[str]],
    scoring: Scoring,
) -> Tensor:
    """``(N, O)`` float64 distributions over the ``O`` options of each of the ``N`` prompts (the same ``O`` for all;
    ``options[i]`` in the order prompt ``i`` shows them), on the CPU."""
    if scoring == "first_token":
        probabilities = adapter.first_token_probs(images, prompts, list(LETTERS[: len(options[0])])).double().cpu()
        return probabilities / probabilities.sum(dim=1, keepdim=True)
    return getattr(adapter.score_options(images, prompts, options), scoring).double().cpu().softmax(dim=1)
