"""Measurement suites: one per paper family."""

from vlbias.suites.base import Suite, SuiteOutput
from vlbias.suites.registry import list_suites, suite_class

__all__ = ["Suite", "SuiteOutput", "list_suites", "suite_class"]
