"""``vlbias debias``: the run folder of one method, the compare mode, the fitting data, and one-line errors."""

import dataclasses
import json
import logging
import math
import shutil
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import torch
import yaml
from PIL import Image
from torch import Tensor

from vlbias.data.biasworld import GROUPS, BiasWorld, group_phrases
from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.errors import InputError
from vlbias.metrics.functional.retrieval import retrieval_recall
from vlbias.mitigation import registry
from vlbias.mitigation.debiased_embeddings import DebiasedEmbeddings
from vlbias.mitigation.debiaser import Debiaser, FitData, Modality, load_debiaser
from vlbias.mitigation.fit_data import biasworld_fit_data, fields_given, file_fit_data
from vlbias.mitigation.projection import orthogonal_projection
from vlbias.models.embedding import text_encoder
from vlbias.models.registry import load
from vlbias.results import read_results
from vlbias.workflows.debias import debias
from vlbias.workflows.debias_outputs import DEBIAS_FOLDER
from vlbias.workflows.loaded_model import load_model
from vlbias.workflows.options import DebiasOptions

QUICK = "{mmbias: {statistics: {n_permutations: 200, n_bootstrap: 100}}}"
SMALL = ["--biasworld.eval_per_combination", "2", "--biasworld.n_train", "16"]
BASE = ["debias", "--model", "clip", "--tiny", *SMALL, "--suite_options", QUICK]
EFFECT = "man_vs_woman/stereotyped_activities/effect_size"


def assert_one_line_error(result, *fragments):
    code, _, err = result
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("vlbias: error: "), err
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture(scope="module")
def orth_proj_run(tmp_path_factory):
    """Orth-Proj fitted on BiasWorld's val split, measured on test (R@K on its captions), through the console script
    in this process."""
    from vlbias.cli import main

    out = tmp_path_factory.mktemp("debias") / "run"
    main([*BASE, "--method", "orth_proj", "--seed", "3", "--captions", "biasworld", "--out", str(out)])
    return out


def test_one_method_writes_the_debiaser_its_summary_and_the_suites_before_and_after(orth_proj_run):
    summary = json.loads((orth_proj_run / "debias.json").read_text())
    assert summary["methods"]["orth_proj"]["state"] == {"projection": [64, 64]}
    assert summary["methods"]["orth_proj"]["options"] == {"rtol": None}
    assert summary["methods"]["orth_proj"]["linear"] == {"text": True}
    assert summary["data"]["data"] == "biasworld" and summary["data"]["split"] == "val"
    assert summary["seed"] == 3 and summary["suites"] == ["mmbias"] and summary["not_fitted"] == {}
    assert summary["vlbias_version"] and summary["environment"]["torch"] == torch.__version__
    before = read_results(orth_proj_run / "before" / "mmbias.json")
    after = read_results(orth_proj_run / "after" / "mmbias.json")
    assert before.config["suite_config"]["data"]["split"] == "test"
    assert before.metrics[EFFECT] != after.metrics[EFFECT]
    rows = {row["method"]: row for row in summary["comparison"]}
    assert rows["none"][f"mmbias/{EFFECT}"] == before.metrics[EFFECT]
    assert rows["orth_proj"][f"mmbias/{EFFECT}"] == after.metrics[EFFECT]
    assert 0 <= rows["orth_proj"]["zero_shot_accuracy"] <= 1
    assert sorted(p.name for p in orth_proj_run.iterdir()) == [
        "after", "before", "clip", "debias.json", "debiaser", "model"
    ]  # fmt: skip


def test_the_debiased_model_is_written_as_a_checkpoint_and_in_clips_own_format(orth_proj_run):
    """``model/`` loads as the ``debiased`` model, ``clip/`` as a plain CLIPModel: both give the debiased
    text embeddings of the model the run fitted on (the tiny CLIP of seed 0)."""
    from transformers import CLIPModel

    debiased = DebiasedEmbeddings.from_pretrained(orth_proj_run / "model")
    texts = ["a person cooking.", "the woman is driving."]
    with torch.no_grad():
        expected = debiased.embed_texts(debiased.prepare_texts(texts))
        exported = CLIPModel.from_pretrained(orth_proj_run / "clip").eval()
        tokens = debiased.prepare_texts(texts)
        plain = exported.get_text_features(**tokens).pooler_output
    torch.testing.assert_close(torch.nn.functional.normalize(plain, dim=-1), expected, atol=1e-5, rtol=0)


