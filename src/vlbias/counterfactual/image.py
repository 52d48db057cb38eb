r"""Image counterfactuals: a model-specific targeted attack on the bias concept (CounterBias,
Zhang et al., 2022, Sec. 3, Eq. 2-3), with an on-disk cache.

With the bias prompt "a [MASK] is in the picture" the model's masked-word prediction over the
bias concept words is its reading of the bias concept in the image (Eq. 2):

.. math::
    P(B \mid V_f) = P([\text{MASK}] = B \mid V_f, \text{bias prompt})

and the counterfactual image is :math:`V_{cf} = V_f + \delta` with (Eq. 3)

.. math::
    \delta = \arg\min_{\lVert\delta\rVert_\infty \le \epsilon}
        \mathcal{L}\bigl(P([\text{MASK}] \mid V_f + \delta, \text{bias prompt}), B'\bigr)

for the counterfactual concept :math:`B'` (``woman`` -> ``man``). :class:`BiasWordLogits` is the
thin ``nn.Module`` that ``torchattacks`` attacks: pixels in ``[0, 1]`` -> the adapter's own
normalisation -> the masked-word scores of the bias words
(:func:`vlbias.models.masked_words.word_log_probs`, log-probabilities over the whole
vocabulary), whose softmax is :math:`P(B \mid V)` over the bias concepts; the loss
:math:`\mathcal{L}` is the cross-entropy of that softmax with :math:`B'` (``torchattacks``'
targeted PGD, or FGSM). The attack runs in ``[0, 1]`` pixel space on the adapter's resized and
cropped image, so :math:`\lVert\delta\rVert_\infty \le \epsilon` holds there.

The model's resized, un-normalised image is recovered as ``prepare_images(x) * std + mean``
(:func:`unit_pixels`); ``ImageTransform`` clamps to ``[0, 1]`` before normalising, so this is the
resized image up to float rounding (~1e-7).

Only adapters that preprocess pixels with an :class:`~vlbias.models.preprocess.ImageTransform`
(``adapter.transform``; among FILL_MASK models: ViLT, ALBEF, FLAVA) can be attacked; region-feature models
(VisualBERT, LXMERT) read detector features, not pixels, and are refused.

The attack runs in the precision the measurements run in (:func:`~vlbias.models.inference.mixed_precision`:
bfloat16 autocast on CUDA, float32 on CPU), so it moves the prediction that is then measured.
Counterfactual images are cached on disk keyed by (model fingerprint, image pixels, attack
config, autocast dtype, bias prompt and words, target concept), so repeating a measurement does no attack.

Example:
    >>> from vlbias.models.registry import load
    >>> adapter = load("vilt", tiny=True, device="cpu")
    >>> generator = CounterfactualImages(adapter, ["man", "woman"], AttackConfig(eps=0.1, steps=3))
    >>> pixels = torch.rand(2, 3, 32, 32)
    >>> result = generator.generate(pixels, target=torch.tensor([1, 0]))
    >>> bool((result.pixels - pixels).abs().max() <= 0.1 + 1e-6)
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import torchattacks
from jsonargparse.typing import PositiveInt
from torch import Tensor, nn

from vlbias.atomic import atomic_write
from vlbias.counterfactual.text import BIAS_PROMPT, fill_template
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.models.base import ModelAdapter
from vlbias.models.inference import autocast_name, measuring, mixed_precision
from vlbias.models.masked_words import word_log_probs, word_pieces
from vlbias.models.preprocess import ImageTransform
from vlbias.models.unseen_text import unseen_masked
from vlbias.options import PositiveUnitInterval, Seed

METHODS = ("pgd", "fgsm")


@dataclass(frozen=True)
class AttackConfig:
    """The targeted attack of Eq. 3.

    Args:
        method: ``"pgd"`` (``torchattacks.PGD``, targeted) or ``"fgsm"`` (one signed step of size ``eps``).
        eps: :math:`\\epsilon`, the L-infinity bound on :math:`\\delta` in ``[0, 1]`` pixel space.
        alpha: PGD step size.
        steps: PGD steps.
        random_start: PGD starts from a uniform point in the eps-ball, drawn from ``seed``.
        seed: seed of the random start.
    """

    method: Literal["pgd", "fgsm"] = "pgd"
    eps: PositiveUnitInterval = 8 / 255
    alpha: PositiveUnitInterval = 2 / 255
    steps: PositiveInt = 10
    random_start: bool = False
    seed: Seed = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"Expected attack `method` to be one of {', '.join(METHODS)} but got {self.method!r}.")
        for name in ("eps", "alpha"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ConfigError(f"Expected attack `{name}` in (0, 1] (pixel space [0, 1]) but got {value!r}.")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ConfigError(f"Expected attack `steps` to be a positive integer but got {self.steps!r}.")

    def key(self) -> dict[str, object]:
        """What determines the attacked pixels (the seed only with a random start): the cache key."""
        key = asdict(self)
        if not self.random_start:
            key.pop("seed")
        return key

    def build(self, model: nn.Module) -> torchattacks.attack.Attack:
        """The ``torchattacks`` attack on ``model``, in targeted-by-label mode."""
        if self.method == "pgd":
            attack = torchattacks.PGD(
                model, eps=self.eps, alpha=self.alpha, steps=self.steps, random_start=self.random_start
            )
        else:
            attack = torchattacks.FGSM(model, eps=self.eps)
        attack.set_mode_targeted_by_label(quiet=True)
        return attack


def pixel_transform(adapter: ModelAdapter) -> ImageTransform:
    """The adapter's :class:`ImageTransform`, or :class:`CapabilityError` if it reads no pixels."""
    transform = getattr(adapter, "transform", None)
    if not isinstance(transform, ImageTransform):
        raise CapabilityError(
            f"Model {adapter.name!r} does not preprocess pixels with an ImageTransform, so its images "
            f"cannot be attacked in pixel space (region-feature models read detector features)."
        )
    return transform


