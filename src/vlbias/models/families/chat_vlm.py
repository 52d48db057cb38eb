"""Chat vision-language models (LLaVA, Qwen-VL, PaliGemma, Idefics3/SmolVLM, InternVL, Gemma 3) as one adapter
over transformers' own loading path: ``AutoModelForImageTextToText`` + ``AutoProcessor`` and the processor's chat
template. Capability ANSWER:

* :meth:`ChatVLMAdapter.score_options`: the log-probability of each candidate answer :math:`a = (a_1..a_L)` given
  the image :math:`x` and the prompt :math:`q`, teacher-forced,
  :math:`\\log p(a \\mid x, q) = \\sum_{l=1}^{L} \\log p(a_l \\mid x, q, a_{<l})` (and its mean over the
  :math:`L` tokens). Exact: the prompt is encoded once and its key/value cache repeated for the options, which
  are scored in one forward pass (no full forward per option); prompts are left-padded and options
  right-padded, so no real token attends to a pad. :meth:`ChatVLMAdapter.score_options_directly` computes the
  same numbers with one unpadded forward of prompt + option per pair: the tests hold the two equal.
* :meth:`ChatVLMAdapter.first_token_probs`: the next-token distribution after the prompt at given answer letters
  or words (their first tokens), as Girrbach et al. (ICLR 2025) score a chat model's answer.
* :meth:`ChatVLMAdapter.generate`: greedy or seeded sampling, returning the text and each token's log-probability.

The scoring runs without gradients; :meth:`ChatVLMAdapter.option_log_probs` and
:meth:`ChatVLMAdapter.next_token_logits` are the same computations with them, for training (the
counterfactual-consistency loss, :mod:`vlbias.objectives.answer_consistency`).

An option is scored as the text that follows the chat template's generation prompt, tokenized without special
tokens: ``answer_prefix`` (``""`` by default) is put before every option (``" "`` for a template that ends in
``"ASSISTANT:"`` and answers after a space).

Each family's own parts (which model types it loads, how a prompt becomes text, the inputs an option needs, the
tiny random model) are one :class:`~vlbias.models.families.chat_tiny.ChatFamily` entry each, in
:mod:`vlbias.models.families.chat_tiny`; this module is the same for all.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import torch
from torch import Tensor
from transformers import AutoModelForImageTextToText, AutoProcessor, PreTrainedModel

from vlbias.data.images import ImageInput, load_image
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ModelAdapter, registered_capabilities
from vlbias.models.families.chat_tiny import (
    GEMMA3,
    IDEFICS3,
    INTERNVL,
    LLAVA,
    PALIGEMMA,
    QWEN2_5_VL,
    QWEN2_VL,
    SMOLVLM,
    ChatFamily,
    TinyChatSizes,
)
from vlbias.models.loading import from_pretrained_strict

PaddingSide = Literal["left", "right"]


@dataclass(frozen=True)
class OptionScores:
    """:meth:`ChatVLMAdapter.score_options`' result for ``N`` items of ``O`` options each.

    Args:
        log_prob: ``(N, O)`` sum of the option's token log-probabilities, :math:`\\log p(a \\mid x, q)`.
        mean_log_prob: ``(N, O)`` the same divided by the option's number of tokens.
        n_tokens: ``(N, O)`` the option's number of tokens.
    """

    log_prob: Tensor
    mean_log_prob: Tensor
    n_tokens: Tensor


@dataclass(frozen=True)
class Generation:
    """One generated answer: its text (special tokens left out), token ids and each token's log-probability
    under the distribution it was drawn from (temperature applied), up to and including the end-of-sequence
    token when one was generated."""

    text: str
    token_ids: list[int]
    token_log_probs: list[float]


class ChatVLMAdapter(ModelAdapter):
    """An image + prompt in, text out: the model, its processor and the family's rules (:attr:`family`).

    Subclasses set ``name``, ``capabilities`` (:func:`~vlbias.models.base.registered_capabilities`) and ``family``.
    Images are PIL images or paths
    (:func:`~vlbias.data.images.load_image`); the processor resizes them its own way.
    """

    family: ClassVar[ChatFamily]
    #: Loaded with a ``device_map``: accelerate placed the layers, and :func:`~vlbias.models.registry.load` does
    #: not move them.
    placed_by_device_map: bool = False
    tiny_sizes = TinyChatSizes()

    def __init__(
        self, model: PreTrainedModel, processor, answer_prefix: str = "", padding_side: PaddingSide = "left"
    ) -> None:
        super().__init__()
        self.model = model
        self.processor = processor
        self.answer_prefix = answer_prefix
        if padding_side == "right" and self.family.left_padding_only:
            raise ConfigError(f"Model {self.name!r} pads prompts on the left only: {self.family.left_padding_only}.")
        self.padding_side = padding_side
        self.tokenizer = processor.tokenizer
        text_config = getattr(model.config, "text_config", model.config)
        self.max_text_length = text_config.max_position_embeddings
        self._cache_argument = _cache_argument(model)
        if self.family.chat_template is not None and processor.chat_template is None:
            raise InputError(
                f"Model {self.name!r}: its processor has no chat template; expected the template of an instruction-"
                "tuned checkpoint (a base checkpoint's processor lacks one: give the chat checkpoint)."
            )

    # -- inputs ----------------------------------------------------------------------
    def prompt_inputs(
        self, images: Sequence[ImageInput], prompts: Sequence[str], side: PaddingSide | None = None
    ) -> dict[str, Tensor]:
        """The processor's inputs for one image and one user prompt per item, rendered by the family (the chat
        template with the generation prompt), padded on ``side`` (:attr:`padding_side` by default), on this
        adapter's device."""
        if len(images) != len(prompts):
            raise InputError(f"Expected one prompt per image but got {len(images)} images and {len(prompts)} prompts.")
        texts = [self.family.render(self.processor, prompt) for prompt in prompts]
        inputs = self.processor(
            images=[[load_image(image)] for image in images],
            text=texts,
            padding=True,
            padding_side=side or self.padding_side,
            return_tensors="pt",
        )
        # PaliGemma's processor adds ``labels`` (all ignored): nothing here asks the model for a loss
        return {key: value.to(self.device) for key, value in inputs.items() if key != "labels"}

    def _check_length(self, inputs: dict[str, Tensor], prompts: Sequence[str], answer_tokens: Sequence[int]) -> None:
        """Refuse, naming the item, a prompt whose tokens (image tokens included) and longest answer exceed the
        model's context (:attr:`max_text_length`)."""
        lengths = inputs["attention_mask"].sum(dim=1).tolist()
        for item, (length, answer) in enumerate(zip(lengths, answer_tokens, strict=True)):
            if length + answer > self.max_text_length:
                raise InputError(
                    f"Prompt {item} ({prompts[item][:60]!r}) is {length} tokens with its image and its longest answer "
                    f"{answer} more, beyond {self.name}'s context of {self.max_text_length} tokens; expected a "
                    "shorter prompt."
                )

    def option_ids(self, options: Sequence[str]) -> list[list[int]]:
        """Each option's token ids (``answer_prefix`` first, no special tokens); an option of no token, or one given
        twice, is refused."""
        repeated = sorted({option for option in options if list(options).count(option) > 1})
        if repeated:
            raise InputError(f"Answer options {list(options)} repeat {repeated}; expected distinct options.")
        encoded = self.tokenizer([self.answer_prefix + option for option in options], add_special_tokens=False)
        for option, ids in zip(options, encoded["input_ids"], strict=True):
            if not ids:
                raise InputError(f"Answer option {option!r} is no token for {self.name}'s tokenizer; expected text.")
        return encoded["input_ids"]

    # -- ANSWER ----------------------------------------------------------------------
    @torch.no_grad()
    def score_options(
        self, images: Sequence[ImageInput], prompts: Sequence[str], options: Sequence[Sequence[str]]
    ) -> OptionScores:
        """Score every option of every item: ``options[i]`` are item ``i``'s candidate answers, the same number
        for every item. One batch: the caller batches (the suites shard items over ranks and batches). Without
        gradients: :meth:`option_log_probs` is the same with them."""
        return self.option_log_probs(images, prompts, options)

    def option_log_probs(
        self, images: Sequence[ImageInput], prompts: Sequence[str], options: Sequence[Sequence[str]]
    ) -> OptionScores:
        """:meth:`score_options` with gradients, for training (the next-token loss on an answer is its ``-log_prob``,
        :class:`~vlbias.modules.chat_answer_tuning.ChatAnswerTuning`; the counterfactual-consistency loss,
        :mod:`vlbias.objectives.answer_consistency`): the same cached forward, in the model's mode (train or eval)
        and in its dtype (float32 at least)."""
        counts = {len(item) for item in options}
        if len(options) != len(prompts) or len(counts) != 1 or 0 in counts:
            raise InputError(
                f"Expected the same number (at least one) of answer options for each of the {len(prompts)} prompts "
                f"but got counts {sorted(len(item) for item in options)}."
            )
        n_options = counts.pop()
        per_item = [self.option_ids(item) for item in options]
        inputs = self.prompt_inputs(images, prompts)
        self._check_length(inputs, prompts, [max(len(ids) for ids in item) for item in per_item])
        prefill, last = self._prefill(inputs)
        cache = _cache_of(prefill)
        cache.batch_repeat_interleave(n_options)  # (N·O, ...): item i's cache for each of its options
        ids, mask = self._right_padded([ids for item in per_item for ids in item])
        prompt_mask = inputs["attention_mask"].repeat_interleave(n_options, dim=0)
        full_mask = torch.cat([prompt_mask, mask], dim=1)
        length = prompt_mask.shape[1]
        out = self.model(
            input_ids=ids,
            attention_mask=full_mask,
            cache_position=torch.arange(length, length + ids.shape[1], device=self.device),
            use_cache=True,
            **{self._cache_argument: cache},
            **self.family.option_inputs(self.model, ids, full_mask),
        )
        first = last[:, None].repeat_interleave(n_options, dim=0)  # predicts each option's first token
        logits = torch.cat([first, out.logits[:, :-1]], dim=1)  # (N·O, L, V): logits[:, l] predicts ids[:, l]
        token_log_probs = _at_least_float32(logits).log_softmax(dim=-1).gather(-1, ids[..., None])[..., 0] * mask
        n_tokens = mask.sum(dim=1)
        total = token_log_probs.sum(dim=1)
        shape = (len(prompts), n_options)
        return OptionScores(total.view(shape), (total / n_tokens).view(shape), n_tokens.view(shape))

    @torch.no_grad()
    def score_options_directly(
        self, images: Sequence[ImageInput], prompts: Sequence[str], options: Sequence[Sequence[str]]
    ) -> OptionScores:
        """:meth:`score_options` with one unpadded forward of prompt + option per pair and no cache: slow, the
        reference the tests hold :meth:`score_options` to."""
        totals, counts = [], []
        for image, prompt, item in zip(images, prompts, options, strict=True):
            inputs = self.prompt_inputs([image], [prompt])
            for ids in self.option_ids(item):
                option = torch.tensor([ids], device=self.device)
                full = {
                    **inputs,
                    "input_ids": torch.cat([inputs["input_ids"], option], dim=1),
                    "attention_mask": torch.ones(1, inputs["input_ids"].shape[1] + len(ids), device=self.device),
                    **self.family.joined_inputs(inputs, option),
                }
                logits = self.model(**full).logits[0, -len(ids) - 1 : -1].float()
                totals.append(float(logits.log_softmax(dim=-1).gather(-1, option[0][:, None]).sum()))
                counts.append(len(ids))
        shape = (len(prompts), -1)
        total, n_tokens = torch.tensor(totals).view(shape), torch.tensor(counts).view(shape)
        return OptionScores(total, total / n_tokens, n_tokens)

    @torch.no_grad()
    def first_token_probs(
        self, images: Sequence[ImageInput], prompts: Sequence[str], candidates: Sequence[str]
    ) -> Tensor:
        """``(N, C)``: the probability, over the whole vocabulary, that the answer's first token is candidate
        ``c``'s first token (``answer_prefix`` applies). Candidates that share a first token are refused: their
        probabilities could not be told apart."""
        firsts = [ids[0] for ids in self.option_ids(candidates)]
        if len(set(firsts)) < len(firsts):
            shared = [c for c, first in zip(candidates, firsts, strict=True) if firsts.count(first) > 1]
            raise InputError(
                f"Answer candidates {shared} begin with the same token for {self.name}'s tokenizer; expected "
                "candidates whose first tokens differ (answer letters such as 'A', 'B', 'C')."
            )
        return self.next_token_logits(images, prompts).softmax(dim=-1)[:, firsts]

    def next_token_logits(self, images: Sequence[ImageInput], prompts: Sequence[str]) -> Tensor:
        """``(N, V)``: the logits of the answer's first token after each prompt, with gradients (in the model's
        dtype, float32 at least); :meth:`first_token_probs` reads them without."""
        inputs = self.prompt_inputs(images, prompts)
        self._check_length(inputs, prompts, [1] * len(prompts))
        return _at_least_float32(self._prefill(inputs)[1])

    @torch.no_grad()
    def generate(
        self,
        images: Sequence[ImageInput],
        prompts: Sequence[str],
        max_new_tokens: int = 32,
        do_sample: bool = False,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> list[Generation]:
        """Answer each prompt: greedy (``do_sample=False``) or sampled at ``temperature`` from a generator seeded
        with ``seed`` (the global RNG is restored afterwards), at most ``max_new_tokens`` tokens. Prompts are
        left-padded whatever :attr:`padding_side` says: ``generate`` appends to the last column."""
        inputs = self.prompt_inputs(images, prompts, side="left")
        self._check_length(inputs, prompts, [max_new_tokens] * len(prompts))
        sampling = {"do_sample": True, "temperature": temperature} if do_sample else {"do_sample": False}
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(seed)
            out = self.model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                return_dict_in_generate=True,
                output_scores=True,
                pad_token_id=self.tokenizer.pad_token_id,
                **sampling,
            )
        new = out.sequences[:, inputs["input_ids"].shape[1] :]
        log_probs = torch.stack(out.scores, dim=1).float().log_softmax(dim=-1).gather(-1, new[..., None])[..., 0]
        return [self._generation(row, row_log_probs) for row, row_log_probs in zip(new, log_probs, strict=True)]

    def _generation(self, ids: Tensor, log_probs: Tensor) -> Generation:
        """One row of :meth:`generate`, cut after the first end-of-sequence token."""
        ids = ids.tolist()
        eos = self.model.generation_config.eos_token_id
        ends = {eos} if isinstance(eos, int) else set(eos or [])
        length = next((i + 1 for i, token in enumerate(ids) if token in ends), len(ids))
        kept = ids[:length]
        return Generation(self.tokenizer.decode(kept, skip_special_tokens=True), kept, log_probs[:length].tolist())

    def _prefill(self, inputs: dict[str, Tensor]) -> tuple[object, Tensor]:
        """The forward of prompts ``inputs`` that caches their keys and values, at the positions the family counts
        (:meth:`~vlbias.models.families.chat_tiny.ChatFamily.prompt_positions`: pads skipped, on either side), and
        ``(N, V)`` each prompt's logits at its last real token. The language model's head runs at those columns only
        (``logits_to_keep``): the logits of every prompt token, ``(N, P, V)``, would take gigabytes at a real
        vocabulary."""
        mask = inputs["attention_mask"]
        last = (mask.long() * torch.arange(mask.shape[1], device=mask.device)).argmax(dim=1)  # (N,)
        kept, row = torch.unique(last, return_inverse=True)
        positions = self.family.prompt_positions(mask)
        out = self.model(**inputs, **positions, use_cache=True, logits_to_keep=kept)
        return out, out.logits[torch.arange(len(last), device=mask.device), row]

    def _right_padded(self, rows: list[list[int]]) -> tuple[Tensor, Tensor]:
        """``(R, L)`` ids padded on the right with the pad token, and their mask."""
        width = max(len(row) for row in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows], device=self.device)
        mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows], device=self.device)
        return ids, mask

    def direct_call(self, capability: Capability, pixel_values: Tensor | None, tokens: dict[str, Tensor]):
        """The wrapped model's logits for prepared processor inputs ``tokens`` (``pixel_values`` among them):
        a chat model reads image and text through one processor, so there is no separate pixel tensor."""
        return self.model(**tokens).logits

    # -- saving and loading ----------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> None:
        """Write the model (config and weights) and the processor (tokenizer, image processor, chat template):
        a folder that ``AutoModelForImageTextToText`` and ``AutoProcessor`` load alone."""
        self.model.save_pretrained(directory)
        self.processor.save_pretrained(directory)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        answer_prefix: str = "",
        padding_side: PaddingSide = "left",
        dtype: Literal["float32", "bfloat16", "float16"] | None = None,
        attn_implementation: Literal["eager", "sdpa", "flash_attention_2"] | None = None,
        device_map: str | None = None,
    ) -> ChatVLMAdapter:
        """Load a hub id or a local ``save_pretrained`` folder of this family: the model through
        ``AutoModelForImageTextToText`` (keys checked strictly; a folder of another family refused by its
        ``model_type``) and the processor through ``AutoProcessor``.

        Args:
            name_or_path: Hub id or local folder.
            answer_prefix: Text put before every answer option (see the module's docstring).
            padding_side: Where a batch's shorter prompts are padded when scoring (the same scores either way).
            dtype: The weights' dtype (``None``: as saved, transformers' default).
            attn_implementation: transformers' attention kernel (``None``: SDPA where the model has it).
            device_map: ``"auto"`` places a model too large for one GPU over the GPUs and the CPU with
                ``accelerate`` (the model then stays where it was placed).
        """
        options = {"dtype": dtype, "attn_implementation": attn_implementation, "device_map": device_map}
        model = from_pretrained_strict(
            AutoModelForImageTextToText,
            name_or_path,
            cls.name,
            cls.family.model_types,
            **{key: value for key, value in options.items() if value is not None},
        )
        adapter = cls(model, AutoProcessor.from_pretrained(str(name_or_path)), answer_prefix, padding_side)
        adapter.placed_by_device_map = device_map is not None
        return adapter

    @classmethod
    def tiny(
        cls,
        seed: int = 0,
        sizes: TinyChatSizes | None = None,
        answer_prefix: str = "",
        padding_side: PaddingSide = "left",
    ) -> ChatVLMAdapter:
        """A tiny random model of this family at transformers' test dimensions, with a byte-level tokenizer, the
        family's processor and a chat template (:mod:`vlbias.models.families.chat_tiny`), all built offline."""
        processor, config = cls.family.tiny(sizes or cls.tiny_sizes)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForImageTextToText.from_config(config)
        return cls(model.eval(), processor, answer_prefix, padding_side)


