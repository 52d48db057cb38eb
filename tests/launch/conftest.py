"""The local Slurm cluster for tests marked ``slurm``: used when it is up; started with slurm/cluster-up.sh
when the binaries are installed, we are root and the run selected these tests (``-m slurm``); else skipped."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cluster_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:  # a controller that is down makes sinfo retry for about 9 s
        done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, check=False, timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and bool({"idle", "mix", "alloc"} & set(done.stdout.split()))


@pytest.fixture(scope="session")
def slurm_cluster(request) -> None:
    if shutil.which("sbatch") is None:
        pytest.skip("Slurm is not installed (sbatch not on PATH): run slurm/install.sh and slurm/cluster-up.sh")
    if _cluster_answers():
        return
    selected = "slurm" in request.config.getoption("markexpr") and "not slurm" not in request.config.getoption(
        "markexpr"
    )
    if not (selected and os.geteuid() == 0 and shutil.which("slurmctld")):
        pytest.skip(
            "the local Slurm cluster is not up: run slurm/cluster-up.sh (as root), or select -m slurm to start it"
        )
    subprocess.run(["bash", str(ROOT / "slurm" / "cluster-up.sh")], check=True, timeout=120)
