"""CounterBias suite: end to end through the CLI on a local VL-Bias folder, BiasWorld, bad input."""

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from PIL import Image

from vlbias.data.biasworld import BiasWorld
from vlbias.data.vl_bias import read_release_index, read_vl_bias
from vlbias.errors import ConfigError, InputError
from vlbias.models.registry import load
from vlbias.results import read_items, read_results
from vlbias.suites.counterbias import CounterBiasItem, CounterBiasSuite
from vlbias.suites.options import CounterBiasOptions, check_suite_options
from vlbias.suites.run import build_suite, measure_suite

ATTACK = {"eps": 0.05, "alpha": 0.0125, "steps": 5}
ROWS = [  # image, concept, concept_type, gender
    ("a.png", "cooking", "activity", "woman"),
    ("b.png", "driving", "activity", "male"),
    ("c.png", "sewing", "activity", "female"),
    ("d.png", "repairing", "activity", "man"),
    ("missing.png", "cooking", "activity", "man"),
    ("corrupt.png", "coding", "activity", "woman"),
    ("e.png", "cleaning", "activity", ""),
    ("f.png", "shopping", "activity", "woman"),
]


@pytest.fixture
def vl_bias_folder(tmp_path):
    root = tmp_path / "vl_bias"
    (root / "images").mkdir(parents=True)
    generator = torch.Generator().manual_seed(0)
    for name in ("a.png", "b.png", "c.png", "d.png", "e.png", "f.png"):
        pixels = (torch.rand(40, 48, 3, generator=generator) * 255).byte().numpy()
        Image.fromarray(pixels).save(root / "images" / name)
    (root / "images" / "corrupt.png").write_bytes(b"not an image")
    lines = ["image,concept,concept_type,gender"] + [",".join(row) for row in ROWS]
    (root / "annotations.csv").write_text("\n".join(lines) + "\n")
    return root


def test_measure_vl_bias_folder_reports_bad_items(vl_bias_folder, tmp_path, run_cli):
    options = {"attack": ATTACK, "require_attack_success": False, "language_baseline": {"model": "bert", "tiny": True}}
    argv = [
        "measure",
        "--suite",
        "counterbias",
        "--model",
        "albef",
        "--tiny",
        "--data",
        str(vl_bias_folder),
        "--out",
        str(tmp_path / "out"),
        "--suite_options",
        json.dumps(options),
    ]
    code, out, err = run_cli(argv)
    assert code == 0, err
    results = read_results(tmp_path / "out" / "counterbias.json")
    reasons = {entry["item"].split("@")[0]: entry["reason"] for entry in results.skipped}
    assert set(reasons) == {"missing.png", "corrupt.png", "e.png", "f.png"}
    assert "does not exist" in reasons["missing.png"]
    assert "could not be decoded" in reasons["corrupt.png"]
    assert reasons["e.png"].startswith("no gender annotation (unannotated='model_reading'")
    assert "target word 'shopping'" in reasons["f.png"] and "vocabulary" in reasons["f.png"]
    assert results.n_items == 4
    assert results.metrics["n_skipped"] == 4
    kinds = {kind: results.metrics[f"n_skipped/{kind}"] for kind in ("image", "no_gender", "target_word_unusable")}
    assert kinds == {"image": 2, "no_gender": 1, "target_word_unusable": 1}
    for measure in ("B@V-L", "B@V", "B@L", "B@L_log", "B@L_log/bert"):
        for template in ("Sw/O", "Sw/", "Pw/O", "Pw/", "avg"):
            assert f"activity/{measure}/{template}" in results.metrics
    assert 0 <= results.metrics["attack_success_rate"] <= 1
    suite_config = results.config["suite_config"]
    assert suite_config["target_normalisation"] == "concepts"
    assert suite_config["data"]["layout"] == "vlbias-local-v1"
    # of VL-Bias's 52 activities the folder holds cooking, driving, sewing, cleaning and shopping
    assert suite_config["data"]["coverage"] == {
        "activities": "5 of 52",
        "occupations": "0 of 13",
        "other_concepts": ["coding", "repairing"],
    }
    items = read_items(tmp_path / "out" / "counterbias.json")
    assert len(items) == 4 * 4  # items x templates
    assert (items["linf_delta"] <= ATTACK["eps"] + 1e-6).all()
    # every attacked image is measured (require_attack_success false); each row says whether its attack succeeded
    succeeded = items.drop_duplicates("item")["attack_succeeded"]
    assert succeeded.sum() == round(results.metrics["attack_success_rate"] * 4)
    assert set(items["bias"]) == {"man", "woman"}
    assert "counterbias/activity/B@V-L/avg" in out


