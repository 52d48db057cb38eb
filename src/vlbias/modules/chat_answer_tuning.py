"""Instruction tuning of a chat VLM (capability ANSWER) on multiple-choice questions about images: the next-token loss
on the answer's tokens, the prompt's tokens given (masked), the prompt rendered as the question suites render it."""

from __future__ import annotations

import torch
import torch.distributed as dist
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor

from vlbias.models.base import Capability
from vlbias.models.families.chat_vlm import OptionScores
from vlbias.modules.adapter_module import AdapterModule
from vlbias.modules.model_spec import ModelSpec
from vlbias.objectives.answer_likelihood import answer_nll, answer_tokens
from vlbias.suites.bias_qa_options import BiasQAOptions

#: The default model: a tiny random PaliGemma, which learns BiasWorld-QA's pictures in a few hundred steps on a CPU
#: (its prefix attends both ways; the tiny LLaVA had not begun to read them after 600).
TINY_PALIGEMMA = ModelSpec("paligemma", tiny=True)


class ChatAnswerTuning(AdapterModule):
    """Train a chat VLM to answer multiple-choice questions about images (e.g.
    :class:`~vlbias.data.biasworld_qa_datamodule.BiasWorldQADataModule`'s batches).

    Each question becomes the prompt the chat suites show (``bias_qa`` and ``counterfactual_answers``: the question,
    its options lettered one a line in the batch's order, "Answer with one of the options."; or ``template``), rendered
    by the family's chat template with the image (:meth:`ChatVLMAdapter.prompt_inputs
    <vlbias.models.families.chat_vlm.ChatVLMAdapter.prompt_inputs>`). Every option's log-probability after the prompt
    is computed with gradients (:meth:`option_log_probs`, the prompt's key/value cache shared across the options,
    each option's text after the adapter's ``answer_prefix``, as the suites score it); the loss is the answer's
    next-token cross-entropy per answer token (:func:`~vlbias.objectives.answer_likelihood.answer_nll`): the prompt's
    tokens are never predicted. No end-of-sequence token is appended: the model is trained on exactly what the suites
    score.

    A subclass adds a term over the same scores (:meth:`added_loss`):
    :class:`~vlbias.modules.counterfactual_consistency.CounterfactualConsistencyTuning` compares them with
    :meth:`option_log_probs` of the batch's counterfactual images. Under DDP the answers' loss is divided by the mean
    over ranks of their answer tokens, so that the averaged gradient is the whole batch's.

    Logged: ``{stage}/loss`` and ``{stage}/accuracy`` (the option of the largest log-probability is the answer), and
    with an added term ``{stage}/answer_loss``.
    At the end of ``fit`` the adapter is exported with ``save_pretrained`` to ``<log_dir>/model``.

    Args:
        model, optimizer, scheduler: as :class:`~vlbias.modules.adapter_module.AdapterModule`; the model needs the
            ANSWER capability (a chat VLM).
        template: the prompt's template, as the chat suites' option ``template`` (``None``: their default); train
            and measure with the same one.
        image_key: batch key of the images (PIL images or paths).
        question_key: batch key of the questions.
        options_key: batch key of each question's options, in the order shown (the same number for every question).
        answer_key: batch key of the answers' indices into their options.
    """

    capability = Capability.ANSWER
    purpose = "answer instruction tuning"

    def __init__(
        self,
        model: ModelSpec = TINY_PALIGEMMA,
        template: str | None = None,
        image_key: str = "image",
        question_key: str = "question",
        options_key: str = "options",
        answer_key: str = "answer_index",
        optimizer: OptimizerCallable = lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01),
        scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        self.prompts = BiasQAOptions(template=template)  # the template checked before any model is built
        super().__init__(model, optimizer, scheduler)

    def prompt(self, question: str, options: list[str]) -> str:
        """The prompt of ``question`` with ``options`` in this order, as the chat suites write it."""
        return self.prompts.prompt("", question, options)

    def option_log_probs(self, batch: dict[str, object], image_key: str | None = None) -> OptionScores:
        """Every option's log-probability after its question's prompt, with gradients, ``(N, O)``, for the images
        at ``image_key`` (default the module's ``image_key``)."""
        hparams = self.hparams
        images = batch[image_key or hparams.image_key]
        options = [list(item) for item in batch[hparams.options_key]]
        prompts = [self.prompt(q, o) for q, o in zip(batch[hparams.question_key], options, strict=True)]
        return self.adapter.option_log_probs(images, prompts, options)

    def _step(self, batch: dict[str, object], stage: str) -> Tensor:
        scores = self.option_log_probs(batch)
        answer = torch.as_tensor(batch[self.hparams.answer_key], device=scores.log_prob.device)
        answer_loss = answer_nll(
            scores.log_prob, scores.n_tokens, answer, self._tokens_per_rank(scores.n_tokens, answer)
        )
        added = self.added_loss(batch, scores, stage)
        loss = answer_loss if added is None else answer_loss + added
        size = len(answer)
        self.log(f"{stage}/loss", loss, prog_bar=True, batch_size=size)
        if added is not None:
            self.log(f"{stage}/answer_loss", answer_loss, batch_size=size)
        accuracy = (scores.log_prob.argmax(dim=1) == answer).float().mean()
        self.log(f"{stage}/accuracy", accuracy, prog_bar=stage == "val", batch_size=size)
        return loss

    def _tokens_per_rank(self, n_tokens: Tensor, answer: Tensor) -> Tensor | None:
        """Under data parallelism, the mean over ranks of their batches' answer tokens (every rank calls it at each
        step), so that DDP's averaged gradient is the whole batch's; ``None`` in one process."""
        if not (dist.is_available() and dist.is_initialized()):
            return None
        tokens = answer_tokens(n_tokens, answer).clone()  # an integer count: summed exactly
        dist.all_reduce(tokens)
        return tokens / dist.get_world_size()

    def added_loss(self, batch: dict[str, object], scores: OptionScores, stage: str) -> Tensor | None:
        """A term added to the answers' loss, from the batch and its options' ``scores`` (``None``: none). A
        subclass's objective (:class:`~vlbias.modules.counterfactual_consistency.CounterfactualConsistencyTuning`)."""
        return None

    def training_step(self, batch: dict[str, object], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, object], batch_idx: int) -> None:
        self._step(batch, "test")
