"""LightningModules."""

from vlbias.modules.contrastive import ContrastivePretraining, contrastive_loss
from vlbias.modules.fairvlp import FairVLP
from vlbias.modules.masked_lm import MaskedLMPretraining, mask_tokens
from vlbias.modules.retrieval import RetrievalFinetuning

__all__ = [
    "ContrastivePretraining",
    "FairVLP",
    "MaskedLMPretraining",
    "RetrievalFinetuning",
    "contrastive_loss",
    "mask_tokens",
]
