r"""Activation steering: an attribute direction :math:`u` in a decoder layer's output (the residual stream),
estimated from counterfactual pairs, projected out at inference, :math:`h \mapsto h - (h \cdot u)\,u`.

**The papers.** Reading a concept as a direction of hidden states from contrasting inputs, and steering the model by
adding or removing it, is representation engineering (Zou et al., 2023, "Representation Engineering: A Top-Down
Approach to AI Transparency": the first principal component of the differences of paired inputs' hidden states
at a token, Sec. 3.1) and activation steering (Rimsky et al., ACL 2024, "Steering Llama 2 via Contrastive
Activation Addition": the mean difference over contrastive pairs). Removing a difference-of-means direction by
projection at inference, rather than adding a vector, is Arditi et al. (NeurIPS 2024, "Refusal in Language Models Is
Mediated by a Single Direction", directional ablation); Ratzlaff et al. (2024, "Debiasing Large Vision-Language
Models by Ablating Protected Attribute Representations") carry the projection to chat VLMs (LLaVA) to remove a
protected attribute while the model generates.

**Where vlbias differs.** (1) The pairs are *counterfactual images*: two images of one
:class:`~vlbias.data.counterfactual_questions.CounterfactualSet` whose people differ in the attribute, asked the same
question (Ratzlaff et al. contrast texts that mention the attribute with neutral ones; Zou et al. and Rimsky et al.
contrast texts); a pair's difference then holds the person's attribute and nothing of the question. (2) The direction
is projected out at *one* chosen layer (``layer``; default the middle one), where Arditi et al. and Ratzlaff et al.
ablate it at every layer: one hook, one direction, which exports as one small file. (3) The projection runs at every
position (``positions="all"``) or, as the reading is taken, from the prompt's last token on (``"last"``: the prompt's
last token and every answer token after it, scored or generated), never on the image and question tokens alone.

**Fitting** (:meth:`ActivationSteering.fit`). Each set's question is shown with each of its images in the prompt
the ``counterfactual_answers`` suite shows by default; the hidden state :math:`h` is the chosen layer's output at
the prompt's last token. A pair is two images of one set whose values of ``attribute`` (the set's ``group`` when
``None``) differ and whose other attributes agree. ``direction="mean_difference"``: the attribute has two values
:math:`v_0 < v_1` (sorted) over the sets, :math:`d = \frac{1}{P}\sum_p (h_{p,v_1} - h_{p,v_0})`;
``"principal_component"``: the first right singular vector of the :math:`(P, D)` matrix of pair differences,
uncentred (a pair's order is arbitrary, so its sign is, and the direction of largest
:math:`\sum_p (d_p \cdot u)^2` is the same for either), any number of values. :math:`u = d / |d|`, computed in
float64.

**Export** (:meth:`ActivationSteering.save`): a folder of ``steering.json`` (the hook's configuration: the model
family, its model type, hidden size and number of decoder layers, the layer, the positions, the options and what it
was fitted on) and ``direction.safetensors`` (``direction``, ``(D,)``), written as a unit
(:class:`vlbias.atomic.OutputFolder`); :func:`load_steering` puts it back onto a model of that family and size.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
from jsonargparse.typing import NonNegativeInt
from torch import Tensor, nn

from vlbias.atomic import OutputFolder
from vlbias.data.counterfactual_questions import CounterfactualImage, CounterfactualSet
from vlbias.data.images import load_image
from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.chat_debiaser import ChatDebiaser, DebiasedChatVLM, chat_model
from vlbias.models.base import ModelAdapter
from vlbias.models.families.chat_vlm import ChatVLMAdapter
from vlbias.models.loading import check_safetensors
from vlbias.suites.counterfactual_answers_options import CounterfactualAnswersOptions

CONFIG_FILE = "steering.json"
DIRECTION_FILE = "direction.safetensors"
STEERING_FOLDER = OutputFolder("a steering export", CONFIG_FILE, frozenset({CONFIG_FILE, DIRECTION_FILE}))
Positions = Literal["all", "last"]


@dataclass(frozen=True)
class ActivationSteeringOptions:
    """Options of :class:`ActivationSteering`.

    Args:
        layer: The decoder layer (0 is the first) whose output the direction is read from and projected out of;
            default the middle one (number of layers // 2).
        direction: mean_difference (the mean over pairs of the difference of their hidden states, two attribute
            values) or principal_component (the first principal component of the pair differences, uncentred).
        positions: all (every token) or last (the prompt's last token and every answer token after it).
        attribute: The attribute whose values make a pair (an attribute the sets' images name, e.g. gender);
            default the images' groups.
    """

    layer: NonNegativeInt | None = None
    direction: Literal["mean_difference", "principal_component"] = "mean_difference"
    positions: Positions = "all"
    attribute: str | None = None


def decoder_layers(adapter: ChatVLMAdapter) -> nn.ModuleList:
    """The language model's decoder layers of a chat model (``get_decoder().layers`` of every family)."""
    return adapter.model.get_decoder().layers


def checked_layer(adapter: ChatVLMAdapter, layer: int | None) -> int:
    """``layer`` (the middle one for ``None``), refused in one line naming the valid range when ``adapter`` has no
    such decoder layer."""
    count = len(decoder_layers(adapter))
    if layer is None:
        return count // 2
    if not 0 <= layer < count:
        raise ConfigError(
            f"Steering layer {layer} is out of range for {adapter.name}'s {count} decoder layers: expected a layer "
            f"in [0, {count - 1}]"
        )
    return layer


def hidden_size(adapter: ChatVLMAdapter) -> int:
    return adapter.model.config.get_text_config().hidden_size


def project_out(hidden: Tensor, direction: Tensor) -> Tensor:
    """``hidden`` ``(..., D)`` less its component along the unit ``direction`` ``(D,)``: :math:`h - (h \\cdot u)u`,
    computed in float32 at least (outside autocast: the suites measure a CUDA model under bf16 autocast, whose
    rounding of :math:`h \\cdot u` would leave a part of the direction), returned in ``hidden``'s dtype.

    Example:
        >>> project_out(torch.tensor([[3.0, 4.0]]), torch.tensor([1.0, 0.0]))
        tensor([[0., 4.]])
    """
    dtype = torch.promote_types(hidden.dtype, torch.float32)
    with torch.autocast(hidden.device.type, enabled=False):
        h, u = hidden.to(dtype), direction.to(device=hidden.device, dtype=dtype)
        return (h - (h @ u)[..., None] * u).to(hidden.dtype)


@contextlib.contextmanager
def projection_hook(layer: nn.Module, direction: Tensor, positions: Positions) -> Iterator[None]:
    """Inside, ``layer``'s output has ``direction`` projected out (:func:`project_out`): at every column with
    ``positions="all"``; with ``"last"``, at the last column of the first forward pass (a left-padded prompt's last
    token) and every column of the later ones (the answer tokens read after the cached prompt, or generated)."""
    first = [True]

    def hook(_module: nn.Module, _inputs: tuple, output: Tensor | tuple) -> Tensor | tuple:
        hidden = output[0] if isinstance(output, tuple) else output
        if positions == "last" and first[0]:
            hidden = torch.cat([hidden[:, :-1], project_out(hidden[:, -1:], direction)], dim=1)
        else:
            hidden = project_out(hidden, direction)
        first[0] = False
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = layer.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


class ActivationSteering(ChatDebiaser):
    """Project an attribute direction out of one decoder layer's output (module docstring). Fitted state:
    :attr:`direction` ``(D,)``, :attr:`layer`, :attr:`fitted_model` (the family it was fitted on, its model type,
    hidden size and number of layers) and :attr:`fitted_on` (sets, pairs, attribute values)."""

    name = "activation_steering"
    ACTS_ON = "hidden_states"
    OPTIONS = ActivationSteeringOptions
    FITS_ON_SETS = True

    def __init__(self, options: ActivationSteeringOptions | None = None) -> None:
        super().__init__(options)
        self.direction: Tensor | None = None
        self.layer: int | None = None
        self.fitted_model: dict[str, object] = {}
        self.fitted_on: dict[str, object] = {}

    def _fit(self, adapter: ChatVLMAdapter, sets: Sequence[CounterfactualSet]) -> None:
        self.layer = checked_layer(adapter, self.options.layer)
        differences, values = self._pair_differences(adapter, sets)
        if self.options.direction == "mean_difference":
            direction = differences.mean(dim=0)
        else:
            direction = torch.linalg.svd(differences, full_matrices=False).Vh[0]
            direction = direction * direction[direction.abs().argmax()].sign()  # a fixed sign: largest entry > 0
        if float(direction.norm()) <= torch.finfo(torch.float32).eps * float(differences.norm(dim=1).max()):
            raise InputError(
                f"The pairs' hidden states at layer {self.layer} do not differ (the prompt's last token there does not "
                "see how the images differ): no attribute direction to remove; expected sets of images that differ in "
                "the person shown, read at a layer that sees them"
            )
        self.direction = (direction / direction.norm()).float().cpu()
        self.fitted_model = model_description(adapter)
        self.fitted_on = {"n_sets": len(sets), "n_pairs": int(differences.shape[0]), "values": values,
                          "attribute": self.options.attribute or "group"}  # fmt: skip

    def _pair_differences(self, adapter: ChatVLMAdapter, sets: Sequence[CounterfactualSet]) -> tuple[Tensor, list]:
        """``(P, D)`` float64 hidden-state differences of the pairs of ``sets`` (module docstring) and the sorted
        attribute values; ``mean_difference`` pairs are oriented from the first value to the second."""
        rows = [(question_set, [self._value(question_set, image) for image in question_set.images])
                for question_set in sets]  # fmt: skip
        values = sorted({value for _, found in rows for value in found})
        if self.options.direction == "mean_difference" and len(values) != 2:
            raise InputError(
                f"Steering direction 'mean_difference' contrasts two values of {self.options.attribute or 'group'} "
                f"but the sets hold {len(values)}: {values}; give an `attribute` of two values, or direction "
                "'principal_component'"
            )
        differences = []
        for question_set, found in rows:
            states = self._states(adapter, question_set)
            for i in range(len(found)):
                for j in range(len(found)):
                    if found[i] > found[j] and self._counterfactual(question_set, i, j):
                        differences.append(states[i] - states[j])
        if not differences:
            raise InputError(
                f"No two images of one set differ in {self.options.attribute or 'group'} alone; expected sets of "
                "counterfactual images"
            )
        return torch.stack(differences), values

    def _value(self, question_set: CounterfactualSet, image: CounterfactualImage) -> str:
        if self.options.attribute is None:
            return image.group
        attributes = dict(image.attributes)
        if self.options.attribute not in attributes:
            raise InputError(
                f"Counterfactual set {question_set.name!r}: image {image.group!r} names no attribute "
                f"{self.options.attribute!r} (it names {sorted(attributes)}); expected `attribute` among those"
            )
        return attributes[self.options.attribute]

    def _counterfactual(self, question_set: CounterfactualSet, i: int, j: int) -> bool:
        """Whether images ``i`` and ``j`` agree on every attribute but the steered one."""
        kept = self.options.attribute
        first, second = (dict(question_set.images[k].attributes) for k in (i, j))
        return kept is None or all(first[name] == second.get(name) for name in first if name != kept)

    @torch.no_grad()
    def _states(self, adapter: ChatVLMAdapter, question_set: CounterfactualSet) -> Tensor:
        """``(n, D)`` float64: the chosen layer's output at the prompt's last token for each image of the set."""
        prompt = CounterfactualAnswersOptions().prompt(question_set.question, question_set.options)
        images = [load_image(image.image) for image in question_set.images]
        inputs = adapter.prompt_inputs(images, [prompt] * len(images), side="left")  # the last column: last token
        found = []
        handle = decoder_layers(adapter)[self.layer].register_forward_hook(
            lambda _m, _i, output: found.append((output[0] if isinstance(output, tuple) else output)[:, -1])
        )
        try:
            adapter.model(**inputs, **adapter.family.prompt_positions(inputs["attention_mask"]), logits_to_keep=1)
        finally:
            handle.remove()
        return found[0].double().cpu()

    # -- inference ----------------------------------------------------------------------
    def wrap(self, adapter: ModelAdapter) -> DebiasedChatVLM:
        """``adapter`` with the direction projected out; refused, in one line, unless it is a model of the family
        and size the direction was fitted on (prompts padded on the left for ``positions="last"``)."""
        adapter = chat_model(adapter, self.name)
        if self.direction is None:
            raise ConfigError("Chat debiaser 'activation_steering' is not fitted: call fit() or load_steering() first")
        found, fitted = model_description(adapter), self.fitted_model
        for key in ("family", "hidden_size"):
            if found[key] != fitted[key]:
                raise ConfigError(
                    f"The steering direction was fitted on {fitted['family']} ({key} {fitted[key]}) but model "
                    f"{adapter.name} has {key} {found[key]}; expected the model it was fitted on"
                )
        checked_layer(adapter, self.layer)
        if self.options.positions == "last" and adapter.padding_side != "left":
            raise ConfigError(
                "Steering at positions 'last' reads each prompt's last token in the last column: load the model with "
                "padding_side 'left'"
            )
        return super().wrap(adapter)

    def intervention(self, adapter: ChatVLMAdapter) -> contextlib.AbstractContextManager:
        return projection_hook(decoder_layers(adapter)[self.layer], self.direction, self.options.positions)

    def record(self) -> dict[str, object]:
        return {**super().record(), "layer": self.layer, "model": self.fitted_model, "fitted_on": self.fitted_on}

    # -- export ---------------------------------------------------------------------------
    def save(self, folder: str | Path) -> Path:
        """Write the export folder (module docstring) as a unit; returns it."""
        from safetensors.torch import save_file

        if self.direction is None:
            raise ConfigError("Chat debiaser 'activation_steering' is not fitted: nothing to save")
        config = {"method": self.name, **self.fitted_model, "layer": self.layer, "positions": self.options.positions,
                  "options": asdict(self.options), "fitted_on": self.fitted_on}  # fmt: skip

        def write(target: Path) -> None:
            save_file({"direction": self.direction.contiguous()}, str(target / DIRECTION_FILE))
            (target / CONFIG_FILE).write_text(json.dumps(config, indent=2, allow_nan=False))

        return STEERING_FOLDER.replace(folder, write)


def model_description(adapter: ChatVLMAdapter) -> dict[str, object]:
    """What a direction is tied to: the model's family (registered name), model type, hidden size, decoder layers."""
    return {"family": adapter.name, "model_type": adapter.model.config.model_type,
            "hidden_size": hidden_size(adapter), "num_layers": len(decoder_layers(adapter))}  # fmt: skip


def load_steering(folder: str | Path, adapter: ModelAdapter) -> DebiasedChatVLM:
    """The model ``adapter`` steered by the export :meth:`ActivationSteering.save` wrote to ``folder``; a folder that
    is not one, or a model of another family or size, is refused in one line."""
    from safetensors.torch import load_file

    folder = Path(folder)
    expected = "expected the folder ActivationSteering.save writes: steering.json and direction.safetensors"
    if not (folder / CONFIG_FILE).is_file() or not (folder / DIRECTION_FILE).is_file():
        raise InputError(f"{str(folder)!r} is not a steering export; {expected}")
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        options = ActivationSteeringOptions(**config["options"])
        model = {key: config[key] for key in ("family", "model_type", "hidden_size", "num_layers")}
        layer, fitted_on = int(config["layer"]), dict(config["fitted_on"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise InputError(
            f"Steering export {str(folder / CONFIG_FILE)!r} is not readable ({err!r}); {expected}"
        ) from err
    check_safetensors(folder / DIRECTION_FILE, f"Steering export {str(folder)!r}")
    direction = load_file(str(folder / DIRECTION_FILE)).get("direction")
    if direction is None or direction.shape != (model["hidden_size"],):
        raise InputError(
            f"{str(folder / DIRECTION_FILE)!r} holds no direction of {model['hidden_size']} values (steering.json's "
            "hidden_size)"
        )
    steering = ActivationSteering(options)
    steering.direction, steering.layer, steering.fitted_model, steering.fitted_on = direction, layer, model, fitted_on
    return steering.wrap(adapter)
