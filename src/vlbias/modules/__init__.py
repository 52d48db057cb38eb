"""LightningModules."""

from vlbias.modules.chat_answer_tuning import ChatAnswerTuning
from vlbias.modules.contrastive import ContrastivePretraining, contrastive_loss
from vlbias.modules.counterfactual_consistency import CounterfactualConsistencyTuning
from vlbias.modules.fairvlp import FairVLP, FairVLPMethod
from vlbias.modules.masked_lm import MaskedLMPretraining, mask_tokens
from vlbias.modules.model_spec import ModelSpec
from vlbias.modules.prompt_array import PromptArrayDebiasing
from vlbias.modules.retrieval import RetrievalFinetuning

__all__ = [
    "ChatAnswerTuning",
    "ContrastivePretraining",
    "CounterfactualConsistencyTuning",
    "FairVLP",
    "FairVLPMethod",
    "MaskedLMPretraining",
    "ModelSpec",
    "PromptArrayDebiasing",
    "RetrievalFinetuning",
    "contrastive_loss",
    "mask_tokens",
]
