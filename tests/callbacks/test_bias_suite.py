"""BiasSuiteCallback: suites built once per fit, any data, logged keys, state in checkpoints, validate/test;
and (slow) the same numbers on 1 and 2 DDP processes and from ``vlbias measure``."""

import json
import logging
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
import torch

from vlbias.callbacks import BiasSuiteCallback
from vlbias.callbacks.bias_suite import _lines
from vlbias.cli import main
from vlbias.errors import ConfigError
from vlbias.results import Results, read_results
from vlbias.suites.mmbias import MMBiasSuite

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"
TINY_FIT = [
    "--trainer.enable_progress_bar", "false",
    "--trainer.log_every_n_steps", "1",
    "--data.init_args.n_train", "64",
    "--data.init_args.eval_per_combination", "2",
    "--data.init_args.batch_size", "32",
]  # fmt: skip
KEY = "bias/mmbias/man_vs_woman/stereotyped_activities/effect_size"
BATCH = 8
PAPER = {"statistics": {"n_permutations": 10000, "n_bootstrap": 1000}}


def biasworld_seat(path: Path) -> Path:
    """A SEAT spec (May et al.'s JSON format) in the tiny models' words: men and women against BiasWorld's
    stereotyped activities, so that a tiny CLIP sees no unknown word."""

    def phrases(word: str) -> list[str]:
        return [word, f"a {word}", f"the {word}", f"a {word} in the photo", f"the {word} in an image"]

    spec = {
        "targ1": {"category": "Men", "examples": phrases("man")},
        "targ2": {"category": "Women", "examples": phrases("woman")},
        "attr1": {"category": "ManActivities", "examples": ["repairing", "driving", "coding", "someone is repairing"]},
        "attr2": {"category": "WomanActivities", "examples": ["cooking", "sewing", "cleaning", "someone is cooking"]},
    }
    path.write_text(json.dumps(spec))
    return path


def callbacks(out: Path | None, seat: Path, extra: tuple[dict, ...] = ()) -> str:
    """``--trainer.callbacks``: the three EMBED suites of ``callbacks/embed_suites.yaml``, SEAT on ``seat``, and
    ``extra`` suites; results to ``out`` (``None``: the default folder, ``<log_dir>/bias``)."""
    batches = {"batch_size": BATCH}  # small, so that two ranks share even BiasWorld's smallest test split
    resamples = {"statistics": {"n_bootstrap": 1000}}
    suites = [
        {"suite": "mmbias", "data": "biasworld", "options": {**PAPER, **batches}},
        {"suite": "vlstereoset", "data": "biasworld", "options": {"shift": False, **resamples, **batches}},
        {"suite": "weat", "data": str(seat), "options": {"source": "embed", **resamples, **batches}},
        *extra,
    ]
    where = {} if out is None else {"out_dir": str(out)}
    return json.dumps([{"class_path": "vlbias.callbacks.BiasSuiteCallback", "init_args": {"suites": suites, **where}}])


def fit(tmp_path: Path, *extra: str) -> Path:
    main(["fit", "--config", str(QUICKSTART), "--trainer.logger.init_args.save_dir", str(tmp_path), *TINY_FIT, *extra])
    return tmp_path / "quickstart" / "version_0"


def test_each_suite_is_built_once_per_fit_and_logged_every_epoch(tmp_path, monkeypatch):
    built = []
    original = MMBiasSuite.from_biasworld.__func__

    def counting(cls, world, options):
        built.append(options)
        return original(cls, world, options)

    monkeypatch.setattr(MMBiasSuite, "from_biasworld", classmethod(counting))
    run = fit(tmp_path, "--trainer.max_epochs", "3")
    assert len(built) == 1
    metrics = pd.read_csv(run / "metrics.csv")
    assert metrics[KEY].notna().sum() == 3
    for suffix in ("ci_low", "ci_high", "p_value"):
        assert metrics[f"{KEY}/{suffix}"].notna().sum() == 3
    low, value, high = (metrics[k].dropna().iloc[-1] for k in (f"{KEY}/ci_low", KEY, f"{KEY}/ci_high"))
    assert low <= value <= high
    # the history is saved in the checkpoint under the callback's state key, and read back
    (checkpoint,) = (run / "checkpoints").glob("*.ckpt")
    state = torch.load(checkpoint, weights_only=False)["callbacks"]
    (key,) = [k for k in state if k.startswith("BiasSuiteCallback")]
    history = state[key]["history"]
    assert [entry["epoch"] for entry in history] == [0, 1, 2]
    assert history[-1][KEY] == pytest.approx(metrics[KEY].dropna().iloc[-1], rel=1e-6)
    callback = BiasSuiteCallback(suites=[{"suite": "mmbias", "options": PAPER}])
    callback.load_state_dict(state[key])
    assert callback.history == history
    # resumed mid-epoch after epoch 2 was measured (a requeue), epoch 2 is measured again: it is kept once, the latest
    callback._record({**history[-1], "global_step": history[-1]["global_step"] + 1})
    assert [entry["epoch"] for entry in callback.history] == [0, 1, 2]
    assert callback.history[-1]["global_step"] == history[-1]["global_step"] + 1


