"""The entry point of a Slurm job's process: ``srun python -m vlbias.commands.job RUN_DIR COMMAND`` (written into
``job.sbatch`` by ``vlbias slurm submit``) runs one attempt of the task (:func:`vlbias.launch.job.run`) with the
command taken from the command table (:func:`vlbias.commands.resolve.runnable`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vlbias.commands.resolve import runnable
from vlbias.launch.job import run

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m vlbias.commands.job RUN_DIR COMMAND (written by `vlbias slurm submit`)")
    sys.exit(run(Path(sys.argv[1]), runnable(sys.argv[2]), os.environ))
