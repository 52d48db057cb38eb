"""Write a file so that readers see the old file or the whole new one, never a part."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, flush and fsync it, then rename it
    over ``path``; on any error the temporary file is removed and ``path`` is left as it was. The file
    gets the mode a plain ``open`` would give it (0666 less the umask), not ``mkstemp``'s 0600.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "out.txt"
        >>> atomic_write(target, lambda handle: handle.write(b"done"))
        >>> target.read_text()
        'done'
    """
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.chmod(handle.fileno(), _created_mode())  # mkstemp makes 0600; a result is for colleagues too
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _created_mode() -> int:
    """0666 less this process's umask (read by setting it and setting it back: there is no getter)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
