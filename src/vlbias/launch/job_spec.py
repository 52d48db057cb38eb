"""What a Slurm job asks for, and the check that it agrees with the Lightning trainer it will run.

Lightning under Slurm runs one process per device, launched by ``srun``: it requires
``SLURM_NTASKS_PER_NODE == trainer.devices`` and ``SLURM_NNODES == trainer.num_nodes``
(``SLURMEnvironment.validate_settings``, Lightning PR #15011, issue #10150). A job that disagrees hangs or
fails after it waited in the queue; :func:`job_for_trainer` refuses it before ``sbatch``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vlbias.errors import ConfigError

GPU_ACCELERATORS = ("gpu", "cuda")
GPU_ONLY_STRATEGIES = ("deepspeed",)  # prefixes of strategy names that need CUDA
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]


@dataclass(frozen=True)
class Runnable:
    """A command a Slurm job runs, as the command layer hands it down (:func:`vlbias.commands.resolve.runnable`):
    its name, whether LightningCLI runs it (one process per device; its loggers are made to continue), how its
    arguments resolve to the configuration the job is given, and how the job runs it on ``--config FILE``."""

    name: str
    lightning: bool
    resolve: Callable[[Sequence[str]], dict[str, Any]]
    run: Callable[[Sequence[str]], None]


@dataclass(frozen=True)
class JobSpec:
    """The ``#SBATCH`` options of a job (``None``: left to the cluster's default, or taken from the trainer).

    Args:
        nodes: Nodes (sbatch --nodes); default the trainer's num_nodes.
        ntasks_per_node: Tasks per node (--ntasks-per-node); default the trainer's device count (one process per
            device).
        gpus_per_node: GPUs per node (--gpus-per-node); default the device count for a GPU accelerator, else 0.
        cpus_per_task: CPUs per task (--cpus-per-task).
        mem: Memory per node (--mem), e.g. 64G.
        time: Time limit (--time), e.g. 04:00:00 or 1-00:00:00.
        partition: Partition (--partition).
        account: Account charged (--account).
        job_name: Job name (--job-name); default the first config file's name.
        signal_seconds: Seconds before the time limit at which the requeue signal is sent (--signal=USR1@N); less
            than the time limit.
        max_parallel: At most this many array tasks at once (--array=0-N%max_parallel).
        extra_sbatch: Further '#SBATCH ...' lines, written as given (e.g. '#SBATCH --constraint=a100').
        setup: Shell lines run before srun (module load ..., source venv/bin/activate): your own shell code,
            written as given.
        python: The Python that runs vlbias on the nodes; default the one running vlbias slurm.
    """

    nodes: int | None = None
    ntasks_per_node: int | None = None
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    job_name: str | None = None
    signal_seconds: int = 90
    max_parallel: int | None = None
    extra_sbatch: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    python: str | None = None

    def __post_init__(self) -> None:
        for name in ("nodes", "ntasks_per_node", "cpus_per_task", "signal_seconds", "max_parallel"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"Expected job option `{name}` to be a positive integer but got {value!r}")
        if self.gpus_per_node is not None and (
            isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 0
        ):
            raise ConfigError(f"Expected job option `gpus_per_node` to be 0 or more but got {self.gpus_per_node!r}")
        if self.time is not None and not _TIME.match(self.time):
            raise ConfigError(
                f"Expected job option `time` in a Slurm time format (MM, HH:MM:SS, D-HH:MM:SS) but got {self.time!r}"
            )
        if self.time is not None and self.signal_seconds >= time_limit_seconds(self.time):
            raise ConfigError(
                f"Expected job option `signal_seconds` ({self.signal_seconds}) to be less than the time limit "
                f"{self.time!r} ({time_limit_seconds(self.time)} s): the requeue signal would come before the job starts"
            )
        for index, line in enumerate(self.extra_sbatch):
            if not line.startswith("#SBATCH "):
                raise ConfigError(f"Expected `extra_sbatch[{index}]` to start with '#SBATCH ' but got {line!r}")
            if "\n" in line:
                raise ConfigError(f"Expected `extra_sbatch[{index}]` to be one line but got {line!r}")


def time_limit_seconds(time: str) -> int:
    """A Slurm time limit in seconds: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``.

    Example:
        >>> time_limit_seconds("90"), time_limit_seconds("1:30"), time_limit_seconds("1-02:00")
        (5400, 90, 93600)
    """
    days, _, clock = time.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if days:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(parts) == 1:  # MM
        return parts[0] * 60
    if len(parts) == 2:  # MM:SS
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def device_count(trainer: dict[str, Any], gpus_per_node: int | None) -> int:
    """The processes per node Lightning starts for ``trainer.devices``: an int, a list of device indices,
    ``"auto"``/``-1`` (every GPU the job has, or 1 on CPU)."""
    devices = trainer.get("devices", "auto")
    if isinstance(devices, str) and devices.strip().lstrip("-").isdigit():
        devices = int(devices)
    if isinstance(devices, list | tuple):
        return len(devices)
    if devices in ("auto", -1):
        if gpus_per_node and trainer.get("accelerator", "auto") != "cpu":  # every GPU the job has
            return gpus_per_node
        if _needs_gpu(trainer):
            raise ConfigError(
                f"trainer.devices is {devices!r} and {_gpu_reason(trainer)}: give the GPUs per node with "
                "--gpus_per_node N (or set trainer.devices)"
            )
        return 1  # one process on CPU
    if isinstance(devices, int) and not isinstance(devices, bool) and devices > 0:
        return devices
    raise ConfigError(f"Expected trainer.devices to be a positive int, a list or 'auto' but got {devices!r}")


def job_for_trainer(trainer: dict[str, Any], job: JobSpec) -> JobSpec:
    """``job`` with its nodes, tasks per node and GPUs filled in from ``trainer`` (a resolved ``trainer``
    section), after checking that the two agree; a disagreement raises :class:`ConfigError` naming both."""
    devices = device_count(trainer, job.gpus_per_node)
    num_nodes = trainer.get("num_nodes", 1)
    if job.ntasks_per_node is not None and job.ntasks_per_node != devices:
        raise ConfigError(
            f"trainer.devices is {devices} but the job asks for --ntasks_per_node {job.ntasks_per_node}: Lightning "
            "runs one task per device (SLURM_NTASKS_PER_NODE must equal devices); make them equal"
        )
    if job.nodes is not None and job.nodes != num_nodes:
        raise ConfigError(
            f"trainer.num_nodes is {num_nodes} but the job asks for --nodes {job.nodes}: Lightning needs "
            "SLURM_NNODES == num_nodes; make them equal (e.g. --trainer.num_nodes)"
        )
    gpus = job.gpus_per_node if job.gpus_per_node is not None else (devices if _needs_gpu(trainer) else 0)
    if _needs_gpu(trainer) and gpus < devices:
        what = _gpu_reason(trainer)
        raise ConfigError(
            f"{what} but the job asks for --gpus_per_node {gpus} for {devices} device(s) per node; "
            "give --gpus_per_node or run on CPU (--trainer.accelerator cpu)"
        )
    return replace(job, nodes=num_nodes, ntasks_per_node=devices, gpus_per_node=gpus)


def single_process_job(job: JobSpec, command: str) -> JobSpec:
    """``job`` for a one-process command (``measure``, ``prune``, ``audit``, ``debias``): one node, one task."""
    for name in ("nodes", "ntasks_per_node"):
        value = getattr(job, name)
        if value not in (None, 1):
            raise ConfigError(f"`vlbias {command}` runs one process, but the job asks for --{name} {value}")
    return replace(job, nodes=1, ntasks_per_node=1, gpus_per_node=job.gpus_per_node or 0)


def _needs_gpu(trainer: dict[str, Any]) -> bool:
    return _gpu_reason(trainer) != ""


def _gpu_reason(trainer: dict[str, Any]) -> str:
    accelerator = trainer.get("accelerator", "auto")
    if isinstance(accelerator, str) and accelerator in GPU_ACCELERATORS:
        return f"trainer.accelerator is {accelerator!r}"
    strategy = trainer.get("strategy", "auto")
    if isinstance(strategy, str) and strategy.startswith(GPU_ONLY_STRATEGIES):
        return f"trainer.strategy is {strategy!r} (GPU only)"
    if isinstance(strategy, dict):
        backend = (strategy.get("init_args") or {}).get("process_group_backend")
        if backend == "nccl":
            return "trainer.strategy's process_group_backend is 'nccl' (GPU only)"
    return ""
