"""The counterfactual_answers suite: a fake chat model with planted answer distributions whose flip rate, largest
changes and per-attribute gaps (with their exact sign-flip p-values) are computed by hand, and `vlbias measure` end
to end on a tiny chat model."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from tests.suites.sharded import single_process
from vlbias.cli import main
from vlbias.errors import ConfigError
from vlbias.models.base import Capability
from vlbias.models.families.chat_vlm import OptionScores
from vlbias.report.build import build_report
from vlbias.report.glossary import undefined
from vlbias.results import read_results
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, measure_suite

OPTIONS = ["a doctor", "a nurse", "unclear"]
GROUPS = {"black_man": ("black", "man"), "black_woman": ("black", "woman"), "white_man": ("white", "man"),
          "white_woman": ("white", "woman")}  # fmt: skip
MAN = {"s1": [0.7, 0.2, 0.1], "s2": [0.5, 0.4, 0.1], "s3": [0.8, 0.1, 0.1], "s4": [0.1, 0.1, 0.8]}
WOMAN = {"s1": [0.3, 0.6, 0.1], "s2": [0.5, 0.4, 0.1], "s3": [0.6, 0.3, 0.1], "s4": [0.1, 0.1, 0.8]}
STATISTICS = {"statistics": {"n_bootstrap": 50}}


def write_sets(folder: Path, sets=("s1", "s2", "s3")) -> tuple[Path, dict[int, list[float]]]:
    """Each set's four images, told apart by their width (planted distribution by width)."""
    (folder / "img").mkdir(parents=True, exist_ok=True)
    lines, planted = [], {}
    for s, name in enumerate(sets):
        for g, (group, (race, gender)) in enumerate(GROUPS.items()):
            width = 10 + 4 * s + g
            image = f"img/{name}_{group}.png"
            Image.fromarray(np.zeros((8, width, 3), dtype=np.uint8)).save(folder / image)
            planted[width] = (MAN if gender == "man" else WOMAN)[name]
            lines.append(json.dumps({"set": name, "image": image, "group": group,
                                     "attributes": {"race": race, "gender": gender},
                                     "question": "Is this person a doctor or a nurse?", "options": OPTIONS,
                                     "unknown_option": 2}) + "\n")  # fmt: skip
    path = folder / "sets.jsonl"
    path.write_text("".join(lines))
    return path, planted


class FakeChat:
    """Each image's planted distribution (by its width) as the options' log-probabilities; first_token: the same
    probabilities halved (the suite renormalises)."""

    name, device, capabilities = "fake", "cpu", frozenset({Capability.ANSWER})

    def __init__(self, planted: dict[int, list[float]]) -> None:
        self.planted = planted

    def score_options(self, images, prompts, options):
        log_prob = torch.tensor([self.planted[image.size[0]] for image in images], dtype=torch.float64).log()
        return OptionScores(log_prob, log_prob, torch.ones_like(log_prob, dtype=torch.long))

    def first_token_probs(self, images, prompts, candidates):
        return torch.tensor([self.planted[image.size[0]] for image in images], dtype=torch.float64) / 2


def run(path, planted, **options):
    suite = build_suite(check_suite_options("counterfactual_answers", {**STATISTICS, **options}), path)
    return measure_suite(suite, FakeChat(planted), seed=0)


