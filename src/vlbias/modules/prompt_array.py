r"""DebiasCLIP (Berg et al., 2022, "A Prompt Array Keeps the Bias Away", AACL 2022): a prompt array trained
adversarially against an attribute classifier, with CLIP's contrastive loss that keeps accuracy.

The CLIP is frozen, image and text towers alike; what trains is the prompt array :math:`P` (``n_prompts`` token
embeddings read before every text, :class:`~vlbias.models.families.prompt_array.PromptArrayCLIP`) and the adversary
:math:`h_\phi`, a two-layer MLP (``adversary_hidden`` wide, ReLU) that predicts an image's protected attribute (its
index in ``groups``, at ``group_label_key`` of the batch) from the cosine similarities of the image to the
attribute-neutral ``queries``, each read after the prompts. Each training step, on one batch of images, their
captions and attributes (manual optimisation, :mod:`vlbias.objectives.prompt_array` for the formulas):

1. ``adversary_steps`` steps of the adversary's optimizer on :math:`\mathcal{L}_{adv}(\phi, P)`;
2. one step of the prompts' optimizer on :math:`\mathcal{L}_P = -\mathcal{L}_{adv} + \lambda\,\mathcal{L}_{itc}`,
   :math:`\mathcal{L}_{itc}` CLIP's symmetric InfoNCE of the images and their captions read with the prompts
   (:func:`~vlbias.objectives.itc_loss`, one positive per row; under DDP against the gathered batches of every
   rank, as one process with the whole batch).

The prompts start as the authors' code starts them by default: ``n_prompts`` copies of the embedding of token id
0 (``debias_token_init="zeros"``; 2 prompts in their configuration). Where the authors' code differs
(``oxai/debias-vision-lang``: ``Adversary`` in ``debias_clip/model/model.py``, the training loop in ``src/debias.py``
at commit ``adcbacc``), by choice here: its adversary has three hidden layers of 32 with sigmoid outputs (the
cross-entropy taken on those), reads CLIP's logits divided by 20 (:math:`e^{t}\cos / 20`) rather than the cosines,
and trains alone for a few epochs first, then alternates with the prompts in blocks of batches rather than
``adversary_steps`` per prompt step. Each backward pass reaches every trainable tensor (the adversary's loss is
taken on similarities that keep the prompts' graph; the prompts' loss goes through the adversary), and the
gradients of both are zeroed before each, so each step moves only its own side and the module trains under plain
``ddp`` as under one process. The learning rates are constant (no scheduler).

Logged: ``train/adversary_loss`` and ``train/adversary_accuracy`` (after the adversary's steps), ``train/itc_loss``
and ``train/loss`` (:math:`\mathcal{L}_P`); ``val/`` and ``test/``: ``loss`` (the contrastive loss with the
prompts), ``i2t_accuracy`` (as :class:`~vlbias.modules.ContrastivePretraining`: the top caption is right when it
is of the image's content class, ``content_label_key``), ``adversary_loss`` and ``adversary_accuracy`` (how well
the adversary still reads the attribute from the queries: ``1 / len(groups)`` is chance). At the end of ``fit``
the :class:`~vlbias.models.families.prompt_array.PromptArrayCLIP` is exported to ``<log_dir>/model``
(``vlbias measure --model prompt_array --checkpoint <log_dir>/model``).
"""

from __future__ import annotations

import torch
from jsonargparse.typing import NonNegativeFloat, PositiveInt
from lightning.pytorch.cli import OptimizerCallable
from torch import Tensor, nn

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability
from vlbias.models.families.clip import CLIPAdapter
from vlbias.models.families.prompt_array import PromptArrayCLIP
from vlbias.models.unseen_text import unseen_by
from vlbias.modules.adapter_module import AdapterModule
from vlbias.modules.contrastive import contrastive_loss
from vlbias.modules.model_spec import TINY_CLIP, ModelSpec
from vlbias.objectives import adversary_loss, itc_loss, prompt_array_loss
from vlbias.options import check_value


