"""The job's resources, filled in from the trainer and checked against it."""

import pytest

from vlbias.errors import ConfigError
from vlbias.launch.job_spec import JobSpec, job_for_trainer, single_process_job


@pytest.mark.parametrize(
    ("trainer", "job", "expected"),
    [
        ({"devices": 1}, JobSpec(), (1, 1, 0)),
        ({"devices": [0, 1], "accelerator": "gpu", "num_nodes": 2}, JobSpec(), (2, 2, 2)),
        ({"devices": "auto", "accelerator": "gpu"}, JobSpec(gpus_per_node=4), (1, 4, 4)),
        ({"devices": "auto", "accelerator": "cpu"}, JobSpec(), (1, 1, 0)),
        ({"devices": "2", "strategy": "ddp", "accelerator": "cpu"}, JobSpec(ntasks_per_node=2), (1, 2, 0)),
    ],
)
def test_nodes_tasks_and_gpus_follow_the_trainer(trainer, job, expected):
    filled = job_for_trainer(trainer, job)
    assert (filled.nodes, filled.ntasks_per_node, filled.gpus_per_node) == expected


@pytest.mark.parametrize(
    ("trainer", "job", "message"),
    [
        (
            {"devices": 1, "strategy": "deepspeed_stage_2"},
            JobSpec(gpus_per_node=0),
            "trainer.strategy is 'deepspeed_stage_2'",
        ),
        ({"devices": "auto", "accelerator": "cuda"}, JobSpec(), "--gpus_per_node N"),
        ({"devices": 0}, JobSpec(), "Expected trainer.devices"),
        (
            {"devices": 1, "strategy": {"init_args": {"process_group_backend": "nccl"}}},
            JobSpec(gpus_per_node=0),
            "process_group_backend is 'nccl'",
        ),
    ],
)
def test_a_trainer_the_job_cannot_run_is_refused(trainer, job, message):
    """GPU strategies get one GPU per device by default; refused when the job says it has none."""
    with pytest.raises(ConfigError, match=message):
        job_for_trainer(trainer, job)


def test_job_options_are_checked_and_one_process_commands_get_one_task():
    with pytest.raises(ConfigError, match="`nodes` to be a positive integer but got 0"):
        JobSpec(nodes=0)
    with pytest.raises(ConfigError, match="to start with '#SBATCH '"):
        JobSpec(extra_sbatch=["--constraint=a100"])
    with pytest.raises(ConfigError, match=r"`signal_seconds` \(120\) to be less than the time limit '2' \(120 s\)"):
        JobSpec(time="2", signal_seconds=120)
    with pytest.raises(ConfigError, match="runs one process, but the job asks for --ntasks_per_node 2"):
        single_process_job(JobSpec(ntasks_per_node=2), "measure")
    assert single_process_job(JobSpec(), "prune").ntasks_per_node == 1
