r"""Counterfactual-consistency fine-tuning of a chat VLM: FairVLP's idea (Zhang et al., 2022, Sec. 5.1) carried from
masked words to answers. A chat model's answer distribution to a question should not change when the person in the
image is swapped for a counterfactual one.

The loss of a batch of questions, each with its factual image :math:`x_f` and its counterfactual image
:math:`x_{cf}` (BiasWorld-QA's, :mod:`vlbias.data.biasworld_qa`: the same picture, the figure's group swapped), is

.. math::
    \mathcal{L} = \mathcal{L}_{ans} + \lambda\, \mathcal{L}_{cons}, \qquad
    \mathcal{L}_{cons} = \frac{1}{N} \sum_{i=1}^{N} D\big(P(\cdot \mid x_{f,i}, q_i),\, P(\cdot \mid x_{cf,i}, q_i)\big)

where :math:`\mathcal{L}_{ans}` is the next-token loss on the factual answers
(:func:`~vlbias.objectives.answer_likelihood.answer_nll`, what :class:`~vlbias.modules.chat_answer_tuning.
ChatAnswerTuning` trains on; FairVLP Eq. 15's cross-entropy in its place), :math:`P(\cdot \mid x, q)` the answer
distribution over the question's options (their teacher-forced log-probabilities renormalised) and :math:`D` the
divergence of :func:`~vlbias.objectives.answer_consistency.answer_consistency_loss` (``divergence``: FairVLP Eq. 14's
KL from the factual to the counterfactual distribution by default; ``gradient``: the side(s) the gradient flows
through, both by default, as the paper writes no stop-gradient). FairVLP Eq. 16 weighs the two terms
:math:`(1-\alpha)\mathcal{L}_{mlm} + \alpha \mathcal{L}_{KL}`; :math:`\lambda = \alpha / (1 - \alpha)` is the same
objective up to the factor :math:`1 - \alpha` (a learning-rate scale), and ``consistency_weight`` :math:`\lambda`
is what vlbias takes (:math:`\lambda = 0`: plain instruction tuning). The counterfactual answers are not trained on:
the question's answer belongs to the factual image, and the consistency term carries what the swap should not change.

Full fine-tuning, or LoRA through ``peft`` (``lora``: :class:`~vlbias.mitigation.chat_lora.LoraOptions`, target
modules and rank; only the LoRA weights train). At the end of ``fit`` the model is exported to ``<log_dir>/model``
as a folder that ``transformers`` alone loads: with LoRA, the adapter merged into the weights
(:func:`~vlbias.mitigation.chat_lora.export_merged`, ``merge_and_unload``). Trains under DDP as any module; the bias
callback (``callbacks/bias_suite.py``) measures ``bias_qa`` and ``counterfactual_answers`` every epoch
(``configs/experiment/biasworld_qa_consistency.yaml``).

Logged: ``{stage}/loss``, ``{stage}/answer_loss``, ``{stage}/consistency`` and ``{stage}/accuracy``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from vlbias.errors import ConfigError
from vlbias.mitigation.chat_lora import LoraOptions, add_lora, export_merged
from vlbias.models.families.chat_vlm import OptionScores
from vlbias.modules.chat_answer_tuning import TINY_PALIGEMMA, ChatAnswerTuning
from vlbias.modules.model_spec import ModelSpec
from vlbias.objectives.answer_consistency import (
    Divergence,
    GradientSide,
    answer_consistency_loss,
    check_consistency_choices,
)


class CounterfactualConsistencyTuning(ChatAnswerTuning):
    """Fine-tune a chat VLM on its answers with the counterfactual-consistency term (module docstring).

    Args:
        model, template, image_key, question_key, options_key, answer_key, optimizer, scheduler: as
            :class:`~vlbias.modules.chat_answer_tuning.ChatAnswerTuning`.
        consistency_weight: :math:`\\lambda`, the weight of the consistency term (0: instruction tuning alone).
        divergence: ``kl`` (FairVLP Eq. 14), ``symmetric_kl`` or ``js``.
        gradient: the side(s) the consistency gradient flows through: ``both``, ``factual`` or ``counterfactual``.
        counterfactual_key: batch key of each question's counterfactual image.
        lora: LoRA layers to train instead of every weight (``None``: full fine-tuning).
    """

    purpose = "counterfactual-consistency fine-tuning"

    def __init__(
        self,
        model: ModelSpec = TINY_PALIGEMMA,
        consistency_weight: float = 1.0,
        divergence: Divergence = "kl",
        gradient: GradientSide = "both",
        counterfactual_key: str = "counterfactual_image",
        lora: LoraOptions | None = None,
        template: str | None = None,
        image_key: str = "image",
        question_key: str = "question",
        options_key: str = "options",
        answer_key: str = "answer_index",
        optimizer: OptimizerCallable = lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01),
        scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        if not consistency_weight >= 0:  # also refuses NaN
            raise ConfigError(f"Expected `consistency_weight` >= 0 but got {consistency_weight}.")
        check_consistency_choices(divergence, gradient)
        super().__init__(model, template, image_key, question_key, options_key, answer_key, optimizer, scheduler)
        # the peft model wraps self.adapter.model, already a submodule: kept out of the module tree (no second copy
        # of every weight in the state dict)
        self.__dict__["lora"] = None if lora is None else add_lora(self.adapter, lora)

    def added_loss(self, batch: dict[str, object], factual: OptionScores, stage: str) -> Tensor | None:
        r""":math:`\lambda \mathcal{L}_{cons}` (module docstring); the consistency is logged in evaluation whatever
        its weight, and computed in training only when it weighs."""
        hparams = self.hparams
        if hparams.consistency_weight == 0 and stage == "train":
            return None
        counterfactual = self.option_log_probs(batch, hparams.counterfactual_key)
        consistency = answer_consistency_loss(
            factual.log_prob, counterfactual.log_prob, None, hparams.divergence, hparams.gradient
        )
        self.log(f"{stage}/consistency", consistency, batch_size=len(factual.log_prob))
        return hparams.consistency_weight * consistency

    def export(self, folder: Path) -> None:
        """The model as ``transformers`` alone loads it: with LoRA, merged into the weights (the module then holds
        the merged model)."""
        if self.lora is None:
            super().export(folder)
            return
        export_merged(self.adapter, self.lora, folder)
        self.__dict__["lora"] = None
