"""The EMBED adapter ``vlbias debias`` measures a fitted debiaser through (:func:`debiased_adapter`): the inner
adapter's embeddings, then the debiaser's transforms.

Suites take an adapter and call ``embed_texts(prepare_texts(texts))`` / ``embed_images(prepare_images(images))``,
so a debiaser is measured by the very suites that measured the model before it. :meth:`DebiasedView.prepare_texts`
keeps the texts beside their tokens (:class:`TextTokens`), so a method that reads the query texts (BendVLM) gets
them; tokens that reach :meth:`DebiasedView.embed_texts` without them (a suite that sliced the dict) go to the
transform without texts, and such a method refuses by name. The view is for measuring only: it does not save
(``vlbias debias`` writes the debiaser itself, :func:`~vlbias.mitigation.debias_outputs.write_debiased_model`).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from vlbias.errors import CapabilityError
from vlbias.mitigation.debiaser import Debiaser
from vlbias.models.base import Capability, ImageInput, ModelAdapter


class TextTokens(dict):
    """Token tensors (a ``dict``, as every adapter's ``prepare_texts`` returns) with the ``texts`` they encode."""

    texts: list[str]


class DebiasedView(ModelAdapter):
    """``inner``'s embeddings transformed by the fitted ``debiaser`` (module docstring); EMBED only."""

    name = "debiased_view"
    capabilities = frozenset({Capability.EMBED})

    def __init__(self, inner: ModelAdapter, debiaser: Debiaser) -> None:
        super().__init__()
        if Capability.EMBED not in inner.capabilities:
            raise CapabilityError(f"Expected an inner adapter with capability 'embed' but {inner.name!r} lacks it")
        self.inner, self.debiaser = inner, debiaser
        self.tokenizer, self.max_text_length = inner.tokenizer, inner.max_text_length

    @property
    def device(self):
        return self.inner.device

    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        return self.inner.prepare_images(images)

    def prepare_texts(self, texts: Sequence[str]) -> TextTokens:
        tokens = TextTokens(self.inner.prepare_texts(texts))
        tokens.texts = list(texts)
        return tokens

    def embed_images(self, pixel_values: Tensor) -> Tensor:
        embeddings = self.inner.embed_images(pixel_values)
        return self.debiaser.transform_images(embeddings.float()).to(embeddings)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        embeddings = self.inner.embed_texts(dict(tokens))
        texts = getattr(tokens, "texts", None)
        return self.debiaser.transform_texts(embeddings.float(), texts).to(embeddings)


def debiased_adapter(inner: ModelAdapter, debiaser: Debiaser) -> ModelAdapter:
    """The adapter whose embeddings are ``inner``'s debiased by the fitted ``debiaser``, which the suites measure
    after fitting: every measurement of a debiaser goes through here, so the ``debiased`` adapter, when it is part
    of vlbias, takes :class:`DebiasedView`'s place in this one line."""
    return DebiasedView(inner, debiaser)
