r"""What a training-free debiaser of a chat VLM is in vlbias (:class:`ChatDebiaser`), and the model it makes
(:class:`DebiasedChatVLM`): an adapter that the chat suites (``bias_qa``, ``counterfactual_answers``) measure
unchanged.

**Why an interface beside** :class:`~vlbias.mitigation.debiaser.Debiaser`. A ``Debiaser`` is fitted on
:class:`~vlbias.mitigation.debiaser.FitData` (unit embeddings of one model) and *is* a transform of ``(n, D)``
embeddings, a matrix when linear, which ``vlbias debias`` folds into a dual encoder's projection. A chat model has
no such embedding to transform: a chat debiaser acts on the *prompt* (an instruction put before the user's text),
on the *hidden states* of a decoder layer during the forward pass (a direction projected out), or on the *answer
probabilities* (the options' scores divided by those of a content-free input). Its fitting data, when it has any, are
counterfactual question sets read through the model itself, not embeddings; its "transform" needs the model's
forward pass and cannot be a matrix. Forcing it into ``Debiaser`` would leave every part of that contract (``NEEDS``
of :class:`FitData`, ``MODIFIES`` image or text, ``transform_images``, ``linear_map``) empty or false. What the two
share is kept alike: a method is a class with a ``name``, a frozen options dataclass ``OPTIONS`` declared once, a
:meth:`ChatDebiaser.fit`, registration by name in a lazy, torch-free table
(:mod:`vlbias.mitigation.chat_registry`), and a save that is one folder written atomically (steering's export).

**How a method acts.** :class:`DebiasedChatVLM` wraps a :class:`~vlbias.models.families.chat_vlm.ChatVLMAdapter`
and answers through it; the debiaser changes one of three things, each an identity by default:

1. :meth:`ChatDebiaser.edit_prompts`: the user prompts before the model reads them (instruction prefix);
2. :meth:`ChatDebiaser.intervention`: a context in which the model's forward passes run (activation steering's hook);
3. :meth:`ChatDebiaser.calibrate_scores` / :meth:`ChatDebiaser.calibrate_first_token`: the answer scores the model
   gave (contextual calibration).

The suites call the adapter's ``score_options`` and ``first_token_probs`` (:func:`vlbias.suites.chat_answers.
answer_distributions`) and ``device`` and ``capabilities``; the wrapper offers those, ``prompt_inputs`` and
``generate``, so a debiased model is measured exactly as the model it wraps. :func:`fit_chat_debiaser` builds and
fits a method by name: what a command that compares them calls.
"""

from __future__ import annotations

import abc
import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Literal, Self

from torch import Tensor

from vlbias.atomic import atomic_write
from vlbias.data.counterfactual_questions import CounterfactualSet
from vlbias.data.images import ImageInput
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.families.chat_vlm import ChatVLMAdapter, Generation, OptionScores
from vlbias.options import check_options

#: The file :meth:`ChatDebiaser.save` writes: what the method is, with every option.
RECORD_FILE = "chat_debiaser.json"

ActsOn = Literal["prompt", "hidden_states", "answer_probabilities"]


@dataclass(frozen=True)
class ChatDebiaserOptions:
    """A method without settings; a method with settings declares its own frozen dataclass (``OPTIONS``)."""


