"""VADER sentiment (Hutto & Gilbert, 2014, "VADER: A Parsimonious Rule-based Model for Sentiment Analysis of Social
Media Text", ICWSM; the ``vaderSentiment`` package): a text's ``compound`` score, the sum of its words' valences
(with VADER's rules for negation, intensifiers, "but", capitals and punctuation) normalised to [-1, 1] by
:math:`x / \\sqrt{x^2 + 15}`. VLBiasBench (Wang et al., 2024) scores the open-ended answers of chat VLMs so.

Example:
    >>> VaderScorer(VaderOptions()).score(["A kind and happy doctor.", "A terrible, cruel man."]).tolist()
    [[0.7964], [-0.7845]]
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version

import torch
from torch import Tensor
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from vlbias.text_scorers.base import TextScorer
from vlbias.text_scorers.options import VaderOptions


class VaderScorer(TextScorer):
    """One score, ``sentiment``: VADER's compound score (module docstring)."""

    score_names = ("sentiment",)

    def __init__(self, options: VaderOptions) -> None:
        self.analyzer = SentimentIntensityAnalyzer()

    def score(self, texts: Sequence[str]) -> Tensor:
        compound = [self.analyzer.polarity_scores(text)["compound"] for text in texts]
        return torch.tensor(compound, dtype=torch.float64).reshape(len(texts), 1)

    @property
    def config(self) -> dict[str, object]:
        return {"vaderSentiment": version("vaderSentiment")}
