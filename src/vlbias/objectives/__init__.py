"""Training losses as plain functions, no Lightning: masked LM, image-text contrast, image-text matching with
hard negatives, the next-token loss on chat answers, FairVLP's counterfactual KL objective, its answer-consistency
counterpart for chat VLMs and DebiasCLIP's prompt-array objectives."""

from vlbias.objectives.answer_consistency import answer_consistency_loss
from vlbias.objectives.answer_likelihood import answer_nll
from vlbias.objectives.contrastive import itc_loss
from vlbias.objectives.fairvlp import FairVLPLoss, counterfactual_kl, fairvlp_loss
from vlbias.objectives.itm import hard_negative_itm, itm_loss, sample_negatives
from vlbias.objectives.masked_lm import IGNORE_INDEX, mask_tokens, masked_lm_loss
from vlbias.objectives.prompt_array import PromptArrayLoss, adversary_loss, prompt_array_loss

__all__ = [
    "IGNORE_INDEX",
    "FairVLPLoss",
    "PromptArrayLoss",
    "adversary_loss",
    "answer_consistency_loss",
    "answer_nll",
    "counterfactual_kl",
    "fairvlp_loss",
    "hard_negative_itm",
    "itc_loss",
    "itm_loss",
    "mask_tokens",
    "masked_lm_loss",
    "prompt_array_loss",
    "sample_negatives",
]
