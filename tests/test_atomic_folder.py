"""A folder written as a unit (:class:`vlbias.atomic.OutputFolder`, what ``vlbias prune`` and ``vlbias audit``
write): a writer killed with SIGKILL at any step leaves the old folder whole or the new one whole, the next writer
tidies what it left (putting the old folder back where a kill came between the fallback's two renames), a live
writer's stage is left alone, and a folder that is not an earlier output of the command is refused by name."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vlbias import atomic
from vlbias.atomic import STAGE_SUFFIX, OutputFolder
from vlbias.errors import ConfigError

UNIT = OutputFolder("vlbias example", "run.json", frozenset({"run.json", "part", "data.txt"}))

# Writes UNIT's folder at argv[1], every file holding argv[2], and SIGKILLs itself at the step argv[3]; argv[4] "0"
# makes the atomic exchange unavailable (the two-rename fallback of NFS and macOS).
WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import vlbias.atomic as atomic

    target, label, kill_at, exchange = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    unit = atomic.OutputFolder("vlbias example", "run.json", frozenset({"run.json", "part", "data.txt"}))
    real_replace, real_exchange, renames = os.replace, atomic._exchange, []

    def die(step):
        if kill_at == step:
            os.kill(os.getpid(), signal.SIGKILL)

    def write(folder):
        (folder / "run.json").write_text(label)
        die("writing")
        (folder / "part").mkdir()
        (folder / "part" / "a.txt").write_text(label)
        (folder / "data.txt").write_text(label)
        die("written")

    def replace(source, target):
        renames.append(target)
        real_replace(source, target)
        die(f"rename{len(renames)}")

    def swap(first, second):
        if not exchange:
            return False
        done = real_exchange(first, second)
        die("exchanged")
        return done

    atomic.os.replace, atomic._exchange = replace, swap
    unit.replace(target, write)
    """
)


def write(target: Path, label: str, kill_at: str = "never", exchange: bool = True) -> int:
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(target), label, kill_at, "1" if exchange else "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, -9), done.stderr
    return done.returncode


def state(target: Path) -> str:
    """The label of the folder at ``target``, asserting that every file holds the same one (a whole folder)."""
    labels = {(target / name).read_text() for name in ("run.json", "data.txt", "part/a.txt")}
    assert len(labels) == 1 and sorted(p.name for p in target.iterdir()) == ["data.txt", "part", "run.json"], labels
    return labels.pop()


def stages(target: Path) -> list[str]:
    return [p.name for p in target.parent.iterdir() if p.name.endswith(STAGE_SUFFIX)]


@pytest.mark.parametrize(
    ("kill_at", "exchange", "after"),
    [
        ("writing", True, "old"),
        ("written", True, "old"),
        ("exchanged", True, "new"),
        ("rename1", False, "old"),  # the old folder moved into the stage, the new one not yet in place
        ("rename2", False, "new"),
    ],
)
def test_a_writer_killed_at_any_step_leaves_the_old_folder_or_the_new_one_whole(tmp_path, kill_at, exchange, after):
    target = tmp_path / "out"
    assert write(target, "old") == 0 and state(target) == "old" and not stages(target)
    assert write(target, "new", kill_at, exchange) == -9
    assert len(stages(target)) == 1  # what the killed writer left
    if kill_at != "rename1":
        assert state(target) == after  # a reader between the kill and the next writer
    UNIT.check(target)  # the next writer tidies it first
    assert state(target) == after and not stages(target)
    assert write(target, "newer") == 0 and state(target) == "newer" and not stages(target)


def test_a_new_or_empty_target_is_renamed_into_place(tmp_path):
    assert write(tmp_path / "new", "a") == 0 and state(tmp_path / "new") == "a"
    (tmp_path / "empty").mkdir()
    assert write(tmp_path / "empty", "b") == 0 and state(tmp_path / "empty") == "b"
    assert not stages(tmp_path / "new")


def test_a_live_writers_stage_is_left_alone(tmp_path):
    target = tmp_path / "out"
    with atomic._stage(target) as stage:
        UNIT.check(target)
        assert stage.is_dir() and (stage / "lock").is_file()
    assert not stage.exists()


def test_a_folder_that_is_not_an_earlier_output_is_refused_by_name_and_kept(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    (target / "data.txt").write_text("mine")
    with pytest.raises(ConfigError) as error:
        UNIT.replace(target, lambda folder: pytest.fail("written"))
    assert str(error.value) == (
        f"Output folder {str(target)!r} holds what vlbias example does not write (notes.txt): give a new or empty "
        "folder (vlbias example replaces a folder only when it is an earlier output of it)."
    )
    (target / "notes.txt").unlink()  # only names it writes, but not its marker: not its output either
    with pytest.raises(ConfigError, match=r"holds what vlbias example does not write \(no run.json\)"):
        UNIT.check(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (target / "data.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="Output folder '.*file' is not a folder; give a new or empty folder."):
        UNIT.check(tmp_path / "file")
    os.symlink(target, tmp_path / "link")
    with pytest.raises(ConfigError, match="'.*link' is not a folder"):
        UNIT.check(tmp_path / "link")


def test_an_error_while_writing_leaves_the_old_folder_and_no_stage(tmp_path):
    target = tmp_path / "out"
    assert write(target, "old") == 0

    def failing(folder: Path) -> None:
        (folder / "run.json").write_text("new")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        UNIT.replace(target, failing)
    assert state(target) == "old" and not stages(target)
