"""Rows per chunk of the resampling loops (bootstrap replicates, jackknife rows, random re-partitions, sign flips).

A chunk of ``rows`` rows of ``numbers_per_row`` numbers holds about :data:`CHUNK_NUMBERS` numbers (~4 MiB of
float64), so memory stays linear in the data whatever the number of replicates. Chunk sizes depend only on the set
sizes, so results do not depend on the machine.

Example:
    >>> chunk_rows(1000), chunk_rows(2**20)
    (524, 1)
"""

from __future__ import annotations

#: Numbers per chunk (about 4 MiB of float64).
CHUNK_NUMBERS = 2**19


def chunk_rows(numbers_per_row: int) -> int:
    """Rows per chunk when each row holds ``numbers_per_row`` numbers; at least one."""
    return max(1, CHUNK_NUMBERS // numbers_per_row)