class ChatDebiaser(abc.ABC):
    """A training-free debiasing method of a chat VLM (see the module docstring for the contract).

    Subclasses set ``name``, ``ACTS_ON``, ``OPTIONS`` (``FITS_ON_SETS`` when :meth:`fit` reads counterfactual sets)
    and override the one of :meth:`edit_prompts`, :meth:`intervention`, :meth:`calibrate_scores` /
    :meth:`calibrate_first_token` through which they act."""

    name: ClassVar[str]
    ACTS_ON: ClassVar[ActsOn]
    OPTIONS: ClassVar[type] = ChatDebiaserOptions
    #: Whether :meth:`fit` estimates something from counterfactual question sets (activation steering).
    FITS_ON_SETS: ClassVar[bool] = False

    def __init__(self, options: object | None = None) -> None:
        self.options = self.OPTIONS() if options is None else options
        if not isinstance(self.options, self.OPTIONS):
            raise ConfigError(
                f"Chat debiaser {self.name!r} takes {self.OPTIONS.__name__} but got {type(options).__name__}"
            )

    def fit(self, adapter: ModelAdapter, sets: Sequence[CounterfactualSet] = ()) -> Self:
        """Fit on ``adapter`` (a chat model) and, for a method that reads them (``FITS_ON_SETS``), the counterfactual
        question ``sets``, each checked (:func:`checked_sets`); a method that fits nothing only checks the model."""
        chat_model(adapter, self.name)
        if self.FITS_ON_SETS:
            self._fit(adapter, checked_sets(sets))
        return self

    def _fit(self, adapter: ChatVLMAdapter, sets: Sequence[CounterfactualSet]) -> None:
        """Estimate the method's state from ``adapter`` and the checked ``sets`` (methods with ``FITS_ON_SETS``)."""
        raise NotImplementedError(f"{type(self).__name__} fits on sets but defines no _fit")

    def record(self) -> dict[str, object]:
        """What a results file records of the method: its name, what it acts on, and every option with its value
        (defaults included: the instruction prefix's text is recorded whether given or not)."""
        return {"method": self.name, "acts_on": self.ACTS_ON, "options": asdict(self.options)}

    def save(self, folder: str | Path) -> Path:
        """Write what the method is (:meth:`record`: its name, what it acts on, every option) to
        ``folder/chat_debiaser.json``, atomically; returns the folder. A method with a fitted state writes it too
        (activation steering's export)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.record(), indent=2, allow_nan=False).encode()
        atomic_write(folder / RECORD_FILE, lambda handle: handle.write(text))
        return folder

    def wrap(self, adapter: ModelAdapter) -> DebiasedChatVLM:
        """The debiased model: ``adapter`` answering through this method."""
        return DebiasedChatVLM(chat_model(adapter, self.name), self)

    # -- where a method acts (identities by default) ------------------------------------
    def edit_prompts(self, prompts: Sequence[str]) -> list[str]:
        """The user prompts the model reads instead of ``prompts``."""
        return list(prompts)

    def intervention(self, adapter: ChatVLMAdapter) -> contextlib.AbstractContextManager:
        """A context inside which ``adapter``'s forward passes of one call run (one prompt batch: its prefill, then
        its options or generated tokens)."""
        return contextlib.nullcontext()

    def calibrate_scores(
        self,
        adapter: ChatVLMAdapter,
        images: Sequence[ImageInput],
        prompts: Sequence[str],
        options: Sequence[Sequence[str]],
        scores: OptionScores,
    ) -> OptionScores:
        """The scores reported instead of ``adapter``'s ``scores`` of ``options`` after ``prompts``."""
        return scores

    def calibrate_first_token(
        self,
        adapter: ChatVLMAdapter,
        images: Sequence[ImageInput],
        prompts: Sequence[str],
        candidates: Sequence[str],
        probabilities: Tensor,
    ) -> Tensor:
        """The first-token probabilities reported instead of ``adapter``'s ``probabilities`` of ``candidates``."""
        return probabilities

    def check_generation(self) -> None:
        """Refuse free generation when the method cannot act on it (a calibration over a fixed set of answers)."""
        return None


