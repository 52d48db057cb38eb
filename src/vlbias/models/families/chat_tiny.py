"""What each chat-VLM family has of its own, one :class:`ChatFamily` entry per family: the model types it loads,
how a prompt becomes text, the per-token inputs an answer's tokens carry, and its tiny random model.

The tiny models use the dimensions of transformers' own tests (2 layers, width 32, 4 heads, images of 28 px in
patches of 14), a byte-level tokenizer (:func:`~vlbias.models.byte_tokenizer.byte_level_tokenizer`) holding the
family's special tokens, the family's own processor classes, and a chat template in the family's format, so that
every path runs offline on a CPU in seconds. Real checkpoints bring their own processor and template.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from jsonargparse.typing import PositiveInt
from torch import Tensor

from vlbias.models.byte_tokenizer import byte_level_tokenizer
from vlbias.models.tiny_sizes import TinySizes


@dataclass(frozen=True)
class TinyChatSizes(TinySizes):
    """The sizes of a tiny chat VLM: ``hidden_size`` and ``num_layers`` for the language model and the vision
    tower alike.

    Args:
        image_size: side of the square images the vision tower reads, in pixels.
        patch_size: side of its square patches, in pixels (it divides ``image_size``).
    """

    image_size: PositiveInt = 28
    patch_size: PositiveInt = 14


def _text_config(sizes: TinyChatSizes, vocab_size: int, ids: Mapping[str, int], **more: object) -> dict:
    """The tiny language model's config fields: ``sizes``' width and depth, 4 heads (2 key/value heads)."""
    return {
        "vocab_size": vocab_size,
        "hidden_size": sizes.hidden_size,
        "intermediate_size": 37,
        "num_hidden_layers": sizes.num_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        **ids,
        **more,
    }


def _vision_config(sizes: TinyChatSizes, **more: object) -> dict:
    """A tiny ViT's config fields (CLIP's and SigLIP's names)."""
    return {
        "hidden_size": sizes.hidden_size,
        "intermediate_size": 37,
        "num_hidden_layers": sizes.num_layers,
        "num_attention_heads": 4,
        "image_size": sizes.image_size,
        "patch_size": sizes.patch_size,
        **more,
    }


def counted_positions(mask: Tensor) -> Tensor:
    """``(N, P)``: each column's count of real tokens before it in its row (a pad takes its neighbour's), so a
    sequence's positions are ``0, 1, ...`` over its real tokens wherever its pads are.

    Example:
        >>> counted_positions(torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0]]))
        tensor([[0, 0, 0, 1],
                [0, 1, 2, 2]])
    """
    return (mask.long().cumsum(dim=1) - 1).clamp(min=0)


