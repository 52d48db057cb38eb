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
        ("import vlbias.workflows.measure, vlbias.suites.run, vlbias.suites.mmbias, vlbias.suites.weat", LIGHTNING),
        ("import vlbias.workflows.debias", LIGHTNING),
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


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (["measure", "--suite", "mmbiass", "--model", "clip"], "Unknown suite 'mmbiass'; expected one of: "),
        (["measure", "--suite", "mmbias", "--model", "clipp"], "Unknown model 'clipp'; expected one of: "),
        (["debias", "--method", "orth_prj", "--model", "clip"], "Unknown debiaser 'orth_prj'; expected one of: "),
        (["prune", "--model", "clop"], "Unknown model 'clop'; expected one of: "),
    ],
    ids=["suite", "model", "method", "prune-model"],
)
def test_a_misspelt_name_is_refused_from_the_catalogs_before_torch_is_imported(argv, refusal, tmp_path):
    code = _cli([*argv, "--tiny", "--out", str(tmp_path / "out")])
    program = CHECK.format(code="exec(" + repr(code) + ")", forbidden=HEAVY)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr[-2000:]
    close = {"mmbiass": "mmbias", "clipp": "clip", "orth_prj": "orth_proj", "clop": "clip"}
    misspelt = next(name for name in close if name in argv)
    assert done.stderr.startswith(f"vlbias: error: {refusal}"), done.stderr
    assert done.stderr.strip().endswith(f"did you mean {close[misspelt]!r}?"), done.stderr
