"""Scoring a chat VLM's answer options (capability ANSWER), in one run (``scripts/bench_answer.py``):

* ``vlbias score_options``: :meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.score_options` from images and
  strings: the processor, one forward of the prompts, their key/value cache repeated for the options, one forward
  of the options;
* ``raw cached forward``: the same written out by hand with transformers alone, as a user without vlbias would:
  the processor on the rendered prompts and the images, then the two forwards; the adapter's overhead is the first
  over this;
* ``naive loop``: one full forward of prompt + option per (item, option), no cache
  (:meth:`~vlbias.models.families.chat_vlm.ChatVLMAdapter.score_options_directly`);
* ``generate 1 token``: the processor, then ``model.generate`` of one token per prompt, what scoring the first
  answer token through generation costs.

Weights are random, at the tiny test width or at base width (768 wide, 12 layers, 12 heads: a 1B-class language
model's width at a tenth of its depth), the prompt padded with words to ``prompt_tokens`` tokens (image tokens
included). Prints the median seconds of ``repeats`` runs after a warm-up, options scored per second, each side's
FLOPs counted by ``torch.utils.flop_counter.FlopCounterMode`` and the ratios; the largest difference between the
cached and the naive scores shows they compute the same numbers.
"""

from __future__ import annotations

import statistics
from typing import Literal

import numpy as np
import torch
from jsonargparse.typing import PositiveInt
from PIL import Image
from torch.utils.flop_counter import FlopCounterMode

from vlbias.experiments.bench.timing import Clock, clock_for, elapsed, machine
from vlbias.models.families.chat_tiny import TinyChatSizes
from vlbias.models.registry import check_device, load
from vlbias.runtime.environment import environment
from vlbias.runtime.threads import torch_threads

#: the sizes of each ``--size``.
SIZES = {"tiny": TinyChatSizes(), "base": TinyChatSizes(hidden_size=768, num_layers=12, image_size=224, patch_size=14)}
OPTIONS = ("a doctor", "a nurse", "cannot be determined", "a teacher in a school")


def bench_answer(
    family: str = "llava",
    size: Literal["tiny", "base"] = "tiny",
    prompt_tokens: PositiveInt = 256,
    options: PositiveInt = 4,
    batch_size: PositiveInt = 4,
    repeats: PositiveInt = 3,
    device: str = "cpu",
    precision: Literal["fp32", "bf16"] = "fp32",
    threads: int = 1,
    clock: Clock = "wall",
) -> None:
    """Time and count the four ways of scoring ``options`` answers to ``batch_size`` prompts; print the table.

    Args:
        family: A registered chat-VLM name (``vlbias models``).
        size: ``tiny`` (transformers' test width) or ``base`` (768 wide, 12 layers).
        prompt_tokens: Tokens of each prompt with its image, at least (words are added until it is reached).
        options: Answer options per prompt (at most 4 distinct ones are built in).
        batch_size: Prompts scored together.
        repeats: Timed runs of each side after a warm-up; median.
        device: ``cpu`` or ``cuda``.
        precision: ``fp32``, or ``bf16`` weights.
        threads: Torch threads on the CPU.
        clock: ``wall``, or ``thread``: this thread's CPU time (CPU, one thread), which leaves out the time other
            processes hold the core on a loaded machine.
    """
    check_device(device)
    timer = clock_for(clock, threads, device)
    with torch_threads(threads):
        dtype = torch.bfloat16 if precision == "bf16" else None
        adapter = load(family, tiny=True, device=device, dtype=dtype, options={"hidden_size": SIZES[size].hidden_size,
                       "num_layers": SIZES[size].num_layers, "image_size": SIZES[size].image_size})  # fmt: skip
        images = [Image.fromarray(np.random.default_rng(i).integers(0, 256, (240, 320, 3), dtype=np.uint8))
                  for i in range(batch_size)]  # fmt: skip
        prompt = _prompt_of(adapter, images[0], prompt_tokens)
        prompts, answers = [prompt] * batch_size, [list(OPTIONS[:options])] * batch_size
        inputs = adapter.prompt_inputs(images, prompts)
        texts = [adapter.family.render(adapter.processor, prompt) for prompt in prompts]
        ids, mask = adapter._right_padded([ids for item in answers for ids in adapter.option_ids(item)])

        def prepared() -> dict[str, torch.Tensor]:
            return dict(adapter.processor(images=[[image] for image in images], text=texts, padding=True,
                                          return_tensors="pt").to(adapter.device))  # fmt: skip

        sides = {
            "vlbias score_options": lambda: adapter.score_options(images, prompts, answers),
            "raw cached forward": lambda: _raw_cached(adapter.model, prepared(), ids, mask, adapter._cache_argument),
            "naive loop": lambda: adapter.score_options_directly(images, prompts, answers),
            "generate 1 token": lambda: adapter.model.generate(
                **prepared(), max_new_tokens=1, do_sample=False, pad_token_id=adapter.tokenizer.pad_token_id
            ),
        }
        numbers = {}
        with torch.no_grad():
            for name, side in sides.items():
                side()  # warm-up
                numbers[f"{name} s"] = statistics.median(elapsed(side, device, timer) for _ in range(repeats))
                with FlopCounterMode(display=False) as counter:
                    side()
                numbers[f"{name} flops"] = counter.get_total_flops()
            cached, naive = sides["vlbias score_options"](), sides["naive loop"]()
    difference = (cached.log_prob.float() - naive.log_prob.float()).abs().max().item()
    _print_table(numbers, family, size, inputs["input_ids"].shape[1], options, batch_size, repeats, device, threads)
    print(f"max |cached - naive log-probability| = {difference:.2e}; torch {environment(device)['torch']}")