@dataclass(frozen=True)
class ChatFamily:
    """One chat-VLM family's own parts.

    Args:
        description: The models and a checkpoint, and what the family does its own way (its adapter's docstring).
        model_types: The ``config.json`` ``model_type`` values the family loads (a folder of another is refused).
        special_tokens: The tiny tokenizer's special tokens (pad, bos, eos first; then image and chat markers).
        roles: The tiny tokenizer's keyword arguments naming them.
        chat_template: The tiny processor's chat template (Jinja), in the family's format; ``None``: the family
            takes a plain prompt (PaliGemma).
        build: ``(tokenizer, sizes, ids) -> (processor, config)`` of the tiny model; ``ids`` maps each special
            token to its id.
        answer_token_types: Per-token inputs that the answer's tokens carry, with their value (PaliGemma's
            ``token_type_ids`` are 1 on the suffix it predicts; Qwen's ``mm_token_type_ids`` 0 on text).
        answer_positions: ``(model, full_mask, length) -> position_ids`` of answer tokens read after a cached
            prompt of ``length`` columns (:func:`counted_positions` by default: each token's count of real tokens
            before it; Qwen's adds its multimodal RoPE's offset).
        model_positions_prompts: The model places a prompt's tokens itself from its attention mask (Qwen's
            multimodal RoPE); otherwise :meth:`prompt_positions` counts them.
        left_padding_only: Why the family's prompts must be padded on the left (``None``: either side gives the
            same scores).
    """

    description: str
    model_types: tuple[str, ...]
    special_tokens: tuple[str, ...]
    roles: Mapping[str, object]
    chat_template: str | None
    build: Callable[..., tuple[object, object]]
    answer_token_types: Mapping[str, int] = field(default_factory=dict)
    answer_positions: Callable[..., Tensor] = field(
        default=lambda _model, mask, length: counted_positions(mask)[:, length:]
    )
    model_positions_prompts: bool = False
    left_padding_only: str | None = None

    def render(self, processor, prompt: str) -> str:
        """The text the processor reads for one image and ``prompt``: the chat template of one user turn (the image
        first, then the prompt) with the generation prompt; a family without a template reads the image token, then
        the prompt (PaliGemma's processor puts ``<bos>`` after the image and ``\n`` after the prompt)."""
        if self.chat_template is None:
            return processor.image_token + prompt
        turn = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
        return processor.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)

    def option_inputs(self, model, ids: Tensor, full_mask: Tensor) -> dict[str, Tensor]:
        """The per-token inputs (and positions, :attr:`answer_positions`) of answer tokens ``ids`` ``(R, L)``
        read after a cached prompt; ``full_mask`` ``(R, P + L)`` is the prompt's attention mask and theirs."""
        inputs = {key: torch.full_like(ids, value) for key, value in self.answer_token_types.items()}
        inputs["position_ids"] = self.answer_positions(model, full_mask, full_mask.shape[1] - ids.shape[1])
        return inputs

    def prompt_positions(self, mask: Tensor) -> dict[str, Tensor]:
        """The ``position_ids`` of prompts with attention ``mask`` ``(N, P)`` (:func:`counted_positions`, so that
        a prompt's positions do not depend on its pads, left or right), or none where the model places them."""
        return {} if self.model_positions_prompts else {"position_ids": counted_positions(mask)}

    def joined_inputs(self, inputs: Mapping[str, Tensor], option: Tensor) -> dict[str, Tensor]:
        """The per-token inputs of one prompt's ``inputs`` followed by answer tokens ``option`` ``(1, L)``."""
        return {
            key: torch.cat([inputs[key], torch.full_like(option, value)], dim=1)
            for key, value in self.answer_token_types.items()
            if key in inputs
        }

    def tiny(self, sizes: TinyChatSizes) -> tuple[object, object]:
        """``(processor, config)`` of the tiny random model at ``sizes``."""
        tokenizer = byte_level_tokenizer(self.special_tokens, **self.roles)
        if self.chat_template is not None:
            tokenizer.chat_template = self.chat_template
        ids = {token: tokenizer.convert_tokens_to_ids(token) for token in self.special_tokens}
        return self.build(tokenizer, sizes, ids)


