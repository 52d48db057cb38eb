"""Entry points pay only for what they use: measuring needs no Lightning (issue 16 moved seeding and the suite
runner out of the Lightning-side modules; the callback imports the runner, not the other way round)."""

import subprocess
import sys

import pytest

CHECK = "import sys; {code}; print(sorted(m for m in ('lightning', 'pytorch_lightning') if m in sys.modules))"


@pytest.mark.parametrize(
    "code",
    [
        "import vlbias.measure, vlbias.suites.run, vlbias.suites.mmbias, vlbias.suites.weat",
        "from vlbias.cli import main\ntry:\n    main(['measure', '--help'])\nexcept SystemExit:\n    pass",
    ],
    ids=["import-measure", "measure-help"],
)
def test_measuring_imports_no_lightning(code):
    program = CHECK.format(code="exec(" + repr(code) + ")")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
