"""Write a file so that readers see the old file or the whole new one, never a part; and remove the
temporary files that a write killed before its rename (``kill -9``, a lost node) left behind."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

TEMPORARY_SUFFIX = ".vlbias.tmp"  # every temporary file vlbias writes: ``.<target name>.<random>.vlbias.tmp``
STARTED = time.time()  # when this process imported vlbias (about when it started): older files are no one's now


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
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
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


def is_stale(path: Path) -> bool:
    """Whether ``path`` was last changed before this process started, so no write of this process, and
    no write running now (a writer keeps touching its file), still owns it."""
    return path.lstat().st_mtime < STARTED


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Delete the temporary files (``.*.vlbias.tmp``) in ``directory`` that :func:`is_stale` calls stale:
    those a killed writer left. A writer running now keeps its own. Returns the paths removed.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> left = folder / f".out.txt.x1y2{TEMPORARY_SUFFIX}"
        >>> _ = left.write_bytes(b"half")
        >>> os.utime(left, (STARTED - 60, STARTED - 60))  # written by a process killed a minute ago
        >>> [p.name for p in remove_stale_temporaries(folder)], left.exists()
        (['.out.txt.x1y2.vlbias.tmp'], False)
    """
    removed = []
    for path in Path(directory).glob(f".*{TEMPORARY_SUFFIX}"):
        try:
            if is_stale(path):
                path.unlink()
                removed.append(path)
        except FileNotFoundError:  # another process cleaned it first
            continue
    return removed


def _created_mode() -> int:
    """0666 less this process's umask (read by setting it and setting it back: there is no getter)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
