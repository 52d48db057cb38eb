"""CounterBias throughput: the batched suite vs a per-image loop doing the same work, same run
(``scripts/bench_counterbias.py``).

The loop is how a straightforward implementation (and the authors' released code) measures: for
each image, attack it alone (Eq. 3), read P(B | V) of V_f and V_cf, then for each Table 1
template run the four (V, L) combinations one forward pass each. The text-only passes of Eq. 12
depend on the caption alone, so the loop runs them once per (template, bias word) before the
images, as the suite does: both sides do the same work and neither does any twice. The suite
attacks ``batch_size`` images together and scores all templates and combinations of a batch in a
few forward passes; a two-stream model (ALBEF) encodes each of the batch's images and distinct
captions once there and runs only its fusion layers per row. Both use the same attack
configuration and no attack cache, on CPU with a tiny random model, and their P(T | V_f, L_f) are
checked to agree.

Timing: *cold* is each side's first full run in this process (the batched side runs first, so it
also pays the process's first-call costs: allocator, tokenizer and kernel warm-up); *warm* is the
median of ``repeats`` further runs of each side, interleaved in pairs whose order alternates.
The speed-ups are cold / cold and the median of the per-pair ratios loop / batched. On a machine
shared with other work, ``clock="thread"`` (with one thread) times by this thread's CPU time.

The batched side is the suite's whole run (what ``measure_suite`` does on one process: the measurement protocol's
``start``, ``probe``/``update`` per batch, ``compute``), timed by phase: *setup* (vocabulary checks, Eq. 12's
text-only passes, the metrics built), *batches* (the attack and the scoring) and *statistics* (Eq. 7 and Table 2
with bootstrap intervals and sign-flip p-values). The loop stops at the probabilities, so it does the work of
setup and batches, not of statistics: the last line gives the speed-up over those two phases as well.
"""

from __future__ import annotations

import statistics

import torch
from jsonargparse.typing import PositiveInt

from vlbias.counterfactual.image import AttackConfig, CounterfactualImages, normalise, unit_pixels
from vlbias.counterfactual.text import CAPTION_TEMPLATES, SwapLexicon, fill_template
from vlbias.data.biasworld import ACTIVITIES, BiasWorld
from vlbias.experiments.bench.timing import Clock, clock_for, interleaved, machine
from vlbias.models.inference import measuring
from vlbias.models.masked_words import word_log_probs
from vlbias.models.registry import load
from vlbias.runtime.threads import torch_threads
from vlbias.suites.base import Batch, Gathered, SuiteOutput
from vlbias.suites.counterbias import CounterBiasSuite
from vlbias.suites.options import CounterBiasOptions

ATTACK = {"eps": 8 / 255, "alpha": 2 / 255, "steps": 10}
BIAS = ["man", "woman"]
PHASES = ("setup", "batches", "statistics")


def batched_run(suite: CounterBiasSuite, adapter, clock, spent: dict[str, float]) -> SuiteOutput:
    """``measure_suite(suite, adapter)`` on one process, step by step as ``measure_suite`` takes it, with each phase's time
    in ``spent`` (module docstring)."""
    start = clock()
    measurement = suite.start(adapter, seed=0)
    setup = clock()
    stimuli = suite.stimuli()
    for first in range(0, len(stimuli), suite.batch_size):
        indices = list(range(first, min(first + suite.batch_size, len(stimuli))))
        batch = Batch(indices, [stimuli[i] for i in indices])
        measurement.update(batch, measurement.probe(batch))
    batches = clock()
    output = measurement.compute(
        Gathered(
            [row for _, row in measurement.rows], [entry for _, entry in measurement.skipped], dict(measurement.counts)
        )
    )
    for phase, (began, ended) in zip(PHASES, ((start, setup), (setup, batches), (batches, clock()))):
        spent[phase] = ended - began
    return output


def per_image_loop(adapter, world: BiasWorld, n_images: int) -> list[float]:
    """The same measurements one image, one text at a time; returns P(T | V_f, L_f) per (image, template)."""
    lexicon, mask, targets = SwapLexicon.default(), adapter.tokenizer.mask_token, list(ACTIVITIES)
    generator = CounterfactualImages(adapter, BIAS, AttackConfig(**ATTACK))
    images, items = world.images("test")[:n_images].float() / 255.0, world.items("test")[:n_images]
    with measuring(adapter.device):  # Eq. 12: one text-only pass per (template, bias word), as the suite's table
        for name in CAPTION_TEMPLATES:
            for bias in BIAS:
                caption = fill_template(CAPTION_TEMPLATES[name], mask, gender=bias)
                word_log_probs(adapter, adapter.no_image(1), caption, targets)
    p_factual = []
    for image, item in zip(images, items):
        pixels = unit_pixels(adapter, image[None]).cpu()
        counter = torch.tensor([BIAS.index(lexicon.mapping[item.group])])
        cf = generator.generate(pixels, counter).pixels
        with measuring(adapter.device):
            generator.logits(pixels).softmax(-1), generator.logits(cf).softmax(-1)
            for name in CAPTION_TEMPLATES:
                text = fill_template(CAPTION_TEMPLATES[name], mask, gender=item.group)
                swapped = lexicon.swap(text)
                for source, caption in ((pixels, text), (cf, swapped), (cf, text), (pixels, swapped)):
                    scores = word_log_probs(adapter, normalise(adapter, source), caption, targets)[0].log_softmax(-1)
                    if caption is text and source is pixels:
                        p_factual.append(float(scores[targets.index(item.activity)].exp()))
    return p_factual