def test_validate_measures_a_checkpoint_on_a_public_data_file(tmp_path):
    run = fit(tmp_path, "--trainer.max_epochs", "1")
    (checkpoint,) = (run / "checkpoints").glob("*.ckpt")
    out, seat = tmp_path / "validate", biasworld_seat(tmp_path / "seat.jsonl")
    again = {
        "suite": "weat",
        "data": str(seat),
        "name": "weat_word",
        "options": {"source": "embed", "embedding": "word"},
    }
    main(["validate", "--config", str(QUICKSTART), "--ckpt_path", str(checkpoint), "--trainer.logger", "false", *TINY_FIT,
          "--trainer.default_root_dir", str(tmp_path),
          "--trainer.callbacks", callbacks(out, seat, (again,))])  # fmt: skip
    results = read_results(out / "validate" / "weat.json")
    assert results.config["stage"] == "validate" and results.config["data"] == str(seat)
    counts = {"n_skipped/empty", "n_skipped/unknown", "n_skipped/truncated", "n_truncated"}  # words it cannot see
    assert set(results.metrics) == {"seat/word/effect_size", *counts} and not results.skipped
    assert all(results.metrics[count] == 0 for count in counts)
    assert results.config["stimuli_per_rank"] == [results.n_items] == [18]
    assert read_results(out / "validate" / "mmbias.json").metrics
    named = read_results(out / "validate" / "weat_word.json")  # a second run of one suite keeps its own files
    assert named.suite == "weat" and named.config["suite_options"]["embedding"] == "word"


def test_bad_suite_entries_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"`suites\[1\]` to be a suite name or a mapping with key 'suite'"):
        BiasSuiteCallback(suites=["mmbias", {"data": "biasworld"}])
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) \['option'\] in `suites\[0\]`"):
        BiasSuiteCallback(suites=[{"suite": "mmbias", "option": {}}])
    with pytest.raises(ConfigError, match="distinct suite names"):
        BiasSuiteCallback(suites=["mmbias", {"suite": "mmbias", "data": "biasworld"}])
    with pytest.raises(ConfigError, match="`every_n_epochs` to be a positive integer but got 0"):
        BiasSuiteCallback(every_n_epochs=0)


def test_suite_options_are_checked_when_the_callback_is_made(monkeypatch):
    """The options of ``options:`` are those of ``vlbias measure --suite_options``, refused the same way, before any
    data is read (the suites are built in ``setup``)."""
    monkeypatch.setattr(MMBiasSuite, "from_biasworld", lambda *args: pytest.fail("data read before the check"))
    cases = [
        ({"n_bootstrap": 50}, "Suite 'mmbias' option `n_bootstrap` moved to `statistics.n_bootstrap`"),
        ({"statistics": {"n_bootstrp": 50}}, "statistics option `n_bootstrp`; did you mean `n_bootstrap`?"),
        ({"top_k": 0}, "Expected suite 'mmbias' option `top_k` to be an integer v>0 but got 0"),
    ]
    for options, message in cases:
        with pytest.raises(ConfigError, match=message):
            BiasSuiteCallback(suites=[{"suite": "mmbias", "options": options}])
    vlstereoset = {"suite": "vlstereoset", "options": {"statistics": {"n_permutations": 100}}}
    with pytest.raises(ConfigError, match="takes no statistics option `n_permutations` other than 10000"):
        BiasSuiteCallback(suites=[vlstereoset])
    callback = BiasSuiteCallback(suites=[{"suite": "mmbias", "options": {"statistics": {"n_bootstrap": 50}}}])
    assert callback.options["mmbias"].statistics.n_bootstrap == 50


