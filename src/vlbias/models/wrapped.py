"""Adapters that wrap an inner EMBED adapter and change its embeddings (:class:`WrappedAdapter`): ``pruned``
(:class:`~vlbias.models.families.pruned.PrunedEmbeddings`), ``debiased``
(:class:`~vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings`) and ``prompt_array``
(:class:`~vlbias.models.families.prompt_array.PromptArrayCLIP`).

They save alike: ``save_pretrained(directory)`` writes the inner adapter, in its own format, to ``directory/inner``
(:data:`INNER_DIR`), what the wrapper adds beside it (a debiaser's folder, a prompt array's weights), and a JSON file
of fields (:attr:`WrappedAdapter.FIELDS_FILE`: ``inner``, the inner model's registered name, then the family's own
fields); :meth:`WrappedAdapter.from_pretrained` checks that the files are there, reads the fields, and rebuilds the
model from them, the inner adapter read back through the catalog (:meth:`WrappedAdapter.load_inner`). Each family
declares only its fields, what it saves beside the inner model, and how it is rebuilt. A wrapper whose embeddings
are a function of the inner adapter's (pruned, debiased) is a :class:`TransformedEmbeddings`: it states that
function once, for images and for texts.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Self

from torch import Tensor

from vlbias.errors import CapabilityError, InputError
from vlbias.models.base import Capability, ImageInput, ModelAdapter
from vlbias.models.catalog import adapter_class
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.loading import check_checkpoint

#: The folder of a saved wrapper that holds its inner adapter's own save.
INNER_DIR = "inner"


class WrappedAdapter(ModelAdapter, abc.ABC):
    """An EMBED adapter built on an inner EMBED adapter (``inner``), whose preprocessing, tokenizer and device it
    takes; its tiny instance wraps a tiny CLIP. Saved as the module docstring says.

    Subclasses set ``name`` and :attr:`FIELDS_FILE`, list in :attr:`SAVED_FILES` the other files they write beside
    the inner model (refused by name when missing), and implement :meth:`saved_fields`, :meth:`_from_saved` and,
    when they write more than the fields, :meth:`_save_beside`.
    """

    tiny_sizes = CLIPAdapter.tiny_sizes
    #: The JSON file of fields beside :data:`INNER_DIR`.
    FIELDS_FILE: ClassVar[str]
    #: The other files a save holds beside :data:`INNER_DIR` and :attr:`FIELDS_FILE`.
    SAVED_FILES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, inner: ModelAdapter) -> None:
        super().__init__()
        if Capability.EMBED not in inner.capabilities:
            raise CapabilityError(f"Expected an inner adapter with capability 'embed' but {inner.name!r} lacks it")
        self.inner = inner
        self.tokenizer = inner.tokenizer
        self.max_text_length = inner.max_text_length

    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        return self.inner.prepare_images(images)

    def enable_gradient_checkpointing(self) -> None:
        """The inner adapter's, whose layers are what the wrapper runs."""
        self.inner.enable_gradient_checkpointing()

    @property
    def export_family(self) -> str:
        """The inner model's family: a wrapper that exports writes its inner model in that family's format."""
        return self.inner.export_family

    @abc.abstractmethod
    def saved_fields(self) -> dict[str, object]:
        """The fields :attr:`FIELDS_FILE` holds besides ``inner`` (JSON-able)."""

    def _save_beside(self, directory: Path) -> None:
        """Write what the family saves beside the inner model and the fields (nothing by default)."""

    @classmethod
    @abc.abstractmethod
    def _from_saved(cls, directory: Path, fields: dict) -> Self:
        """The model saved in ``directory``, whose :attr:`FIELDS_FILE` holds ``fields`` (its inner adapter from
        :meth:`load_inner`); refuses, naming the file, a save that does not fit together."""

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        self.inner.save_pretrained(directory / INNER_DIR)
        self._save_beside(directory)
        fields = {"inner": self.inner.name, **self.saved_fields()}
        (directory / self.FIELDS_FILE).write_text(json.dumps(fields, indent=2))

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> Self:
        """Load a :meth:`save_pretrained` directory."""
        check_checkpoint(name_or_path, cls.name)
        directory = Path(name_or_path)
        for name in (cls.FIELDS_FILE, *cls.SAVED_FILES):
            if not (directory / name).is_file():
                raise InputError(f"Checkpoint {str(name_or_path)!r} for model {cls.name!r} has no {name}")
        return cls._from_saved(directory, json.loads((directory / cls.FIELDS_FILE).read_text()))

    @staticmethod
    def load_inner(directory: Path, fields: dict) -> ModelAdapter:
        """The inner adapter saved in ``directory/inner``, read by the family ``fields["inner"]`` names."""
        return adapter_class(fields["inner"]).from_pretrained(directory / INNER_DIR)


class TransformedEmbeddings(WrappedAdapter):
    """A wrapper whose image and text embeddings are the inner adapter's, changed by :meth:`transform_images` and
    :meth:`transform_texts` (the tokens given for the texts' sake): ``embed_images``, ``embed_texts`` and
    ``direct_call`` (the inner library model called directly) all apply them."""

    @abc.abstractmethod
    def transform_images(self, embeddings: Tensor) -> Tensor:
        """``(B, D)`` inner image embeddings -> this model's."""

    @abc.abstractmethod
    def transform_texts(self, embeddings: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        """``(B, D)`` inner text embeddings of ``tokens`` -> this model's."""

    def prepare_texts(self, texts: Sequence[str]) -> dict[str, Tensor]:
        return self.inner.prepare_texts(texts)

    def embed_images(self, pixel_values: Tensor) -> Tensor:
        return self.transform_images(self.inner.embed_images(pixel_values))

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        return self.transform_texts(self.inner.embed_texts(tokens), tokens)

    def direct_call(
        self, capability: Capability, pixel_values: Tensor, tokens: dict[str, Tensor]
    ) -> tuple[Tensor, Tensor]:
        """The inner adapter's ``direct_call`` (its library model called directly), transformed."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        images, texts = self.inner.direct_call(capability, pixel_values, tokens)
        return self.transform_images(images), self.transform_texts(texts, tokens)
