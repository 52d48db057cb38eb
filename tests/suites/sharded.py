"""Run suites on two CPU processes joined by gloo, as a DDP trainer would, and compare with one process.

A *case* is a module-level function returning ``(suite, adapter)``; each rank builds its own (same seeds),
runs :func:`~vlbias.suites.run.measure_suite` over its shard, and returns the whole :class:`~vlbias.suites.base.SuiteOutput`."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

import torch

from tests.metrics.ddp import results_per_rank
from vlbias.suites.run import measure_suite

Case = Callable[[], tuple]


def _run_cases(cases: Sequence[Case], seed: int, _batches) -> list[dict]:
    torch.set_num_threads(1)  # as the test process (conftest.py), which spawned ranks do not read
    torch.manual_seed(0)
    outputs = []
    for case in cases:
        suite, adapter = case()
        outputs.append(dataclasses.asdict(measure_suite(suite, adapter, seed=seed)))
    return outputs


def outputs_per_rank(cases: Sequence[Case], seed: int = 0) -> list[list[dict]]:
    """``[rank][case]``: each case's output as a dict, from each of two ranks."""
    return results_per_rank(functools.partial(_run_cases, list(cases), seed), n_batches=0)


def single_process(cases: Sequence[Case], seed: int = 0) -> list[dict]:
    return _run_cases(cases, seed, None)


def _close(actual, expected, path: str, atol: float) -> None:
    if isinstance(expected, float) or isinstance(actual, float):
        if math.isnan(expected):
            assert math.isnan(actual), f"{path}: {actual} != nan"
        else:
            assert math.isclose(actual, expected, rel_tol=0, abs_tol=atol), f"{path}: {actual} != {expected}"
    elif isinstance(expected, dict):
        assert sorted(actual) == sorted(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            _close(actual[key], expected[key], f"{path}/{key}", atol)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: {len(actual)} entries != {len(expected)}"
        for index, (a, e) in enumerate(zip(actual, expected)):
            _close(a, e, f"{path}[{index}]", atol)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def assert_same_output(actual: dict, expected: dict, atol: float = 1e-5) -> None:
    """Counts, names, skips and item tables exactly; floats to ``atol``; the stimuli probed per rank add up to
    the one-process run's."""
    actual, expected = dict(actual), dict(expected)
    assert sum(actual.pop("stimuli_per_rank")) == sum(expected.pop("stimuli_per_rank"))
    _close(actual, expected, "output", atol)