def test_the_saved_debiaser_is_orth_proj_of_the_group_prompts_of_the_model():
    """The fitted state equals P = I - V V^+ of the model's own group-phrase embeddings (an independent
    float64 transcription), and the view the suites measure applies it to the text embeddings."""
    model = load("clip", tiny=True)
    world = BiasWorld(eval_per_combination=1, n_train=8)
    data = biasworld_fit_data(model, world, "val")
    debiaser = registry.debiaser_class("orth_proj")().fit(data)
    prompts = torch.cat([data.attribute_prompts[g] for g in GROUPS]).double()  # (6, D)
    reference = torch.eye(prompts.shape[1], dtype=torch.float64) - prompts.T @ torch.linalg.pinv(prompts.T)
    torch.testing.assert_close(debiaser.linear_map("text").double(), reference, atol=1e-5, rtol=0)
    texts = ["a person cooking.", "the woman is driving."]
    plain = text_encoder(model)(texts).double()
    expected = torch.nn.functional.normalize(plain @ reference.T, dim=1)
    view = DebiasedEmbeddings(model, debiaser)
    with torch.no_grad():
        seen = view.embed_texts(view.prepare_texts(texts)).double()
    torch.testing.assert_close(seen, expected, atol=1e-5, rtol=0)
    pixels = view.prepare_images(world.images("test")[:2])
    with torch.no_grad():
        torch.testing.assert_close(view.embed_images(pixels), model.embed_images(pixels))  # Orth-Proj leaves images


def test_recall_at_k_is_the_retrieval_metric_of_the_debiased_embeddings(orth_proj_run):
    """The R@K of the run's rows equal retrieval_recall of the test split's images and own captions, embedded by
    the written model (``none``: its inner model) and cosine-scored; each in its interval."""
    summary = json.loads((orth_proj_run / "debias.json").read_text())
    rows = {row["method"]: row for row in summary["comparison"]}
    debiased = DebiasedEmbeddings.from_pretrained(orth_proj_run / "model")
    world = BiasWorld(**summary["biasworld"])
    captions = [item.caption for item in world.items("test")]
    for method, model in (("none", debiased.inner), ("orth_proj", debiased)):
        with torch.no_grad():
            images = model.embed_images(model.prepare_images(world.images("test")))
            texts = model.embed_texts(model.prepare_texts(captions))
        scores = (
            torch.nn.functional.normalize(images.double(), dim=1)
            @ torch.nn.functional.normalize(texts.double(), dim=1).T
        )
        expected = retrieval_recall(scores, torch.arange(len(captions)))
        for key in ("txt_r1", "txt_r5", "txt_r10", "img_r1", "img_r5", "img_r10"):
            column = f"retrieval_recall/{key}"
            assert rows[method][column] == pytest.approx(float(expected[key])), (method, key)
            assert rows[method][f"{column}/ci_low"] <= rows[method][column] <= rows[method][f"{column}/ci_high"]


def test_the_saved_debiaser_loads_back_with_its_state(orth_proj_run):
    loaded = load_debiaser(orth_proj_run / "debiaser")
    assert loaded.name == "orth_proj" and loaded.fitted_state()["projection"].shape == (64, 64)
    summary = json.loads((orth_proj_run / "debias.json").read_text())
    assert json.loads((orth_proj_run / "debiaser" / "debiaser.json").read_text())["state"] == {
        name: shape for name, shape in summary["methods"]["orth_proj"]["state"].items()
    }


def test_biasworld_fit_data_pairs_each_template_with_both_groups():
    model = load("clip", tiny=True)
    world = BiasWorld(eval_per_combination=1, n_train=8)
    data = biasworld_fit_data(model, world, "val")
    encode = text_encoder(model)
    torch.testing.assert_close(
        data.prompt_pairs[3], encode(["a photo of a man cooking.", "a photo of a woman cooking."])
    )
    torch.testing.assert_close(data.attribute_prompts["woman"], encode(group_phrases("woman")))
    assert data.reference_labels == [item.group for item in world.items("val")]
    assert data.reference_images.shape == (12, 64) and data.attribute_words == {"man": ["man"], "woman": ["woman"]}
    assert data.helpful_pairs is None and data.description["split"] == "val"


