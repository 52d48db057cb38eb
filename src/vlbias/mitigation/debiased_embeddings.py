"""Embeddings of any EMBED adapter changed by a fitted post-hoc debiaser (:class:`DebiasedEmbeddings`, model
``debiased``).

The image and text embeddings are the debiaser's :meth:`~vlbias.mitigation.debiaser.Debiaser.transform_images` and
:meth:`~vlbias.mitigation.debiaser.Debiaser.transform_texts` of the inner adapter's; a method that reads the texts
themselves (``READS_TEXTS``, e.g. BendVLM's per-query prompts) gets the text of each row, remembered by
:meth:`DebiasedEmbeddings.prepare_texts`: ``embed_texts`` is given tokens only, and tokens cannot be decoded back to
the text the method rewrites (a word-level tokenizer maps unknown words to one id), so each prepared text is kept by
its tokens. Only the :data:`REMEMBERED_TEXTS` most recently prepared are kept (and always every text of the latest
``prepare_texts`` call), so a long run holds a bounded map; tokens prepared longer ago, or by another model, are
refused by row. A linear debiaser on a family that folds a linear map into its projection
weights (CLIP, open_clip; SigLIP's text tower) also exports the debiased model in the family's own format
(:meth:`DebiasedEmbeddings.export_linear`).

Example:
    >>> model = DebiasedEmbeddings.tiny()
    >>> model.embed_texts(model.prepare_texts(["a man is cooking"])).shape
    torch.Size([1, 64])
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from vlbias.errors import InputError
from vlbias.mitigation.debiaser import Debiaser, FitData, load_debiaser
from vlbias.mitigation.orth_proj import OrthProj
from vlbias.models.base import ModelAdapter, registered_capabilities
from vlbias.models.embedding import text_encoder
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.linear_export import checked_linear_maps
from vlbias.models.tiny_sizes import TinySizes
from vlbias.models.wrapped import TransformedEmbeddings

#: The file beside ``inner/`` and ``debiaser/`` that names the inner model and the embedding dimensions.
DEBIASED_FILE = "debiased_embeddings.json"
#: The folder beside ``inner/`` that holds the fitted debiaser (:meth:`~vlbias.mitigation.debiaser.Debiaser.save`).
DEBIASER_DIR = "debiaser"
#: How many prepared texts (distinct token rows) a debiased model whose debiaser reads texts remembers, the most
#: recently prepared; every text of the latest ``prepare_texts`` call is remembered whatever their number.
REMEMBERED_TEXTS = 10_000
#: The attribute prompts the tiny model's Orth-Proj is fitted on.
TINY_PROMPTS = {"man": ["a photo of a man"], "woman": ["a photo of a woman"]}


class DebiasedEmbeddings(TransformedEmbeddings):
    """An EMBED adapter whose embeddings are ``debiaser``'s transforms of ``inner``'s (module docstring).

    Preprocessing, tokenizer and device are the inner adapter's. ``save_pretrained(directory)`` writes the inner
    adapter to ``directory/inner``, the debiaser to ``directory/debiaser``
    (:meth:`~vlbias.mitigation.debiaser.Debiaser.save`) and :data:`DEBIASED_FILE`; :meth:`from_pretrained` reads all
    three back through the catalog and the debiaser registry (:class:`~vlbias.models.wrapped.WrappedAdapter`).
    """

    name = "debiased"
    capabilities = registered_capabilities(name)
    FIELDS_FILE = DEBIASED_FILE

    def __init__(self, inner: ModelAdapter, debiaser: Debiaser) -> None:
        super().__init__(inner)
        if not debiaser.fitted:
            raise InputError(f"Expected a fitted debiaser but {debiaser.name!r} is not fitted")
        self.debiaser = debiaser
        self._texts: OrderedDict[tuple[int, ...], set[str]] = OrderedDict()  # least recently prepared first
        debiaser.attach_text_encoder(text_encoder(inner))
        with torch.no_grad():
            full = inner.embed_texts(inner.prepare_texts(["a"]))
        self.inner_dim = full.shape[1]
        self.embedding_dim = debiaser.transform_texts(full, ["a"]).shape[1]

    def prepare_texts(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """The inner adapter's tokens; for a debiaser that reads texts, each row's text is remembered by its tokens
        (the :data:`REMEMBERED_TEXTS` most recently prepared token rows, and all of this call's)."""
        tokens = self.inner.prepare_texts(texts)
        if self.debiaser.READS_TEXTS:
            keys = _row_keys(tokens)
            for key, text in zip(keys, texts):
                self._texts.setdefault(key, set()).add(text)
                self._texts.move_to_end(key)
            while len(self._texts) > max(REMEMBERED_TEXTS, len(set(keys))):
                self._texts.popitem(last=False)
        return tokens

    def _texts_of(self, tokens: dict[str, Tensor]) -> list[str] | None:
        """The text of each row of ``tokens`` (for a debiaser that reads texts), from :meth:`prepare_texts`."""
        if not self.debiaser.READS_TEXTS:
            return None
        texts = []
        for row, key in enumerate(_row_keys(tokens)):
            known = self._texts.get(key, set())
            if len(known) != 1:
                problem = (
                    f"were not prepared by this model (or not among the {REMEMBERED_TEXTS} last prepared)"
                    if not known
                    else f"stand for several texts {sorted(known)}"
                )
                raise InputError(
                    f"Debiaser {self.debiaser.name!r} reads each query's text, but the tokens of row {row} {problem}"
                )
            texts.append(next(iter(known)))
        return texts

    def transform_images(self, embeddings: Tensor) -> Tensor:
        return self.debiaser.transform_images(embeddings)

    def transform_texts(self, embeddings: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        return self.debiaser.transform_texts(embeddings, self._texts_of(tokens))

    @property
    def no_linear_export(self) -> str | None:
        """Why :meth:`export_linear` cannot write this model: :meth:`linear_export_refusal` of no further change."""
        return self.linear_export_refusal(())

    def linear_export_refusal(self, modalities: Iterable[str] = ("image", "text")) -> str | None:
        """Why :meth:`export_linear` cannot write this model with a further change of ``modalities``: the inner
        family's reason for those and the debiaser's modalities, or a debiaser that changes a modality
        non-linearly; ``None`` when it can."""
        refusal = self.inner.linear_export_refusal(set(modalities) | self.debiaser.MODIFIES)
        if refusal is not None:
            return f"its inner model {self.inner.name!r} cannot: {refusal}"
        nonlinear = sorted(m for m in self.debiaser.MODIFIES if self.debiaser.linear_map(m) is None)
        if nonlinear:
            return f"debiaser {self.debiaser.name!r} changes the {' and '.join(nonlinear)} embeddings non-linearly"
        return None

    def check_linear_export(self, modalities: Iterable[str] = ("image", "text")) -> None:
        super().check_linear_export(modalities)
        self.inner.check_linear_export(set(modalities) | self.debiaser.MODIFIES)

    def export_linear(self, image_map: Tensor | None, text_map: Tensor | None, out_dir: str | Path) -> Path:
        """The inner model in its family's own format with the debiaser's linear maps, then ``image_map`` and
        ``text_map`` (``None``: nothing more), folded into its projections: ``export_linear(None, None, out_dir)``
        writes the debiased model itself, which the family's own loader reads with no vlbias code."""
        self.check_linear_export([m for m, given in (("image", image_map), ("text", text_map)) if given is not None])
        given = checked_linear_maps(image_map, text_map, self.embedding_dim)
        total = [after @ self._own_map(modality) for modality, after in zip(("image", "text"), given, strict=True)]
        return self.inner.export_linear(total[0], total[1], out_dir)

    def _own_map(self, modality: str) -> Tensor:
        """The debiaser's ``(embedding_dim, inner_dim)`` map of ``modality`` in float64 (the identity if unchanged)."""
        if modality not in self.debiaser.MODIFIES:
            return torch.eye(self.inner_dim, dtype=torch.float64)
        return self.debiaser.linear_map(modality).detach().cpu().double()

    def saved_fields(self) -> dict[str, object]:
        return {"inner_dim": self.inner_dim, "embedding_dim": self.embedding_dim}

    def _save_beside(self, directory: Path) -> None:
        self.debiaser.save(directory / DEBIASER_DIR)

    @classmethod
    def _from_saved(cls, directory: Path, fields: dict) -> DebiasedEmbeddings:
        model = cls(cls.load_inner(directory, fields), load_debiaser(directory / DEBIASER_DIR))
        written = (fields["inner_dim"], fields["embedding_dim"])
        if (model.inner_dim, model.embedding_dim) != written:
            raise InputError(
                f"{str(directory / DEBIASED_FILE)!r} was written for {written[0]}-dimensional inner embeddings "
                f"debiased to {written[1]} but the inner {fields['inner']!r} model and the debiaser give "
                f"{model.inner_dim} and {model.embedding_dim}"
            )
        return model

    @classmethod
    def tiny(cls, seed: int = 0, tokenizer: object | None = None, sizes: TinySizes | None = None) -> DebiasedEmbeddings:
        """A tiny random CLIP of ``sizes`` (:meth:`CLIPAdapter.tiny`; by default 64 dimensions) with Orth-Proj fitted
        on its own embeddings of :data:`TINY_PROMPTS`."""
        inner = CLIPAdapter.tiny(seed, tokenizer, sizes)
        with torch.no_grad():
            prompts = {value: inner.embed_texts(inner.prepare_texts(texts)) for value, texts in TINY_PROMPTS.items()}
        return cls(inner, OrthProj().fit(FitData(attribute_prompts=prompts)))


def _row_keys(tokens: dict[str, Tensor]) -> list[tuple[int, ...]]:
    """One key per row of ``tokens``: its ``input_ids`` without padding (where an ``attention_mask`` marks it), so a
    text has one key whatever the batch it is padded in."""
    ids = tokens["input_ids"].cpu()
    mask = tokens.get("attention_mask")
    if mask is None:
        return [tuple(row.tolist()) for row in ids]
    return [tuple(row[keep].tolist()) for row, keep in zip(ids, mask.cpu().bool())]
