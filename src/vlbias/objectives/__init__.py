"""Training losses as plain functions, no Lightning: masked LM, image-text contrast, image-text matching with
hard negatives, and FairVLP's counterfactual KL objective."""

from vlbias.objectives.contrastive import itc_loss
from vlbias.objectives.fairvlp import FairVLPLoss, counterfactual_kl, fairvlp_loss
from vlbias.objectives.itm import hard_negative_itm, itm_loss, sample_negatives
from vlbias.objectives.masked_lm import IGNORE_INDEX, mask_tokens, masked_lm_loss

__all__ = [
    "IGNORE_INDEX",
    "FairVLPLoss",
    "counterfactual_kl",
    "fairvlp_loss",
    "hard_negative_itm",
    "itc_loss",
    "itm_loss",
    "mask_tokens",
    "masked_lm_loss",
    "sample_negatives",
]