def utkface_folder(root):
    """Four tiny UTKFace-named images: two men, two women."""
    root.mkdir()
    for k, gender in enumerate([0, 1, 0, 1]):
        Image.new("RGB", (32, 32), (40 * k, 80, 120)).save(root / f"{20 + k}_{gender}_0_2017011917043553{k}.jpg")
    return root


def test_a_prompt_file_gives_its_prompts_and_a_gallery_of_reference_images(tmp_path):
    gallery = utkface_folder(tmp_path / "utk")
    path = tmp_path / "prompts.yaml"
    spec = {
        "attribute_prompts": {"male": ["a photo of a man."], "female": ["a photo of a woman."]},
        "prompt_pairs": [["the man is cooking.", "the woman is cooking."]],
        "concept_prompts": ["a person cooking.", "a person driving."],
        "reference": {"gallery": "utkface", "root": str(gallery), "attribute": "gender", "limit": 1},
    }
    path.write_text(yaml.safe_dump(spec))
    model = load("clip", tiny=True)
    data = file_fit_data(model, path)
    assert data.prompt_pairs.shape == (1, 2, 64) and data.concept_prompts.shape == (2, 64)
    assert data.reference_images.shape == (2, 64) and sorted(data.reference_labels) == ["Female", "Male"]
    assert data.helpful_pairs is None and data.attribute_words is None
    assert data.description["reference"]["n_reference"] == 2 and data.description["given"]["prompt_pairs"] == 1


def test_prompts_the_model_cannot_see_are_skipped_by_name_and_a_field_left_empty_is_refused(tmp_path, caplog):
    """The measuring suites' check (vlbias.models.unseen_text) on the fitting prompts: a prompt of U+200B only (no
    token) and one of a script the vocabulary lacks (unknown tokens only) are not fitted on, each named."""
    path = tmp_path / "prompts.yaml"
    spec = {
        "attribute_prompts": {"male": ["a photo of a man.", "\u200b"], "female": ["a photo of a woman."]},
        "prompt_pairs": [["the man is cooking.", "漢字 漢字"], ["the man is driving.", "the woman is driving."]],
        "concept_prompts": ["a person cooking.", "漢字"],
    }
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    model = load("clip", tiny=True)
    with caplog.at_level(logging.WARNING):
        data = file_fit_data(model, path)
    assert data.attribute_prompts["male"].shape[0] == 1 and data.prompt_pairs.shape[0] == 1
    assert data.concept_prompts.shape[0] == 1
    skipped = data.description["skipped"]
    assert [entry["item"] for entry in skipped] == [
        "attribute_prompts['male']: '\\u200b'",
        "prompt_pairs: '漢字 漢字'",
        "concept_prompts: '漢字'",
    ]
    assert "holds no token" in skipped[0]["reason"] and "unknown token '[UNK]'" in skipped[1]["reason"]
    assert "not fitting on concept_prompts text '漢字'" in caplog.text
    spec["attribute_prompts"]["female"] = ["漢字"]
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    with pytest.raises(InputError, match=r"Every text of `attribute_prompts\['female'\]` is one the model cannot see"):
        file_fit_data(model, path)


def test_a_reference_row_the_gallery_skips_is_named_in_the_fitting_data(tmp_path, caplog):
    """A FairFace row with a race outside the release's is listed in ``skipped`` as ``vlbias measure`` lists it."""
    from tests.data.faces import write_fairface

    rows = [f"val/{k}.jpg,20-29,{gender},{race},True\n" for k, gender, race in [(1, "Male", "White"),
            (2, "Female", "Black"), (3, "Male", "Martian")]]  # fmt: skip
    root = write_fairface(tmp_path / "fairface", rows, ["1.jpg", "2.jpg", "3.jpg"])
    path = tmp_path / "prompts.yaml"
    spec = {
        "attribute_prompts": {"male": ["a man."], "female": ["a woman."]},
        "reference": {"gallery": "fairface", "root": str(root)},
    }
    path.write_text(yaml.safe_dump(spec))
    with caplog.at_level(logging.WARNING), pytest.warns(UserWarning, match="lists 3 images; the release lists"):
        data = file_fit_data(load("clip", tiny=True), path)
    assert data.reference_labels == ["Male", "Female"]
    (entry,) = data.description["skipped"]
    assert entry["item"] == "fairface_label_val.csv row 4" and "'Martian'" in entry["reason"]
    assert "reference image fairface_label_val.csv row 4 left out" in caplog.text


