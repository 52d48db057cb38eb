"""Other libraries' loggers at a given level for the length of a block, then back (:func:`quieted`): the start-up
lines of a Trainer run inside a command, a hub client's warning that the error raised after it repeats.

Example:
    >>> import logging
    >>> with quieted(logging.ERROR, "lightning.pytorch"):
    ...     logging.getLogger("lightning.pytorch").level
    40
"""

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def quieted(level: int, *names: str) -> Iterator[None]:
    """The loggers ``names`` (``""``: the root logger) at ``level`` within the block, each back to its own level
    after it, however the block ends."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
    try:
        yield
    finally:
        for logger, own in zip(loggers, levels, strict=True):
            logger.setLevel(own)
