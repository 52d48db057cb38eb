"""Write a file, or a folder of related files, so that readers see the old one or the whole new one, never a
part; and remove what a write killed before its rename (``kill -9``, a lost node) left behind.

A file: :func:`atomic_write` (a temporary file beside it, renamed over it). A folder that a command writes as a
unit (``vlbias prune``'s ``model/``, ``clip/``, ``prune.json`` and trade-off table; ``vlbias audit``'s results,
``audit.json`` and report): :class:`OutputFolder`. The new folder is written whole in a *stage* beside the target,
``.<name>.<random>.vlbias.part/new/<name>`` (the folder keeps its own name while it is written, so what records
it names it rightly), whose writer holds ``.../lock`` locked (``flock``) while it lives; then, in one step,

* the target is absent or an empty folder: the new folder is renamed to it;
* else the two are exchanged by one ``renameat2(RENAME_EXCHANGE)`` (Linux), and the stage, now holding the old
  folder, is deleted; where the file system has no atomic exchange (NFS, macOS), the old folder is first renamed
  into the stage (``.../old``) and the new one then into place.

A kill at any moment leaves the target the old folder whole or the new one whole; in the one exception, a kill
in the instant between the two renames of the fallback, the old folder waits whole in the stage. A stage whose
lock no one holds is a killed writer's: the next :meth:`OutputFolder.check` of that target puts its ``old``
folder back when the target is missing and deletes it. A folder is replaced only when it is an earlier output of
the same command (it holds the command's marker file and nothing the command does not write): a user's files
are never deleted; any other non-empty folder is refused by name.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import BinaryIO

from vlbias.errors import ConfigError

TEMPORARY_SUFFIX = ".vlbias.tmp"  # every temporary file vlbias writes: ``.<target name>.<random>.vlbias.tmp``
STAGE_SUFFIX = ".vlbias.part"  # every folder being written as a unit: ``.<target name>.<random>.vlbias.part``
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
    """0666 less this process's umask."""
    return 0o666 & ~_umask()


@dataclass(frozen=True)
class OutputFolder:
    """The folder a command writes as a unit (module docstring): ``command`` names it in refusals, every output of
    it holds ``marker``, and ``names`` are everything it may write at the folder's top (names, or ``fnmatch``
    patterns such as ``*.png``).

    Example:
        >>> import tempfile
        >>> unit = OutputFolder("vlbias example", "summary.json", frozenset({"summary.json", "table.csv"}))
        >>> out = Path(tempfile.mkdtemp()) / "out"
        >>> def write(folder):
        ...     _ = (folder / "summary.json").write_text("{}"), (folder / "table.csv").write_text("a")
        >>> unit.replace(out, write) == out, sorted(p.name for p in out.iterdir())
        (True, ['summary.json', 'table.csv'])
        >>> _ = (out / "notes.txt").write_text("mine")
        >>> unit.check(out)
        Traceback (most recent call last):
        ...
        vlbias.errors.ConfigError: Output folder '...out' holds what vlbias example does not write (notes.txt): ...
    """

    command: str
    marker: str
    names: frozenset[str]

    def check(self, target: str | Path) -> Path:
        """``target`` as a :class:`~pathlib.Path` after making sure it can be replaced: its parent is created and
        writable, the stages killed writers left beside it are tidied, and it is absent, an empty folder or an
        earlier output of the command; anything else is a :class:`~vlbias.errors.ConfigError` naming it."""
        target = Path(target)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".vlbias-write-test.", suffix=TEMPORARY_SUFFIX):
                pass
        except OSError as err:
            raise ConfigError(
                f"Output folder {str(target)!r} cannot be written: its parent {str(target.parent)!r} is not writable "
                f"({err.strerror or err})."
            ) from err
        _finish_killed_stages(target)
        self._refuse_foreign(target)
        return target

    def _refuse_foreign(self, target: Path) -> None:
        """Refuse ``target`` unless it is absent, an empty folder or an earlier output of the command."""
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise ConfigError(f"Output folder {str(target)!r} is not a folder; give a new or empty folder.")
        present = {entry.name for entry in target.iterdir()} if target.is_dir() else set()
        foreign = sorted(name for name in present if not any(fnmatchcase(name, known) for known in self.names))
        if present and (foreign or self.marker not in present):
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "") if foreign else f"no {self.marker}"
            raise ConfigError(
                f"Output folder {str(target)!r} holds what {self.command} does not write ({shown}): give a new or "
                f"empty folder ({self.command} replaces a folder only when it is an earlier output of it)."
            )

    def replace(self, target: str | Path, write: Callable[[Path], object]) -> Path:
        """Call ``write(folder)`` on a new folder in a stage beside ``target``, then put it in ``target``'s place as
        the module docstring says (after :meth:`check`, again at the end); returns ``target``."""
        target = self.check(target)
        with _stage(target) as stage:
            new = stage / "new" / target.name
            new.mkdir(parents=True)
            write(new)
            self._refuse_foreign(target)  # the folder may have changed while the new one was written
            if not target.exists() or not any(target.iterdir()):
                os.replace(new, target)
            elif _exchange(new, target):
                pass  # ``new`` now holds the old folder, deleted with the stage
            else:
                os.replace(target, stage / "old")
                os.replace(new, target)
        return target


@contextmanager
def _stage(target: Path) -> Iterator[Path]:
    """A stage folder beside ``target`` whose ``lock`` this process holds for the block; deleted afterwards
    (also on an error: the target is then as it was)."""
    stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=STAGE_SUFFIX))
    stage.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the folder is meant to be shared like any other
    try:
        with (stage / "lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _finish_killed_stages(target: Path) -> list[Path]:
    """Tidy the stages of ``target`` that killed writers left (their lock held by no one, or never taken and older
    than this process): put a stage's ``old`` folder back when ``target`` is missing, then delete the stage.
    Returns the stages removed."""
    removed = []
    prefix = f".{target.name}."
    for stage in target.parent.iterdir() if target.parent.is_dir() else []:
        if not (stage.name.startswith(prefix) and stage.name.endswith(STAGE_SUFFIX) and stage.is_dir()):
            continue
        if _writer_alive(stage):
            continue
        old = stage / "old"
        if old.is_dir() and not target.exists():
            os.replace(old, target)  # killed between the fallback's two renames: the old folder, whole
        shutil.rmtree(stage, ignore_errors=True)
        removed.append(stage)
    return removed


def _writer_alive(stage: Path) -> bool:
    """Whether a process holds ``stage``'s lock (or, where locks cannot be taken, could: then it is kept)."""
    try:
        with (stage / "lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:  # the lock was never made: a writer killed at once, unless it starts now
        return not is_stale(stage)
    except OSError as err:
        return err.errno in (errno.EAGAIN, errno.EACCES, errno.ENOLCK, errno.EINVAL)
    return False


def _exchange(first: Path, second: Path) -> bool:
    """Exchange the two paths in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``); ``False`` where the C
    library or the file system has no such call, so that nothing was done."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    at_cwd, rename_exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE from <fcntl.h>, <linux/fs.h>
    if renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _umask() -> int:
    """This process's umask (read by setting it and setting it back: there is no getter)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask
