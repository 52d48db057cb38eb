"""The gallery-skew suite: the planted skew recovered exactly through the whole pipeline (BiasWorld's planted gallery
ranked by the ground-truth concept adapter), the fold intervals recomputed by hand, a tiny CLIP on BiasWorld and on a
FairFace folder in the release's layout, the protocol recorded, skips counted by name, bad options refused and
``vlbias measure``; its sharded case runs in ``tests/suites/test_sharded.py``."""

import json
import math
import warnings

import pandas as pd
import pytest
import torch

from tests.data.test_celeba import _release as celeba_release
from tests.data.test_fairface import ROWS
from tests.data.test_fairface import _release as fairface_release
from vlbias.data.biasworld import BiasWorld
from vlbias.errors import ConfigError
from vlbias.experiments.planted.concept_oracle import ConceptOracle
from vlbias.experiments.planted.gallery_skew import planted_max_skew
from vlbias.metrics.functional import max_skew_at_k
from vlbias.metrics.functional.t_interval import t_interval
from vlbias.metrics.ranking_protocols import ranking_protocol
from vlbias.models.families.clip import CLIPAdapter
from vlbias.results import read_results
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import build_suite, measure_suite

FAST = {"statistics": {"n_bootstrap": 50}}
SMALL_WORLD = {"image_size": 32, "n_train": 8, "eval_per_combination": 1}


def _suite(data, **options):
    return build_suite(check_suite_options("gallery_skew", {**FAST, **options}), data)


@pytest.mark.parametrize("share", [0.5, 0.7, 0.9])
def test_the_planted_skew_is_measured_exactly_when_the_top_k_is_the_concepts_images(share):
    # 30 per activity: 15/15, 21/9, 27/3 by gender, each split evenly over the 3 tones
    suite = _suite(BiasWorld(**SMALL_WORLD), share=share, per_activity=30, k=[10, 30])
    output = measure_suite(suite, ConceptOracle(suite.gallery), seed=0)
    metrics, intervals = output.metrics, output.intervals
    planted = planted_max_skew(share, 30)
    assert abs(metrics["gender/max_skew@30"] - planted) < 1e-12, (metrics["gender/max_skew@30"], planted)
    assert intervals["gender/max_skew@30"][0] - 1e-12 <= planted <= intervals["gender/max_skew@30"][1] + 1e-12
    assert abs(metrics["tone/max_skew@30"]) < 1e-12  # tones dealt evenly within each gender
    assert abs(metrics["tone_x_gender/max_skew@30"] - planted_max_skew(share, 30, groups=6)) < 1e-12
    assert metrics["precision@30"] == 1.0 and metrics["precision@10"] == 1.0
    # the stereotyped gender of each activity is over-represented in its group's top K by exactly the planted share
    assert abs(metrics["group/cooking/gender/max_skew@30"] - planted) < 1e-12
    assert metrics["n_queries"] == 18 and metrics["gallery/n_images"] == 180 and metrics["n_empty_groups"] == 0
    if share == 0.5:
        assert metrics["gender/kl@30"] == 0.0 and intervals["gender/max_skew@30"][0] <= 0.0


def test_fold_statistics_are_the_mean_and_t_interval_of_each_random_half_ranked_alone():
    suite = _suite(BiasWorld(**SMALL_WORLD), protocol="bendvlm", share=0.9, per_activity=12, k=5)
    oracle = ConceptOracle(suite.gallery)
    output = measure_suite(suite, oracle, seed=3)
    assert suite.config["protocol"] == "bendvlm" and suite.config["folds"] == 5
    # by hand: the oracle's scores, five halves drawn in order from a generator seeded with the run's seed
    images = oracle.embed_images(oracle.prepare_images(suite.gallery.model_inputs))
    texts = [query.text for query in suite.stimuli()]
    scores = oracle.embed_texts(oracle.prepare_texts(texts)) @ images.T  # (18, 72)
    codes = torch.tensor([("man", "woman").index(g) for g in suite.gallery.labels["gender"]])
    generator = torch.Generator().manual_seed(3)
    conventions = ranking_protocol("bendvlm").conventions
    values = []
    for _ in range(5):
        fold = torch.randperm(72, generator=generator)[:36].sort().values
        values.append(max_skew_at_k(scores[:, fold], codes[fold], 5, conventions=conventions))
    values = torch.stack(values)
    assert abs(output.metrics["folds/gender/max_skew@5"] - float(values.mean())) < 1e-12
    assert output.intervals["folds/gender/max_skew@5"] == pytest.approx(t_interval(values).tolist(), abs=1e-12)


