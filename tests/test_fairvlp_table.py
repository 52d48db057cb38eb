"""scripts/fairvlp_table.py's summary: the change of B@V-L against vanilla, of the means and seed by seed."""

import json


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


def test_summary_compares_the_means_and_each_seed_with_vanilla(load_script, tmp_path, capsys):
    # vanilla 10 and 30; fairvlp 5 (-50 %) and 33 (+10 %): the means change by 19/20 - 1 = -5 %, the seeds
    # by -20 ± 42.43 % (sample sd of -50 and +10)
    rows = [row("vanilla", 0, 10.0), row("vanilla", 1, 30.0), row("fairvlp", 0, 5.0), row("fairvlp", 1, 33.0)]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    load_script("fairvlp_table").main(["--summary", str(path)])
    summary = {  # method -> cells of its summary line: 2 seeds (the per-run lines have seed 0 or 1 there)
        cells[0]: cells[2:]
        for line in capsys.readouterr().out.splitlines()
        if (cells := [cell.strip() for cell in line.strip("|").split("|")])[1:2] == ["2"]
    }
    assert summary["fairvlp"][0] == "19.00 ± 19.80"  # B@V-L
    assert summary["vanilla"][-2:] == ["+0 %", "0 ± 0 %"]
    assert summary["fairvlp"][-2:] == ["-5 %", "-20 ± 42 %"]
