"""The protocol checks (``adapter_checks``, see conftest) on every registered adapter and each
capability it declares: shapes and dtypes, determinism, batch-invariance, equality with the
wrapped model called directly, and a save -> load round trip. A new adapter is checked as soon as
it is registered; its own test file holds only what is specific to it."""

import functools

import pytest

from vlbias.models import list_models, load
from vlbias.models.registry import adapter_class

CASES = [(name, capability) for name in list_models() for capability in sorted(adapter_class(name).capabilities)]
CHECKS = ("shapes_and_dtypes", "deterministic", "batch_invariant", "equals_direct_call", "save_load_round_trip")


@functools.cache
def tiny(name: str):
    return load(name, tiny=True, device="cpu")


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize(("name", "capability"), CASES, ids=[f"{n}-{c.value}" for n, c in CASES])
def test_adapter_protocol(name, capability, check, adapter_checks, tmp_path):
    extra = (tmp_path,) if check == "save_load_round_trip" else ()
    getattr(adapter_checks, check)(tiny(name), capability, *extra)