def bench_counterbias(
    model: str = "vilt",
    n_images: PositiveInt = 64,
    batch_size: PositiveInt = 32,
    threads: int = 1,
    repeats: PositiveInt = 3,
    clock: Clock = "wall",
) -> None:
    """Time the batched suite and the per-image loop, cold and warm, and print the table and their agreement.

    Args:
        model: A FILL_MASK model that reads pixels: vilt, albef, flava.
        n_images: Test images measured.
        batch_size: Images the suite attacks and scores together.
        threads: Torch threads.
        repeats: Warm runs of each side, after one cold run each.
        clock: wall: elapsed time; thread: this thread's CPU time, which leaves out the time other processes hold
            the core (a loaded machine), valid with --threads 1 only.
    """
    timer = clock_for(clock, threads)
    with torch_threads(threads):
        adapter = load(model, tiny=True, device="cpu")
        world = BiasWorld(eval_per_combination=-(-n_images // 12))
        options = CounterBiasOptions(attack=ATTACK, require_attack_success=False, batch_size=batch_size)
        suite = CounterBiasSuite.from_biasworld(world, options)
        suite.items = suite.items[:n_images]
        phases: list[dict[str, float]] = []  # one per batched run, cold first

        def batched() -> SuiteOutput:
            phases.append({})
            return batched_run(suite, adapter, timer, phases[-1])

        sides = {"batched": batched, "loop": lambda: per_image_loop(adapter, world, n_images)}
        outputs: dict[str, object] = {}

        def timed(side: str) -> float:
            start = timer()
            outputs[side] = sides[side]()
            return timer() - start

        cold = {side: timed(side) for side in sides}  # batched first: it pays the process's first-call costs
        warm = interleaved(sides, repeats, timed)  # pairs in alternating order, so drift hits both sides alike
    median = {side: statistics.median(times) for side, times in warm.items()}
    pair_ratio = statistics.median(loop / batched for batched, loop in zip(warm["batched"], warm["loop"]))
    warm_phases = {phase: statistics.median(run[phase] for run in phases[1:]) for phase in PHASES}
    same_work_ratio = statistics.median(
        loop / (run["setup"] + run["batches"]) for run, loop in zip(phases[1:], warm["loop"])
    )

    output, looped = outputs["batched"], outputs["loop"]
    by_item = {row["item"]: [] for row in output.items}
    for row in output.items:
        by_item[row["item"]].append(row["p_target_f"])
    batched_factual = [p for ps in by_item.values() for p in ps]
    max_diff = max(abs(a - b) for a, b in zip(batched_factual, looped))
    n = len(by_item)
    print(
        f"model={model} (tiny, {machine(threads)}), {n} images x "
        f"{len(CAPTION_TEMPLATES)} templates, PGD {ATTACK['steps']} steps, eps={ATTACK['eps']:.4f}, clock={clock}; cold: first run "
        f"of each side (batched first), warm: median of {repeats} interleaved runs"
    )
    print(f"{'implementation':<28}{'cold s':>10}{'warm s':>10}{'warm items/s':>14}")
    for label, side in ((f"vlbias batched ({batch_size})", "batched"), ("per-image loop", "loop")):
        print(f"{label:<28}{cold[side]:>10.2f}{median[side]:>10.2f}{n / median[side]:>14.1f}")
    print(
        f"speed-up: cold {cold['loop'] / cold['batched']:.1f}x, warm {pair_ratio:.1f}x (median of per-pair ratios)   "
        f"max |P(T|V_f,L_f) batched - loop| = {max_diff:.2e} over {len(batched_factual)} pairs"
    )
    print(
        "batched phases, warm median s: "
        + ", ".join(f"{phase} {warm_phases[phase]:.3f}" for phase in PHASES)
        + f"; without statistics (the loop's work): warm {same_work_ratio:.1f}x (median of per-pair ratios)"
    )
