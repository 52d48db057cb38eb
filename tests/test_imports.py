"""Entry points pay only for what they use: measuring needs no Lightning (issue 16 moved seeding and the suite
runner out of the Lightning-side modules; the callback imports the runner, not the other way round), and
``vlbias --help``, ``vlbias measure --help`` and ``vlbias models`` need no torch (issue 23: they answer in under a
second): the suites' options are declared in :mod:`vlbias.suites.options` and the models' capabilities in
:mod:`vlbias.models.catalog`, both torch-free."""

import subprocess
import sys

import pytest

from vlbias.models.catalog import describe_models

CHECK = "import sys; {code}; print(sorted(m for m in {forbidden!r} if m in sys.modules))"
LIGHTNING = ("lightning", "pytorch_lightning")
HEAVY = ("torch", "torchvision", "torchmetrics", "transformers", *LIGHTNING)


def _cli(argv: list[str]) -> str:
    return f"from vlbias.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"


@pytest.mark.parametrize(
    ("code", "forbidden"),
    [
        ("import vlbias.measure, vlbias.suites.run, vlbias.suites.mmbias, vlbias.suites.weat", LIGHTNING),
        ("import vlbias.debias", LIGHTNING),
        (_cli(["measure", "--help"]), HEAVY),
        (_cli(["debias", "--help"]), HEAVY),
        (_cli(["--help"]), HEAVY),
        (_cli(["models"]), HEAVY),
    ],
    ids=["import-measure", "import-debias", "measure-help", "debias-help", "help", "models"],
)
def test_entry_points_import_only_what_they_use(code, forbidden):
    program = CHECK.format(code="exec(" + repr(code) + ")", forbidden=forbidden)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_catalog_capabilities_are_the_adapters():
    """The catalog declares the capabilities, torch-free; each registered adapter class reads its own from it."""
    from vlbias.models.catalog import adapter_class

    for model in describe_models():
        declared = sorted(capability.value for capability in adapter_class(model["name"]).capabilities)
        assert model["capabilities"] == declared, model["name"]