def test_fitting_on_a_prompt_file_writes_its_source(tmp_path, run_cli):
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({"attribute_prompts": {"man": ["the man."], "woman": ["the woman."]}}))
    code, out, err = run_cli([*BASE, "--method", "orth_proj", "--data", str(path), "--out", str(tmp_path / "run")])
    assert code == 0, err
    assert out.startswith(f"fitting orth_proj on {path}; writing {tmp_path / 'run'}\n")
    assert "orth_proj: mmbias/" in out and out.strip().endswith(f"wrote {tmp_path / 'run'}")
    summary = json.loads((tmp_path / "run" / "debias.json").read_text())
    assert summary["data"] == {"data": str(path.resolve()), "given": {"attribute_prompts": 2}}


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        (["--method", "orth_prj"], ["Unknown debiaser 'orth_prj'", "orth_proj"]),
        (["--method", "orth_proj", "--method_options", "{rtols: 0.1}"], ["`rtols`", "did you mean `rtol`"]),
        (["--method", "orth_proj", "--method_options", "{rtol: 2}"], ["`rtol` in [0, 1)", "2"]),
        (["--method", "[orth_proj, orth_proj]"], ["distinct methods"]),
        (["--method", "orth_proj", "--suites", "[]"], ["at least one suite"]),
        (["--method", "[orth_proj]", "--method_options", "{sfid: {}}"], ["not compared: ['sfid']"]),
        (["--method", "orth_proj", "--suite_options", "{weat: {}}"], ["suites that do not run: ['weat']"]),
        (["--method", "orth_proj", "--suite_options", "{mmbias: {probe: match}}"], ["Suite 'mmbias' probes match"]),
        (["--method", "orth_proj", "--trained_models", "{pa: {model: clip, checkpoint: d}}"], ["rows of the compare"]),
        (["--method", "[orth_proj]", "--trained_models", "{none: {model: clip, checkpoint: d}}"], ["row 'none'"]),
        (["--method", "[orth_proj]", "--trained_models", "{pa: {model: clip}}"], ["row 'pa' needs `checkpoint`"]),
        (["--method", "[orth_proj]", "--trained_models", "{pa: {checkpont: d}}"], ["`checkpont`", "`checkpoint`"]),
        (["--method", "[orth_proj]", "--trained_models", "{pa: {model: bert, checkpoint: d}}"], ["'bert' lacks"]),
        (["--method", "orth_proj", "--caption_images", "pictures"], ["give the file as `captions`"]),
        (["--method", "orth_proj", "--captions", "no/such/captions.json"], ["no/such/captions.json"]),
    ],
)
def test_bad_choices_are_one_line_before_anything_is_written(tmp_path, run_cli, arguments, fragments):
    out = tmp_path / "run"
    argv = ["debias", "--model", "clip", "--tiny", *arguments, "--out", str(out)]
    result = run_cli(argv)
    assert_one_line_error(result, *fragments)
    assert result[1] == "" and not out.exists()


def test_a_method_whose_needs_the_data_does_not_give_is_refused_by_field(tmp_path, run_cli):
    path = tmp_path / "prompts.yaml"
    path.write_text(yaml.safe_dump({"concept_prompts": ["a person cooking."]}))
    out = tmp_path / "run"
    result = run_cli([*BASE, "--method", "orth_proj", "--data", str(path), "--out", str(out)])
    assert_one_line_error(result, "Debiaser 'orth_proj' needs `attribute_prompts`", str(path))
    assert result[1] == "" and not out.exists()


