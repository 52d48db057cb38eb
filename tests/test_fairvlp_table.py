"""The FairVLP table's summary (``scripts/fairvlp_table.py``, :mod:`vlbias.experiments.fairvlp_table`): the change of
B@V-L against vanilla, of the means and seed by seed, and the number of seeds on which it is lower."""

import json

import pytest

from vlbias.experiments.command_line import run
from vlbias.experiments.fairvlp_measures import bias_on, image_records
from vlbias.experiments.fairvlp_table import fairvlp_table


def row(method: str, seed: int, bias: float) -> dict:
    measures = {"B@V-L": bias, "B@V": 2 * bias, "B@L": 1.0}
    return {
        "method": method,
        "seed": seed,
        "train_s": 1.0,
        "attack_success_rate": 0.9,
        **measures,
        **{f"{name}_interval": [value - 1, value + 1] for name, value in measures.items()},
        "masked_activity": 90.0,
        "itm": 80.0,
        "i2t_r1": 50.0,
    }


def test_summary_compares_the_means_and_each_seed_with_vanilla(tmp_path, capsys):
    # vanilla 10 and 30; fairvlp 5 (-50 %) and 33 (+10 %): the means change by 19/20 - 1 = -5 %, the seeds
    # by -20 ± 42.43 % (sample sd of -50 and +10), with the t-interval -20 ± t(0.975, 1) 42.43 / sqrt(2) = -20 ± 381
    rows = [row("vanilla", 0, 10.0), row("vanilla", 1, 30.0), row("fairvlp", 0, 5.0), row("fairvlp", 1, 33.0)]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    run(fairvlp_table, ["--summary", str(path)])
    summary = {  # method -> cells of its summary line: 2 seeds (the per-run lines have seed 0 or 1 there)
        cells[0]: cells[2:]
        for line in capsys.readouterr().out.splitlines()
        if (cells := [cell.strip() for cell in line.strip("|").split("|")])[1:2] == ["2"]
    }
    assert summary["fairvlp"][0] == "19.00 ± 19.80"  # B@V-L
    assert summary["vanilla"][-3:] == ["+0 %", "0 ± 0 [+0, +0] %", "0 of 2"]
    assert summary["fairvlp"][-3:] == ["-5 %", "-20 ± 42 [-401, +361] %", "1 of 2"]


def test_summary_gives_each_alpha_of_a_kl_method_its_own_line(tmp_path, capsys):
    # an alpha sweep: vanilla 20 on seeds 0 and 1; fairvlp at alpha 0.5 (10, 30) and at alpha 0.9 (5, 15)
    rows = [row("vanilla", 0, 20.0) | {"alpha": None}, row("vanilla", 1, 20.0) | {"alpha": None}]
    rows += [row("fairvlp", seed, bias) | {"alpha": 0.5} for seed, bias in ((0, 10.0), (1, 30.0))]
    rows += [row("fairvlp", seed, bias) | {"alpha": 0.9} for seed, bias in ((0, 5.0), (1, 15.0))]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([r | {"split": "val"} for r in rows]))
    run(fairvlp_table, ["--summary", str(path)])
    out = capsys.readouterr().out
    summary = {
        cells[0]: cells[2:]
        for line in out.splitlines()
        if (cells := [cell.strip() for cell in line.strip("|").split("|")])[1:2] == ["2"]
    }
    assert list(summary) == ["vanilla", "fairvlp (alpha 0.5)", "fairvlp (alpha 0.9)"]
    assert summary["fairvlp (alpha 0.5)"][-3:] == ["+0 %", "0 ± 71 [-635, +635] %", "1 of 2"]  # -50 % and +50 %
    assert summary["fairvlp (alpha 0.9)"][-3:] == ["-50 %", "-50 ± 35 [-368, +268] %", "2 of 2"]  # -75 % and -25 %
    assert "measured on the val split" in out


