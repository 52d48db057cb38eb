"""Lightning callbacks."""

from vlbias.callbacks.bias_suite import BiasSuiteCallback
from vlbias.callbacks.checkpoint import BiasAwareCheckpoint
from vlbias.callbacks.tradeoff import TradeoffCallback
from vlbias.callbacks.training_speed import TrainingSpeed

__all__ = ["BiasAwareCheckpoint", "BiasSuiteCallback", "TradeoffCallback", "TrainingSpeed"]