@pytest.mark.parametrize("scoring", ["log_prob", "first_token"])
def test_planted_flips_changes_and_gaps_by_hand(tmp_path, scoring):
    output = run(*write_sets(tmp_path), scoring=scoring)
    metrics = output.metrics
    assert metrics["n_sets"] == 3 and metrics["n_items"] == 12 and metrics["n_skipped"] == 0
    # s1 flips (doctor for men, nurse for women); s2 and s3 do not
    assert metrics["flip_rate"] == pytest.approx(1 / 3)
    # largest change: s1 0.4, s2 0, s3 0.2
    assert metrics["max_change"] == pytest.approx(0.2)
    assert metrics["unknown_rate"] == 0
    # man - woman, paired within sets: doctor 0.4, 0, 0.2; race changes nothing
    assert metrics["gap/gender/man-woman/a doctor"] == pytest.approx(0.2)
    assert metrics["gap/gender/man-woman/a nurse"] == pytest.approx(-0.2)
    assert metrics["gap/gender/man-woman/unclear"] == pytest.approx(0)
    assert metrics["gap/race/black-white/a doctor"] == pytest.approx(0)
    assert metrics["gap/gender/man-woman/a doctor/n_sets"] == 3
    # exact sign flips of (0.4, 0, 0.2): |sum| >= 0.6 for 4 of the 8 sign vectors
    assert output.p_values["gap/gender/man-woman/a doctor"] == pytest.approx(0.5)
    assert output.p_values["gap/gender/man-woman/a doctor@holm"] >= 0.5
    js = [0.0, 0.0, 0.0]  # each set: two distributions, each on half its images: JS of the two
    for k, name in enumerate(("s1", "s2", "s3")):
        mean = [(a + b) / 2 for a, b in zip(MAN[name], WOMAN[name], strict=True)]
        entropy = lambda p: -sum(x * math.log(x) for x in p)  # noqa: E731
        js[k] = entropy(mean) - (entropy(MAN[name]) + entropy(WOMAN[name])) / 2
    assert metrics["js_divergence"] == pytest.approx(sum(js) / 3)
    low, high = output.intervals["flip_rate"]
    assert low <= metrics["flip_rate"] <= high
    row = output.items[1]
    assert row["set"] == "s1" and row["group"] == "black_woman" and row["chosen"] == "a nurse"
    assert json.loads(row["attributes"]) == {"gender": "woman", "race": "black"}
    assert row["probabilities"] == pytest.approx(WOMAN["s1"])


def sharded_case():
    """The planted sets, one set a batch (rank 0 of two probes s1 and s3, rank 1 s2), and a fourth set of which three
    images are missing and the fourth does not decode (the reader skips the images, then the set)."""
    folder = Path(tempfile.mkdtemp())
    path, planted = write_sets(folder, ("s1", "s2", "s3", "s4"))
    for group in GROUPS:
        (folder / "img" / f"s4_{group}.png").unlink()
    (folder / "img" / "s4_white_woman.png").write_bytes(b"no image")
    options = check_suite_options("counterfactual_answers", {"batch_size": 1, "statistics": {"n_bootstrap": 20}})
    return build_suite(options, path), FakeChat(planted)


def test_sharded_case_gives_the_hand_numbers():
    (output,) = single_process([sharded_case])
    assert output["metrics"]["flip_rate"] == pytest.approx(1 / 3) and output["metrics"]["n_sets"] == 3
    assert output["metrics"]["n_skipped"] == 5
    assert [entry["item"] for entry in output["skipped"]] == [*(f"s4/{group}" for group in GROUPS), "s4"]


def test_measure_runs_end_to_end_on_a_tiny_chat_model(tmp_path):
    path, _ = write_sets(tmp_path / "data")
    (tmp_path / "data" / "img" / "s2_black_man.png").write_bytes(b"no image")
    out = tmp_path / "out"
    main(["measure", "--suite", "counterfactual_answers", "--model", "qwen2_vl", "--tiny", "--threads", "1", "--data",
          str(path), "--out", str(out), "--suite_options", json.dumps(STATISTICS)])  # fmt: skip
    results = read_results(out / "counterfactual_answers.json")
    assert results.n_items == 11 and results.metrics["n_skipped"] == 1
    assert results.skipped[0]["item"] == "s2/black_man"
    for name in ("max_change", "js_divergence", "flip_rate", "unknown_rate", "gap/gender/man-woman/a doctor"):
        assert name in results.metrics and len(results.intervals[name]) == 2
    assert 0 <= results.metrics["js_divergence"] <= math.log(4)
    assert undefined("counterfactual_answers", list(results.metrics)) == []  # every name has a glossary entry
    items = pd.read_parquet(out / "counterfactual_answers.items.parquet")
    assert list(items.columns) == ["set", "group", "attributes", "probabilities", "chosen"]
    assert all(sum(row) == pytest.approx(1) for row in items["probabilities"])
    text = build_report([out], tmp_path / "report").markdown.read_text()  # each attribute's gaps, per option
    assert "![out: counterfactual_answers per group (gender)](" in text