def _prompt_of(adapter, image, tokens: int) -> str:
    """A question padded with words until it and ``image`` make at least ``tokens`` tokens."""
    prompt = "Who is the person in the picture, and what is their job?"
    while adapter.prompt_inputs([image], [prompt])["input_ids"].shape[1] < tokens:
        prompt = "Look closely at the picture. " + prompt
    return prompt


def _raw_cached(model, inputs: dict[str, torch.Tensor], ids: torch.Tensor, mask: torch.Tensor, cache_argument: str):
    """The cached scoring's two forwards on prepared ``inputs`` and answer tokens ``ids`` ``(N·O, L)`` with their
    ``mask`` (llama-style positions), no adapter around them: the summed log-probabilities ``(N·O,)``."""
    n = ids.shape[0] // inputs["input_ids"].shape[0]
    prefill = model(**inputs, use_cache=True)
    cache = prefill.past_key_values
    cache.batch_repeat_interleave(n)
    length = inputs["input_ids"].shape[1]
    full = torch.cat([inputs["attention_mask"].repeat_interleave(n, dim=0), mask], dim=1)
    out = model(input_ids=ids, attention_mask=full, use_cache=True, **{cache_argument: cache},
                cache_position=torch.arange(length, length + ids.shape[1], device=ids.device))  # fmt: skip
    logits = torch.cat([prefill.logits[:, -1:].repeat_interleave(n, dim=0), out.logits[:, :-1]], dim=1)
    return (logits.float().log_softmax(dim=-1).gather(-1, ids[..., None])[..., 0] * mask).sum(dim=1)


def _print_table(numbers, family, size, length, options, batch_size, repeats, device, threads) -> None:
    scored = options * batch_size
    where = machine(threads) if device == "cpu" else f"GPU: {torch.cuda.get_device_name(device)}"
    print(f"{where}; {family} at {size} width, {batch_size} prompts of {length} tokens x {options} options; "
          f"median of {repeats} after a warm-up")  # fmt: skip
    print(f"{'side':<22}{'seconds':>10}{'options/s':>11}{'GFLOP':>9}{'time / raw':>12}{'FLOP naive / this':>19}")
    for name in ("vlbias score_options", "raw cached forward", "naive loop", "generate 1 token"):
        seconds, flops = numbers[f"{name} s"], numbers[f"{name} flops"]
        print(
            f"{name:<22}{seconds:>10.3f}{scored / seconds:>11.1f}{flops / 1e9:>9.2f}"
            f"{seconds / numbers['raw cached forward s']:>12.3f}{numbers['naive loop flops'] / flops:>19.2f}"
        )