class DebiasedChatVLM(ModelAdapter):
    """A chat model answering through a :class:`ChatDebiaser` (module docstring): the inner adapter's tokenizer,
    device and capability ANSWER, its prompts edited, its forward passes run inside the method's intervention and its
    scores calibrated by the method.

    Args:
        inner: the chat model (:class:`~vlbias.models.families.chat_vlm.ChatVLMAdapter`).
        debiaser: the fitted method.
    """

    def __init__(self, inner: ChatVLMAdapter, debiaser: ChatDebiaser) -> None:
        super().__init__()
        self.inner, self.debiaser = inner, debiaser
        self.name = f"{inner.name}+{debiaser.name}"
        self.capabilities = inner.capabilities
        self.tokenizer = inner.tokenizer
        self.max_text_length = inner.max_text_length

    def prompt_inputs(self, images: Sequence[ImageInput], prompts: Sequence[str], side=None) -> dict[str, Tensor]:
        """The inner model's inputs for the edited prompts (what the model reads)."""
        return self.inner.prompt_inputs(images, self.debiaser.edit_prompts(prompts), side)

    def score_options(
        self, images: Sequence[ImageInput], prompts: Sequence[str], options: Sequence[Sequence[str]]
    ) -> OptionScores:
        """:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.score_options` of the debiased model."""
        with self.debiaser.intervention(self.inner):
            scores = self.inner.score_options(images, self.debiaser.edit_prompts(prompts), options)
        return self.debiaser.calibrate_scores(self.inner, images, prompts, options, scores)

    def first_token_probs(
        self, images: Sequence[ImageInput], prompts: Sequence[str], candidates: Sequence[str]
    ) -> Tensor:
        """:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.first_token_probs` of the debiased model."""
        with self.debiaser.intervention(self.inner):
            probabilities = self.inner.first_token_probs(images, self.debiaser.edit_prompts(prompts), candidates)
        return self.debiaser.calibrate_first_token(self.inner, images, prompts, candidates, probabilities)

    def generate(self, images: Sequence[ImageInput], prompts: Sequence[str], **options) -> list[Generation]:
        """:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.generate` of the debiased model (refused by a
        method that cannot act on free text)."""
        self.debiaser.check_generation()
        with self.debiaser.intervention(self.inner):
            return self.inner.generate(images, self.debiaser.edit_prompts(prompts), **options)


def chat_model(adapter: ModelAdapter, method: str) -> ChatVLMAdapter:
    """``adapter`` when it is a chat model (capability ANSWER, :class:`ChatVLMAdapter`), else one line naming it."""
    if not isinstance(adapter, ChatVLMAdapter) or Capability.ANSWER not in adapter.capabilities:
        raise CapabilityError(
            f"Chat debiaser {method!r} debiases a chat model (capability 'answer', e.g. llava, qwen2_vl) but got "
            f"model {getattr(adapter, 'name', type(adapter).__name__)!r}"
        )
    return adapter


def checked_sets(sets: Sequence[CounterfactualSet]) -> list[CounterfactualSet]:
    """``sets`` as a list, refused in one line when there is none or a set has fewer than two images (a set's images
    differ only in the person shown, so a set of one image contrasts nothing)."""
    sets = list(sets)
    if not sets:
        raise InputError("Expected at least one counterfactual question set to fit on but got none")
    for question_set in sets:
        if len(question_set.images) < 2:
            raise InputError(
                f"Counterfactual set {question_set.name!r} has {len(question_set.images)} image; expected two or "
                "more images that differ only in the person shown"
            )
    return sets


def fit_chat_debiaser(
    name: str,
    adapter: ModelAdapter,
    sets: Sequence[CounterfactualSet] = (),
    options: Mapping[str, object] | object | None = None,
) -> ChatDebiaser:
    """The chat debiaser registered as ``name`` (:mod:`vlbias.mitigation.chat_registry`), its ``options`` (a mapping
    checked against its ``OPTIONS`` dataclass, or an instance of it) applied, fitted on ``adapter`` and ``sets``
    (read by activation steering only). What ``vlbias debias`` calls to fit a chat method; ``.wrap(adapter)`` of
    the result is the model the suites measure."""
    from vlbias.mitigation.chat_registry import chat_debiaser_class

    cls = chat_debiaser_class(name)  # an unknown name is refused with the registered ones
    if options is None or isinstance(options, Mapping):
        options = cls.OPTIONS(**check_options(dict(options or {}), cls.OPTIONS, f"chat debiaser {name!r} option"))
    return cls(options).fit(adapter, sets)