def vlbias(*argv: str, cwd: Path) -> None:
    """``vlbias argv`` in a fresh process (DDP launches its other ranks from the command line)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "vlbias.cli", *argv]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow  # three trainer launches, one of them two processes: ~2 min on 2 cores
def test_validate_gives_the_same_bias_on_one_and_two_processes_and_as_measure(tmp_path):
    """The quickstart model (trained briefly), measured by the callback in ``vlbias validate`` on 1 process and on
    2 DDP processes (gloo), and by ``vlbias measure`` on the exported model: counts exactly, floats to 1e-5."""
    world = ["--data.init_args.n_train", "2048", "--data.init_args.eval_per_combination", "3"]  # odd: uneven shards
    small = [
        "--trainer.limit_train_batches",
        "4",
        "--trainer.limit_val_batches",
        "2",
        "--trainer.enable_progress_bar",
        "false",
    ]
    vlbias(
        "fit",
        "--config",
        str(QUICKSTART),
        "--trainer.max_epochs",
        "1",
        "--trainer.logger.init_args.save_dir",
        str(tmp_path),
        "--trainer.callbacks",
        "[]",
        *world,
        *small,
        cwd=ROOT,
    )
    run = tmp_path / "quickstart" / "version_0"
    (checkpoint,) = (run / "checkpoints").glob("*.ckpt")
    outputs, seat = {}, biasworld_seat(tmp_path / "seat.jsonl")
    for processes in (1, 2):
        outputs[processes] = out = tmp_path / f"validate{processes}"
        ddp = ["--trainer.strategy", "ddp", "--trainer.accelerator", "cpu"] if processes == 2 else []
        vlbias(
            "validate", "--config", str(QUICKSTART), "--ckpt_path", str(checkpoint), "--trainer.devices", str(processes),
            *ddp, "--trainer.logger", "false", *world, *small, "--trainer.callbacks", callbacks(out, seat),
            "--trainer.default_root_dir", str(out), cwd=ROOT,
        )  # fmt: skip
    for suite in ("mmbias", "vlstereoset", "weat"):
        one, two = (read_results(outputs[n] / "validate" / f"{suite}.json") for n in (1, 2))
        assert_same_results(two, one)
        (n_stimuli,), per_rank = one.config["stimuli_per_rank"], two.config["stimuli_per_rank"]
        assert len(per_rank) == 2 and sum(per_rank) == n_stimuli and abs(per_rank[0] - per_rank[1]) <= BATCH, per_rank
    measured = tmp_path / "measure"
    vlbias(
        "measure", "--suite", "mmbias", "--model", "clip", "--checkpoint", str(run / "model"), "--data", "biasworld",
        "--biasworld.bias_strength", "0.9", "--biasworld.eval_per_combination", "3", "--biasworld.neutral_caption_rate", "0.5",
        "--suite_options", json.dumps({**PAPER, "batch_size": BATCH}), "--out", str(measured), cwd=ROOT,
    )  # fmt: skip
    assert_same_results(read_results(measured / "mmbias.json"), read_results(outputs[1] / "validate" / "mmbias.json"))


def assert_same_results(actual, expected, atol=1e-5) -> None:
    assert actual.n_items == expected.n_items and actual.skipped == expected.skipped
    for field in ("metrics", "p_values"):
        got, want = getattr(actual, field), getattr(expected, field)
        assert sorted(got) == sorted(want), field
        for key in want:
            assert got[key] == pytest.approx(want[key], abs=atol), (field, key)
    assert sorted(actual.intervals) == sorted(expected.intervals)
    for key, interval in expected.intervals.items():
        assert actual.intervals[key] == pytest.approx(interval, abs=atol), key


@pytest.mark.slow  # a two-process DDP fit: ~1 min on 2 cores
def test_two_process_fit_runs_the_callback_to_the_end(tmp_path):
    """The quickstart with the three EMBED suites on 2 CPU processes (gloo), each suite's stimuli split over
    the ranks (one image per combination in BiasWorld's balanced split)."""
    vlbias(
        "fit", "--config", str(QUICKSTART), "--trainer.max_epochs", "2",
        "--trainer.callbacks", callbacks(None, biasworld_seat(tmp_path / "seat.jsonl")),
        "--trainer.strategy", "ddp", "--trainer.accelerator", "cpu", "--trainer.devices", "2",
        "--trainer.logger.init_args.save_dir", str(tmp_path), "--trainer.enable_progress_bar", "false",
        "--data.init_args.n_train", "64", "--data.init_args.eval_per_combination", "1", cwd=ROOT,
    )  # fmt: skip
    run = tmp_path / "quickstart" / "version_0"
    metrics = pd.read_csv(run / "metrics.csv")
    assert metrics[KEY].notna().sum() == 2
    for suite in ("mmbias", "vlstereoset", "weat"):
        results = read_results(run / "bias" / "epoch=001" / f"{suite}.json")  # the default folder: log_dir/bias
        per_rank = results.config["stimuli_per_rank"]
        assert len(per_rank) == 2 and min(per_rank) > 0 and results.metrics, (suite, per_rank)


def test_printed_lines_show_bias_with_its_interval_and_only_counts_that_are_not_zero():
    results = Results(
        suite="mmbias",
        model="clip",
        checkpoint=None,
        config={},
        seed=0,
        n_items=10,
        metrics={"man_vs_woman/effect_size": 0.5, "n_skipped/empty": 0.0, "n_skipped/unknown": 2.0},
        intervals={"man_vs_woman/effect_size": (0.25, 0.75)},
        p_values={"man_vs_woman/effect_size": 0.0123},
    )
    assert _lines("mmbias", results, 3) == [
        "epoch 3: bias/mmbias/man_vs_woman/effect_size = +0.500 [+0.250, +0.750] p=0.0123",
        "epoch 3: bias/mmbias/n_skipped/unknown = 2",
    ]


@pytest.mark.parametrize(
    ("every", "max_epochs", "said"),
    [
        (5, 1, "bias suites mmbias: no epoch measured (every_n_epochs is 5, max_epochs 1)"),
        (2, 5, "bias suites mmbias: measured after epochs 1, 3"),
        (1, 12, "bias suites mmbias: measured after epochs 0, 1, 2, ..."),
    ],
)
def test_a_fit_says_on_which_epochs_bias_is_measured(every, max_epochs, said, caplog):
    callback = BiasSuiteCallback(suites=["mmbias"], every_n_epochs=every)
    callback.suites["mmbias"] = object()  # built in setup; only its name is said here
    trainer = types.SimpleNamespace(max_epochs=max_epochs)
    with caplog.at_level(logging.INFO):
        callback.on_fit_start(trainer, None)
    assert said in caplog.text


def corrupt_mmbias(root: Path) -> Path:
    """An MMBias folder (the tiny models' words) whose every image is corrupt."""
    phrases = {
        "unpleasant_phrases": ["cooking", "cleaning", "sewing"],
        "pleasant_phrases": ["driving", "repairing", "coding"],
        "category_phrases": {"muslim": ["a man ."], "christian": ["a woman ."]},
    }
    root.mkdir(parents=True)
    (root / "textual_phrases.json").write_text(json.dumps(phrases))
    for group in ("Muslim", "Christian"):
        for index in range(2):
            path = root / "images" / "Religion" / group / f"{index}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"not a png")
    return root


@pytest.mark.parametrize("on_nothing_measured", ["continue", "stop"])
def test_a_suite_that_measured_nothing_is_said_and_neither_logged_nor_written(
    tmp_path, run_cli, caplog, on_nothing_measured
):
    """Every image corrupt: with ``continue`` a line names the suite and the reason each time and the fit ends with
    nothing logged or written for it; with ``stop`` that line is the run's one error (exit status 2)."""
    data = corrupt_mmbias(tmp_path / "mmbias")
    options = {"pairs": [["muslim", "christian"]], "experiments": ["cross_modal"], "batch_size": BATCH}
    suite = {"suite": "mmbias", "data": str(data), "options": options}
    callback = {"suites": [suite], "out_dir": str(tmp_path / "bias"), "on_nothing_measured": on_nothing_measured}
    callback_list = json.dumps([{"class_path": "vlbias.callbacks.BiasSuiteCallback", "init_args": callback}])
    argv = ["fit", "--config", str(QUICKSTART), "--trainer.logger.init_args.save_dir", str(tmp_path), *TINY_FIT,
            "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "1", "--trainer.callbacks", callback_list]  # fmt: skip
    with caplog.at_level(logging.INFO):
        code, out, err = run_cli(argv)
    said = (
        f"epoch 0: Suite 'mmbias' measured nothing on data {str(data)!r} (0 items measured, 3 metrics, 7 skipped: 1x could not be "
        "decoded as an image: cannot identify image file "
    )
    if on_nothing_measured == "continue":
        assert code == 0, err
        (line,) = [record.getMessage() for record in caplog.records if "measured nothing" in record.getMessage()]
        assert line.startswith(said) and line.endswith(
            "; nothing logged or written, the run goes on (on_nothing_measured: continue)."
        )
        metrics = pd.read_csv(tmp_path / "quickstart" / "version_0" / "metrics.csv")
        assert not [column for column in metrics.columns if column.startswith("bias/")]
        assert not (tmp_path / "bias").exists()
    else:
        assert code == 2 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("vlbias: error:"), err
        (last,) = [line for line in err.splitlines() if line.startswith("vlbias: error:")]
        assert last.startswith(f"vlbias: error: {said}") and last.endswith(
            "; the run stops (on_nothing_measured: stop)."
        )


def test_on_nothing_measured_takes_continue_or_stop():
    with pytest.raises(ConfigError, match="`on_nothing_measured` to be 'continue' or 'stop' but got 'ignore'"):
        BiasSuiteCallback(on_nothing_measured="ignore")
