"""``vlbias slurm``: render and submit sbatch jobs of
``vlbias fit|validate|test|predict|measure|prune|audit|debias``, sweeps as job arrays, and the per-job runner that makes requeued runs resume where they stopped."""

from vlbias.launch.job_spec import JobSpec
from vlbias.launch.status import TaskStatus, run_status
from vlbias.launch.submit import Submission, submit, sweep

__all__ = ["JobSpec", "Submission", "TaskStatus", "run_status", "submit", "sweep"]