def _at_least_float32(logits: Tensor) -> Tensor:
    """``logits`` in float32, or in float64 where the model computes in float64 (the gradient checks do)."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _cache_of(output) -> object:
    """The key/value cache a forward returned (``cache`` in newer transformers, ``past_key_values`` before)."""
    return output["cache"] if "cache" in output else output["past_key_values"]


def _cache_argument(model: PreTrainedModel) -> str:
    """The name the model's ``forward`` takes its key/value cache by (``cache`` in newer transformers)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def chat_adapter(class_name: str, name: str, family: ChatFamily) -> type[ChatVLMAdapter]:
    """The adapter class of a registered chat family: its catalog ``name``, the capabilities the catalog declares for
    it (:func:`~vlbias.models.base.registered_capabilities`), its ``family`` and the family's description."""
    members = {"name": name, "capabilities": registered_capabilities(name), "family": family}
    return type(class_name, (ChatVLMAdapter,), {**members, "__doc__": family.description, "__module__": __name__})


LlavaAdapter = chat_adapter("LlavaAdapter", "llava", LLAVA)
Qwen2VLAdapter = chat_adapter("Qwen2VLAdapter", "qwen2_vl", QWEN2_VL)
Qwen25VLAdapter = chat_adapter("Qwen25VLAdapter", "qwen2_5_vl", QWEN2_5_VL)
PaliGemmaAdapter = chat_adapter("PaliGemmaAdapter", "paligemma", PALIGEMMA)
Gemma3Adapter = chat_adapter("Gemma3Adapter", "gemma3", GEMMA3)
Idefics3Adapter = chat_adapter("Idefics3Adapter", "idefics3", IDEFICS3)
SmolVLMAdapter = chat_adapter("SmolVLMAdapter", "smolvlm", SMOLVLM)
InternVLAdapter = chat_adapter("InternVLAdapter", "internvl", INTERNVL)