def test_unannotated_images_can_take_the_models_reading(vl_bias_folder):
    with (vl_bias_folder / "annotations.csv").open("a") as annotations:
        annotations.write("f.png,shopping,activity,\n")  # unannotated, and its target is not in the vocabulary
    adapter = load("albef", tiny=True, device="cpu")
    options = CounterBiasOptions(attack=ATTACK, require_attack_success=False, unannotated="model_reading")
    suite = CounterBiasSuite.from_path(vl_bias_folder, options)
    output = measure_suite(suite, adapter)
    assert suite.config["unannotated"] == "model_reading"
    assert not any(entry["kind"] == "no_gender" for entry in output.skipped)
    (unusable,) = [entry for entry in output.skipped if entry["item"] == "f.png@row10"]
    assert unusable["kind"] == "target_word_unusable" and unusable["reason"].startswith("target word 'shopping'")
    rows = [row for row in output.items if row["item"].startswith("e.png")]
    assert len(rows) == 4 and not any(row["bias_annotated"] for row in rows)
    assert all(row["p_bias_vf"] >= 0.5 for row in rows)  # the concept it reads is the likelier of the two
    assert all(row["bias_annotated"] for row in output.items if not row["item"].startswith("e.png"))
    with pytest.raises(ConfigError, match="unannotated"):
        check_suite_options("counterbias", {"unannotated": "guess"})


def test_measure_an_index_of_the_authors_release(vl_bias_folder, tmp_path, run_cli):
    # The layout of the index files that CounterBias_Activity.py / CounterBias_Occu.py of the release read.
    release = tmp_path / "release"
    release.mkdir()
    index = {
        "version": "1.0",
        "data": {
            "cooking": [
                {"original": "../vl_bias/images/a.png", "attack": "x/a.npy"},
                {"original": str(vl_bias_folder / "images" / "b.png"), "attack": "x/b.npy"},
            ],
            "driving": [{"original": "../vl_bias/images/gone.png", "attack": "x/gone.npy"}],
        },
    }
    (release / "verb_attack.json").write_text(json.dumps(index))
    options = {"attack": ATTACK, "require_attack_success": False, "unannotated": "model_reading"}
    argv = [
        "measure",
        "--suite",
        "counterbias",
        "--model",
        "albef",
        "--tiny",
        "--data",
        str(release / "verb_attack.json"),
        "--out",
        str(tmp_path / "out"),
        "--suite_options",
        json.dumps(options),
    ]
    code, _, err = run_cli(argv)
    assert code == 0, err
    results = read_results(tmp_path / "out" / "counterbias.json")
    assert results.n_items == 2
    (missing,) = results.skipped
    assert (
        missing["kind"] == "image"
        and missing["item"].endswith("gone.png@entry3")
        and "does not exist" in missing["reason"]
    )
    data = results.config["suite_config"]["data"]
    assert data["layout"] == "vl-bias-release-index"
    assert data["coverage"] == {"activities": "2 of 52", "occupations": "0 of 13", "other_concepts": []}
    items = read_items(tmp_path / "out" / "counterbias.json")
    assert len(items) == 2 * 4 and not items["bias_annotated"].any()
    assert set(items["target"]) == {"cooking"} and set(items["bias"]) <= {"man", "woman"}


def test_bad_release_index_files_are_refused(tmp_path):
    index = tmp_path / "index.json"
    with pytest.raises(InputError, match="does not exist"):
        read_release_index(index)
    for text, message in (
        ("{not json", "is not a JSON file"),
        ('{"cooking": []}', 'expected an object with a "data" object'),
        (
            '{"data": {"repairing": [{"original": "a.png"}]}}',
            r"concept 'repairing' is not among VL-Bias's .*`concept_type`",
        ),
        ('{"data": {"cooking": "a.png"}}', r"data\['cooking'\] should be a list of images but is str"),
        (
            '{"data": {"cooking": [{"attack": "a.npy"}]}}',
            r"data\['cooking'\]\[0\] should be an object with an \"original\" image path",
        ),
        ('{"data": {"cooking": []}}', "lists no images"),
    ):
        index.write_text(text)
        with pytest.raises(InputError, match=message):
            read_release_index(index)
    index.write_text('{"data": {"Doctor": [{"original": "d.png"}], "cooking": [{"original": "/abs/c.png"}]}}')
    assert [
        (item.row, item.image, item.concept, item.concept_type, item.gender) for item in read_release_index(index)
    ] == [(1, str(tmp_path / "d.png"), "doctor", "occupation", None), (2, "/abs/c.png", "cooking", "activity", None)]


def test_biasworld_dataset_bias_matches_item_rows(tmp_path):
    options = check_suite_options("counterbias", {"attack": ATTACK, "require_attack_success": False})
    suite = build_suite(options, BiasWorld(eval_per_combination=1))
    output = measure_suite(suite, load("albef", tiny=True, device="cpu"))
    assert output.n_items == 12 and not output.skipped
    rows = [row for row in output.items if row["template"] == "Sw/O" and row["target"] == "cooking"]
    signed = [row["bias_B@L"] * (1 if row["bias"] == "man" else -1) for row in rows]
    expected = sum(signed) / len(signed)  # Eq. 7 for "cooking" under one template
    per_template = [
        sum(
            r["bias_B@L"] * (1 if r["bias"] == "man" else -1)
            for r in output.items
            if r["template"] == t and r["target"] == "cooking"
        )
        / 2
        for t in ("Sw/O", "Sw/", "Pw/O", "Pw/")
    ]
    assert output.metrics["activity/cooking/B@L"] == pytest.approx(sum(per_template) / 4)
    assert per_template[0] == pytest.approx(expected)


def test_intervals_and_p_values_come_from_the_item_rows():
    options = {
        "attack": ATTACK,
        "require_attack_success": False,
        "statistics": {"n_bootstrap": 300, "n_permutations": 200, "confidence": 0.9},
    }
    suite = build_suite(check_suite_options("counterbias", options), BiasWorld(eval_per_combination=2))
    output = measure_suite(suite, load("albef", tiny=True, device="cpu"), seed=3)
    assert suite.config["statistics"] == {"n_permutations": 200, "n_bootstrap": 300, "confidence": 0.9}
    templates = ("Sw/O", "Sw/", "Pw/O", "Pw/")
    for measure in ("B@V-L", "B@V", "B@L"):
        for template in (*templates, "avg"):
            low, high = output.intervals[f"activity/{measure}/{template}"]
            assert low <= high
        for target in suite.groups["activity"]:
            key = f"activity/{target}/{measure}"
            low, high = output.intervals[key]
            assert low <= output.metrics[key] <= high  # holds here; a percentile interval need not hold the estimate
            assert 0 < output.p_values[key] <= output.p_values[f"{key}@holm"] <= 1
            assert output.p_values[key] <= output.p_values[f"{key}@bh"] <= output.p_values[f"{key}@holm"]
    assert not [
        key for key in (*output.intervals, *output.p_values) if "B@L_log" in key
    ]  # text only: no images to resample
    # the B@L p-value of one target, from the item rows by brute force over the 2^4 sign flips
    rows = [row for row in output.items if row["target"] == "cooking"]
    images = sorted({row["item"] for row in rows})
    signed = torch.tensor(
        [
            [
                row["bias_B@L"] * (1 if row["bias"] == "man" else -1)
                for t in templates
                for row in rows
                if row["item"] == image and row["template"] == t
            ]
            for image in images
        ],
        dtype=torch.float64,
    )
    flips = torch.tensor(list(itertools.product([1.0, -1.0], repeat=len(images))), dtype=torch.float64)
    statistics = (flips @ signed).mean(dim=1) / len(images)
    observed = signed.mean()
    expected = float((statistics.abs() >= observed.abs() - 1e-12).double().mean())
    assert output.p_values["activity/cooking/B@L"] == pytest.approx(expected)
    with pytest.raises(ConfigError, match="confidence"):
        check_suite_options("counterbias", {"statistics": {"confidence": 1.5}})
    with pytest.raises(ConfigError, match="n_permutations"):
        check_suite_options("counterbias", {"statistics": {"n_permutations": 0}})