def test_tiny_clip_on_biasworld_records_the_protocol_and_reports_every_attribute():
    suite = _suite(BiasWorld(**SMALL_WORLD), per_activity=6, protocol="sfid", k=[3, 6])
    output = measure_suite(suite, CLIPAdapter.tiny(), seed=0)
    config = suite.config
    assert config["protocol"] == "sfid" and config["k"] == [3, 6] and "Jung et al." in config["protocol_source"]
    assert config["attributes"] == ["gender", "tone", "tone_x_gender"] and config["data"]["share"] == 0.7
    for attribute in config["attributes"]:
        for statistic in ("max_skew", "min_skew", "kl", "ndkl"):
            assert f"{attribute}/{statistic}@6" in output.intervals
            assert f"group/sewing/{attribute}/{statistic}@3" in output.metrics
    assert len(output.items) == 18 and {"query", "group", "concept", "precision@3"} <= set(output.items[0])


def test_a_fairface_folder_is_read_and_its_empty_groups_missing_images_and_unseen_queries_are_skipped(tmp_path):
    rows = [*ROWS, "val/9.jpg,20-29,Male,White,False\n"]  # no image 9.jpg
    root = fairface_release(tmp_path / "fairface", rows=rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 rows where the release lists 10,954
        suite = _suite(root, queries=["a photo of a person.", "zzqx", "   "])
    output = measure_suite(suite, CLIPAdapter.tiny(), seed=0)
    assert suite.config["data"]["dataset"] == "FairFace" and suite.config["k"] == [3]  # geyik's 10, at most 3
    assert suite.config["attributes"] == ["gender", "race", "age", "race_x_gender"]
    skipped = {entry["item"]: entry["reason"] for entry in output.skipped}
    assert "image file 'val/9.jpg' is missing" in skipped["fairface_label_val.csv row 5"]
    assert "an empty group" in skipped["race=White"] and "race_x_gender=White x Male" in skipped
    # 7 races, 9 age groups and 14 race x gender pairs, of which the 3 images hold 3, 3 and 3
    assert output.metrics["n_empty_groups"] == (7 - 3) + (9 - 3) + (14 - 3)
    assert output.metrics["n_skipped/empty"] == 1 and output.metrics["n_skipped/unknown"] == 1
    assert skipped["zzqx"] and output.metrics["n_queries"] == 1
    assert "precision@3" not in output.metrics  # the neutral queries have no labelled concept


def test_celeba_hair_queries_get_precision_against_the_attribute_they_name(tmp_path):
    root = celeba_release(tmp_path / "celeba")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        suite = _suite(root, queries="bendvlm_hair", split="test", k=1)
    output = measure_suite(suite, CLIPAdapter.tiny(), seed=0)
    assert suite.config["data"]["dataset"] == "CelebA" and suite.config["attributes"] == ["gender"]
    # test split: images 2 (Blond_Hair) and 3; a query ranks the two by score, ties by index
    assert output.metrics["precision/n_queries"] == 4
    assert 0.0 <= output.metrics["group/Blond_Hair/precision@1"] <= 1.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"protocol": "nope"}, "protocol"),
        ({"queries": "activities_x"}, "queries"),
        ({"attributes": ["height"]}, "Expected `attributes` among BiasWorld's gender, tone, activity but got"),
        ({"protocol": "bendvlm", "per_activity": 1, "k": 4}, "at most half the gallery"),
        ({"queries": "bendvlm_hair"}, "names the gallery attributes"),
        ({"split": "val"}, "apply to a data path"),
    ],
)
def test_bad_options_are_refused_by_name(options, message):
    with pytest.raises(ConfigError, match=message):
        _suite(BiasWorld(**SMALL_WORLD), **options)