def test_what_the_data_is_said_to_give_is_what_it_gives(tmp_path):
    """``fields_given`` (the door's check) agrees with the fitting data built from BiasWorld and from a file."""
    model = load("clip", tiny=True)
    built = biasworld_fit_data(model, BiasWorld(eval_per_combination=1, n_train=8), "val")
    assert {f.name for f in dataclasses.fields(built) if getattr(built, f.name) is not None} == fields_given(
        "biasworld"
    )
    path = tmp_path / "prompts.yaml"
    spec = {"concept_prompts": ["a person cooking."], "helpful_pairs": [["a person cooking.", "a person."]]}
    path.write_text(yaml.safe_dump(spec))
    built = file_fit_data(model, path)
    assert {f.name for f in dataclasses.fields(built) if getattr(built, f.name) is not None} == fields_given(path)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ({"atribute_prompts": {"a": ["x"]}}, "unknown key(s) ['atribute_prompts']"),
        ({"prompt_pairs": [["only one"]]}, "`prompt_pairs` to be a list of [text, text] pairs"),
        ({"reference": {"gallery": "lfw", "root": "."}}, "`gallery` (one of fairface, utkface, celeba)"),
    ],
)
def test_a_bad_prompt_file_is_refused_by_key(tmp_path, run_cli, content, fragment):
    path = tmp_path / "prompts.yaml"
    path.write_text(yaml.safe_dump(content))
    result = run_cli(["debias", "--model", "clip", "--tiny", "--method", "orth_proj", "--data", str(path),
                      "--out", str(tmp_path / "run")])  # fmt: skip
    assert_one_line_error(result, str(path), fragment)


def test_measuring_on_the_fitting_split_warns(tmp_path, caplog):
    options = DebiasOptions(
        method="orth_proj",
        model="clip",
        tiny=True,
        out=str(tmp_path / "run"),
        suite_options={"mmbias": {"split": "val", "statistics": {"n_permutations": 100, "n_bootstrap": 50}}},
        biasworld=BiasWorldOptions(eval_per_combination=1, n_train=8),
    )
    with caplog.at_level(logging.WARNING):
        debias(options)
    assert "measures BiasWorld's 'val' split (seed 0), the split the debiasers are fitted on" in caplog.text


class MeanGap(Debiaser):
    """A test method: image embeddings projected away from the gap between the two groups' mean reference images."""

    name = "mean_gap"
    NEEDS = ("reference_images", "reference_labels")
    MODIFIES = frozenset({"image"})

    def _fit(self, data: FitData) -> None:
        images, labels = data.labelled_references()
        first = torch.tensor([label == labels[0] for label in labels])
        gap = images[first].mean(0) - images[~first].mean(0)
        self._keep("projection", orthogonal_projection(gap[None, :]))

    def linear_map(self, modality: Modality) -> Tensor | None:
        return self.fitted_state()["projection"] if modality in self.MODIFIES else None


class NeedsInsights(MeanGap):
    """A test method that needs RoboShot's helpful pairs, which BiasWorld does not give."""

    name = "needs_insights"
    NEEDS = ("helpful_pairs",)


class FailsToFit(MeanGap):
    """A test method whose fit refuses the data it is given (as SFID does with too few references)."""

    name = "fails_to_fit"

    def _fit(self, data: FitData) -> None:
        raise InputError("Expected more references than these")


@pytest.fixture
def two_more_methods(monkeypatch):
    module = sys.modules[__name__].__name__
    entries = {
        **registry._DEBIASERS.entries,
        "mean_gap": f"{module}:MeanGap",
        "needs_insights": f"{module}:NeedsInsights",
        "fails_to_fit": f"{module}:FailsToFit",
    }
    monkeypatch.setattr(registry._DEBIASERS, "entries", entries)


