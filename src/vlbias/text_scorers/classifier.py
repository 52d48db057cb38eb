"""Any Hugging Face text classifier as a scorer (a toxicity model, a sentiment model, ...): the probability of one
label the user names, loaded from a hub id or a local folder through ``AutoModelForSequenceClassification`` and
``AutoTokenizer``. The probability is the softmax over the model's labels, or the label's own sigmoid when the
model's ``problem_type`` is ``multi_label_classification`` (as toxicity models with several independent labels
are trained); texts are cut to ``max_length`` tokens.

The score is named after the label (``toxic``); a model without that label is refused naming its labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from vlbias.errors import ConfigError
from vlbias.text_scorers.base import TextScorer
from vlbias.text_scorers.options import ClassifierOptions


class ClassifierScorer(TextScorer):
    """One score, named after ``options.label``: that label's probability (module docstring)."""

    def __init__(self, options: ClassifierOptions) -> None:
        self.options = options
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(options.model)
            model = AutoModelForSequenceClassification.from_pretrained(options.model)
        except (OSError, ValueError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(
                f"Text classifier {options.model!r} could not be loaded (expected a hub id or a folder that "
                f"AutoModelForSequenceClassification and AutoTokenizer load): {first}"
            ) from None
        labels = {str(name): int(index) for index, name in model.config.id2label.items()}
        if options.label not in labels:
            raise ConfigError(
                f"Text classifier {options.model!r} has no label {options.label!r}; its labels: "
                f"{', '.join(sorted(labels))}."
            )
        self.index = labels[options.label]
        self.multi_label = model.config.problem_type == "multi_label_classification"
        self.model = model.eval()
        self.score_names = (options.label,)

    def to(self, device: torch.device | str) -> ClassifierScorer:
        self.model.to(device)
        return self

    @torch.no_grad()
    def score(self, texts: Sequence[str]) -> Tensor:
        found = []
        for start in range(0, len(texts), self.options.batch_size):
            inputs = self.tokenizer(
                list(texts[start : start + self.options.batch_size]), padding=True, truncation=True,
                max_length=self.options.max_length, return_tensors="pt",
            ).to(self.model.device)  # fmt: skip
            logits = self.model(**inputs).logits.double()
            probabilities = logits.sigmoid() if self.multi_label else logits.softmax(dim=-1)
            found.append(probabilities[:, self.index].cpu())
        return torch.cat(found).reshape(len(texts), 1) if found else torch.empty(0, 1, dtype=torch.float64)

    @property
    def config(self) -> dict[str, object]:
        return {"multi_label": self.multi_label, "labels": sorted(map(str, self.model.config.id2label.values()))}
