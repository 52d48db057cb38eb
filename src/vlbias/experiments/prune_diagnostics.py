r"""What the pruning table (:mod:`vlbias.experiments.prune_table`) computes on one embedded split: |d| and zero-shot
accuracy with some coordinates removed or the texts projected, how much of |d|'s numerator N coordinates hold, and
the N coordinates whose removal lowers |d| most as far as local search finds.

The effect size's numerator is :math:`(\bar x - \bar y) \cdot (\bar a - \bar b) = \sum_k \delta_k \tau_k` over the
coordinates k (unit embeddings: a word's association is :math:`w \cdot (\bar a - \bar b)`), so removing coordinate
k takes :math:`\delta_k \tau_k` out of it (before re-normalisation): :func:`coordinate_shares`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlbias.data.biasworld import GROUPS, BiasWorld, group_phrases
from vlbias.mitigation import apply_projection, effect_size_without, orthogonal_projection
from vlbias.mitigation.leave_one_out import kept_dimensions, leave_one_out_effect_sizes
from vlbias.mitigation.pruning import BiasTest, select_dimensions
from vlbias.mitigation.zero_shot import zero_shot_accuracy
from vlbias.workflows.prune import biasworld_data

ROTATIONS = 200


def embed(adapter, world: BiasWorld, split: str) -> dict:
    """The test's sets, the images with their activity labels, the class prompts, all embedded (float64)."""
    data = biasworld_data(world, split)
    (spec,) = data.tests
    with torch.no_grad():
        images = torch.cat(
            [
                adapter.embed_images(adapter.prepare_images(world.images(split)[i : i + 128].float() / 255.0))
                for i in range(0, len(data.dataset), 128)
            ]
        ).double()
        texts = {key: adapter.embed_texts(adapter.prepare_texts(spec[key])).double() for key in ("a", "b")}
        prompts = [p for prompts in data.class_prompts for p in prompts]
        prompt_embeddings = adapter.embed_texts(adapter.prepare_texts(prompts)).double()
        bias = adapter.embed_texts(adapter.prepare_texts([p for g in GROUPS for p in group_phrases(g)])).double()
    items = world.items(split)
    groups = torch.tensor([GROUPS.index(item.group) for item in items])
    return {
        "name": spec["name"],
        "x": images[groups == 0],
        "y": images[groups == 1],
        "a": texts["a"],
        "b": texts["b"],
        "images": images,
        "labels": torch.tensor([data.dataset[i]["activity"] for i in range(len(items))]),
        "prompts": prompt_embeddings,
        "prompt_classes": torch.tensor([k for k, prompts in enumerate(data.class_prompts) for _ in prompts]),
        "bias": bias,
    }


def coordinate_shares(e: dict, n: int, removed: dict[str, list[int]], seed: int) -> dict[str, float]:
    r"""Percent of the effect size's numerator :math:`\sum_k \delta_k \tau_k` held by its ``n`` largest terms
    (``top``), by each strategy's ``removed`` coordinates, and by the ``n`` largest terms after a random rotation of
    the space (``rotated``: mean over :data:`ROTATIONS` Haar-random rotations, seeded; the sum itself is unchanged
    by a rotation): the share to expect when the bias is not aligned with the coordinates at all."""
    delta, tau = e["x"].mean(0) - e["y"].mean(0), e["a"].mean(0) - e["b"].mean(0)  # (D,), (D,)
    terms = delta * tau
    total = terms.sum()
    generator = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(ROTATIONS, len(delta), len(delta), generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    rotations = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar: fix the signs of QR
    rotated_terms = (delta @ rotations) * (tau @ rotations)  # (ROTATIONS, D)
    shares = {
        "top": terms.topk(n).values.sum() / total,
        "rotated": (rotated_terms.topk(n).values.sum(1) / total).mean(),
    }
    shares |= {
        strategy: terms[torch.tensor(dims, dtype=torch.long)].sum() / total for strategy, dims in removed.items()
    }
    return {key: 100 * float(value) for key, value in shares.items()}


def best_on_test(e: dict, n: int, restarts: int, seed: int) -> tuple[list[int], int]:
    """The ``n`` coordinates whose removal lowers |d| on the embedded split ``e`` most, as far as local search finds:
    from greedy removal over all coordinates and from ``restarts`` random sets (seeded), each improved by swaps (while
    some swap of a removed coordinate for a kept one lowers |d|, make the best one; one leave-one-out pass per removed
    coordinate finds all its swaps). Returns the best set found and how many of the ``restarts + 1`` starts reached
    its |d|."""
    x, y, a, b, dim = e["x"], e["y"], e["a"], e["b"], e["x"].shape[1]
    greedy = select_dimensions([BiasTest(e["name"], x, y, a, b)], torch.zeros(dim), n, strategy="greedy", theta=1.0)
    generator = torch.Generator().manual_seed(seed)
    starts = [greedy.removed] + [torch.randperm(dim, generator=generator)[:n].tolist() for _ in range(restarts)]
    found = [_swapped_to_a_local_optimum(x, y, a, b, start) for start in starts]
    best, removed = min(found)
    return sorted(removed), sum(value <= best * (1 + 1e-9) for value, _ in found)


def _swapped_to_a_local_optimum(x: Tensor, y: Tensor, a: Tensor, b: Tensor, removed: list[int]) -> tuple[float, list]:
    """|d| and the removed set after swaps from ``removed`` until no swap lowers |d| (see :func:`best_on_test`)."""
    best = abs(float(effect_size_without(x, y, a, b, torch.tensor(removed))))
    while True:
        swaps = []
        for position in range(len(removed)):
            rest = removed[:position] + removed[position + 1 :]
            kept = kept_dimensions(torch.tensor(rest), x.shape[1])
            psi = leave_one_out_effect_sizes(*(m[:, kept] for m in (x, y, a, b))).abs()
            swaps.append((float(psi.min()), position, int(kept[psi.argmin()])))
        value, position, added = min(swaps)
        # putting back the coordinate just taken out is no swap: its |d| is the current one, computed another way
        if value >= best * (1 - 1e-12) or added == removed[position]:
            return best, removed
        removed, best = removed[:position] + removed[position + 1 :] + [added], value


def judged(e: dict, removed: list[int]) -> tuple[float, float]:
    """|d| and zero-shot accuracy on the embedded split with ``removed`` left out."""
    removed = torch.tensor(removed, dtype=torch.long)
    d = float(effect_size_without(e["x"], e["y"], e["a"], e["b"], removed))
    return abs(d), zero_shot_accuracy(e["images"], e["prompts"], e["prompt_classes"], e["labels"], removed)


def projected(e: dict) -> tuple[float, float]:
    """|d| and accuracy with the text embeddings projected off the group prompts' span (debias_vl, Chuang et al.,
    2023), images unchanged."""
    p = orthogonal_projection(e["bias"])
    a, b, prompts = (apply_projection(e[key], p) for key in ("a", "b", "prompts"))
    d = float(effect_size_without(e["x"], e["y"], a, b, torch.arange(0)))
    return abs(d), zero_shot_accuracy(e["images"], prompts, e["prompt_classes"], e["labels"])
