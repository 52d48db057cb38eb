r"""What a debiasing method is in vlbias: fitted once on what the method needs, then a transform of image and/or text
embeddings (:class:`Debiaser`), with the inputs a method can be fitted on gathered in one object (:class:`FitData`).

Every post-hoc method of the literature fits this shape: Orth-Proj and Orth-Cal (Chuang et al., 2023), PRISM-mini
(Molahasani et al., 2025), RoboShot (Adila et al., 2024), SFID (Jung et al., 2024), BendVLM (Gerych et al., 2024),
CLIP-clip and MMBias pruning (Wang et al., 2021; Janghorbani & de Melo, 2023). A method

1. names the :class:`FitData` fields it needs (``NEEDS``) and the embeddings it changes (``MODIFIES``);
   :meth:`Debiaser.fit` refuses, by name, data that lacks a needed field, before any arithmetic;
2. is fitted by :meth:`Debiaser.fit`, which keeps its fitted state as tensors (:meth:`Debiaser.fitted_state`);
3. transforms embeddings with :meth:`Debiaser.transform_images` / :meth:`Debiaser.transform_texts` (an
   identity on a modality it does not change); the outputs are unit-normalised, as the inputs;
4. when its transform of a modality is :math:`z \mapsto M z / |M z|` for a fixed :math:`M`, gives :math:`M`
   (:meth:`Debiaser.linear_map`), which is what lets ``vlbias debias`` fold it into the model's projection weights
   and export a checkpoint the family's own loader reads;
5. saves and loads: :meth:`Debiaser.save` writes ``debiaser.json`` (method, options, fitted-state shapes, the
   fitted state that is not a tensor) and ``debiaser.safetensors`` (the fitted tensors) as one folder
   (:class:`vlbias.atomic.OutputFolder`); :func:`load_debiaser` reads it back through
   :mod:`vlbias.mitigation.registry`, and a method that embeds texts of its own is given the model's text encoder
   back by :meth:`Debiaser.attach_text_encoder`.

A method's settings are a frozen options dataclass (``OPTIONS``), declared once, checked in ``__post_init__``.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import ClassVar, Literal, Self

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.atomic import OutputFolder
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_embeddings
from vlbias.models.loading import check_safetensors

Modality = Literal["image", "text"]
STATE_FILE = "debiaser.safetensors"
CONFIG_FILE = "debiaser.json"
DEBIASER_FOLDER = OutputFolder("a debiaser's save", CONFIG_FILE, frozenset({CONFIG_FILE, STATE_FILE}))


@dataclass(frozen=True)
class FitData:
    """What a debiaser may be fitted on; each method reads the fields it names in ``NEEDS`` (all unit-normalised
    embeddings of one model, ``D`` dimensions, one row each).

    Attributes:
        reference_images: ``(n, D)`` embeddings of attribute-labelled reference images.
        reference_labels: the attribute value of each reference image (``n`` values, at least two distinct).
        reference_classes: the class (zero-shot label) of each reference image, for a method that keeps the
            dimensions that classify (MMBias Algorithm 1's labels :math:`L`).
        attribute_prompts: attribute value -> ``(m, D)`` embeddings of prompts that name that value ("a photo of a
            man", "a photo of a woman").
        prompt_pairs: ``(p, 2, D)`` embeddings of prompt pairs that differ only in the attribute ("a photo of a
            male doctor" / "a photo of a female doctor"), Orth-Cal's positive pairs.
        concept_prompts: ``(c, D)`` embeddings of the concepts (class or query prompts) the debiased model is
            used for.
        helpful_pairs: ``(h, 2, D)`` embeddings of text pairs whose difference is a helpful insight (RoboShot).
        encode_text: the model's text encoder (texts -> unit ``(len(texts), D)`` embeddings), for methods that
            embed texts they build themselves (BendVLM's attribute-augmented queries).
        attribute_words: attribute value -> the words that name it, for the texts such methods build.
        description: a short, JSON-able description of where the data came from (recorded in ``debias.json``).
    """

    reference_images: Tensor | None = None
    reference_labels: Sequence[Hashable] | None = None
    reference_classes: Sequence[Hashable] | None = None
    attribute_prompts: Mapping[Hashable, Tensor] | None = None
    prompt_pairs: Tensor | None = None
    concept_prompts: Tensor | None = None
    helpful_pairs: Tensor | None = None
    encode_text: Callable[[Sequence[str]], Tensor] | None = None
    attribute_words: Mapping[Hashable, Sequence[str]] | None = None
    description: Mapping[str, object] | None = None

    def missing(self, needs: Sequence[str]) -> list[str]:
        """The fields of ``needs`` that are not given."""
        return [name for name in needs if getattr(self, name) is None]

    def labelled_references(self) -> tuple[Tensor, list[Hashable]]:
        """The reference images and their labels, checked: aligned, and at least two distinct labels."""
        images = check_embeddings("reference_images", self.reference_images)
        labels = list(self.reference_labels)
        if len(labels) != images.shape[0]:
            raise InputError(
                f"Expected one reference label per reference image but got {len(labels)} labels for "
                f"{images.shape[0]} images"
            )
        if len(set(labels)) < 2:
            raise InputError(
                f"Expected reference labels of at least two groups but got only {sorted(set(map(str, labels)))}"
            )
        return images, labels


@dataclass(frozen=True)
class DebiaserOptions:
    """A method without settings; a method with settings declares its own frozen dataclass (``OPTIONS``)."""


class Debiaser(abc.ABC):
    """A fitted post-hoc debiasing method (see the module docstring for the contract).

    Subclasses set ``name``, ``NEEDS``, ``MODIFIES`` and ``OPTIONS``, implement :meth:`_fit` (which sets the fitted
    tensors through :meth:`_keep`) and the transforms of the modalities they change."""

    name: ClassVar[str]
    NEEDS: ClassVar[tuple[str, ...]]
    MODIFIES: ClassVar[frozenset[Modality]]
    OPTIONS: ClassVar[type] = DebiaserOptions
    #: Whether :meth:`transform_texts` reads the texts themselves (BendVLM's per-query prompts); an adapter that
    #: debiases embeddings (:class:`vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings`) then remembers each
    #: row's text.
    READS_TEXTS: ClassVar[bool] = False

    def __init__(self, options: object | None = None) -> None:
        self.options = self.OPTIONS() if options is None else options
        if not isinstance(self.options, self.OPTIONS):
            raise ConfigError(f"Debiaser {self.name!r} takes {self.OPTIONS.__name__} but got {type(options).__name__}")
        self._state: dict[str, Tensor] = {}
        self._info: dict[str, object] = {}  # fitted state that is not a tensor (JSON-able), saved with it

    @property
    def fitted(self) -> bool:
        return bool(self._state)

    def fit(self, data: FitData) -> Self:
        """Fit on ``data``; a field of ``NEEDS`` that ``data`` lacks is refused by name."""
        missing = data.missing(self.NEEDS)
        if missing:
            raise InputError(
                f"Debiaser {self.name!r} needs {', '.join(self.NEEDS)} to fit but got no {', '.join(missing)}"
            )
        self._state, self._info = {}, {}
        self._fit(data)
        return self

    @abc.abstractmethod
    def _fit(self, data: FitData) -> None:
        """Compute the fitted state from ``data`` (its ``NEEDS`` are given) and :meth:`_keep` each tensor."""

    def _keep(self, name: str, tensor: Tensor) -> None:
        """Keep ``tensor`` as fitted state ``name`` (saved and loaded with the debiaser)."""
        self._state[name] = tensor.detach()

    def _keep_info(self, name: str, value: object) -> None:
        """Keep the JSON-able ``value`` as fitted state ``name`` (saved in ``debiaser.json``, loaded with it)."""
        self._info[name] = value

    def attach_text_encoder(self, encode_text: Callable[[Sequence[str]], Tensor]) -> None:
        """Give a loaded debiaser the text encoder of the model it debiases. A method that embeds texts it builds
        itself (BendVLM's rewritten queries) needs it back after :func:`load_debiaser`, since an encoder is not
        saved; :class:`~vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings` attaches its inner model's. Other
        methods embed no text of their own and ignore it."""
        return None

    def fitted_state(self) -> dict[str, Tensor]:
        """The fitted tensors, by name (what :meth:`save` writes)."""
        self._check_fitted()
        return dict(self._state)

    def _check_fitted(self) -> None:
        if not self.fitted:
            raise ConfigError(f"Debiaser {self.name!r} is not fitted: call fit() or load a saved one first")

    def transform_images(self, embeddings: Tensor) -> Tensor:
        """Debiased ``(n, D)`` image embeddings (the embeddings themselves when the method changes no image)."""
        self._check_fitted()
        embeddings = check_embeddings("image embeddings", embeddings)
        return self._transform("image", embeddings, None) if "image" in self.MODIFIES else embeddings

    def transform_texts(self, embeddings: Tensor, texts: Sequence[str] | None = None) -> Tensor:
        """Debiased ``(n, D)`` text embeddings of ``texts`` (the texts are read only by methods that build
        per-query texts, such as BendVLM; the embeddings themselves when the method changes no text)."""
        self._check_fitted()
        embeddings = check_embeddings("text embeddings", embeddings)
        if texts is not None and len(texts) != embeddings.shape[0]:
            raise InputError(f"Expected one text per text embedding but got {len(texts)} for {embeddings.shape[0]}")
        return self._transform("text", embeddings, texts) if "text" in self.MODIFIES else embeddings

    def _transform(self, modality: Modality, embeddings: Tensor, texts: Sequence[str] | None) -> Tensor:
        """The transform of ``modality`` (one the method changes); by default its :meth:`linear_map`, re-normalised."""
        matrix = self.linear_map(modality)
        if matrix is None:
            raise NotImplementedError(f"{type(self).__name__} changes {modality} embeddings but defines no transform")
        return renormalised(f"{modality} embeddings", embeddings, embeddings @ matrix.to(embeddings).T)

    def linear_map(self, modality: Modality) -> Tensor | None:
        """``M`` with transform ``z -> M z / |M z|`` of ``modality`` (an identity for a modality the method does not
        change is ``None``), or ``None`` when the transform is not linear."""
        return None

    def save(self, folder: str | Path) -> Path:
        """Write ``folder`` (``debiaser.json`` and ``debiaser.safetensors``) as a unit; returns it."""
        from safetensors.torch import save_file

        state = {name: tensor.contiguous().cpu() for name, tensor in self.fitted_state().items()}
        config = {
            "method": self.name,
            "options": asdict(self.options),
            "state": {name: list(tensor.shape) for name, tensor in state.items()},
            "info": self._info,
        }

        def write(target: Path) -> None:
            save_file(state, str(target / STATE_FILE))
            (target / CONFIG_FILE).write_text(json.dumps(config, indent=2, allow_nan=False))

        return DEBIASER_FOLDER.replace(folder, write)


def load_debiaser(folder: str | Path) -> Debiaser:
    """The debiaser :meth:`Debiaser.save` wrote to ``folder``."""
    from safetensors.torch import load_file

    from vlbias.mitigation.registry import debiaser_class

    folder = Path(folder)
    config_path = folder / CONFIG_FILE
    if not config_path.is_file() or not (folder / STATE_FILE).is_file():
        raise InputError(f"{str(folder)!r} is not a saved debiaser: expected {CONFIG_FILE} and {STATE_FILE} in it")
    config = _saved_config(config_path)
    check_safetensors(folder / STATE_FILE, f"Saved debiaser {str(folder)!r}")
    cls = debiaser_class(config["method"])
    known = {field.name for field in fields(cls.OPTIONS)}
    unknown = sorted(set(config["options"]) - known)
    if unknown:
        raise InputError(f"{str(config_path)!r}: options {unknown} are not options of debiaser {cls.name!r}")
    debiaser = cls(cls.OPTIONS(**config["options"]))
    state = load_file(str(folder / STATE_FILE))
    if {name: list(t.shape) for name, t in state.items()} != config["state"]:
        raise InputError(f"{str(folder / STATE_FILE)!r} does not hold the state {CONFIG_FILE} lists")
    debiaser._state, debiaser._info = dict(state), dict(config.get("info", {}))
    return debiaser


def _saved_config(path: Path) -> dict:
    """The ``debiaser.json`` at ``path`` (:meth:`Debiaser.save`), or one line naming it and what it should hold:
    a JSON object with ``method`` (a debiaser's name), ``options`` and ``state`` (objects)."""
    expected = "expected the JSON object Debiaser.save writes: {method: NAME, options: {..}, state: {..}, info: {..}}"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"Saved debiaser file {str(path)!r} is not valid JSON ({err}); {expected}") from err
    if not isinstance(config, dict):
        raise InputError(f"Saved debiaser file {str(path)!r} holds a JSON {type(config).__name__}; {expected}")
    for key, kind in (("method", str), ("options", dict), ("state", dict), ("info", dict)):
        if not isinstance(config.get(key, {} if key == "info" else None), kind):
            found = f"{type(config[key]).__name__} {config[key]!r:.40}" if key in config else "nothing"
            raise InputError(f"Saved debiaser file {str(path)!r}: field `{key}` holds {found}; {expected}")
    return config


class RemovedSpanError(InputError):
    """Embeddings that a debiaser's transform leaves (almost) nothing of (:func:`renormalised`): they lie in the span
    it removes, as the very prompts it was fitted on do."""


def renormalised(what: str, embeddings: Tensor, transformed: Tensor) -> Tensor:
    """``transformed`` (the transform of unit ``embeddings``) re-normalised to unit rows; a row the transform left
    with (almost) no length has no direction to keep and is refused by index (:class:`RemovedSpanError`), never
    returned as noise."""
    ratio = transformed.norm(dim=1) / embeddings.norm(dim=1)
    lost = (ratio < torch.finfo(embeddings.dtype).eps ** 0.5).nonzero().squeeze(1)
    if lost.numel():
        raise RemovedSpanError(f"Rows {lost.tolist()} of the {what} lie in the removed span: nothing is left of them")
    return F.normalize(transformed, dim=-1)


def checked_pairs(name: str, pairs: Tensor) -> Tensor:
    """``pairs`` (a :class:`FitData` field of text pairs, ``(p, 2, D)``: ``prompt_pairs``, ``helpful_pairs``) unchanged,
    or one line naming the field: not of that shape, empty, or with a row :func:`check_embeddings` refuses."""
    if not isinstance(pairs, Tensor) or pairs.ndim != 3 or pairs.shape[1] != 2:
        shape = tuple(pairs.shape) if isinstance(pairs, Tensor) else type(pairs).__name__
        raise InputError(f"Expected `{name}` of shape (pairs, 2, D) but got {shape}")
    check_embeddings(name, pairs.reshape(-1, pairs.shape[-1]))
    return pairs


def attribute_values(prompts: Mapping[Hashable, Tensor]) -> list[Hashable]:
    """The values of ``attribute_prompts``, refused unless there are at least two: an attribute is what differs
    between its values, and the prompts of one value name no such difference (a method fitted on them removes, or
    contrasts against, what the value's prompts share, a photo of a person, not the attribute)."""
    values = list(prompts)
    if len(values) < 2:
        raise InputError(
            f"Expected attribute_prompts of at least two values (an attribute is what differs between its values) "
            f"but got {len(values)}: {[str(value) for value in values]}; give prompts of each value"
        )
    return values


def stacked_prompts(prompts: Mapping[Hashable, Tensor]) -> Tensor:
    """Every attribute prompt embedding, stacked ``(sum m, D)`` in the mapping's order (at least two values:
    :func:`attribute_values`)."""
    values = attribute_values(prompts)
    return torch.cat([check_embeddings(f"attribute_prompts[{value!r}]", prompts[value]) for value in values])
