"""The model a training module trains (or a pruning run prunes): one :class:`ModelSpec`, declared and checked here."""

from __future__ import annotations

from dataclasses import dataclass

from vlbias.errors import ConfigError
from vlbias.models.base import Capability, ModelAdapter, require_capability
from vlbias.models.catalog import adapter_class
from vlbias.models.registry import check_model_options, load
from vlbias.models.vocab import word_tokenizer


@dataclass(frozen=True)
class ModelSpec:
    """Which adapter, from which weights: pretrained ones (``checkpoint``) or a tiny random instance (``tiny``).

    Every training module takes one as its ``model`` argument. In a LightningCLI config::

        model:
          class_path: vlbias.modules.ContrastivePretraining
          init_args:
            model: {name: clip, tiny: true}

    and on the command line ``--model.init_args.model.tiny true``. A field is set to null with the group as a
    mapping, ``--model.init_args.model '{tiny: true, checkpoint: null}'`` (what trains a tiny model from a config
    that names a checkpoint, such as ``retrieval_coco.yaml``); jsonargparse (4.53) reads the flag
    ``--model.init_args.model.checkpoint null`` as the string ``"None"``, which is taken as null too.

    Args:
        name: registered adapter name (``vlbias models`` lists them).
        checkpoint: hub id, URL or local path of pretrained weights; ``None`` with ``tiny``.
        tiny: build a small random instance instead of loading weights.
        tiny_sizes: sizes of the tiny instance by name (e.g. ``{image_size: 64, patch_size: 8}``), over the family's
            defaults: the fields of its :attr:`~vlbias.models.base.ModelAdapter.tiny_sizes`, declared in
            :mod:`vlbias.models.tiny_sizes`; needs ``tiny``.
        tiny_vocabulary: the words of the tiny instance's word-level tokenizer (``None``: the tiny models' default
            words, :func:`vlbias.models.vocab.tiny_tokenizer`); needs ``tiny``.
        options: the adapter's own loading options, e.g. ``{image_size: 384}`` to fine-tune ALBEF's pre-trained
            256-pixel checkpoint at the retrieval resolution (position embeddings interpolated).
        seed: seeds the random initialisation of a tiny model (and, in pruning, the MI estimator). ``vlbias fit``
            sets it from the run's one ``seed``, so a config gives the seed once.
    """

    name: str
    checkpoint: str | None = None
    tiny: bool = False
    tiny_sizes: dict[str, int] | None = None
    tiny_vocabulary: list[str] | None = None
    options: dict[str, object] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.checkpoint in ("None", "null"):  # jsonargparse's reading of `--...model.checkpoint null`
            object.__setattr__(self, "checkpoint", None)
        if self.tiny_vocabulary is not None and not self.tiny:
            raise ConfigError("`tiny_vocabulary` is the vocabulary of a tiny model; it needs `tiny: true`.")
        if self.tiny_sizes and not self.tiny:
            raise ConfigError("`tiny_sizes` are the sizes of a tiny model; it needs `tiny: true`.")
        given = {**(self.options or {}), **(self.tiny_sizes or {}), **({"seed": self.seed} if self.tiny else {})}
        check_model_options(self.name, given, self.tiny)  # the adapter's own options, refused by name

    def load(self, capability: Capability, purpose: str) -> ModelAdapter:
        """The adapter, on the CPU in eval mode, through :func:`~vlbias.models.registry.load` (a missing checkpoint
        is refused by name; the options were checked when the spec was made). A family without
        ``capability`` is refused before any weights are read, a loaded model without it (e.g. ALBEF from a
        retrieval checkpoint, which has no MLM head) after; ``purpose`` names the work in the refusal."""
        require_capability(adapter_class(self.name), capability, suite=purpose)
        options = dict(self.options or {})
        if self.tiny:
            options.update(self.tiny_sizes or {}, seed=self.seed)
            if self.tiny_vocabulary is not None:
                options["tokenizer"] = word_tokenizer(self.tiny_vocabulary)
        adapter = load(self.name, checkpoint=self.checkpoint, tiny=self.tiny, device="cpu", options=options or None)
        require_capability(adapter, capability, suite=purpose)
        return adapter


#: The training modules' default models: a tiny random CLIP (a dual encoder) and a tiny random ALBEF (with fusion).
TINY_CLIP = ModelSpec("clip", tiny=True)
TINY_ALBEF = ModelSpec("albef", tiny=True)
