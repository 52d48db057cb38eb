"""Datasets: readers for the public formats and the synthetic BiasWorld."""

from vlbias.data.biasworld import BiasWorld, Item
from vlbias.data.datamodule import BiasWorldDataModule

__all__ = ["BiasWorld", "BiasWorldDataModule", "Item"]