def test_compare_mode_fits_every_method_on_the_same_data_and_tabulates_them(tmp_path, orth_proj_run, two_more_methods):
    """Every method, and a model given as trained (here the run's own model, saved: its row must be ``none``'s)."""
    options = DebiasOptions(
        method="all",
        model="clip",
        tiny=True,
        seed=3,
        out=str(tmp_path / "compare"),
        suite_options=yaml.safe_load(QUICK),
        captions="biasworld",
        biasworld=BiasWorldOptions(eval_per_combination=2, n_train=16),
    )
    load_model(options).save_pretrained(tmp_path / "same")
    trained = {"same_model": {"model": "clip", "checkpoint": str(tmp_path / "same")}}
    summary = debias(dataclasses.replace(options, trained_models=trained))
    out = tmp_path / "compare"
    table = pd.read_csv(out / "compare.csv")
    methods = registry.list_debiasers()  # every registered method, the two of the fixture among them
    refused = ["fails_to_fit", "needs_insights"]  # in the table, last, with the reason
    fitted_methods = [m for m in methods if m not in refused]
    assert table["method"].tolist() == ["none", *fitted_methods, "same_model", *refused]
    by_method = table.set_index("method")
    assert by_method.loc["same_model"].equals(by_method.loc["none"].rename("same_model"))
    assert summary["trained_models"] == trained and (out / "methods" / "same_model" / "mmbias.json").is_file()
    assert "`helpful_pairs`" in table.set_index("method").loc["needs_insights", "not_fitted"]
    assert table.set_index("method").loc["fails_to_fit", "not_fitted"] == (
        "Debiaser 'fails_to_fit' could not be fitted on world 0: Expected more references than these"
    )
    assert summary["not_fitted"].keys() == set(refused)
    fitted = table[~table["method"].isin(refused)]
    accuracy = fitted["zero_shot_accuracy"]
    assert (
        (fitted["zero_shot_accuracy/ci_low"] <= accuracy) & (accuracy <= fitted["zero_shot_accuracy/ci_high"])
    ).all()
    # the same data, folds and seed as the one-method run: the same numbers for the same method
    single = json.loads((orth_proj_run / "debias.json").read_text())["comparison"]
    for row in single:
        assert table.set_index("method").loc[row["method"], f"mmbias/{EFFECT}"] == pytest.approx(
            row[f"mmbias/{EFFECT}"]
        )
    assert load_debiaser(out / "methods" / "mean_gap" / "debiaser").name == "mean_gap"
    assert sorted(p.name for p in (out / "methods").iterdir()) == sorted({"none", "same_model", *fitted_methods})
    assert read_results(out / "methods" / "none" / "mmbias.json").metrics[EFFECT] == table.loc[0, f"mmbias/{EFFECT}"]
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_non_finite_number_in_a_comparison_row_is_written_as_null_and_listed(tmp_path, monkeypatch, two_more_methods):
    """A bootstrap interval that is NaN (and an accuracy interval end planted infinite) in one method's row: the
    whole comparison is written, each such number ``null`` in debias.json and listed in its ``non_finite``."""
    from vlbias.results import json_loads
    from vlbias.workflows import debias_fold

    measure, scores = debias_fold.measure_suites, debias_fold.fold_scores

    def planted_measure(suites, adapter, options, config, seed):
        measured = measure(suites, adapter, options, config, seed)
        if config.get("debiaser") == "mean_gap":
            measured["mmbias"][0].intervals[EFFECT] = [math.nan, math.nan]
        return measured

    def planted_scores(evaluation, debiaser, seed):
        out = scores(evaluation, debiaser, seed)
        if debiaser is not None:
            out["zero_shot_accuracy"] = (out["zero_shot_accuracy"][0], out["zero_shot_accuracy"][1], math.inf)
        return out

    monkeypatch.setattr(debias_fold, "measure_suites", planted_measure)
    monkeypatch.setattr(debias_fold, "fold_scores", planted_scores)
    options = DebiasOptions(
        method=["mean_gap"],
        model="clip",
        tiny=True,
        out=str(tmp_path / "compare"),
        suite_options=yaml.safe_load(QUICK),
        biasworld=BiasWorldOptions(eval_per_combination=2, n_train=16),
    )
    debias(options)
    out = tmp_path / "compare"
    written = json.loads((out / "debias.json").read_text())
    assert written["comparison"][1]["method"] == "mean_gap"
    assert written["comparison"][1][f"mmbias/{EFFECT}/ci_low"] is None
    assert {(tuple(entry["at"]), entry["value"]) for entry in written["non_finite"]} >= {
        (("comparison", 1, f"mmbias/{EFFECT}/ci_low"), "nan"),
        (("comparison", 1, f"mmbias/{EFFECT}/ci_high"), "nan"),
        (("comparison", 1, "zero_shot_accuracy/ci_high"), "inf"),
    }
    back = json_loads((out / "debias.json").read_text())["comparison"][1]
    assert math.isnan(back[f"mmbias/{EFFECT}/ci_low"]) and back["zero_shot_accuracy/ci_high"] == math.inf
    assert read_results(out / "methods" / "mean_gap" / "mmbias.json").intervals[EFFECT] == [None, None]
    assert pd.isna(pd.read_csv(out / "compare.csv").set_index("method").loc["mean_gap", f"mmbias/{EFFECT}/ci_low"])
    assert (out / "compare.png").is_file() and (out / "methods" / "mean_gap" / "debiaser").is_dir()