def test_bad_options_and_data_are_one_line_each(tmp_path):
    with pytest.raises(ConfigError, match=r"`template` to hold \{question\} and \{options\}"):
        check_suite_options("counterfactual_answers", {"template": "{question} {context}"})
    with pytest.raises(ConfigError, match="`interval_method`"):
        check_suite_options("counterfactual_answers", {"statistics": {"interval_method": "bca"}})
    with pytest.raises(ConfigError, match="cannot read its stimuli from BiasWorld"):
        build_suite(check_suite_options("counterfactual_answers", {}), "biasworld")
    with pytest.raises(
        ConfigError,
        match="is not a counterfactual question-set data set; expected a JSONL question-set file, a PAIRS folder",
    ):
        build_suite(check_suite_options("counterfactual_answers", {}), tmp_path)
    options = check_suite_options("counterfactual_answers", {"scoring": "first_token"})
    assert options.prompt("Q?", ["x", "y"]) == "Q?\nA. x\nB. y\nAnswer with the letter of one option."


def test_pairs_layout_gives_vhelm_unclear_rates_and_yes_no_sets_girrbach_gaps_by_hand(tmp_path):
    from tests.data.chat_layouts import write_pairs

    root = write_pairs(tmp_path / "PAIRS", {"occupations": ["airplane"]})  # widths 8-11: the four groups in order
    planted = {
        8: [0.2, 0.1, 0.7],
        9: [0.6, 0.3, 0.1],
        10: [0.3, 0.2, 0.5],
        11: [0.1, 0.1, 0.8],
    }  # pilot, attendant, unclear
    output = run(root, planted)
    metrics = output.metrics
    # chosen "unclear": black man, white man, white woman; the black woman "pilot"
    assert metrics["unclear_rate/gender/man"] == 1 and metrics["unclear_rate/gender/woman"] == pytest.approx(0.5)
    assert metrics["unclear_rate/race/black"] == pytest.approx(0.5) and metrics["unclear_rate/race/white"] == 1
    assert metrics["unclear_rate/race/white/n_images"] == 2
    assert not any(name.startswith("yes_gap/") for name in metrics)  # no yes/no question
    lines, planted = [], {}
    for s, (man, woman) in enumerate((([0.8, 0.2], [0.4, 0.6]), ([0.6, 0.4], [0.5, 0.5]))):
        for g, (gender, distribution) in enumerate((("man", man), ("woman", woman))):
            width = 20 + 2 * s + g
            Image.fromarray(np.zeros((8, width, 3), dtype=np.uint8)).save(tmp_path / f"{s}{gender}.png")
            planted[width] = distribution
            lines.append(json.dumps({"set": f"k{s}", "image": f"{s}{gender}.png", "group": gender,
                                     "attributes": {"gender": gender}, "question": "Is this person kind?",
                                     "options": ["yes", "no"]}) + "\n")  # fmt: skip
    (tmp_path / "kind.jsonl").write_text("".join(lines))
    output = run(tmp_path / "kind.jsonl", planted)
    gap = "yes_gap/gender/man-woman/Is this person kind?"
    assert output.metrics[gap] == pytest.approx((0.4 + 0.1) / 2) and output.metrics[f"{gap}/n_sets"] == 2
    assert output.p_values[gap] == pytest.approx(0.5)  # (0.4, 0.1): |sum| 0.5 for (+, +) and (-, -)
    assert output.p_values[f"{gap}@holm"] == pytest.approx(0.5) and output.p_values[f"{gap}@bh"] == pytest.approx(0.5)
    assert undefined("counterfactual_answers", list(output.metrics)) == []