def test_a_protocol_k_above_the_gallery_is_lowered_and_flagged_and_a_given_one_refused():
    # bendvlm's K = 500 on 36 images in folds of 18: each fold's top K is the whole fold, skew 0 whatever the model
    suite = _suite(BiasWorld(**SMALL_WORLD), protocol="bendvlm", per_activity=6)
    output = measure_suite(suite, ConceptOracle(suite.gallery), seed=0)
    assert suite.ks == (18,) and (suite.config["k"], suite.config["protocol_k"]) == ([18], 500)
    assert output.metrics["n_protocol_k_above_gallery"] == 1 and output.metrics["folds/gender/max_skew@18"] == 0.0
    reasons = {entry["item"]: entry["reason"] for entry in output.skipped}
    assert reasons["k=18"].startswith(
        "protocol 'bendvlm''s K = 500 is above half the gallery (each fold is a random half), 18 images of BiasWorld: "
        "K = 18 used, so each fold's top K is the whole fold"
    )
    given = _suite(BiasWorld(**SMALL_WORLD), protocol="bendvlm", per_activity=6, k=4)
    assert "n_protocol_k_above_gallery" not in measure_suite(given, ConceptOracle(given.gallery), seed=0).metrics
    with pytest.raises(
        ConfigError, match=r"at most the gallery size, 36 images of BiasWorld, but got 1000 \(protocol 'debiasclip'\)"
    ):
        _suite(BiasWorld(**SMALL_WORLD), protocol="debiasclip", per_activity=6, k=1000)


def test_a_group_of_one_query_has_no_interval_and_says_why():
    queries = {"one": ["a photo of a person cooking."], "two": ["a person sewing.", "a photo of someone sewing."]}
    suite = _suite(BiasWorld(**SMALL_WORLD), per_activity=6, k=3, queries=queries)
    output = measure_suite(suite, CLIPAdapter.tiny(), seed=0)
    assert output.metrics["group/one/n_queries"] == 1 and math.isfinite(output.metrics["group/one/gender/max_skew@3"])
    assert all(math.isnan(end) for end in output.intervals["group/one/gender/max_skew@3"])  # not [v, v]
    assert not any(math.isnan(end) for end in output.intervals["group/two/gender/max_skew@3"])
    scoped = {entry["item"]: entry["reason"] for entry in output.skipped if entry.get("scope") == "interval"}
    assert scoped["group/one/gender/*@3"].startswith("one query: the intervals of its statistics @3 are undefined")
    assert not any(item.startswith("group/two/") for item in scoped)


def test_an_unknown_protocol_gets_the_list():
    with pytest.raises(ConfigError) as error:
        check_suite_options("gallery_skew", {"protocol": "nope"})
    assert all(name in str(error.value) for name in ("geyik", "debiasclip", "bendvlm", "sfid"))


def test_measure_runs_the_suite_on_biasworld(tmp_path, run_cli):
    argv = ["measure", "--suite", "gallery_skew", "--model", "clip", "--tiny", "--data", "biasworld"]
    argv += ["--out", str(tmp_path / "out"), "--biasworld.image_size", "32"]
    code, _, err = run_cli([*argv, "--suite_options", "{per_activity: 6, k: 3, statistics: {n_bootstrap: 50}}"])
    assert code == 0, err
    results = read_results(tmp_path / "out" / "gallery_skew.json")
    assert results.config["suite_config"]["protocol"] == "geyik" and math.isfinite(results.metrics["gender/max_skew@3"])


def sharded_case():
    """18 queries in batches of 4 over two ranks, on BiasWorld's planted gallery with the concept oracle and folds."""
    options = check_suite_options("gallery_skew", {"protocol": "bendvlm", "per_activity": 6, "k": 4, "batch_size": 4})
    suite = build_suite(options.with_statistics(n_bootstrap=50), BiasWorld(**SMALL_WORLD))
    return suite, ConceptOracle(suite.gallery)


def test_the_bias_callback_measures_it_every_epoch(tmp_path):
    from tests.callbacks.test_bias_suite import fit

    suites = [{"suite": "gallery_skew", "data": "biasworld", "options": {"per_activity": 6, "k": 3, **FAST}}]
    callback = [{"class_path": "vlbias.callbacks.BiasSuiteCallback", "init_args": {"suites": suites}}]
    run = fit(tmp_path, "--trainer.max_epochs", "2", "--trainer.callbacks", json.dumps(callback))
    metrics = pd.read_csv(run / "metrics.csv")
    assert metrics["bias/gallery_skew/gender/max_skew@3"].notna().sum() == 2
