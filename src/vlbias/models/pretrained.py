"""What the adapters around one Hugging Face ``transformers`` model share, so that each family's file holds only
what is its own.

* :class:`PretrainedAdapter`: the model (``self.model``, a ``PreTrainedModel`` of the family's
  ``model_class``) and its tokenizer; ``save_pretrained`` writes both, ``from_pretrained`` reads both back
  (keys checked strictly, :func:`~vlbias.models.loading.from_pretrained_strict`). The base of every adapter
  below and of :class:`~vlbias.models.regions.RegionAdapter` (VisualBERT, LXMERT).
* :class:`ImageTextAdapter`: with an :class:`~vlbias.models.preprocess.ImageTransform` saved to and read
  from ``preprocessor_config.json`` (CLIP, BLIP, FLAVA).
* :class:`TextOnlyAdapter`: a model that takes no image (BERT, the sentence encoders).
* :func:`tiny_layers`, :func:`tiny_vocabulary_ids`: the layer sizes and token ids of the tiny random models'
  ``transformers`` configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from torch import Tensor
from transformers import AutoTokenizer, PreTrainedModel

from vlbias.errors import InputError
from vlbias.models.base import ImageInput, ModelAdapter
from vlbias.models.loading import from_pretrained_strict
from vlbias.models.preprocess import ImageTransform
from vlbias.models.tiny_sizes import TinySizes


class PretrainedAdapter(ModelAdapter):
    """An adapter around one ``transformers`` model and its tokenizer.

    ``max_text_length`` is the text model's ``max_position_embeddings`` (of ``config.text_config`` in a model of
    several towers). Subclasses set ``model_class``, the class :meth:`from_pretrained` loads (through
    :meth:`_load_model`, which a family with its own loading rules overrides).
    """

    model_class: ClassVar[type[PreTrainedModel]]

    def __init__(self, model: PreTrainedModel, tokenizer) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_text_length = getattr(model.config, "text_config", model.config).max_position_embeddings

    def enable_gradient_checkpointing(self) -> None:
        """transformers' activation checkpointing of every layer of the model (:func:`checkpoint_layers`)."""
        checkpoint_layers(self, self.model)

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the model's weights and config and the tokenizer to ``directory``."""
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> PretrainedAdapter:
        """Load a hub id or a local ``save_pretrained`` directory: the weights (missing or unexpected keys are
        refused) and the tokenizer."""
        return cls(cls._load_model(name_or_path), AutoTokenizer.from_pretrained(str(name_or_path)))

    @classmethod
    def _load_model(cls, name_or_path: str | Path) -> PreTrainedModel:
        """``model_class`` from ``name_or_path``, its keys checked strictly."""
        return from_pretrained_strict(cls.model_class, name_or_path, cls.name)


class ImageTextAdapter(PretrainedAdapter):
    """A :class:`PretrainedAdapter` whose images go through ``transform``, saved with the model as
    ``preprocessor_config.json`` (:meth:`_save_transform`, :meth:`_load_transform`).

    Subclasses set ``size_key``, the field of ``preprocessor_config.json`` that holds the image size in the
    family's own image processor (``"crop_size"`` for CLIP, ``"size"`` for BLIP), and ``center_crop``
    (``False``: images are resized straight to the square, ignoring the aspect ratio).
    """

    size_key: ClassVar[str]
    center_crop: ClassVar[bool] = True

    def __init__(self, model: PreTrainedModel, tokenizer, transform: ImageTransform) -> None:
        super().__init__(model, tokenizer)
        self.transform = transform

    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        return self.transform(images).to(self.device)

    def save_pretrained(self, directory: str | Path) -> None:
        """Write weights, config, tokenizer and ``preprocessor_config.json`` to ``directory``."""
        super().save_pretrained(directory)
        self._save_transform(directory)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> ImageTextAdapter:
        """Load a hub id or a local ``save_pretrained`` directory: weights (keys checked strictly), tokenizer
        and ``preprocessor_config.json``."""
        model = cls._load_model(name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
        return cls(model, tokenizer, cls._load_transform(name_or_path, model))

    def _save_transform(self, directory: str | Path) -> None:
        """``preprocessor_config.json`` with the image size under ``size_key``, the mean and the std."""
        self.transform.save(directory, size_key=self.size_key)

    @classmethod
    def _load_transform(cls, name_or_path: str | Path, model: PreTrainedModel) -> ImageTransform:
        """The transform of ``name_or_path``'s ``preprocessor_config.json``; fields it lacks take the vision
        config's image size and CLIP's mean and std."""
        image_size = model.config.vision_config.image_size
        return ImageTransform.load(name_or_path, cls.size_key, image_size, center_crop=cls.center_crop)


class TextOnlyAdapter(PretrainedAdapter):
    """A :class:`PretrainedAdapter` of a model that takes no image: :meth:`no_image` is ``None`` and the
    capability methods require ``pixel_values is None`` (:meth:`check_no_image`). An image passed to it raises
    :class:`InputError` rather than being silently dropped, so a suite that means to condition on an image
    cannot quietly measure the text-only model instead."""

    text_only = True

    def prepare_images(self, images) -> Tensor:
        raise InputError(f"Model {self.name!r} is text-only and takes no images; use pixel_values=None.")

    def no_image(self, batch_size: int) -> None:
        """A text-only model: "no image" is ``None``."""
        return None

    def check_no_image(self, pixel_values: Tensor | None) -> None:
        """Refuse ``pixel_values`` other than ``None``."""
        if pixel_values is not None:
            raise InputError(
                f"Model {self.name!r} is text-only but got pixel_values of shape {tuple(pixel_values.shape)}; "
                f"pass pixel_values=None (model.no_image(batch_size))."
            )


def checkpoint_layers(adapter: ModelAdapter, *models: PreTrainedModel) -> None:
    """:meth:`~vlbias.models.base.ModelAdapter.enable_gradient_checkpointing` of ``adapter`` through
    transformers: ``activation_checkpointing_enable()`` of each of ``models`` (its layers checkpointed
    non-reentrantly in training mode), or none of them when one's class does not support it
    (``supports_gradient_checkpointing``: LXMERT's), a refusal naming the class."""
    unsupported = [type(model).__name__ for model in models if not model.supports_gradient_checkpointing]
    if unsupported:
        raise adapter._no_gradient_checkpointing(f"transformers' {unsupported[0]} does not support it")
    for model in models:
        model.activation_checkpointing_enable()  # non-reentrant: torch.utils.checkpoint with use_reentrant=False


def tiny_layers(sizes: TinySizes, intermediate_size: int) -> dict[str, int]:
    """The transformer sizes of a tiny random model, as ``transformers`` configs name them: ``sizes.hidden_size``,
    ``sizes.num_layers`` layers of 4 attention heads and a feed-forward width of ``intermediate_size``."""
    return dict(
        hidden_size=sizes.hidden_size,
        num_hidden_layers=sizes.num_layers,
        num_attention_heads=4,
        intermediate_size=intermediate_size,
    )


def tiny_vocabulary_ids(tokenizer, start_and_end: bool = False) -> dict[str, int]:
    """A tiny model's vocabulary size and padding id from its ``tokenizer``; with ``start_and_end`` also its
    first and last token ids (``bos_token_id`` = ``[CLS]``, ``eos_token_id`` = ``[SEP]``), for text towers that
    pool at the last token (CLIP) or decode (BLIP)."""
    ids = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    if start_and_end:
        ids.update(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    return ids