def test_an_earlier_output_is_replaced_and_a_foreign_folder_refused(tmp_path, run_cli, orth_proj_run):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert_one_line_error(run_cli([*BASE, "--method", "orth_proj", "--out", str(foreign)]), "notes.txt")
    assert (foreign / "notes.txt").read_text() == "mine"


# Rewrites the debias folder argv[1] from its own files with Orth-Proj's rtol set to 0.5 (in debias.json and in
# debiaser/), and SIGKILLs itself at the step argv[2]: "debiaser" (debiaser/ written in the stage, the rest not),
# "exchanged" (the new folder swapped in, the stage with the old one not yet deleted) or "rename1" (the two-rename
# fallback, between its renames: the old folder moved aside, the new one not yet in place).
REWRITER = textwrap.dedent(
    """
    import json, os, shutil, signal, sys
    from pathlib import Path
    import vlbias.atomic as atomic
    from vlbias.mitigation.debiaser import load_debiaser
    from vlbias.mitigation.orth_proj import OrthProj, OrthProjOptions
    from vlbias.results import read_items, read_results
    from vlbias.workflows.debias_outputs import write_debias_folder, write_measurements

    out, kill_at = Path(sys.argv[1]), sys.argv[2]
    summary = json.loads((out / "debias.json").read_text())
    summary["methods"]["orth_proj"]["options"]["rtol"] = 0.5
    debiaser = OrthProj(OrthProjOptions(rtol=0.5))
    debiaser._state = load_debiaser(out / "debiaser").fitted_state()
    runs = {
        part: {s: (read_results(out / part / f"{s}.json"), read_items(out / part / f"{s}.json")) for s in summary["suites"]}
        for part in ("before", "after")
    }
    replace = os.replace

    def exchange(first, second):
        if kill_at == "rename1":
            return False
        atomic.ctypes.CDLL(None).renameat2(-100, os.fsencode(first), -100, os.fsencode(second), 2)
        os.kill(os.getpid(), signal.SIGKILL)

    def replace_then_die(source, target):
        replace(source, target)
        os.kill(os.getpid(), signal.SIGKILL)

    def write(folder):
        debiaser.save(folder / "debiaser")
        for part in ("model", "clip"):  # the model's files as they were: this rewrite changes the debiaser only
            shutil.copytree(out / part, folder / part)
        if kill_at == "debiaser":
            os.kill(os.getpid(), signal.SIGKILL)
        for part, measured in runs.items():
            write_measurements(folder / part, measured)
        atomic._exchange, atomic.os.replace = exchange, replace_then_die  # the folder's own swap, not its files'

    write_debias_folder(out, summary, write)
    """
)