def test_failed_attacks_are_skipped_with_reason():
    options = CounterBiasOptions(attack={"eps": 1e-4, "alpha": 1e-4, "steps": 1})
    suite = CounterBiasSuite.from_biasworld(BiasWorld(eval_per_combination=1), options)
    output = measure_suite(suite, load("vilt", tiny=True, device="cpu"))
    failed = [entry for entry in output.skipped if entry["reason"].startswith("attack failed")]
    assert failed and output.metrics["n_attack_failed"] == len(failed) == output.metrics["n_skipped/attack_failed"]
    assert output.n_items + len(failed) == 12
    assert output.metrics["attack_success_rate"] == pytest.approx(output.n_items / 12)
    # so small a step changes no reading: the "successes" are the images already read as B'
    assert output.metrics["n_counterfactual_before_attack"] == output.n_items
    assert all(row["attack_succeeded"] for row in output.items)  # only the successes are measured


def test_a_group_with_one_target_is_summarised():
    # torchmetrics hands back a one-target group's per-target bias as a 0-d tensor
    options = CounterBiasOptions(attack=ATTACK, require_attack_success=False)
    suite = CounterBiasSuite.from_biasworld(BiasWorld(eval_per_combination=1), options)
    suite = CounterBiasSuite([item for item in suite.items if item.target == "cooking"], suite.data_config, options)
    output = measure_suite(suite, load("albef", tiny=True, device="cpu"))
    assert output.n_items == 2
    rows = [row for row in output.items if row["template"] == "Sw/O"]
    signed = sum(row["bias_B@L"] * (1 if row["bias"] == "man" else -1) for row in rows) / len(rows)
    assert output.metrics["activity/B@L/Sw/O"] == pytest.approx(100 * abs(signed))
    assert "activity/cooking/B@V-L" in output.metrics


def test_b0_names_a_side_when_there_are_more_than_two_concepts():
    world = BiasWorld(eval_per_combination=1)
    concepts = ["man", "woman", "boy", "girl"]
    options = CounterBiasOptions(bias_concepts=concepts, b0=["man", "boy"])
    assert CounterBiasSuite.from_biasworld(world, options).b0 == ["man", "boy"]
    with pytest.raises(ConfigError, match=r"\[man, boy\] for \[man, woman, boy, girl\]"):
        CounterBiasSuite.from_biasworld(world, CounterBiasOptions(bias_concepts=concepts, b0="man"))  # "boy": B1
    with pytest.raises(ConfigError, match="B0 side"):
        CounterBiasSuite.from_biasworld(world, CounterBiasOptions(b0=["man", "woman"]))


def test_repeated_measurement_hits_the_cache(tmp_path):
    world = BiasWorld(eval_per_combination=1)
    adapter = load("albef", tiny=True, device="cpu")
    options = CounterBiasOptions(attack=ATTACK, require_attack_success=False, cache_dir=str(tmp_path / "cache"))
    first = measure_suite(CounterBiasSuite.from_biasworld(world, options), adapter)
    second = measure_suite(CounterBiasSuite.from_biasworld(world, options), adapter)
    assert not any(row["cache_hit"] for row in first.items)
    assert all(row["cache_hit"] for row in second.items)
    assert first.metrics == second.metrics


def test_vocabulary_normalisation_is_an_option():
    world, adapter = BiasWorld(eval_per_combination=1), load("albef", tiny=True, device="cpu")
    options = CounterBiasOptions(attack=ATTACK, require_attack_success=False, templates=["Sw/O"])
    suite = CounterBiasSuite.from_biasworld(world, replace(options, target_normalisation="vocabulary"))
    output = measure_suite(suite, adapter)
    assert suite.config["target_normalisation"] == "vocabulary"
    concepts = measure_suite(CounterBiasSuite.from_biasworld(world, options), adapter)
    for vocab_row, concept_row in zip(output.items, concepts.items):
        assert vocab_row["p_target_f"] < concept_row["p_target_f"]  # 6 concepts share less than the vocabulary


