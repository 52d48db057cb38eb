"""Measurement suites: one per paper family.

What a suite is: :mod:`vlbias.suites.base`; the registered suites: :mod:`vlbias.suites.registry`; their options:
:mod:`vlbias.suites.options`; building and running one: :mod:`vlbias.suites.run`. This package imports nothing
itself, so the torch-free modules (the registry, the options) import without torch.
"""