@pytest.mark.parametrize(
    ("kill_at", "rtol"),
    [
        pytest.param("debiaser", None, marks=pytest.mark.slow),
        ("exchanged", 0.5),
        pytest.param("rename1", None, marks=pytest.mark.slow),
    ],
)
def test_a_debias_killed_while_replacing_its_folder_leaves_the_old_run_or_the_new_one_whole(
    orth_proj_run, tmp_path, kill_at, rtol
):
    out = tmp_path / "out"
    shutil.copytree(orth_proj_run, out)
    names = sorted(p.name for p in out.iterdir())
    done = subprocess.run(
        [sys.executable, "-c", REWRITER, str(out), kill_at], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr
    DEBIAS_FOLDER.check(out)
    assert sorted(p.name for p in out.iterdir()) == names and [p.name for p in tmp_path.iterdir()] == ["out"]
    assert json.loads((out / "debias.json").read_text())["methods"]["orth_proj"]["options"]["rtol"] == rtol
    assert load_debiaser(out / "debiaser").options.rtol == rtol
    assert read_results(out / "after" / "mmbias.json").suite == "mmbias"


def test_folds_give_each_number_its_mean_over_worlds_with_an_interval(tmp_path, orth_proj_run, two_more_methods):
    options = DebiasOptions(
        method=["orth_proj", "mean_gap"],
        model="clip",
        tiny=True,
        seed=3,
        folds=2,
        out=str(tmp_path / "compare"),
        suite_options=yaml.safe_load(QUICK),
        biasworld=BiasWorldOptions(eval_per_combination=2, n_train=16),
    )
    summary = debias(options)
    out = tmp_path / "compare"
    table = pd.read_csv(out / "compare.csv").set_index("method")
    folds = pd.read_csv(out / "compare_folds.csv")
    assert summary["fold_worlds"] == [0, 1] and folds["fold"].tolist() == [0, 0, 0, 1, 1, 1]
    column = f"mmbias/{EFFECT}"
    for method, rows in folds.groupby("method"):
        assert table.loc[method, column] == pytest.approx(rows[column].mean())
        assert (
            table.loc[method, f"{column}/ci_low"] <= table.loc[method, column] <= table.loc[method, f"{column}/ci_high"]
        )
        assert table.loc[method, "zero_shot_accuracy"] == pytest.approx(rows["zero_shot_accuracy"].mean())
    # fold 0 is the one-method run's world and seed: the same numbers
    single = {row["method"]: row for row in json.loads((orth_proj_run / "debias.json").read_text())["comparison"]}
    first = folds[folds["fold"] == 0].set_index("method")
    assert first.loc["orth_proj", column] == pytest.approx(single["orth_proj"][column])
    assert first.loc["none", "zero_shot_accuracy"] == pytest.approx(single["none"]["zero_shot_accuracy"])
    assert folds[folds["fold"] == 1].set_index("method").loc["none", column] != first.loc["none", column]
    world = read_results(out / "methods" / "none" / "fold1" / "mmbias.json").config["suite_config"]["data"]["seed"]
    assert world == 1 and load_debiaser(out / "methods" / "mean_gap" / "fold1" / "debiaser").name == "mean_gap"


def test_folds_are_for_the_compare_mode_on_biasworld(tmp_path, run_cli):
    result = run_cli(["debias", "--model", "clip", "--tiny", "--method", "orth_proj", "--folds", "2",
                      "--out", str(tmp_path / "run")])  # fmt: skip
    assert_one_line_error(result, "`folds` (2) are BiasWorld worlds of the compare mode")


def test_debiasing_a_model_already_debiased_by_the_method_says_so(tmp_path, run_cli, orth_proj_run):
    """The debiased model embeds nothing of the group prompts its Orth-Proj removed: fitting Orth-Proj on them again
    is refused saying the model is already debiased by it, and what to do."""
    checkpoint = str(orth_proj_run / "model")
    argv = ["debias", "--model", "debiased", "--checkpoint", checkpoint, *SMALL, "--suite_options", QUICK]
    code, out, err = run_cli([*argv, "--method", "orth_proj", "--out", str(tmp_path / "again")])
    *loading, line = err.strip().splitlines()  # transformers' progress bar of the inner CLIP's weights, then the line
    assert all(text.startswith("Loading weights") for text in loading), err
    assert_one_line_error(
        (code, out, line),
        f"Model 'debiased' {checkpoint!r} is already debiased by 'orth_proj' (the method fitted now): its debiaser "
        "removed the span of these fitting texts",
        "lie in the removed span",
        "debias the model it was made from (its inner model",
    )


def test_a_bend_vlm_debiased_model_loads_and_measures_with_its_inner_models_encoder(tmp_path):
    """BendVLM embeds the queries it rewrites: the ``debiased`` model saved with it gets its inner model's text
    encoder back on loading (the attribute words are saved with the debiaser), and gives the same embeddings."""
    model = load("clip", tiny=True)
    world = BiasWorld(eval_per_combination=2, n_train=8)
    debiaser = registry.debiaser_class("bend_vlm")().fit(biasworld_fit_data(model, world, "val"))
    debiased = DebiasedEmbeddings(model, debiaser)
    debiased.save_pretrained(tmp_path / "model")
    loaded = DebiasedEmbeddings.from_pretrained(tmp_path / "model")
    texts = ["a person cooking.", "someone is driving."]
    with torch.no_grad():
        expected = debiased.embed_texts(debiased.prepare_texts(texts))
        torch.testing.assert_close(loaded.embed_texts(loaded.prepare_texts(texts)), expected, atol=1e-6, rtol=0)