def test_region_model_is_refused(tmp_path, run_cli):
    argv = [
        "measure",
        "--suite",
        "counterbias",
        "--model",
        "visualbert",
        "--tiny",
        "--out",
        str(tmp_path),
        "--biasworld.eval_per_combination",
        "1",
    ]
    code, _, err = run_cli(argv)
    assert code == 2 and "Traceback" not in err
    assert "cannot be attacked in pixel space" in err


def test_bad_options_and_files_are_refused(vl_bias_folder):
    world = BiasWorld(eval_per_combination=1)
    with pytest.raises(ConfigError, match="templates"):
        check_suite_options("counterbias", {"templates": ["nope"]})
    with pytest.raises(ConfigError, match="`templates` to name at least one template"):
        check_suite_options("counterbias", {"templates": []})
    with pytest.raises(ConfigError, match="eps"):
        check_suite_options("counterbias", {"attack": {"eps": 2}})
    with pytest.raises(ConfigError, match="attack.seed"):
        check_suite_options("counterbias", {"attack": {"seed": 1}})
    with pytest.raises(ConfigError, match="target_normalisation"):
        check_suite_options("counterbias", {"target_normalisation": "softmax"})
    with pytest.raises(ConfigError, match="`language_baseline` to name a `model`"):
        CounterBiasOptions(language_baseline={"checkpoint": "bert-base-uncased"})
    with pytest.raises(ConfigError, match="must swap to another bias concept"):
        CounterBiasSuite.from_biasworld(world, CounterBiasOptions(bias_concepts=["man", "girl"], b0="man"))
    annotations = vl_bias_folder / "annotations.csv"
    annotations.write_text("image,concept,concept_type\na.png,cooking,activity\n")
    with pytest.raises(InputError, match="missing column"):
        read_vl_bias(vl_bias_folder)
    annotations.write_text("image,concept,concept_type,gender\na.png,cooking,hobby,woman\n")
    with pytest.raises(InputError, match=r"row 2: `concept_type` is 'hobby'"):
        read_vl_bias(vl_bias_folder)
    annotations.write_text(
        "image,concept,gender\na.png,doctor,woman\nb.png,Cooking,man\n"
    )  # types from VL-Bias's lists
    assert [(item.concept, item.concept_type) for item in read_vl_bias(vl_bias_folder)] == [
        ("doctor", "occupation"),
        ("cooking", "activity"),
    ]
    annotations.write_text("image,concept,gender\na.png,repairing,woman\n")
    with pytest.raises(InputError, match=r"row 2: concept 'repairing' is not among VL-Bias's .* must be given"):
        read_vl_bias(vl_bias_folder)
    annotations.write_text("image,concept,concept_type,gender\na.png,doctor,activity,woman\n")
    with pytest.raises(InputError, match=r"row 2: 'doctor' is a VL-Bias occupation, but `concept_type` is 'activity'"):
        read_vl_bias(vl_bias_folder)
    annotations.unlink()
    with pytest.raises(InputError, match="do not exist"):
        read_vl_bias(vl_bias_folder)


def test_bias_words_outside_the_vocabulary_are_reported_per_item(vl_bias_folder):
    (vl_bias_folder / "annotations.csv").write_text("image,concept,gender\na.png,cooking,boy\nb.png,driving,\n")
    adapter = load("albef", tiny=True, device="cpu")  # its tiny vocabulary has man and woman, not boy or girl
    for unannotated in ("skip", "model_reading"):
        options = CounterBiasOptions(bias_concepts=["boy", "girl"], b0="boy", unannotated=unannotated)
        output = measure_suite(CounterBiasSuite.from_path(vl_bias_folder, options), adapter)
        reasons = {entry["item"]: (entry["kind"], entry["reason"]) for entry in output.skipped}
        assert reasons["a.png@row2"][0] == "bias_word_unusable"
        assert (
            reasons["a.png@row2"][1].startswith("bias word 'boy' is not usable")
            and "vocabulary" in reasons["a.png@row2"][1]
        )
        expected = "no_gender" if unannotated == "skip" else "bias_word_unusable"
        assert reasons["b.png@row3"][0] == expected and output.n_items == 0