def _stats(transform: ImageTransform, like: Tensor) -> tuple[Tensor, Tensor]:
    shape = (1, 3, 1, 1)
    mean = torch.tensor(transform.mean, dtype=like.dtype, device=like.device).view(shape)
    std = torch.tensor(transform.std, dtype=like.dtype, device=like.device).view(shape)
    return mean, std


def unit_pixels(adapter: ModelAdapter, images) -> Tensor:
    """Images (paths, PIL or a float tensor in ``[0, 1]``) resized and cropped as ``adapter``
    sees them, un-normalised to ``[0, 1]``: ``(B, 3, S, S)`` float32 on the adapter's device."""
    transform = pixel_transform(adapter)
    normalised = adapter.prepare_images(images).float()
    mean, std = _stats(transform, normalised)
    return (normalised * std + mean).clamp_(0.0, 1.0)


def normalise(adapter: ModelAdapter, pixels: Tensor) -> Tensor:
    """``[0, 1]`` pixels -> the adapter's ``pixel_values`` (its mean/std and dtype)."""
    mean, std = _stats(pixel_transform(adapter), pixels)
    dtype = next(adapter.parameters()).dtype
    return ((pixels - mean) / std).to(dtype)


class BiasWordLogits(nn.Module):
    """``[0, 1]`` pixels ``(B, 3, S, S)`` -> ``(B, n_words)`` scores of the bias words at the bias
    prompt's mask (log-probabilities over the vocabulary; their softmax is P(B | V), Eq. 2).

    Args:
        adapter: a FILL_MASK adapter that reads pixels.
        words: the bias concept words; column ``k`` of the output is ``words[k]``.
        prompt: the bias prompt, ``{mask}`` marking the mask.
        strategy: multi-piece word strategy of :func:`~vlbias.models.masked_words.word_log_probs`.
    """

    def __init__(
        self, adapter: ModelAdapter, words: Sequence[str], prompt: str = BIAS_PROMPT, strategy: str = "mean_all_masked"
    ) -> None:
        super().__init__()
        pixel_transform(adapter)
        self.adapter = adapter
        self.words = list(words)
        self.prompt = fill_template(prompt, adapter.tokenizer.mask_token)
        self.strategy = strategy
        self._check_prompt_is_read()

    def _check_prompt_is_read(self) -> None:
        """Refuse a bias prompt whose mask the model's maximum length cuts off (nothing would be read at it): the
        prompt as it is fed, with the mask repeated once per word piece of the longest bias word."""
        mask = self.adapter.tokenizer.mask_token
        pieces = max((self._piece_count(word) for word in self.words), default=1)
        fed = self.prompt.replace(mask, " ".join([mask] * pieces))
        problem = unseen_masked(self.adapter, [fed])[0]
        if problem is not None and problem.skip:
            raise ConfigError(
                f"The bias prompt {fed!r} cannot be read by model {self.adapter.name!r}: {problem.reason}"
            )

    def _piece_count(self, word: str) -> int:
        """Word pieces of ``word``; 1 for a word the tokenizer cannot score (reported where words are scored)."""
        try:
            return len(word_pieces(self.adapter.tokenizer, [word], self.strategy)[0])
        except InputError:
            return 1

    def forward(self, pixels: Tensor) -> Tensor:
        """Scores of ``pixels`` on any device (moved to the adapter's: V_cf are kept on the CPU)."""
        pixels = pixels.to(self.adapter.device)
        return word_log_probs(
            self.adapter, normalise(self.adapter, pixels), self.prompt, self.words, self.strategy
        ).float()

    def probabilities(self, pixels: Tensor, batch_size: int = 32) -> Tensor:
        """P(B | V) ``(B, n_words)``, the softmax over the bias words, without gradients."""
        with measuring(self.adapter.device):
            return torch.cat([self(chunk).softmax(dim=-1).cpu() for chunk in pixels.split(batch_size)])


