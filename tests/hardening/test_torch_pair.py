"""A torchvision built for another torch (a CPU torch beside a CUDA torchvision) fails at import with
``operator torchvision::nms does not exist``: vlbias says in one line that the two do not match and which pair to
install, where it imports torchvision and on the command line wherever another library imported it first."""

import importlib
from importlib import metadata

import pytest

import vlbias.runtime.torch_pair
from vlbias.errors import ConfigError
from vlbias.runtime.torch_pair import import_torchvision

BROKEN = "operator torchvision::nms does not exist"


@pytest.fixture
def mismatched(monkeypatch):
    """torchvision's import raising what a torchvision built for another torch raises."""
    real = importlib.import_module

    def import_module(name, *args):
        if name.split(".")[0] == "torchvision":
            raise RuntimeError(BROKEN)
        return real(name, *args)

    monkeypatch.setattr(vlbias.runtime.torch_pair.importlib, "import_module", import_module)
    versions = {"torch": "2.5.1+cpu", "torchvision": "0.21.0+cu124"}
    monkeypatch.setattr(vlbias.runtime.torch_pair, "_version", lambda package: versions[package])


def test_a_torchvision_for_another_torch_is_one_line_naming_both_and_the_pair(mismatched):
    expected = (
        "torch 2.5.1+cpu and torchvision 0.21.0+cu124 do not match (torchvision was built for another torch: "
        f"{BROKEN}); install the torchvision built for this torch, from the same index (CPU or the same CUDA): "
        "`pip install 'torch==2.5.1' 'torchvision==0.20.*'`, or reinstall both together"
    )
    with pytest.raises(ConfigError) as error:
        import_torchvision("torchvision.transforms.v2.functional")
    assert str(error.value) == expected


def test_another_runtime_error_is_left_as_it_is(monkeypatch):
    def import_module(name, *args):
        raise RuntimeError("CUDA driver initialisation failed")

    monkeypatch.setattr(vlbias.runtime.torch_pair.importlib, "import_module", import_module)
    with pytest.raises(RuntimeError, match="CUDA driver"):
        import_torchvision()
    assert metadata.version("torchvision")  # the real pair is untouched


def test_the_command_line_says_it_in_one_line_wherever_torchvision_was_first_imported(run_cli, monkeypatch):
    def measure(options):
        raise RuntimeError(BROKEN)  # as torchmetrics' or transformers' import of torchvision would

    monkeypatch.setattr("vlbias.workflows.measure.measure", measure)
    versions = {"torch": "2.5.1+cpu", "torchvision": "0.21.0+cu124"}
    monkeypatch.setattr(vlbias.runtime.torch_pair, "_version", lambda package: versions[package])
    code, out, err = run_cli(["measure", "--suite", "mmbias", "--model", "clip", "--tiny", "--out", "ignored"])
    assert code == 2 and err.startswith("vlbias: error: torch 2.5.1+cpu and torchvision 0.21.0+cu124 do not match")
    assert len(err.strip().splitlines()) == 1
