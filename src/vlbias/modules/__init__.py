"""LightningModules."""

from vlbias.modules.contrastive import ContrastivePretraining, contrastive_loss

__all__ = ["ContrastivePretraining", "contrastive_loss"]