class PromptArrayDebiasing(AdapterModule):
    """Train a prompt array against an attribute adversary (module docstring) on image-caption batches with each
    image's attribute.

    Args:
        queries: the attribute-neutral texts whose similarities to an image the adversary reads (e.g. BiasWorld's
            ``a person cooking.``); each must be readable by the tokenizer (not empty, not all unknown tokens, not
            cut).
        groups: the attribute's groups, in the order of the labels at ``group_label_key`` (at least two).
        n_prompts: K, the prompt tokens before every text.
        lam: :math:`\\lambda`, the weight of the contrastive loss in the prompts' objective, >= 0 (0: the
            adversarial objective alone).
        adversary_steps: the adversary's optimizer steps per prompt step.
        adversary_hidden: the width of the adversary's hidden layer.
        image_key, caption_key: batch keys of the images and their captions.
        group_label_key: batch key of each image's group (an index into ``groups``).
        content_label_key: batch key of each pair's content class for the validation accuracy (``None``: only the
            image's own caption is right).
        model: the CLIP whose texts are prompted (:class:`~vlbias.modules.model_spec.ModelSpec`; model ``clip``
            only), frozen.
        optimizer: builds the prompts' optimizer from the prompt array.
        adversary_optimizer: builds the adversary's optimizer from its parameters.
    """

    capability = Capability.EMBED
    purpose = "prompt-array debiasing"

    def __init__(
        self,
        queries: list[str],
        groups: list[str],
        n_prompts: int = 2,
        lam: float = 1.0,
        adversary_steps: int = 1,
        adversary_hidden: int = 32,
        image_key: str = "pixel_values",
        caption_key: str = "caption",
        group_label_key: str = "group",
        content_label_key: str | None = "label",
        model: ModelSpec = TINY_CLIP,
        optimizer: OptimizerCallable = lambda params: torch.optim.Adam(params, lr=1e-3),
        adversary_optimizer: OptimizerCallable = lambda params: torch.optim.Adam(params, lr=1e-3),
    ) -> None:
        what = "prompt-array option"
        for name, value, kind in (
            ("n_prompts", n_prompts, PositiveInt),
            ("lam", lam, NonNegativeFloat),
            ("adversary_steps", adversary_steps, PositiveInt),
            ("adversary_hidden", adversary_hidden, PositiveInt),
        ):
            check_value(name, value, kind, what)
        if model.name != CLIPAdapter.name:
            raise ConfigError(
                f"Prompt-array debiasing prompts transformers' CLIP text tower (model 'clip') but got model "
                f"{model.name!r}."
            )
        if len(groups) < 2:
            raise ConfigError(f"Expected `groups` to name at least two groups but got {groups!r}.")
        if not queries:
            raise ConfigError("Expected `queries` to hold at least one attribute-neutral text but got none.")
        super().__init__(model, optimizer, None)
        self.automatic_optimization = False
        inner = self.adapter.requires_grad_(False)
        start = inner.model.text_model.embeddings.token_embedding.weight[0].detach()
        self.adapter = PromptArrayCLIP(inner, start.expand(n_prompts, -1))
        unread = [(query, why) for query, why in zip(queries, unseen_by(self.adapter, queries)) if why is not None]
        if unread:
            listed = "; ".join(f"{query!r} ({why.reason})" for query, why in unread)
            raise ConfigError(
                f"The tokenizer of model {model.name!r} cannot read these `queries` as written: {listed}."
            )
        self.queries = list(queries)
        self.make_adversary_optimizer = adversary_optimizer
        self.adversary = nn.Sequential(
            nn.Linear(len(queries), adversary_hidden), nn.ReLU(), nn.Linear(adversary_hidden, len(groups))
        )

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.make_optimizer([self.adapter.prompts]), self.make_adversary_optimizer(self.adversary.parameters())]

    # -- the two sides -----------------------------------------------------------------------------
    def _images(self, batch: dict[str, object]) -> tuple[Tensor, Tensor]:
        """The batch's image embeddings ``(B, D)`` (the frozen image tower, no graph) and attributes ``(B,)``."""
        missing = [key for key in (self.hparams.image_key, self.hparams.group_label_key) if key not in batch]
        if missing:
            raise InputError(
                f"Prompt-array debiasing reads batch keys {missing} (`image_key`, `group_label_key`) but the batch has "
                f"{sorted(batch)}."
            )
        with torch.no_grad():
            images = self.adapter.embed_images(self.adapter.prepare_images(batch[self.hparams.image_key]))
        attributes = torch.as_tensor(batch[self.hparams.group_label_key], device=images.device).long()
        return images, attributes

    def _adversary_logits(self, images: Tensor) -> Tensor:
        """:math:`h_\\phi(s_i(P))` ``(B, G)``: the adversary on the cosines of the images to the prompted queries."""
        queries = self.adapter.embed_texts(self.adapter.prepare_texts(self.queries))  # (Q, D)
        return self.adversary(images @ queries.T)

    def _itc(self, images: Tensor, captions: list[str]) -> Tensor:
        """:math:`\\mathcal{L}_{itc}` of the images and their prompted captions, one positive per row, against the
        batches of every rank (gathered with their gradients) under DDP."""
        texts = self.adapter.embed_texts(self.adapter.prepare_texts(captions))  # (B, D)
        gallery_images, gallery_texts = images, texts
        first = 0
        if self.trainer.world_size > 1:  # the same B on every rank: DistributedSampler pads the shards
            gallery_images = self.all_gather(images).flatten(0, 1)  # (W * B, D); frozen, no gradient
            gallery_texts = self.all_gather(texts, sync_grads=True).flatten(0, 1)
            first = self.global_rank * len(images)
        positives = torch.zeros(len(images), len(gallery_texts), dtype=torch.bool, device=images.device)
        positives[torch.arange(len(images)), first + torch.arange(len(images))] = True
        return itc_loss(images, texts, self.adapter.logit_scale, gallery_images, gallery_texts, positives)

    def _step(self, optimizer, loss: Tensor) -> None:
        """Zero both sides' gradients, backpropagate ``loss`` and step ``optimizer`` alone."""
        for each in self.optimizers():
            each.zero_grad()
        self.manual_backward(loss)
        optimizer.step()

    # -- training and evaluation -------------------------------------------------------------------
    def training_step(self, batch: dict[str, object], batch_idx: int) -> None:
        images, attributes = self._images(batch)
        prompt_optimizer, adversary_optimizer = self.optimizers()
        n = len(images)
        for _ in range(self.hparams.adversary_steps):
            logits = self._adversary_logits(images)
            adversarial = adversary_loss(logits, attributes)
            self._step(adversary_optimizer, adversarial)
        self.log("train/adversary_loss", adversarial.detach(), prog_bar=True, batch_size=n)
        self.log("train/adversary_accuracy", self._accuracy(logits, attributes), batch_size=n)
        contrastive = self._itc(images, list(batch[self.hparams.caption_key]))
        parts = prompt_array_loss(self._adversary_logits(images), attributes, contrastive, self.hparams.lam)
        self._step(prompt_optimizer, parts.total)
        self.log("train/itc_loss", contrastive.detach(), batch_size=n)
        self.log("train/loss", parts.total.detach(), prog_bar=True, batch_size=n)

    @staticmethod
    def _accuracy(logits: Tensor, attributes: Tensor) -> Tensor:
        return (logits.argmax(dim=1) == attributes).float().mean()

    def _evaluate(self, batch: dict[str, object], stage: str) -> None:
        images, attributes = self._images(batch)
        texts = self.adapter.embed_texts(self.adapter.prepare_texts(list(batch[self.hparams.caption_key])))
        key = self.hparams.content_label_key
        labels = None if key is None or key not in batch else torch.as_tensor(batch[key], device=images.device)
        loss, accuracy = contrastive_loss(images, texts, self.adapter.logit_scale, labels)
        logits = self._adversary_logits(images)
        n = len(images)
        self.log(f"{stage}/loss", loss, prog_bar=True, batch_size=n)
        self.log(f"{stage}/i2t_accuracy", accuracy, prog_bar=stage == "val", batch_size=n)
        self.log(f"{stage}/adversary_loss", adversary_loss(logits, attributes), batch_size=n)
        self.log(f"{stage}/adversary_accuracy", self._accuracy(logits, attributes), batch_size=n)

    def validation_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._evaluate(batch, "test")
