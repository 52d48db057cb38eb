"""``vlbias audit`` finds FairFace, UTKFace and CelebA folders under ``--data_root`` for the gallery-skew suite,
measures each beside BiasWorld's planted gallery, and the report draws its per-concept skew figure."""

import json
import warnings

from tests.data.faces import write_image
from tests.data.test_celeba import _release as celeba_release
from tests.data.test_fairface import _release as fairface_release
from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.results import read_results
from vlbias.workflows.audit import MEASURED, audit, find_datasets
from vlbias.workflows.options import AuditOptions


def test_audit_measures_every_face_folder_and_the_report_shows_the_per_concept_skew(tmp_path):
    data = tmp_path / "data"
    fairface_release(data / "fairface")
    celeba_release(data / "celeba", folders=True)
    for name in ("26_1_3_20170119180435537.jpg.chip.jpg", "30_0_0_20170117120403395.jpg"):
        write_image(data / "utkface" / name)
    (data / "notes").mkdir()
    assert [name for name, _ in find_datasets("gallery_skew", data)] == ["celeba", "fairface", "utkface"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixtures hold fewer rows than the releases
        path = audit(
            AuditOptions(model="clip", out=str(tmp_path / "out"), tiny=True, suites=["gallery_skew"],
                         data_root=str(data), suite_options={"gallery_skew": {"k": 1}},
                         biasworld=BiasWorldOptions(image_size=32))
        )  # fmt: skip
    entries = {(e["suite"], e["dataset"]): e for e in json.loads(path.read_text())["entries"]}
    assert set(entries) == {("gallery_skew", name) for name in ("biasworld", "celeba", "fairface", "utkface")}
    assert all(entry["status"] == MEASURED for entry in entries.values()), entries
    fairface = read_results(tmp_path / "out" / entries[("gallery_skew", "fairface")]["results"])
    assert fairface.config["suite_config"]["data"]["dataset"] == "FairFace" and "race/max_skew@1" in fairface.metrics
    report = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "gallery_skew per group (@1)" in report  # the per-concept MaxSkew bars of the BiasWorld run