def test_a_run_that_measures_no_item_gives_nan_metrics_without_warnings(vl_bias_folder, recwarn):
    (vl_bias_folder / "annotations.csv").write_text("image,concept,gender\na.png,cooking,\nb.png,driving,\n")
    suite = CounterBiasSuite.from_path(vl_bias_folder, CounterBiasOptions())
    output = measure_suite(suite, load("vilt", tiny=True, device="cpu"))
    assert output.n_items == 0 and output.metrics["n_skipped/no_gender"] == 2
    assert torch.isnan(torch.tensor(output.metrics["activity/B@V-L/avg"]))
    assert output.metrics["n_excluded/B@V-L"] == 0
    assert not [str(w.message) for w in recwarn.list]


def sharded_case():
    """Nine BiasWorld images (rank 0 of two probes 0, 2, 4, 6, 8; rank 1 probes 1, 3, 5, 7): both occupation
    images fall to rank 0, and rank 1 measures one image (3's two-step attack fails, 5's file is missing, 7 has
    no gender); image 6's target is outside the tiny vocabulary. The BERT baseline adds ``B@L_log/bert``.
    One image per probe: a float32 forward pass of two images rounds an image's P(B | V) differently (~1e-7)
    from one of the same image with another, which B@V-L (Eq. 6) divides by a small change in P(B) and reports
    in percent; alone, and on one thread as in the test process (conftest), an image gets the same numbers on
    any rank."""
    images = BiasWorld(eval_per_combination=1).images("test").float() / 255.0
    rows = [  # group, target, bias concept
        ("activity", "cooking", "man"),
        ("activity", "driving", "woman"),
        ("occupation", "coding", "man"),
        ("activity", "cooking", "woman"),
        ("occupation", "sewing", "woman"),
        ("activity", "driving", "man"),
        ("activity", "shopping", "woman"),
        ("activity", "cleaning", None),
        ("activity", "repairing", "man"),
    ]
    items = [
        CounterBiasItem(f"image {index}", images[index], target, group, bias)
        for index, (group, target, bias) in enumerate(rows)
    ]
    items[5] = CounterBiasItem("image 5", Path("/nonexistent/counterbias/missing.png"), "driving", "activity", "man")
    options = CounterBiasOptions(
        attack={"eps": 0.02, "alpha": 0.01, "steps": 2}, language_baseline={"model": "bert", "tiny": True}, batch_size=1
    )
    suite = CounterBiasSuite(
        items, {"data": "sharded_case"}, options.with_statistics(n_bootstrap=50, n_permutations=50)
    )
    return suite, load("albef", tiny=True, device="cpu")


def test_sharded_case_measures_every_kind_of_item():
    suite, adapter = sharded_case()
    output = measure_suite(suite, adapter)
    assert output.n_items == 5 and output.stimuli_per_rank == [9]
    assert [(entry["item"], entry["kind"]) for entry in output.skipped] == [
        ("image 6", "target_word_unusable"),
        ("image 7", "no_gender"),
        ("image 3", "attack_failed"),
        ("image 5", "image"),
    ]
    assert [row["item"] for row in output.items] == [f"image {index}" for index in (0, 1, 2, 4, 8) for _ in range(4)]
    assert output.metrics["n_attack_failed"] == 1 and output.metrics["attack_success_rate"] == pytest.approx(5 / 6)
    assert output.metrics["occupation/B@V-L/avg"] > 0 and output.metrics["occupation/coding/B@L_log/bert"] != 0
    assert output.p_values["occupation/coding/B@L"] == 1.0  # one image: both sign flips reach |bias|


def test_the_language_baselines_loading_options_are_checked_with_the_suites():
    with pytest.raises(ConfigError, match="does not take option"):
        CounterBiasOptions(language_baseline={"model": "bert", "tiny": True, "options": {"hiden_size": 8}})
    with pytest.raises(ConfigError, match="`language_baseline` to name a `model`"):
        CounterBiasOptions(language_baseline={"model": "bert", "checkpont": "bert-base-uncased"})
