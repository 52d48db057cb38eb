"""``measure_suite``'s progress bar: on stderr, rank 0, shown when stderr is a terminal or when
``VLBIAS_PROGRESS=1``, and never in captured (non-terminal) output otherwise."""

import pytest

from tests.suites.test_weat import FakeAdapter, seat_dir
from vlbias.suites.options import WEATOptions
from vlbias.suites.run import PROGRESS_VARIABLE, measure_suite
from vlbias.suites.weat import WEATSuite


@pytest.mark.parametrize(("forced", "shown"), [(None, False), ("0", False), ("1", True)])
def test_progress_bar_on_stderr_only_when_a_terminal_or_forced(tmp_path, capsys, monkeypatch, forced, shown):
    if forced is None:
        monkeypatch.delenv(PROGRESS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(PROGRESS_VARIABLE, forced)
    suite = WEATSuite.from_path(seat_dir(tmp_path), WEATOptions(batch_size=4).with_statistics(n_bootstrap=20))
    measure_suite(suite, FakeAdapter(), seed=0)
    out, err = capsys.readouterr()
    assert out == ""
    assert ("measure weat" in err and "/10 [" in err) is shown, err  # 10 stimuli: 3 + 3 targets, 2 + 2 attributes
