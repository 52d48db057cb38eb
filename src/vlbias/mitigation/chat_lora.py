r"""LoRA (Hu et al., ICLR 2022) on a chat VLM through ``peft``, and the export that merges it into the weights.

A LoRA layer adds a low-rank update to a frozen weight :math:`W` ``(out, in)``: :math:`W x + \frac{\alpha}{r} B A x`
with :math:`A` ``(r, in)`` random and :math:`B` ``(out, r)`` zero at the start, so the adapted model starts as the
model. :func:`add_lora` puts LoRA layers into the adapter's model in place (``peft.get_peft_model``): the adapter
scores, generates and trains through them, and only :math:`A` and :math:`B` take gradients. The layers adapted are
:attr:`LoraOptions.target_modules`, by default the language model's attention projections, read from the model
(:func:`default_target_modules`: the linear layers inside the attention modules of ``model.get_decoder()``; ``q_proj,
k_proj, v_proj, o_proj`` in every registered family), not listed per checkpoint.

:func:`export_merged` folds :math:`\frac{\alpha}{r} B A` into :math:`W` (``merge_and_unload``) and writes the model and
its processor with ``save_pretrained``: a folder that ``AutoModelForImageTextToText`` and ``AutoProcessor`` load
alone, with no ``peft`` and no vlbias, written as a unit (:class:`~vlbias.atomic.OutputFolder`) with
:data:`MERGE_FILE` recording the LoRA settings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from jsonargparse.typing import PositiveFloat, PositiveInt
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import LoraLayer
from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

from vlbias.atomic import OutputFolder
from vlbias.errors import ConfigError, InputError
from vlbias.models.families.chat_vlm import ChatVLMAdapter
from vlbias.options import DropoutRate, check_options

#: The file in a merged export recording the LoRA settings that were merged (and marking the folder as one).
MERGE_FILE = "lora_merge.json"
MERGED_FOLDER = OutputFolder(
    "a merged LoRA export",
    MERGE_FILE,
    frozenset({MERGE_FILE, "*.json", "*.safetensors", "*.jinja", "*.model", "*.txt", "*.tiktoken"}),
)
#: The layer kinds ``peft`` can put LoRA on.
ADAPTABLE_LAYERS = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, nn.Conv3d, Conv1D)


@dataclass(frozen=True)
class LoraOptions:
    """The LoRA layers to add.

    Args:
        target_modules: the layers to adapt, each named as ``peft`` matches names: a module's full name, or its last
            parts after a dot (``"q_proj"`` is every ``q_proj``, the vision tower's too; ``"language_model.layers.0.
            self_attn.q_proj"`` one layer). ``None``: the language model's attention projections
            (:func:`default_target_modules`).
        rank: :math:`r`, the rank of the update.
        alpha: :math:`\\alpha`; the update is scaled by :math:`\\alpha / r`.
        dropout: the dropout probability on the LoRA branch's input, in [0, 1).
    """

    target_modules: tuple[str, ...] | None = None
    rank: PositiveInt = 8
    alpha: PositiveFloat = 16.0
    dropout: DropoutRate = 0.0

    def __post_init__(self) -> None:
        given = {item.name: getattr(self, item.name) for item in fields(self) if item.name != "target_modules"}
        for key, value in check_options(given, type(self), "LoRA option").items():
            object.__setattr__(self, key, value)
        if self.target_modules is not None:
            names = tuple(self.target_modules)
            if not names or not all(isinstance(name, str) and name for name in names):
                raise ConfigError(
                    f"Expected LoRA option `target_modules` to be module names (or null) but got {self.target_modules!r}."
                )
            object.__setattr__(self, "target_modules", names)


def default_target_modules(model: PreTrainedModel) -> tuple[str, ...]:
    """The full names of the linear layers inside the language model's attention modules: the modules of
    ``model.get_decoder()`` whose class name ends in ``Attention``. A model with none is refused."""
    decoder = model.get_decoder()
    prefix = next(name for name, module in model.named_modules() if module is decoder)
    found = tuple(
        f"{prefix}.{name}.{child}" if prefix else f"{name}.{child}"
        for name, module in decoder.named_modules()
        if type(module).__name__.endswith("Attention")
        for child, layer in module.named_children()
        if isinstance(layer, nn.Linear)
    )
    if not found:
        raise ConfigError(
            f"Found no attention projection in the language model ({type(decoder).__name__}) of "
            f"{type(model).__name__}; give LoRA option `target_modules`."
        )
    return found


def add_lora(adapter: ChatVLMAdapter, options: LoraOptions | None = None) -> PeftModel:
    """Put LoRA layers into ``adapter.model`` in place (see the module) and freeze every other weight; returns the
    ``peft`` model that wraps it (for :func:`export_merged`). Target names the model does not have, and a model that
    has LoRA layers already, are refused in one line."""
    options = options or LoraOptions()
    model = adapter.model
    if any(isinstance(module, LoraLayer) for module in model.modules()):
        raise InputError(f"Model {adapter.name!r} has LoRA layers already; expected a model without.")
    targets = options.target_modules or default_target_modules(model)
    _check_targets(adapter.name, model, targets)
    config = LoraConfig(
        r=options.rank,
        lora_alpha=options.alpha,
        lora_dropout=options.dropout,
        target_modules=list(targets),
        bias="none",
    )
    return get_peft_model(model, config)


def _check_targets(model_name: str, model: nn.Module, targets: tuple[str, ...]) -> None:
    """Refuse target names that match no layer LoRA can adapt, listing the names of those the model has."""
    layers = [name for name, module in model.named_modules() if isinstance(module, ADAPTABLE_LAYERS)]
    missing = [target for target in targets if not any(_matches(name, target) for name in layers)]
    if missing:
        short = sorted({name.rsplit(".", 1)[-1] for name in layers})
        raise ConfigError(
            f"LoRA target modules {missing} are not layers of model {model_name!r} that LoRA can adapt; its "
            f"linear, embedding and convolution layers are named: {', '.join(short)} (a name matches a full name "
            "or its last parts after a dot)."
        )


def _matches(name: str, target: str) -> bool:
    """``peft``'s match of a module ``name`` with a ``target`` name: equal, or ending in ``.target``."""
    return name == target or name.endswith(f".{target}")


def export_merged(adapter: ChatVLMAdapter, lora: PeftModel, out: str | Path) -> Path:
    """Merge ``lora``'s updates into ``adapter.model``'s weights (``merge_and_unload``: the adapter's model is left
    merged, without LoRA layers) and write the model and the processor to the folder ``out`` as a unit (see the
    module), with :data:`MERGE_FILE`; returns ``out``. ``lora`` must wrap the adapter's model."""
    if lora.get_base_model() is not adapter.model:
        raise InputError(f"The LoRA model given does not wrap model {adapter.name!r}'s weights; expected add_lora's.")
    config = lora.peft_config[lora.active_adapter]
    settings = {
        "rank": config.r,
        "alpha": config.lora_alpha,
        "dropout": config.lora_dropout,
        "target_modules": sorted(config.target_modules),
    }
    MERGED_FOLDER.check(out)
    lora.merge_and_unload()

    def write(folder: Path) -> None:
        adapter.save_pretrained(folder)
        (folder / MERGE_FILE).write_text(json.dumps({"model": adapter.name, "lora": settings}, indent=2))

    return MERGED_FOLDER.replace(out, write)
