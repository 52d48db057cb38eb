"""vlbias.experiments.tables.run_table: the runner of the tables (rows in job order, shown and saved after every run)."""

import json

from vlbias.experiments.tables import run_table


def square(method: str, seed: int) -> dict:
    return {"method": method, "seed": seed, "value": seed * seed}


def test_rows_come_in_job_order_each_shown_and_saved_as_it_ends(tmp_path):
    shown, saved = [], []
    out = tmp_path / "rows.json"

    def show(row):
        shown.append(row)
        saved.append(json.loads(out.read_text()) if out.exists() else [])  # the file before this row's write

    jobs = [("a", 3), ("b", 1), ("a", 2)]
    rows = run_table(square, jobs, workers=2, show=show, out=out)
    assert rows == shown == [square(*job) for job in jobs]
    assert saved == [[], rows[:1], rows[:2]] and json.loads(out.read_text()) == rows
