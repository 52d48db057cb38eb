"""Image counterfactuals during training (FairVLP, Zhang et al., 2022, Sec. 5.1), under a cost policy.

FairVLP attacks the *current* model (Eq. 2-3): each image's bias concept B is the one the model reads,
argmax P(B | V_f) at the bias prompt, and V_cf is the targeted attack toward its lexicon counterpart B'
(:class:`~vlbias.counterfactual.image.CounterfactualImages`). The attack succeeds when B' is then the
most likely concept, P(B | V_cf); a failed attack gives no image counterfactual.

A PGD attack costs about ``steps`` forward-backward passes, more than the training step itself, so when
to attack is a policy:

* ``every_step``: every batch is attacked on the current model (the paper's procedure);
* ``every_n_steps``: batches of steps ``0, k, 2k, ...`` are attacked on the current model; the others
  get no image counterfactual (cost / k, image branch on 1 / k of the steps);
* ``cached``: each image's V_cf is kept in memory with the *model version* it was made with,
  ``step // k``; a batch attacks only the images with no V_cf of the current version (cost falls as
  images recur within one version; V_cf is at most ``k`` steps stale). Every step then has an image branch.
  With k spanning E epochs the cost is that of ``every_n_steps`` with k = E; the memory is one V_cf per
  training image (100 MB for BiasWorld's 2,048 at 64 x 64, far too much for COCO at 256 x 256).

On BiasWorld's validation split, ``cached`` with k of 4 epochs cut B@V-L more than ``every_n_steps`` (k 4) at
the same cost, and more than ``every_step``, which took 1.5x its training time (docs/results/fairvlp.md, "How the settings were chosen");
on the test split the cut was 30 % against ``every_n_steps``' 23 %, within the seeds' spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from vlbias.counterfactual.image import AttackConfig, CounterfactualImages, image_fingerprint
from vlbias.counterfactual.text import SwapLexicon
from vlbias.errors import ConfigError
from vlbias.models.base import ModelAdapter

POLICIES = ("every_step", "every_n_steps", "cached")


@dataclass
class ImageCounterfactuals:
    """V_cf ``(B, 3, S, S)`` in ``[0, 1]`` (V_f where the attack failed), ``success`` ``(B,)`` bool and
    ``attacked`` ``(B,)`` bool (attacked in this call, not read from the cache)."""

    pixels: Tensor
    success: Tensor
    attacked: Tensor


class TrainingImageCounterfactuals:
    """V_cf of training batches under ``policy`` (module docstring).

    Args:
        adapter: the FILL_MASK adapter being trained (pixels read through its ``ImageTransform``).
        bias_words: the bias concepts; each one's ``lexicon`` counterpart must be among them.
        lexicon: the swap lexicon that gives B' from B.
        attack: the attack of Eq. 3.
        policy: one of :data:`POLICIES`.
        k: the period of ``every_n_steps`` and the version length of ``cached``, in steps.
    """

    def __init__(
        self,
        adapter: ModelAdapter,
        bias_words: Sequence[str],
        lexicon: SwapLexicon,
        attack: AttackConfig,
        policy: str = "every_n_steps",
        k: int = 4,
    ) -> None:
        if policy not in POLICIES:
            raise ConfigError(
                f"Expected `image_counterfactuals` to be one of {', '.join(POLICIES)} but got {policy!r}."
            )
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"Expected `k` (steps) to be a positive integer but got {k!r}.")
        words = [word.lower() for word in bias_words]
        missing = [word for word in words if lexicon.mapping.get(word) not in words]
        if len(words) < 2 or missing:
            raise ConfigError(
                f"Expected the bias concept words (FairVLP: `groups`) to hold each one's lexicon counterpart but got {words} "
                f"(no counterpart among them: {missing})."
            )
        self.generator = CounterfactualImages(adapter, words, attack)
        self.counterpart = torch.tensor([words.index(lexicon.mapping[word]) for word in words])
        self.policy, self.k = policy, k
        self._cache: dict[str, tuple[int, Tensor, bool]] = {}  # image key -> (version, V_cf, success)

    def __call__(self, pixels: Tensor, step: int) -> ImageCounterfactuals | None:
        """V_cf of ``pixels`` ``(B, 3, S, S)`` in ``[0, 1]`` at training ``step``; ``None`` when the policy
        makes none this step."""
        pixels = pixels.detach().float().cpu()
        if self.policy == "every_n_steps" and step % self.k:
            return None
        if self.policy != "cached":
            return self._attack(pixels)
        version = step // self.k
        keys = [image_fingerprint(image) for image in pixels]
        todo = [b for b, key in enumerate(keys) if self._cache.get(key, (-1,))[0] != version]
        out = ImageCounterfactuals(
            pixels.clone(), torch.zeros(len(pixels), dtype=torch.bool), torch.zeros(len(pixels), dtype=torch.bool)
        )
        if todo:
            fresh = self._attack(pixels[todo])
            for row, b in enumerate(todo):
                self._cache[keys[b]] = (version, fresh.pixels[row], bool(fresh.success[row]))
            out.attacked[todo] = True
        for b, key in enumerate(keys):
            _, out.pixels[b], out.success[b] = self._cache[key]
        return out

    def _attack(self, pixels: Tensor) -> ImageCounterfactuals:
        logits = self.generator.logits
        was_training = logits.adapter.training
        logits.adapter.eval()  # read the concepts without dropout, as the attack does
        try:
            target = self.counterpart[logits.probabilities(pixels).argmax(dim=1)]  # B' of the concept read
            attacked = self.generator.generate(pixels, target).pixels
            success = logits.probabilities(attacked).argmax(dim=1) == target
        finally:
            logits.adapter.train(was_training)
        kept = torch.where(success.view(-1, 1, 1, 1), attacked, pixels)
        return ImageCounterfactuals(kept, success, torch.ones(len(pixels), dtype=torch.bool))
