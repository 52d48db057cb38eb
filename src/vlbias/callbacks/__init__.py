"""Lightning callbacks."""

from vlbias.callbacks.bias_suite import BiasSuiteCallback
from vlbias.callbacks.checkpoint import BiasAwareCheckpoint
from vlbias.callbacks.tradeoff import TradeoffCallback

__all__ = ["BiasAwareCheckpoint", "BiasSuiteCallback", "TradeoffCallback"]
