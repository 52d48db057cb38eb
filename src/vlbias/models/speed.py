"""The speed switches that change a model in place without changing what it computes, each written once for the
training callback (:class:`vlbias.callbacks.TrainingSpeed`) and the throughput benchmark
(``scripts/bench_throughput.py``). Gradient checkpointing is each family's own
(:meth:`vlbias.models.base.ModelAdapter.enable_gradient_checkpointing`).
"""

from __future__ import annotations

import torch
from torch import nn

#: The class-name endings of the modules :func:`compile_layers` compiles: open_clip's ``ResidualAttentionBlock``,
#: timm's ``Block``, transformers' ``*Layer`` and ``*EncoderLayer``, ALBEF's ``ALBEFLayer``.
LAYER_NAME_ENDINGS = ("Layer", "Block")


def compile_layers(model: nn.Module) -> int:
    """Compile each transformer layer of ``model`` in place (regional compilation) and return how many: every
    module whose class name ends in one of :data:`LAYER_NAME_ENDINGS`, and none inside one.

    ``nn.Module.compile`` compiles a module's ``forward`` where it is called, keeps its parameters and state-dict
    keys (an export after training writes the same files), and every layer of a kind reuses one compiled graph.
    Compiling layers rather than the model: an adapter calls its model's parts (``encode_image`` and the like),
    not the model's ``forward``. A layer compiled already is left as it is, so a second call changes nothing."""
    compiled: list[str] = []
    for name, module in model.named_modules():
        if any(name.startswith(f"{outer}.") for outer in compiled):
            continue
        if type(module).__name__.endswith(LAYER_NAME_ENDINGS):
            if module._compiled_call_impl is None:
                module.compile()
            compiled.append(name)
    return len(compiled)


def to_channels_last(model: nn.Module) -> None:
    """``model``'s 4-D tensors in place in channels-last memory format (``(N, C, H, W)`` stored as
    ``(N, H, W, C)``); the others are left as they are.

    In a ViT the only 4-D tensor is the patch embedding's convolution weight ``(D, 3, P, P)``: everything after it
    is a sequence of tokens. A convolution whose weight is channels-last runs its channels-last kernel and
    converts its input itself (PyTorch picks the layout from the input or the weight), so pixels need no
    conversion where they are prepared. ALBEF's and FLAVA's patch embeddings are one matrix product over the
    flattened patches (:mod:`vlbias.models.patches`), which then reads the weight through a copy."""
    model.to(memory_format=torch.channels_last)