def model_fingerprint(adapter: ModelAdapter) -> str:
    """SHA-256 of the adapter's name, weights (names, dtypes, shapes, values) and tokenizer vocabulary."""
    digest = hashlib.sha256(adapter.name.encode())
    for name, tensor in adapter.state_dict().items():
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    vocab = sorted(adapter.tokenizer.get_vocab().items())
    digest.update(json.dumps(vocab).encode())
    return digest.hexdigest()


def image_fingerprint(pixels: Tensor) -> str:
    """SHA-256 of one image's ``[0, 1]`` float32 pixels ``(3, S, S)``."""
    data = pixels.detach().float().cpu().contiguous()
    return hashlib.sha256(
        f"{tuple(data.shape)}".encode() + data.view(-1).view(torch.uint8).numpy().tobytes()
    ).hexdigest()


@dataclass
class CounterfactualBatch:
    """Counterfactual images ``V_cf`` ``(B, 3, S, S)`` in ``[0, 1]``, on the device of the attacked images, and which
    came from the cache."""

    pixels: Tensor
    cache_hit: Tensor  # (B,) bool


class CounterfactualImages:
    """Counterfactual images by the targeted attack of Eq. 3, cached on disk.

    Args:
        adapter: a FILL_MASK adapter that reads pixels (see the module docstring).
        words: the bias concept words (``["man", "woman"]``); targets index into them.
        attack: the attack configuration.
        cache_dir: where counterfactual images are kept (one ``<key>.pt`` file each); ``None``
            attacks every time.
        prompt: the bias prompt of Eq. 2, ``{mask}`` marking the mask.
        strategy: multi-piece word strategy of :func:`~vlbias.models.masked_words.word_log_probs`.
    """

    def __init__(
        self,
        adapter: ModelAdapter,
        words: Sequence[str],
        attack: AttackConfig | None = None,
        cache_dir: str | Path | None = None,
        prompt: str = BIAS_PROMPT,
        strategy: str = "mean_all_masked",
    ) -> None:
        self.logits = BiasWordLogits(adapter, words, prompt, strategy)
        self.attack_config = attack or AttackConfig()
        self.attack = self.attack_config.build(self.logits)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        """The model fingerprint in every cache key (computed once)."""
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.logits.adapter)
        return self._fingerprint

    def cache_key(self, pixels: Tensor, target_word: str) -> str:
        """The cache key of one image ``(3, S, S)`` attacked toward ``target_word``."""
        key = {
            "model": self.fingerprint,
            "image": image_fingerprint(pixels),
            "attack": self.attack_config.key(),
            "autocast": autocast_name(self.logits.adapter.device),
            "prompt": self.logits.prompt,
            "words": self.logits.words,
            "strategy": self.logits.strategy,
            "target": target_word,
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    def generate(self, pixels: Tensor, target: Tensor) -> CounterfactualBatch:
        """Attack ``pixels`` ``(B, 3, S, S)`` in ``[0, 1]`` toward bias word ``target[b]``
        (index into ``words``); cached images are read instead of attacked. V_cf comes back on ``pixels``' device
        (the attack runs on the adapter's, the cache is read and written on the CPU)."""
        if pixels.ndim != 4 or pixels.shape[1] != 3:
            raise InputError(f"Expected pixels of shape (B, 3, S, S) but got {tuple(pixels.shape)}.")
        if float(pixels.min()) < 0.0 or float(pixels.max()) > 1.0:
            raise InputError("Expected pixels in [0, 1] (un-normalised) for the attack.")
        target = torch.as_tensor(target, dtype=torch.long).cpu()
        if target.shape != (pixels.shape[0],) or bool(((target < 0) | (target >= len(self.logits.words))).any()):
            raise InputError(
                f"Expected one target index in [0, {len(self.logits.words)}) per image but got {target.tolist()}."
            )
        device = pixels.device
        pixels = pixels.detach().float().cpu()
        output = torch.empty_like(pixels)
        hit = torch.zeros(len(pixels), dtype=torch.bool)
        keys: list[str | None] = [None] * len(pixels)
        if self.cache_dir is not None:
            for b in range(len(pixels)):
                keys[b] = self.cache_key(pixels[b], self.logits.words[int(target[b])])
                path = self.cache_dir / f"{keys[b]}.pt"
                if path.is_file():
                    output[b], hit[b] = torch.load(path, weights_only=True), True
        todo = (~hit).nonzero().flatten()
        if len(todo):
            output[todo] = self._attack(pixels[todo], target[todo])
            if self.cache_dir is not None:
                for b in todo.tolist():
                    self._write(self.cache_dir / f"{keys[b]}.pt", output[b])
        return CounterfactualBatch(output.to(device), hit)

    def _attack(self, pixels: Tensor, target: Tensor) -> Tensor:
        adapter = self.logits.adapter
        device, was_training = adapter.device, adapter.training
        self.logits.eval()  # torchattacks restores the wrapper's mode, so make it eval; dropout off
        trainable = [p for p in adapter.parameters() if p.requires_grad]
        for parameter in trainable:  # gradients w.r.t. the pixels only
            parameter.requires_grad_(False)
        try:
            with (
                torch.enable_grad(),
                mixed_precision(device),
                torch.random.fork_rng(devices=[device] if device.type == "cuda" else []),
            ):
                torch.manual_seed(self.attack_config.seed)
                # torchattacks moves inputs and labels to the device the model had when the attack was built; a
                # model being trained moves after that (Lightning puts it on the GPU), so the attack follows it
                self.attack.set_device(device)
                adversarial = self.attack(pixels.to(device), target.to(device))
        finally:
            adapter.train(was_training)
            for parameter in trainable:
                parameter.requires_grad_(True)
        return adversarial.detach().float().cpu()

    @staticmethod
    def _write(path: Path, pixels: Tensor) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda handle: torch.save(pixels.clone(), handle))
