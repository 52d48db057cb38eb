"""The model card beside every exported checkpoint: after ``vlbias prune`` (tiny CLIP) and after a tiny fit, the
card's front matter is Hugging Face's, and its before/after numbers are those of the run's files."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from vlbias.cli import main
from vlbias.report.model_card import Change, ModelCard, card_text, training_card
from vlbias.results import is_count, read_results

ROOT = Path(__file__).resolve().parents[2]
SUITE_OPTIONS = {"statistics": {"n_permutations": 200, "n_bootstrap": 50}}


def front_matter(text: str) -> dict:
    assert text.startswith("---\n"), text[:40]
    header, _ = text[4:].split("\n---\n", 1)
    return yaml.safe_load(header)


def section_rows(text: str, heading: str) -> dict[str, list[str]]:
    """The rows of the table under ``## heading``, by first cell."""
    body = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("| ")][2:]  # after the header and its rule
    rows = [line.strip("|").split("|") for line in lines]
    return {cells[0].strip(): [cell.strip() for cell in cells[1:]] for cells in rows}


def interval(cell: str) -> list[float] | None:
    return None if cell == "n/a" else [float(part) for part in cell.strip("[]").split(",")]


def test_card_after_prune_holds_the_summary_numbers(tmp_path):
    out = tmp_path / "prune"
    main(["prune", "--model", "clip", "--tiny", "--data", "biasworld", "--biasworld.eval_per_combination", "2",
          "--fraction", "0.1", "--theta_quantile", "0.9", "--seed", "3", "--out", str(out)])  # fmt: skip
    summary = json.loads((out / "prune.json").read_text())
    text = (out / "model" / "README.md").read_text()
    front = front_matter(text)
    assert front["library_name"] == "vlbias" and "embedding-pruning" in front["tags"]
    assert "base_model" not in front and "license" not in front  # a tiny model has no base; licence unknown
    assert front_matter((out / "clip" / "README.md").read_text())["library_name"] == "transformers"
    details = section_rows(text, "Model details")
    assert details["seed"] == ["3"] and details["vlbias version"][0]
    assert section_rows(text, "Method options")["strategy"] == ["ranked"]
    bias = section_rows(text, "Bias before and after")
    (test,) = summary["effect_sizes_before"]
    before, _, after, _ = bias[f"{test}/effect_size"]
    expected = (summary["effect_sizes_before"][test], summary["effect_sizes_after"][test])
    assert (float(before), float(after)) == pytest.approx(expected, rel=1e-3)
    before, _, after, _ = section_rows(text, "Accuracy before and after")["zero_shot_accuracy"]
    accuracy = summary["zero_shot_accuracy"]
    assert (float(before), float(after)) == pytest.approx((accuracy["before"], accuracy["after"]), rel=1e-3)


def test_card_after_a_fit_holds_the_first_and_last_epochs(tmp_path):
    callbacks = [{"class_path": "vlbias.callbacks.BiasSuiteCallback",
                  "init_args": {"suites": [{"suite": "mmbias", "options": SUITE_OPTIONS}]}}]  # fmt: skip
    main(
        ["fit", "--config", str(ROOT / "configs/experiment/quickstart.yaml"), "--trainer.max_epochs", "2",
         "--trainer.logger.init_args.save_dir", str(tmp_path), "--trainer.enable_progress_bar", "false",
         "--trainer.enable_checkpointing", "false", "--trainer.callbacks", json.dumps(callbacks),
         "--data.init_args.n_train", "64", "--data.init_args.eval_per_combination", "2",
         "--data.init_args.batch_size", "32"]
    )  # fmt: skip
    run = tmp_path / "quickstart" / "version_0"
    text = (run / "model" / "README.md").read_text()
    front = front_matter(text)
    assert front["library_name"] == "vlbias" and "ContrastivePretraining" in front["tags"]
    assert "base_model" not in front
    assert section_rows(text, "Data")["datamodule"] == ["BiasWorldDataModule"]
    first, last = (read_results(run / "bias" / f"epoch={e:03d}" / "mmbias.json") for e in (0, 1))
    bias = section_rows(text, "Bias before and after")
    measured = {metric: value for metric, value in last.metrics.items() if not is_count(metric)}
    assert len(bias) == len(measured) == 1 and len(last.metrics) > 1  # the counts are left out of the card
    for metric, value in measured.items():
        before, before_interval, after, after_interval = bias[f"mmbias/{metric}"]
        assert float(before) == pytest.approx(first.metrics[metric], rel=1e-3)
        assert float(after) == pytest.approx(value, rel=1e-3)
        assert interval(before_interval) == pytest.approx(first.intervals.get(metric), rel=1e-3)
        assert interval(after_interval) == pytest.approx(last.intervals.get(metric), rel=1e-3)
    logged = pd.read_csv(run / "metrics.csv").dropna(subset=["val/loss"]).set_index("epoch")
    accuracy = section_rows(text, "Accuracy before and after")
    assert "val/i2t_accuracy" in accuracy and "val/loss" not in accuracy
    assert text.count("| epoch 0 | interval | epoch 1 |") == 2
    assert "_class_path" not in text and "_instantiator" not in text
    for column, (before, _, after, _) in accuracy.items():
        assert (float(before), float(after)) == pytest.approx((logged.loc[0, column], logged.loc[1, column]), rel=1e-3)


def test_base_model_is_named_only_for_a_hub_checkpoint(tmp_path):
    def card(checkpoint):
        return ModelCard(
            title="t", model="clip", base_model=checkpoint, method="m", options={}, data={}, seed=0,
            bias=[Change("d", 0.5, 0.1, [0.2, 0.8], None)], accuracy=[], before="before", after="after",
        )  # fmt: skip

    hub = card_text(card("openai/clip-vit-base-patch32"))
    assert front_matter(hub)["base_model"] == "openai/clip-vit-base-patch32"
    assert "base_model" not in front_matter(card_text(card(str(tmp_path))))
    assert section_rows(hub, "Bias before and after")["d"] == ["0.5", "[0.2, 0.8]", "0.1", "n/a"]
    assert "None recorded at export." in hub.split("## Accuracy before and after", 1)[1]


def test_a_fit_card_leaves_out_and_names_cells_of_metrics_csv_that_are_not_numbers(tmp_path):
    (tmp_path / "metrics.csv").write_text("epoch,step,val/accuracy\n0,5,0.5\n1,10,n/a\n2,15,0.75\n")
    card = training_card(tmp_path, "Quickstart", {"model": "clip", "tiny": True, "seed": 0}, {})
    assert [(c.name, c.before, c.after) for c in card.accuracy] == [("val/accuracy", 0.5, 0.75)]
    left_out = "(metrics.csv column 'val/accuracy': 1 cell(s) not a finite number, left out: 'n/a' (line 3))"
    assert card.sources == [left_out, "metrics.csv"]