# -- LLaVA-1.5 ---------------------------------------------------------------------------
LLAVA_TEMPLATE = (
    "{% for message in messages %}{{ message['role'].upper() }}: {% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n{% else %}{{ part['text'] }}{% endif %}{% endfor %} "
    "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def _llava(tokenizer, sizes: TinyChatSizes, ids: Mapping[str, int]) -> tuple[object, object]:
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaProcessor

    side = {"height": sizes.image_size, "width": sizes.image_size}
    images = CLIPImageProcessor(size={"shortest_edge": sizes.image_size}, crop_size=side)
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        patch_size=sizes.patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's class token, dropped by the "default" strategy
        chat_template=LLAVA_TEMPLATE,
    )
    special = {"pad_token_id": ids["<pad>"], "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"]}
    config = LlavaConfig(
        vision_config={"model_type": "clip_vision_model", **_vision_config(sizes, projection_dim=sizes.hidden_size)},
        text_config={"model_type": "llama", **_text_config(sizes, len(tokenizer), special)},
        image_token_id=ids["<image>"],
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    return processor, config


LLAVA = ChatFamily(
    description="LLaVA-1.5 (``llava-hf/llava-1.5-7b-hf``).",
    model_types=("llava",),
    special_tokens=("<pad>", "<s>", "</s>", "<image>"),
    roles={
        "pad_token": "<pad>",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "extra_special_tokens": {"image_token": "<image>"},
    },
    chat_template=LLAVA_TEMPLATE,
    build=_llava,
)


# -- Qwen2-VL and Qwen2.5-VL -------------------------------------------------------------
QWEN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
QWEN_ROLES = {
    "pad_token": "<|endoftext|>",
    "eos_token": "<|im_end|>",
    "extra_special_tokens": {
        "image_token": "<|image_pad|>",
        "video_token": "<|video_pad|>",
        "vision_start_token": "<|vision_start|>",
        "vision_end_token": "<|vision_end|>",
    },
}


def _qwen_vl(config_class: str, vision: Mapping[str, object]) -> Callable[..., tuple[object, object]]:
    """The tiny builder of a Qwen-VL generation: its config class and its vision tower's fields."""

    def build(tokenizer, sizes: TinyChatSizes, ids: Mapping[str, int]) -> tuple[object, object]:
        import transformers
        from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

        merged = sizes.patch_size * 2  # a 2x2 block of patches is one image token
        pixels = {"min_pixels": merged * merged, "max_pixels": 4 * merged * merged}
        processor = Qwen2VLProcessor(
            image_processor=Qwen2VLImageProcessor(patch_size=sizes.patch_size, merge_size=2, **pixels),
            video_processor=Qwen2VLVideoProcessor(patch_size=sizes.patch_size, merge_size=2, **pixels),
            tokenizer=tokenizer,
            chat_template=QWEN_TEMPLATE,
        )
        head_dim = sizes.hidden_size // 4
        rope = {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [head_dim // 8, head_dim // 8, head_dim // 4],
        }
        special = {"pad_token_id": ids["<|endoftext|>"], "bos_token_id": None, "eos_token_id": ids["<|im_end|>"]}
        config = getattr(transformers, config_class)(
            text_config=_text_config(sizes, len(tokenizer), special, rope_parameters=rope),
            vision_config={**vision, "depth": sizes.num_layers, "num_heads": 4, "patch_size": sizes.patch_size},
            image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"],
        )
        return processor, config

    return build


def _qwen_answer_positions(model, full_mask: Tensor, length: int) -> Tensor:
    """Text positions after a Qwen-VL prompt: the count of real tokens before each (left padding skipped) plus the
    prompt's ``rope_deltas``, the amount by which its multimodal RoPE positions (Wang et al., 2024, Sec. 2.1) end
    short of its token count; the model stores them at the prompt's forward, one per prompt, and the options of a
    prompt repeat its row."""
    deltas = model.model.rope_deltas  # (N, 1)
    deltas = deltas.repeat_interleave(full_mask.shape[0] // deltas.shape[0], dim=0)
    return counted_positions(full_mask)[:, length:] + deltas


def _qwen_family(description: str, model_type: str, config_class: str, vision: Mapping[str, object]) -> ChatFamily:
    return ChatFamily(
        description=description,
        model_types=(model_type,),
        special_tokens=QWEN_TOKENS,
        roles=QWEN_ROLES,
        chat_template=QWEN_TEMPLATE,
        build=_qwen_vl(config_class, vision),
        answer_token_types={"mm_token_type_ids": 0},
        answer_positions=_qwen_answer_positions,
        model_positions_prompts=True,
    )


QWEN2_VL = _qwen_family(
    "Qwen2-VL (``Qwen/Qwen2-VL-2B-Instruct``).",
    "qwen2_vl",
    "Qwen2VLConfig",
    {"embed_dim": 32, "hidden_size": 32, "mlp_ratio": 2, "spatial_merge_size": 2},
)
QWEN2_5_VL = _qwen_family(
    "Qwen2.5-VL (``Qwen/Qwen2.5-VL-3B-Instruct``).",
    "qwen2_5_vl",
    "Qwen2_5_VLConfig",
    {"hidden_size": 32, "intermediate_size": 37, "out_hidden_size": 32, "spatial_merge_size": 2, "window_size": 56},
)


# -- PaliGemma (1 and 2) --------------------------------------------------------------------
def _paligemma(tokenizer, sizes: TinyChatSizes, ids: Mapping[str, int]) -> tuple[object, object]:
    from transformers import PaliGemmaConfig, PaliGemmaProcessor, SiglipImageProcessor

    side = {"height": sizes.image_size, "width": sizes.image_size}
    tokens = (sizes.image_size // sizes.patch_size) ** 2
    images = SiglipImageProcessor(size=side)
    images.image_seq_length = tokens  # the processor reads it from here, and saves it
    processor = PaliGemmaProcessor(image_processor=images, tokenizer=tokenizer)
    special = {"pad_token_id": ids["<pad>"], "bos_token_id": ids["<bos>"], "eos_token_id": ids["<eos>"]}
    config = PaliGemmaConfig(
        vision_config={"model_type": "siglip_vision_model", **_vision_config(sizes, projection_dim=sizes.hidden_size)},
        text_config={"model_type": "gemma", **_text_config(sizes, len(tokenizer), special, head_dim=8)},
        image_token_id=ids["<image>"],
        projection_dim=sizes.hidden_size,
    )
    config.vision_config.num_image_tokens = tokens
    return processor, config


PALIGEMMA = ChatFamily(
    description=(
        "PaliGemma and PaliGemma 2 (``google/paligemma2-3b-mix-224``): a plain prompt, no chat template (the "
        "processor puts the image tokens and ``<bos>`` first and ``\\n`` after the prompt); the prefix (image and "
        "prompt) attends both ways, the answer causally (``token_type_ids`` 1)."
    ),
    model_types=("paligemma",),
    special_tokens=("<pad>", "<bos>", "<eos>", "<image>"),
    roles={
        "pad_token": "<pad>",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "extra_special_tokens": {"image_token": "<image>"},
    },
    chat_template=None,
    build=_paligemma,
    answer_token_types={"token_type_ids": 1},
)


# -- Gemma 3 ------------------------------------------------------------------------------
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<start_of_turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<start_of_image>{% else %}{{ part['text'] }}{% endif %}{% endfor %}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def _gemma3(tokenizer, sizes: TinyChatSizes, ids: Mapping[str, int]) -> tuple[object, object]:
    from transformers import Gemma3Config, Gemma3ImageProcessor, Gemma3Processor

    tokens = (sizes.image_size // sizes.patch_size) ** 2
    side = {"height": sizes.image_size, "width": sizes.image_size}
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size=side, do_pan_and_scan=False),
        tokenizer=tokenizer,
        chat_template=GEMMA3_TEMPLATE,
        image_seq_length=tokens,
    )
    special = {"pad_token_id": ids["<pad>"], "bos_token_id": ids["<bos>"], "eos_token_id": ids["<end_of_turn>"]}
    config = Gemma3Config(
        text_config=_text_config(sizes, len(tokenizer), special, head_dim=8, sliding_window=16),
        vision_config=_vision_config(sizes),
        mm_tokens_per_image=tokens,
        boi_token_id=ids["<start_of_image>"],
        eoi_token_id=ids["<end_of_image>"],
        image_token_id=ids["<image_soft_token>"],
    )
    return processor, config


GEMMA3 = ChatFamily(
    description=(
        "Gemma 3 (``google/gemma-3-4b-it``): the image's tokens attend to each other both ways (``token_type_ids`` "
        "1 on them, 0 on text and answers)."
    ),
    model_types=("gemma3",),
    special_tokens=(
        "<pad>",
        "<bos>",
        "<eos>",
        "<start_of_turn>",
        "<end_of_turn>",
        "<start_of_image>",
        "<end_of_image>",
        "<image_soft_token>",
    ),
    roles={
        "pad_token": "<pad>",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "extra_special_tokens": {
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
    },
    chat_template=GEMMA3_TEMPLATE,
    build=_gemma3,
    left_padding_only=(
        "its sliding-window layers attend to the last columns of the cache, pads among them, so an answer after a "
        "right-padded prompt would see fewer of the prompt's tokens"
    ),
    answer_token_types={"token_type_ids": 0},
)


# -- Idefics3 and SmolVLM ---------------------------------------------------------------------
IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}:"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)


def _idefics3(smolvlm: bool) -> Callable[..., tuple[object, object]]:
    """The tiny builder of Idefics3 (``smolvlm``: of SmolVLM, the same model under its own classes)."""

    def build(tokenizer, sizes: TinyChatSizes, ids: Mapping[str, int]) -> tuple[object, object]:
        import transformers

        prefix = "SmolVLM" if smolvlm else "Idefics3"
        edge = {"longest_edge": sizes.image_size}
        images = getattr(transformers, f"{prefix}ImageProcessor")(
            do_image_splitting=False, size=edge, max_image_size=edge
        )
        scale = 2  # pixel shuffle: a 2x2 block of patches is one image token
        tokens = (sizes.image_size // sizes.patch_size) ** 2 // scale**2
        videos = {"video_processor": transformers.SmolVLMVideoProcessor()} if smolvlm else {}
        processor = getattr(transformers, f"{prefix}Processor")(
            image_processor=images, tokenizer=tokenizer, image_seq_len=tokens, chat_template=IDEFICS3_TEMPLATE, **videos
        )
        special = {"pad_token_id": ids["<|endoftext|>"], "bos_token_id": ids["<|im_start|>"],
                   "eos_token_id": ids["<end_of_utterance>"]}  # fmt: skip
        config = getattr(transformers, f"{prefix}Config")(
            text_config={"model_type": "llama", **_text_config(sizes, len(tokenizer), special)},
            vision_config=_vision_config(sizes),
            scale_factor=scale,
            image_token_id=ids["<image>"],
            pad_token_id=ids["<|endoftext|>"],
        )
        return processor, config

    return build


def _idefics3_family(description: str, model_type: str, smolvlm: bool) -> ChatFamily:
    return ChatFamily(
        description=description,
        model_types=(model_type,),
        special_tokens=(
            "<|endoftext|>",
            "<|im_start|>",
            "<end_of_utterance>",
            "<fake_token_around_image>",
            "<image>",
            "<global-img>",
        ),  # fmt: skip
        roles={"pad_token": "<|endoftext|>", "bos_token": "<|im_start|>", "eos_token": "<end_of_utterance>"},
        chat_template=IDEFICS3_TEMPLATE,
        build=_idefics3(smolvlm),
    )


IDEFICS3 = _idefics3_family("Idefics3 (``HuggingFaceM4/Idefics3-8B-Llama3``).", "idefics3", smolvlm=False)
SMOLVLM = _idefics3_family("SmolVLM and SmolVLM2 (``HuggingFaceTB/SmolVLM2-2.2B-Instruct``).", "smolvlm", smolvlm=True)


# -- InternVL (2.5 and 3, the transformers-native checkpoints) ---------------------------------------
INTERNVL_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<IMG_CONTEXT>\n{% else %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _internvl(tokenizer, sizes: TinyChatSizes, ids: Mapping[str, int]) -> tuple[object, object]:
    from transformers import GotOcr2ImageProcessor, InternVLConfig, InternVLProcessor, InternVLVideoProcessor

    side = {"height": sizes.image_size, "width": sizes.image_size}
    tokens = (sizes.image_size // sizes.patch_size) ** 2 // 4  # pixel shuffle at downsample ratio 0.5
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=side, crop_to_patches=False, max_patches=1),
        video_processor=InternVLVideoProcessor(size=side),
        tokenizer=tokenizer,
        chat_template=INTERNVL_TEMPLATE,
        image_seq_length=tokens,
    )
    special = {"pad_token_id": ids["<|endoftext|>"], "bos_token_id": None, "eos_token_id": ids["<|im_end|>"]}
    square = [sizes.image_size, sizes.image_size]
    config = InternVLConfig(
        text_config={"model_type": "qwen2", **_text_config(sizes, len(tokenizer), special)},
        vision_config=_vision_config(sizes, image_size=square, patch_size=[sizes.patch_size, sizes.patch_size]),
        downsample_ratio=0.5,
        image_token_id=ids["<IMG_CONTEXT>"],
        image_seq_length=tokens,
    )
    return processor, config


INTERNVL = ChatFamily(
    description="InternVL 2.5 and 3 in transformers' own format (``OpenGVLab/InternVL3-1B-hf``).",
    model_types=("internvl",),
    special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"),
    roles={
        "pad_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "extra_special_tokens": {
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
    },
    chat_template=INTERNVL_TEMPLATE,
    build=_internvl,
)
