"""How the WEAT suite (:mod:`vlbias.suites.weat`) embeds its stimuli: a text, or a (caption, image) pair, as a
word, sentence or contextual embedding from a model's last-layer token states, or from an EMBED model's embeddings
(the module docstring of :mod:`vlbias.suites.weat` gives the choices)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.models.base import ModelAdapter
from vlbias.models.unseen_text import TRUNCATED, UnseenText, unseen_by


@dataclass(frozen=True)
class Stimulus:
    """One thing to embed: a text, its image (grounded) and how it is masked."""

    text: str
    image: Path | None = None
    mask_text: bool = False
    mask_person: bool = False


def word_pattern(words: Sequence[str]) -> re.Pattern | None:
    """Whole-word, case-insensitive alternation, longest first (``construction worker`` before ``worker``)."""
    if not words:
        return None
    alternation = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)", re.IGNORECASE)


class Encoder:
    """Embeds batches of :class:`Stimulus` with one adapter and one embedding kind; a batch shares its
    masking and whether it has images."""

    def __init__(
        self,
        adapter: ModelAdapter,
        kind: str,
        pooling: str,
        source: str,
        contextual: re.Pattern | None,
        person_object_ids: Sequence[int],
    ) -> None:
        self.adapter, self.kind, self.pooling, self.source = adapter, kind, pooling, source
        self.contextual, self.person_object_ids = contextual, list(person_object_ids)

    def text(self, stimulus: Stimulus) -> str:
        if not stimulus.mask_text:
            return stimulus.text
        return self.contextual.sub(self.adapter.tokenizer.mask_token, stimulus.text)

    def anchor(self, stimulus: Stimulus) -> int | None:
        """Character offset of the contextual word (or of the first mask) in the text fed to the model."""
        text = self.text(stimulus)
        if stimulus.mask_text:
            found = text.find(self.adapter.tokenizer.mask_token)
            return None if found < 0 else found
        match = self.contextual.search(text) if self.contextual is not None else None
        return None if match is None else match.start()

    def unseen(self, batch: list[Stimulus]) -> list[UnseenText | None]:
        """Why the model cannot see each stimulus's text as written (:func:`unseen_texts`); a contextual
        stimulus whose contextual word is past the truncation is skipped (there is nothing to measure)."""
        texts = [self.text(s) for s in batch]
        problems = unseen_by(self.adapter, texts)
        if self.kind != "contextual":
            return problems
        cut = [i for i, problem in enumerate(problems) if problem is not None and problem.kind == TRUNCATED]
        if cut:
            positions = self._positions([batch[i] for i in cut], [texts[i] for i in cut])
            for i, position in zip(cut, positions):
                if position is None:
                    problems[i] = UnseenText(TRUNCATED, f"{problems[i].reason}; the contextual word is cut", skip=True)
        return problems

    def __call__(self, batch: list[Stimulus]) -> Tensor:
        """Embeddings ``(len(batch), D)`` in float32 on CPU (call under :func:`measuring`)."""
        adapter, texts = self.adapter, [self.text(s) for s in batch]
        tokens = adapter.prepare_texts(texts)
        images = [s.image for s in batch]
        if self.source == "embed":
            embedded = adapter.embed_texts(tokens).float()
            if images[0] is not None:
                pictures = adapter.embed_images(adapter.prepare_images(images)).float()
                embedded = torch.cat([embedded, pictures], dim=1) / math.sqrt(2)
            return embedded.cpu()
        pixels = adapter.no_image(len(batch)) if images[0] is None else adapter.prepare_images(images)
        if batch[0].mask_person:
            ids = torch.tensor(self.person_object_ids, device=pixels.object_ids.device)
            pixels = pixels.zero_regions(torch.isin(pixels.object_ids, ids))
        states = adapter.token_states(pixels, tokens).float()  # (B, T, H)
        if self.kind == "contextual":
            positions = self._positions(batch, texts)
            if None in positions:  # Encoder.unseen skips these before embedding
                raise InputError(f"A contextual word of {texts[positions.index(None)]!r} was truncated away.")
            return states[torch.arange(len(batch)), torch.tensor(positions)].cpu()
        if self.pooling == "cls":
            return states[:, 0].cpu()
        mask = tokens["attention_mask"].unsqueeze(-1).to(states.dtype)  # (B, T, 1)
        return ((states * mask).sum(1) / mask.sum(1)).cpu()

    def _positions(self, batch: list[Stimulus], texts: list[str]) -> list[int | None]:
        """Index of the first word piece covering each stimulus's anchor character (``None`` where truncation
        cut it)."""
        adapter = self.adapter
        offsets = adapter.tokenizer(
            texts,
            return_offsets_mapping=True,
            padding=True,
            truncation=True,
            max_length=adapter.max_text_length,
        )["offset_mapping"]
        positions = []
        for stimulus, spans in zip(batch, offsets):
            anchor = self.anchor(stimulus)
            found = [t for t, (lo, hi) in enumerate(spans) if hi > lo and lo <= anchor < hi]
            positions.append(found[0] if found else None)
        return positions
