"""``vlbias audit --tiny --data_root DIR`` with all four face data sets under DIR in their release layouts: the
gallery-skew and zero-shot fairness suites measure each data set they read (FairFace, CelebA, UTKFace; the
zero-shot tasks need FairFace's or CelebA's labels), SocialCounterfactuals' shards are no suite's data and are left
alone, and the report shows both suites."""

import json
import warnings

from tests.data.faces import celeba_row, write_celeba, write_image
from tests.data.test_social_counterfactuals import FIRST, SECOND, _release
from tests.suites.test_zero_shot_fairness import _fairface
from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.workflows.audit import MEASURED, audit
from vlbias.workflows.options import AuditOptions

QUICK = {"statistics": {"n_bootstrap": 20}}


def test_audit_runs_both_face_suites_on_every_face_data_set_it_finds(tmp_path):
    data = tmp_path / "data"
    _fairface(data / "fairface")
    names = [f"{k:06d}.jpg" for k in range(1, 9)]
    rows = [celeba_row(name, {"Male"} if k % 2 else set()) for k, name in enumerate(names)]
    write_celeba(data / "celeba", rows, "".join(f"{name} 2\n" for name in names), names, folders=True)
    for k in range(8):  # UTKFace: age_gender_race_date.jpg, genders 0/1, races 0-4
        write_image(data / "utkface" / f"{20 + k}_{k % 2}_{k % 5}_2017011617452{k}.jpg", (30 * k, 100, 200 - 20 * k))
    _release(data / "social_counterfactuals", FIRST, SECOND)
    options = AuditOptions(
        model="clip", out=str(tmp_path / "out"), tiny=True, suites=["gallery_skew", "zero_shot_fairness"],
        data_root=str(data), biasworld=BiasWorldOptions(eval_per_combination=2),
        suite_options={"gallery_skew": {"k": 2, **QUICK}, "zero_shot_fairness": QUICK},
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fixtures of a few rows, where the releases list thousands
        path = audit(options)
    entries = json.loads(path.read_text())["entries"]
    status = {(entry["suite"], entry["dataset"]): entry["status"] for entry in entries}
    assert status == {
        **{("gallery_skew", name): MEASURED for name in ("biasworld", "celeba", "fairface", "utkface")},
        **{("zero_shot_fairness", name): MEASURED for name in ("biasworld", "celeba", "fairface")},
    }
    report = (path.parent / "report" / "report.md").read_text()
    for suite in ("gallery_skew", "zero_shot_fairness"):
        for name in ("biasworld", "celeba", "fairface"):
            assert f"{name}/{suite}" in report
