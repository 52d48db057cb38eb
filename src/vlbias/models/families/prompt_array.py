"""A CLIP whose texts are read after a learned prompt array (DebiasCLIP, Berg et al., 2022).

:class:`PromptArrayCLIP` wraps a :class:`~vlbias.models.families.clip.CLIPAdapter` and prepends ``K`` learned token
embeddings, the prompt array :math:`P` (``(K, H)``, ``H`` the text tower's width), to every text it embeds; images
are the inner CLIP's. :class:`vlbias.modules.PromptArrayDebiasing` trains the array
(:mod:`vlbias.objectives.prompt_array`) and exports this adapter, which ``vlbias measure --model prompt_array
--checkpoint DIR`` and the suites read like any other.

Where the prompts go (as the authors' released code places them): before the start-of-text token, carrying no
position embedding of their own (a learned vector absorbs one), while the text keeps CLIP's positions ``0 .. T-1``.
So the text tower reads ``[P_1 .. P_K, e(t_0) + p_0, .., e(t_{T-1}) + p_{T-1}]``, ``e`` and ``p`` its token and
position embeddings, under CLIP's causal mask, and pools at the end-of-text token, now at its index + ``K``.

How it is computed, with ``transformers``' own ``CLIPTextTransformer``: the ids are given ``K`` placeholder ids in
front (the start-of-text id, never the end-of-text one) and position ids ``0 .. K-1, 0 .. T-1``; a forward hook on
the text embeddings puts :math:`P` where the placeholders' embeddings were. The library's pooling then finds the
end-of-text token in the padded ids itself, by whichever of its two rules the config selects (the first
``eos_token_id``, or the largest id for configs with the legacy ``eos_token_id == 2``), at index + ``K``.
``tests/models/test_prompt_array_clip.py`` checks the pooled position against prompts that are the embeddings of real
tokens. The longest text is ``K`` tokens shorter than the inner CLIP's (:attr:`max_text_length`).

Example:
    >>> model = PromptArrayCLIP.tiny()
    >>> model.embed_texts(model.prepare_texts(["a man is cooking."])).shape
    torch.Size([1, 64])
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from vlbias.errors import InputError
from vlbias.models.base import Capability, ModelAdapter, registered_capabilities
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.tiny_sizes import TinySizes
from vlbias.models.wrapped import WrappedAdapter

#: The file beside the inner CLIP's directory that names the inner model and the array's shape.
PROMPT_ARRAY_FILE = "prompt_array.json"
#: The prompt array's weights (safetensors, one tensor ``prompts``).
PROMPTS_FILE = "prompt_array.safetensors"
#: The prompt tokens of the tiny instance.
TINY_PROMPTS = 2


class PromptArrayCLIP(WrappedAdapter):
    """An EMBED adapter: a CLIP whose texts are read after the prompt array ``prompts`` ``(K, H)`` (module
    docstring). ``save_pretrained(directory)`` writes the inner CLIP to ``directory/inner``, the array to
    :data:`PROMPTS_FILE` and :data:`PROMPT_ARRAY_FILE` (inner model, ``K``, ``H``); :meth:`from_pretrained` reads
    them back (:class:`~vlbias.models.wrapped.WrappedAdapter`).

    Args:
        inner: the CLIP (only ``transformers``' CLIP: another family's text tower is refused by name).
        prompts: ``(K, H)`` the prompt array, ``K >= 1`` and ``K`` below the text tower's positions, ``H`` its
            width; it becomes a parameter of this adapter.
    """

    name = "prompt_array"
    capabilities = registered_capabilities(name)
    FIELDS_FILE = PROMPT_ARRAY_FILE
    SAVED_FILES = (PROMPTS_FILE,)

    def __init__(self, inner: ModelAdapter, prompts: Tensor) -> None:
        if not isinstance(inner, CLIPAdapter):
            raise InputError(
                f"A prompt array is read by transformers' CLIP text tower (model 'clip') but got model "
                f"{getattr(inner, 'name', type(inner).__name__)!r}"
            )
        config = inner.model.config.text_config
        positions, width = config.max_position_embeddings, config.hidden_size
        if prompts.ndim != 2 or prompts.shape[1] != width or not 1 <= prompts.shape[0] < positions - 1:
            raise InputError(
                f"Expected a prompt array of shape (K, {width}) with 1 <= K < {positions - 1} (the text tower has "
                f"{positions} positions and a text needs 2) but got {tuple(prompts.shape)}"
            )
        super().__init__(inner)
        self.prompts = nn.Parameter(prompts.detach().clone().to(inner.device, torch.float32))
        self.max_text_length = inner.max_text_length - self.n_prompts

    @property
    def n_prompts(self) -> int:
        """``K``, the prompt tokens before every text."""
        return self.prompts.shape[0]

    @property
    def logit_scale(self) -> Tensor:
        return self.inner.logit_scale

    def embed_images(self, pixel_values: Tensor) -> Tensor:
        return self.inner.embed_images(pixel_values)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        with self._prompted():
            features = self.inner.model.get_text_features(**self._prompted_inputs(tokens)).pooler_output
        return F.normalize(features, dim=-1)  # (B, D)

    def direct_call(
        self, capability: Capability, pixel_values: Tensor, tokens: dict[str, Tensor]
    ) -> tuple[Tensor, Tensor]:
        """``CLIPModel.forward``'s ``image_embeds`` and ``text_embeds`` for EMBED, the prompts put in place by the
        same hook on the text embeddings."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        with self._prompted():
            out = self.inner.model(pixel_values=pixel_values, **self._prompted_inputs(tokens))
        return out.image_embeds, out.text_embeds

    def _prompted_inputs(self, tokens: dict[str, Tensor]) -> dict[str, Tensor]:
        """``input_ids``, ``attention_mask`` and ``position_ids`` ``(B, K + T)``: ``K`` placeholder ids (the
        start-of-text id, never the end-of-text one) in front, attended, at positions ``0 .. K-1``; the text at
        its own ``0 .. T-1``."""
        ids = tokens["input_ids"]
        batch, length = ids.shape
        placeholder = ids.new_full((batch, self.n_prompts), self.inner.model.config.text_config.bos_token_id)
        mask = tokens.get("attention_mask", torch.ones_like(ids))
        positions = torch.cat([torch.arange(self.n_prompts), torch.arange(length)]).to(ids.device)
        return {
            "input_ids": torch.cat([placeholder, ids], dim=1),
            "attention_mask": torch.cat([torch.ones_like(placeholder), mask], dim=1),
            "position_ids": positions.expand(batch, -1),
        }

    @contextmanager
    def _prompted(self) -> Iterator[None]:
        """While open, the text embeddings' first ``K`` rows are the prompt array (module docstring)."""

        def put_prompts(module: nn.Module, inputs: tuple, embeddings: Tensor) -> Tensor:
            prompts = self.prompts.to(embeddings.dtype).expand(embeddings.shape[0], -1, -1)
            return torch.cat([prompts, embeddings[:, self.n_prompts :]], dim=1)

        handle = self.inner.model.text_model.embeddings.register_forward_hook(put_prompts)
        try:
            yield
        finally:
            handle.remove()

    def saved_fields(self) -> dict[str, object]:
        return {"n_prompts": self.n_prompts, "hidden_size": self.prompts.shape[1]}

    def _save_beside(self, directory: Path) -> None:
        save_file({"prompts": self.prompts.detach().cpu().contiguous()}, str(directory / PROMPTS_FILE))

    @classmethod
    def _from_saved(cls, directory: Path, fields: dict) -> PromptArrayCLIP:
        """The prompt array checked against the fields before the inner CLIP is read."""
        if fields.get("inner") != CLIPAdapter.name:
            raise InputError(
                f"{str(directory / PROMPT_ARRAY_FILE)!r} names inner model {fields.get('inner')!r}; a prompt array "
                f"is read by model 'clip'"
            )
        prompts = load_file(str(directory / PROMPTS_FILE)).get("prompts")
        shape = [fields.get("n_prompts"), fields.get("hidden_size")]
        if prompts is None or list(prompts.shape) != shape:
            got = "no tensor 'prompts'" if prompts is None else f"shape {tuple(prompts.shape)}"
            raise InputError(f"{str(directory / PROMPTS_FILE)!r} should hold 'prompts' of shape {shape} but has {got}")
        return cls(cls.load_inner(directory, fields), prompts)

    @classmethod
    def tiny(cls, seed: int = 0, tokenizer: object | None = None, sizes: TinySizes | None = None) -> PromptArrayCLIP:
        """A tiny random CLIP of ``sizes`` (:meth:`CLIPAdapter.tiny`) with :data:`TINY_PROMPTS` prompt tokens drawn
        from N(0, 0.02^2) (a generator seeded with ``seed``)."""
        inner = CLIPAdapter.tiny(seed, tokenizer, sizes)
        width = inner.model.config.text_config.hidden_size
        generator = torch.Generator().manual_seed(seed)
        return cls(inner, 0.02 * torch.randn(TINY_PROMPTS, width, generator=generator))