def test_summary_gives_each_attack_policy_its_own_line_and_rows_name_it(tmp_path, capsys):
    # a policy sweep at one alpha: vanilla 20 on seeds 0 and 1; fairvlp every 4th step (10, 30), every step (5, 10)
    rows = [row("vanilla", seed, 20.0) | {"alpha": None, "image_counterfactuals": None} for seed in (0, 1)]
    for spec, biases in (("every_n_steps:4", (10.0, 30.0)), ("every_step", (5.0, 10.0))):
        rows += [
            row("fairvlp", seed, bias) | {"alpha": 0.5, "image_counterfactuals": spec}
            for seed, bias in zip((0, 1), biases)
        ]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    run(fairvlp_table, ["--summary", str(path)])
    lines = [[cell.strip() for cell in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()]
    summary = {cells[0]: cells[2:] for cells in lines if cells[1:2] == ["2"]}
    # alpha is the same on every fairvlp row, so the policy alone names a summary line
    assert list(summary) == ["vanilla", "fairvlp (image every_n_steps:4)", "fairvlp (image every_step)"]
    assert summary["fairvlp (image every_step)"][-3:] == [
        "-62 %",
        "-62 ± 18 [-221, +96] %",
        "2 of 2",
    ]  # -75 % and -50 %
    # each run's own line names every setting it was trained with (rows from before counterfactual_targets was
    # recorded were trained with swapped targets)
    assert ["fairvlp (alpha 0.5, image every_step, targets swapped)", "1"] in [cells[:2] for cells in lines]


def test_a_bad_attack_policy_fails_before_anything_is_trained(capsys):
    with pytest.raises(SystemExit):
        run(fairvlp_table, ["--image_counterfactuals", "every_n_steps:0"])
    error = capsys.readouterr().err
    assert "POLICY:K" in error and "'every_n_steps:0'" in error


def test_summary_keeps_the_seeds_asked_for(tmp_path, capsys):
    rows = [row("vanilla", 0, 10.0), row("vanilla", 1, 30.0), row("fairvlp", 0, 5.0), row("fairvlp", 1, 33.0)]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    run(fairvlp_table, ["--summary", str(path), "--seeds", "0"])
    out = capsys.readouterr().out
    summary = {
        cells[0]: cells[2:]
        for line in out.splitlines()
        if (cells := [cell.strip() for cell in line.strip("|").split("|")])[-1].endswith("of 1")
    }
    # one seed: its mean and its change with no spread
    assert summary["fairvlp"][0] == "5.00" and summary["fairvlp"][-3:] == ["-50 %", "-50 %", "1 of 1"]
    assert "seeds [0]" in out


def test_summary_splits_recall_into_the_activity_and_the_group_of_the_best_caption(tmp_path, capsys):
    # (R@1, best caption's activity right, its group right) per seed: vanilla (50, 80, 60) and (40, 70, 60);
    # fairvlp (44, 80, 52) and (36, 72, 50), i.e. against vanilla (-6, 0, -8) and (-4, +2, -10): each mean ± 1.41, and
    # its t-interval ± t(0.975, 1) 1.41 / sqrt(2) = ± 12.71. A row from before the parts were kept (no i2t_r1_group) is
    # left out of that table.
    parts = {
        ("vanilla", 0): (50.0, 80.0, 60.0),
        ("vanilla", 1): (40.0, 70.0, 60.0),
        ("fairvlp", 0): (44.0, 80.0, 52.0),
        ("fairvlp", 1): (36.0, 72.0, 50.0),
    }
    keys = ("i2t_r1", "i2t_r1_activity", "i2t_r1_group")
    rows = [row(method, seed, 10.0) | dict(zip(keys, values)) for (method, seed), values in parts.items()]
    rows.append(row("fairvlp", 2, 10.0))
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    run(fairvlp_table, ["--summary", str(path)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if "its group right" in line)  # the last table printed
    table = {
        cells[0]: cells[1:]
        for line in lines[header + 2 :]
        if (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    assert (
        " | ".join(table["vanilla"])
        == "2 | 45.00 ± 7.07 | 75.00 ± 7.07 | 60.00 ± 0.00 | 0.0 ± 0.0 [+0.0, +0.0] | 0.0 ± 0.0 [+0.0, +0.0] | "
        "0.0 ± 0.0 [+0.0, +0.0]"
    )
    assert (
        " | ".join(table["fairvlp"])
        == "2 | 40.00 ± 5.66 | 76.00 ± 5.66 | 51.00 ± 1.41 | -5.0 ± 1.4 [-17.7, +7.7] | 1.0 ± 1.4 [-11.7, +13.7] | "
        "-9.0 ± 1.4 [-21.7, +3.7]"
    )


def images(succeeded: dict[str, bool], bias: dict[str, tuple[float | None, float | None]]) -> dict[str, dict]:
    """Image records of :func:`image_records`: a cooking image of B0 ("a"), one of B1 ("b"), a driving one of
    B0 ("c"), each with its B@V-L under templates t1 and t2."""
    who = {"a": ("cooking", 1), "b": ("cooking", -1), "c": ("driving", 1)}
    return {
        name: {
            "target": who[name][0],
            "direction": who[name][1],
            "attack_succeeded": succeeded[name],
            "B@V-L": dict(zip(("t1", "t2"), bias[name])),
        }
        for name in succeeded
    }


def test_bias_of_a_subset_of_images_is_table_2_over_those_images():
    records = images({"a": True, "b": True, "c": False}, {"a": (0.2, 0.4), "b": (0.1, None), "c": (-0.3, -0.1)})
    # t1: cooking (0.2 - 0.1) / 2 = 0.05, driving -0.3 -> 17.5 %; t2 ("b" excluded): cooking 0.4, driving -0.1 -> 25 %
    assert bias_on(records, {"a", "b", "c"}) == pytest.approx(21.25)
    assert bias_on(records, {"a", "b"}) == pytest.approx((5.0 + 40.0) / 2)  # one activity left
    assert bias_on(records, set()) != bias_on(records, set())  # NaN


def test_image_records_keep_each_activity_image_once_with_its_templates():
    rows = [
        {"item": "a", "group": "activity", "target": "cooking", "bias": "woman", "attack_succeeded": False}
        | {"template": template, "bias_B@V-L": value}
        for template, value in (("t1", 0.5), ("t2", float("nan")))
    ]
    rows.append(rows[0] | {"item": "z", "group": "occupation"})
    records = image_records(rows, b0=["man"])
    assert records == {
        "a": {"target": "cooking", "direction": -1, "attack_succeeded": False, "B@V-L": {"t1": 0.5, "t2": None}}
    }


def test_summary_compares_with_vanilla_on_the_images_both_attacks_flip(tmp_path, capsys):
    # vanilla's attack flips a and b, fairvlp's b and c: both flip b only. On b alone (cooking, B1, t2 excluded):
    # vanilla |-0.1| = 10 %, fairvlp |-0.05| = 5 % (-50 %). On every image, vanilla 21.25 % (as in the test above),
    # fairvlp: t1 cooking (0.1 - 0.05) / 2 = 0.025, driving -0.3 -> 16.25 %; t2 cooking 0.2, driving -0.1 -> 15 %.
    vanilla = images({"a": True, "b": True, "c": False}, {"a": (0.2, 0.4), "b": (0.1, None), "c": (-0.3, -0.1)})
    fairvlp = images({"a": False, "b": True, "c": True}, {"a": (0.1, 0.2), "b": (0.05, None), "c": (-0.3, -0.1)})
    rows = [row("vanilla", 0, 10.0) | {"images": vanilla}, row("fairvlp", 0, 5.0) | {"images": fairvlp}]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    run(fairvlp_table, ["--summary", str(path)])
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if "images both attacks flip" in line)
    cells = [c.strip() for c in lines[header + 2].strip("|").split("|")]
    assert cells[:7] == ["fairvlp", "1", "1", "5.00", "10.00", "-50 %", "1 of 1"]
    assert [float(c) for c in cells[7:9]] == pytest.approx([15.625, 21.25], abs=0.006)  # printed to 2 decimals
    assert float(cells[9].rstrip(" %")) == pytest.approx(round(100 * (15.625 / 21.25 - 1)))
