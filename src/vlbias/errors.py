"""Errors that reach the user as one line naming the file, field or value at fault.

The ``vlbias`` console script prints these without a traceback and exits with status 2.
"""


class VlbiasError(ValueError):
    """Base class: bad input or configuration, explained in the message."""


class InputError(VlbiasError):
    """A data file, image, text or field that cannot be used as given."""


class ConfigError(VlbiasError):
    """A configuration value that is out of range or inconsistent."""


class CapabilityError(VlbiasError):
    """A model asked for something its family cannot compute."""


class SchemaError(VlbiasError):
    """A results file that does not follow the results schema."""
