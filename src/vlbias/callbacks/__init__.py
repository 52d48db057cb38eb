"""Lightning callbacks."""

from vlbias.callbacks.bias_suite import BiasSuiteCallback

__all__ = ["BiasSuiteCallback"]
