"""The MMBias suite: hand-computed numbers through the whole pipeline on a fake adapter with chosen
vectors, bad input, and end-to-end ``vlbias measure`` runs with tiny models."""

import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from tests.suites.sharded import single_process
from vlbias.data.biasworld import BiasWorld
from vlbias.data.images import load_image
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.results import read_items, read_results
from vlbias.suites.mmbias import MMBiasSuite
from vlbias.suites.options import MMBiasOptions, check_suite_options
from vlbias.suites.run import measure_suite

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mmbias"
#: The counts of texts the model cannot see (or sees cut), reported even when none is.
UNSEEN_NONE = {"n_skipped/empty": 0.0, "n_skipped/unknown": 0.0, "n_truncated": 0.0}
SQRT_3_2 = math.sqrt(1.5)

# Text vectors, 2-D. The attributes: A (unpleasant) = "bad" along x, B (pleasant) = "good" along y, so the
# association of a unit vector w is s(w, A, B) = cos(w, A) - cos(w, B) = w_x - w_y.
TEXT_VECTORS = {
    "bad": (1.0, 0.0),
    "good": (0.0, 1.0),
    "islam": (3.0, 4.0),  # s = (3 - 4) / 5 = -0.2
    "quran": (1.0, 0.0),  # s = 1
    "church": (0.0, 1.0),  # s = -1
    "bible": (4.0, 3.0),  # s = 0.2
    "torah": (math.nan, 1.0),  # a broken embedding
    "synagogue": (1.0, 1.0),
}


class VectorAdapter(ModelAdapter):
    """EMBED + MATCH with chosen vectors: an image's embedding is its (red, green) colour, a text's the
    vector in TEXT_VECTORS, and the match probability is 0.5 + 0.4 cos(image, text)."""

    name = "vectors"
    capabilities = frozenset({Capability.EMBED, Capability.MATCH})

    def __init__(self) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # gives the adapter a device
        self.words = list(TEXT_VECTORS)
        self.table = torch.tensor([TEXT_VECTORS[w] for w in self.words])

    def prepare_images(self, images):
        colours = [np.asarray(load_image(image), dtype=np.float64)[0, 0, :2] / 255.0 for image in images]
        return torch.tensor(np.stack(colours), dtype=torch.float32)  # (B, 2)

    def prepare_texts(self, texts):
        return {"input_ids": torch.tensor([[self.words.index(t)] for t in texts])}  # (B, 1)

    def embed_images(self, pixel_values):
        return F.normalize(pixel_values, dim=1)

    def embed_texts(self, tokens):
        return F.normalize(self.table[tokens["input_ids"][:, 0]], dim=1)

    def match_logits(self, pixel_values, tokens):
        cos = (self.embed_images(pixel_values) * self.embed_texts(tokens)).sum(dim=1)
        probability = 0.5 + 0.4 * cos
        return torch.log(probability / (1 - probability))


def save_image(path: Path, red: int, green: int) -> None:
    """A 4x4 picture of one colour, written to a temporary name and renamed, so that the two ranks of
    :func:`sharded_case`, writing the same files, never read a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    Image.fromarray(np.full((4, 4, 3), (red, green, 0), dtype=np.uint8)).save(
        partial, format=Image.registered_extensions()[path.suffix]
    )
    os.replace(partial, path)


@pytest.fixture
def vector_data(tmp_path) -> Path:
    """X = Muslim images (1, 0) and (1, 1), s = [1, 0]; Y = Christian images (0, 1) and (1, 1), s = [-1, 0];
    X^T = [islam, quran], s = [-0.2, 1]; Y^T = [church, bible], s = [-1, 0.2]; valence images along A and B."""
    return write_vector_data(tmp_path / "data")


def write_vector_data(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    phrases = {
        "unpleasant_phrases": ["bad"],
        "pleasant_phrases": ["good"],
        "category_phrases": {
            "muslim": ["islam", "quran"],
            "christian": ["church", "bible"],
            "jewish": ["torah", "synagogue"],
            "Hindu": [],
        },
    }
    partial = root / f".textual_phrases.json.{os.getpid()}"
    partial.write_text(json.dumps(phrases))
    os.replace(partial, root / "textual_phrases.json")
    save_image(root / "images" / "Religion" / "Muslim" / "1.png", 255, 0)
    save_image(root / "images" / "Religion" / "Muslim" / "2.png", 255, 255)
    save_image(root / "images" / "Religion" / "Christian" / "1.png", 0, 255)
    save_image(root / "images" / "Religion" / "Christian" / "2.png", 255, 255)
    save_image(root / "valence_images" / "Unpleasant" / "1.png", 255, 0)
    save_image(root / "valence_images" / "Pleasant" / "1.png", 0, 255)
    return root


def by_test(output) -> dict[str, dict]:
    return {row["test"]: row for row in output.items if row["kind"] != "zero_shot"}


def test_hand_computed_effect_sizes_p_values_and_adjusted_p_values(vector_data):
    suite = MMBiasSuite.from_path(
        vector_data, MMBiasOptions(pairs=[["Islam", "Christianity"]]).with_statistics(n_bootstrap=50)
    )
    output = measure_suite(suite, VectorAdapter(), seed=0)
    rows = by_test(output)
    # cross-modal and visual: s_X = [1, 0], s_Y = [-1, 0]: d = (0.5 + 0.5) / std([1, 0, -1, 0]) = 1 / sqrt(2/3).
    # Exact p: 2 of the C(4, 2) = 6 halves have a sum >= 1.
    for kind in ("cross_modal", "visual"):
        row = rows[f"muslim_vs_christian/{kind}"]
        assert row["effect_size"] == pytest.approx(SQRT_3_2)
        assert row["p_value"] == pytest.approx(1 / 3)
        assert (row["n_x"], row["n_y"], row["n_a"], row["n_b"]) == (2, 2, 1, 1)
    # textual: s_X = [-0.2, 1], s_Y = [-1, 0.2]: d = 0.8 / sqrt(2.08 / 3); halves with sum >= 0.8: 2 of 6.
    textual = rows["muslim_vs_christian/textual"]
    assert textual["effect_size"] == pytest.approx(0.8 / math.sqrt(2.08 / 3))
    assert textual["p_value"] == pytest.approx(1 / 3)
    # three tests with p = 1/3: Holm multiplies the smallest by 3 (then 2, 1, monotone) -> 1; BH: 3/3 * 1/3.
    assert [r["p_holm"] for r in rows.values()] == pytest.approx([1.0] * 3)
    assert [r["p_bh"] for r in rows.values()] == pytest.approx([1 / 3] * 3)
    assert output.metrics["muslim_vs_christian/cross_modal/effect_size"] == pytest.approx(SQRT_3_2)
    assert output.p_values["muslim_vs_christian/textual/effect_size"] == pytest.approx(1 / 3)
    assert output.p_values["muslim_vs_christian/textual/effect_size@holm"] == pytest.approx(1.0)
    assert output.p_values["muslim_vs_christian/textual/effect_size@bh"] == pytest.approx(1 / 3)
    low, high = output.intervals["muslim_vs_christian/visual/effect_size"]
    assert low <= high


def test_hand_computed_zero_shot_ranking(vector_data):
    suite = MMBiasSuite.from_path(
        vector_data, MMBiasOptions(pairs=[["muslim", "christian"]], experiments=["zero_shot"], top_k=1)
    )
    output = measure_suite(suite, VectorAdapter())
    ranked = {row["test"]: row for row in output.items}
    # Muslim images (1, 0), (1, 1)/sqrt 2: mean cos with "bad" (1 + 0.7071) / 2 = 0.8536 > "good" 0.3536.
    muslim, christian = ranked["zero_shot/muslim"], ranked["zero_shot/christian"]
    assert (muslim["word"], muslim["valence"], muslim["rank"]) == ("bad", "unpleasant", 1)
    assert muslim["score"] == pytest.approx((1 + math.sqrt(0.5)) / 2)
    assert (christian["word"], christian["score"]) == ("good", pytest.approx((1 + math.sqrt(0.5)) / 2))
    shares = {"zero_shot/christian/pleasant_share": 1.0, "zero_shot/muslim/pleasant_share": 0.0}
    assert output.metrics == shares | UNSEEN_NONE


def test_hand_computed_itm_gap_and_effect_size(vector_data):
    suite = MMBiasSuite.from_path(
        vector_data, MMBiasOptions(pairs=[["muslim", "christian"]], probe="match").with_statistics(n_bootstrap=50)
    )
    assert suite.capability is Capability.MATCH
    output = measure_suite(suite, VectorAdapter())
    # sigma(w, a) = 0.5 + 0.4 cos, so sigma(w, A, B) = 0.4 s(w, A, B): X [0.4, 0], Y [-0.4, 0];
    # gap = 0.2 - (-0.2) = 0.4, effect size as with cosines; top_k 15 lowered to |A| = |B| = 1.
    row = by_test(output)["muslim_vs_christian/itm"]
    assert row["probability_gap"] == pytest.approx(0.4)
    assert row["effect_size"] == pytest.approx(SQRT_3_2)
    assert row["p_value"] == pytest.approx(1 / 3) and row["top_k"] == 1
    assert output.metrics["muslim_vs_christian/itm/probability_gap"] == pytest.approx(0.4)
    zero_shot = [row for row in output.items if row["test"] == "zero_shot/muslim"]
    assert zero_shot[0]["word"] == "bad" and zero_shot[0]["score"] == pytest.approx(
        0.5 + 0.4 * (1 + math.sqrt(0.5)) / 2
    )


def test_empty_sets_nan_embeddings_missing_groups_and_unequal_sets(vector_data):
    save_image(vector_data / "images" / "Religion" / "Hindu" / "1.png", 0, 255)
    save_image(vector_data / "images" / "Religion" / "Hindu" / "2.png", 255, 0)
    save_image(vector_data / "images" / "Religion" / "Hindu" / "3.png", 200, 100)
    pairs = [["jewish", "christian"], ["hindu", "christian"], ["muslim", "hindu"]]
    suite = MMBiasSuite.from_path(
        vector_data, MMBiasOptions(pairs=pairs, experiments=["cross_modal", "textual"]).with_statistics(n_bootstrap=20)
    )
    output = measure_suite(suite, VectorAdapter())
    reasons = {entry["item"]: entry["reason"] for entry in output.skipped}
    assert "empty set(s) ['images/jewish']" in reasons["jewish_vs_christian/cross_modal"]  # no Jewish image folder
    assert "empty set(s) ['phrases/hindu']" in reasons["hindu_vs_christian/textual"]  # "Hindu": [] in the JSON
    assert "1 of the 2 items of set 'phrases/jewish' hold NaN or inf" in reasons["jewish_vs_christian/textual"]
    rows = by_test(output)
    assert set(rows) == {"hindu_vs_christian/cross_modal", "muslim_vs_hindu/cross_modal"}
    unequal = rows["muslim_vs_hindu/cross_modal"]  # |X| = 2, |Y| = 3: exact over the C(5, 2) = 10 re-partitions
    assert (unequal["n_x"], unequal["n_y"]) == (2, 3)
    assert 0 < unequal["p_value"] <= 1 and unequal["p_value"] * 10 == pytest.approx(round(unequal["p_value"] * 10))
    assert output.p_values["muslim_vs_hindu/cross_modal/effect_size"] == unequal["p_value"]
    assert 0 < rows["hindu_vs_christian/cross_modal"]["p_value"] <= 1  # |X| = 3, |Y| = 2


def test_unreadable_images_are_listed_and_skipped_or_stop_the_run(vector_data):
    broken = vector_data / "images" / "Religion" / "Muslim" / "3.jpg"
    broken.write_bytes(b"truncated")
    suite = MMBiasSuite.from_path(
        vector_data,
        MMBiasOptions(pairs=[["muslim", "christian"]], experiments=["cross_modal"]).with_statistics(n_bootstrap=20),
    )
    output = measure_suite(suite, VectorAdapter())
    assert output.skipped[0]["item"] == str(broken) and "could not be decoded" in output.skipped[0]["reason"]
    assert output.items[0]["n_x"] == 2 and output.items[0]["effect_size"] == pytest.approx(SQRT_3_2)
    with pytest.raises(InputError, match=r"1 missing or unreadable image.*Muslim/3\.jpg: could not be decoded"):
        MMBiasSuite.from_path(vector_data, MMBiasOptions(pairs=[["muslim", "christian"]], on_missing_images="stop"))
    # textual tests need no images, so a broken image does not stop them
    MMBiasSuite.from_path(
        vector_data, MMBiasOptions(pairs=[["muslim", "christian"]], experiments=["textual"], on_missing_images="stop")
    )


def test_bad_options_are_refused(vector_data):
    with pytest.raises(ConfigError, match="`probe` to be one of"):
        check_suite_options("mmbias", {"probe": "cosine"})
    with pytest.raises(ConfigError, match=r"among \['itm', 'zero_shot'\] for probe 'match'"):
        MMBiasOptions(probe="match", experiments=["textual"])
    with pytest.raises(ConfigError, match=r"among \['cross_modal', 'textual'\] for probe 'embed' on BiasWorld"):
        MMBiasOptions(experiments=["visual"]).check_source(biasworld=True)
    with pytest.raises(ConfigError, match="two different groups"):
        MMBiasSuite.from_path(vector_data, MMBiasOptions(pairs=[["Islam", "muslim"]]))
    with pytest.raises(ConfigError, match="on_missing_images"):
        check_suite_options("mmbias", {"on_missing_images": "ignore"})


def test_default_pairs_are_table2_and_groups_without_images_are_skipped(vector_data):
    suite = MMBiasSuite.from_path(vector_data, MMBiasOptions(experiments=["cross_modal"]))
    assert len(suite.config["data"]["pairs"]) == 19 and suite.config["data"]["pairs"][0] == ["muslim", "christian"]
    skipped = {entry["item"] for entry in suite.skipped}
    assert "mexican_vs_american/cross_modal" in skipped and [t.name for t in suite.tests] == [
        "muslim_vs_christian/cross_modal"
    ]


def test_biasworld_itm_and_textual_tests(tmp_path):
    world = BiasWorld(n_train=8, eval_per_combination=1, image_size=32)
    embed = MMBiasSuite.from_biasworld(
        world, MMBiasOptions(experiments=["cross_modal", "textual"]).with_statistics(n_bootstrap=20, n_permutations=50)
    )
    assert [t.name for t in embed.tests] == [
        "man_vs_woman/stereotyped_activities",
        "man_vs_woman/stereotyped_activities/textual",
    ]
    match = MMBiasSuite.from_biasworld(
        world, MMBiasOptions(probe="match").with_statistics(n_bootstrap=20, n_permutations=50)
    )
    output = measure_suite(match, VectorAdapterForWorld())
    assert set(output.metrics) == {
        "man_vs_woman/stereotyped_activities/itm/effect_size",
        "man_vs_woman/stereotyped_activities/itm/probability_gap",
        *UNSEEN_NONE,
    }


class VectorAdapterForWorld(VectorAdapter):
    """Match probability from the image's mean colour and the text's length: any fixed function will do."""

    def prepare_images(self, images):
        return images.mean(dim=(2, 3))[:, :2] + 0.1  # (B, 2) from a float tensor

    def prepare_texts(self, texts):
        return {"input_ids": torch.tensor([[len(t) % 6] for t in texts])}  # rows 0-5: finite vectors


# ----------------------------------------------------------------------------- end to end, tiny models
WORDS = {
    "unpleasant_phrases": ["cooking", "cleaning", "sewing"],
    "pleasant_phrases": ["driving", "repairing", "coding"],
}


@pytest.fixture
def tiny_data(tmp_path) -> Path:
    """BiasWorld words (the tiny models' vocabulary) as phrases; three images per group, one corrupt."""
    root = tmp_path / "data"
    root.mkdir()
    groups = {"muslim": ["a man .", "the man ."], "christian": ["a woman .", "the woman ."]}
    (root / "textual_phrases.json").write_text(json.dumps({**WORDS, "category_phrases": groups}))
    rng = np.random.default_rng(0)
    for group in ("Muslim", "Christian"):
        for index in range(3):
            path = root / "images" / "Religion" / group / f"{index}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(path)
    (root / "images" / "Religion" / "Christian" / "bad.jpg").write_bytes(b"no image")
    return root


def measure_argv(model: str, data: Path, out: Path, options: str) -> list[str]:
    return [
        "measure",
        "--suite",
        "mmbias",
        "--model",
        model,
        "--tiny",
        "--data",
        str(data),
        "--out",
        str(out),
        "--suite_options",
        options,
    ]


def test_measure_clip_writes_one_row_per_test_and_the_ranking_table(tiny_data, tmp_path, run_cli):
    options = "{pairs: [[muslim, christian]], experiments: [cross_modal, textual, zero_shot], top_k: 4, statistics: {n_permutations: 100, n_bootstrap: 50}}"
    code, out, err = run_cli(measure_argv("clip", tiny_data, tmp_path / "out", options))
    assert code == 0, err
    results = read_results(tmp_path / "out" / "mmbias.json")
    items = read_items(tmp_path / "out" / "mmbias.json")
    tests = items[items["kind"] != "zero_shot"].set_index("test")
    assert list(tests.index) == ["muslim_vs_christian/cross_modal", "muslim_vs_christian/textual"]
    assert tests.loc["muslim_vs_christian/cross_modal", ["n_x", "n_y", "n_a", "n_b"]].tolist() == [3, 3, 3, 3]
    for column in ("effect_size", "p_value", "p_holm", "p_bh", "ci_low", "ci_high"):
        assert tests[column].notna().all(), column
    assert (tests["p_holm"] >= tests["p_value"]).all()
    ranking = items[items["kind"] == "zero_shot"]
    assert ranking.groupby("test")["rank"].apply(list).to_dict() == {
        f"zero_shot/{g}": [1, 2, 3, 4] for g in ("christian", "muslim")
    }
    assert set(ranking["word"]) <= set(WORDS["unpleasant_phrases"] + WORDS["pleasant_phrases"])
    assert results.skipped[0]["item"].endswith("bad.jpg")
    assert set(results.metrics) == {
        "muslim_vs_christian/cross_modal/effect_size",
        "muslim_vs_christian/textual/effect_size",
        "zero_shot/christian/pleasant_share",
        "zero_shot/muslim/pleasant_share",
        *UNSEEN_NONE,
    }
    assert all(results.metrics[count] == 0 for count in UNSEEN_NONE)
    assert results.config["suite_config"]["data"]["n_images"] == {"christian": 3, "muslim": 3}
    assert "muslim_vs_christian/cross_modal/effect_size" in out


def test_measure_match_only_model_uses_itm_probabilities(tiny_data, tmp_path, run_cli):
    options = "{probe: match, pairs: [[muslim, christian]], statistics: {n_permutations: 100, n_bootstrap: 50}}"
    code, _, err = run_cli(measure_argv("vilt", tiny_data, tmp_path / "out", options))
    assert code == 0, err
    items = read_items(tmp_path / "out" / "mmbias.json").set_index("test")
    row = items.loc["muslim_vs_christian/itm"]
    assert row["kind"] == "itm" and row["top_k"] == 3 and -1 <= row["probability_gap"] <= 1
    assert (items.loc["zero_shot/muslim", "score"].between(0, 1)).all()


@pytest.mark.parametrize("model", ["open_clip", "siglip", "siglip2"])
def test_measure_runs_the_open_clip_and_siglip_families_with_either_probe(model, tiny_data, tmp_path, run_cli):
    """The families of issue 40 through the catalog: embeddings for the WEAT tests and the ranking, and their pair
    scores (MATCH) for the ITM gap, every word of the data read (none unseen)."""
    statistics = "statistics: {n_permutations: 50, n_bootstrap: 20}"
    embed = f"{{pairs: [[muslim, christian]], experiments: [cross_modal, textual, zero_shot], {statistics}}}"
    code, _, err = run_cli(measure_argv(model, tiny_data, tmp_path / "embed", embed))
    assert code == 0, err
    results = read_results(tmp_path / "embed" / "mmbias.json")
    assert results.model == model and all(results.metrics[count] == 0 for count in UNSEEN_NONE)
    for test in ("cross_modal", "textual"):
        assert math.isfinite(results.metrics[f"muslim_vs_christian/{test}/effect_size"])
    match = f"{{probe: match, pairs: [[muslim, christian]], {statistics}}}"
    code, _, err = run_cli(measure_argv(model, tiny_data, tmp_path / "match", match))
    assert code == 0, err
    items = read_items(tmp_path / "match" / "mmbias.json").set_index("test")
    assert -1 <= items.loc["muslim_vs_christian/itm", "probability_gap"] <= 1
    assert items.loc["zero_shot/muslim", "score"].between(0, 1).all()


def test_measure_refuses_a_match_only_model_with_the_embed_probe_and_stops_on_missing_images(
    tiny_data, tmp_path, run_cli
):
    code, _, err = run_cli(measure_argv("vilt", tiny_data, tmp_path / "a", "{}"))
    assert code == 2 and "needs capability 'embed'" in err and "probe: match" in err
    code, _, err = run_cli(measure_argv("clip", tiny_data, tmp_path / "b", "{on_missing_images: stop}"))
    assert code == 2 and "bad.jpg: could not be decoded" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared MMBias data not beside the repository")
def test_intra_visual_test_on_the_real_valence_images(tiny_data, tmp_path, run_cli):
    options = json.dumps(
        {
            "pairs": [["muslim", "christian"]],
            "experiments": ["visual"],
            "valence_images": str(SHARED / "valence_images"),
            "statistics": {"n_permutations": 100, "n_bootstrap": 50},
        }
    )
    with pytest.warns(UserWarning, match="converted to RGB"):  # one valence image is greyscale
        code, _, err = run_cli(measure_argv("clip", tiny_data, tmp_path / "out", options))
    assert code == 0, err
    row = read_items(tmp_path / "out" / "mmbias.json").iloc[0]
    assert (row["test"], row["n_a"], row["n_b"], row["n_x"]) == ("muslim_vs_christian/visual", 50, 50, 3)
    assert math.isfinite(row["effect_size"])


def test_the_suite_config_runs_table2_on_what_the_data_holds(tiny_data, tmp_path, run_cli):
    config = Path(__file__).resolve().parents[2] / "configs" / "suite" / "mmbias.yaml"
    argv = [
        "measure",
        "--config",
        str(config),
        "--model",
        "clip",
        "--tiny",
        "--data",
        str(tiny_data),
        "--out",
        str(tmp_path / "out"),
    ]
    code, _, err = run_cli(argv)
    assert code == 0, err
    results = read_results(tmp_path / "out" / "mmbias.json")
    assert (
        results.config["suite_config"]["probe"] == "embed"
        and len(results.config["suite_config"]["data"]["pairs"]) == 19
    )
    assert {"muslim_vs_christian/cross_modal/effect_size", "muslim_vs_christian/textual/effect_size"} <= set(
        results.metrics
    )
    reasons = {entry["item"]: entry["reason"] for entry in results.skipped}
    assert reasons[str(tiny_data / "valence_images" / "Pleasant")] == "valence image folder does not exist"
    assert "empty set(s) ['images/arab', 'images/american']" in reasons["arab_vs_american/cross_modal"]
    assert "muslim_vs_christian/visual" in reasons


def test_duplicate_phrases_are_dropped_and_reported(vector_data):
    phrases = {  # repeats are kept once; "fine" (both attribute sets) and "holy" (both groups) are dropped from both
        "unpleasant_phrases": ["bad", "bad", "fine"],
        "pleasant_phrases": ["good", "fine", "good"],
        "category_phrases": {"muslim": ["islam", "quran", "islam", "holy"], "christian": ["church", "holy", "bible"]},
    }
    (vector_data / "textual_phrases.json").write_text(json.dumps(phrases))
    suite = MMBiasSuite.from_path(
        vector_data,
        MMBiasOptions(pairs=[["muslim", "christian"]], experiments=["textual"]).with_statistics(n_bootstrap=20),
    )
    output = measure_suite(suite, VectorAdapter(), seed=0)
    reasons = {entry["item"]: entry["reason"] for entry in output.skipped}
    kept_once = "listed more than once in the set; kept once"
    assert reasons == {
        "textual_phrases.json: pleasant_phrases: 'good'": kept_once,
        "textual_phrases.json: unpleasant_phrases: 'bad'": kept_once,
        "textual_phrases.json: category_phrases.muslim: 'islam'": kept_once,
        "textual_phrases.json: pleasant_phrases+unpleasant_phrases: 'fine'": "in both pleasant_phrases and "
        "unpleasant_phrases; dropped from both",
        "muslim_vs_christian/textual: 'holy'": "in both phrases/muslim and phrases/christian; dropped from both",
    }
    # what is left is the hand-computed test of test_hand_computed_effect_sizes_p_values_and_adjusted_p_values
    (row,) = by_test(output).values()
    assert (row["n_x"], row["n_y"], row["n_a"], row["n_b"]) == (2, 2, 1, 1)
    assert row["effect_size"] == pytest.approx(0.8 / math.sqrt(2.08 / 3)) and row["p_value"] == pytest.approx(1 / 3)
    phrases["unpleasant_phrases"] = ["good"]  # nothing left of A once it shares its only word with B
    (vector_data / "textual_phrases.json").write_text(json.dumps(phrases))
    with pytest.raises(InputError, match="attribute set 'unpleasant_phrases' is empty once the words it shares"):
        MMBiasSuite.from_path(vector_data, MMBiasOptions(pairs=[["muslim", "christian"]], experiments=["textual"]))


def test_a_misspelt_group_in_pairs_stops_with_the_known_groups(vector_data):
    with pytest.raises(ConfigError, match=r"group\(s\) \['muslimm'\] .* its groups are \[.*'christian'.*'muslim'"):
        MMBiasSuite.from_path(vector_data, MMBiasOptions(pairs=[["Muslimm", "Christian"]]))


def sharded_data() -> Path:
    """The vector data plus three Hindu images, at a path both ranks of a two-process run find."""
    root = write_vector_data(Path(tempfile.gettempdir()) / "vlbias-mmbias-sharded")
    for name, (red, green) in {"1.png": (0, 255), "2.png": (255, 0), "3.png": (200, 100)}.items():
        save_image(root / "images" / "Religion" / "Hindu" / name, red, green)
    return root


PAIRS = [["muslim", "christian"], ["jewish", "christian"], ["muslim", "hindu"]]


def sharded_case():
    """Every embed experiment: 2 + 2 + 3 images, 6 phrases (one NaN), the two attribute words, 2 valence
    images and the 2 ranked words: 19 stimuli in batches of 2, rank 0 of two probing batches 0, 2, 4, ...
    (10 stimuli), rank 1 the others (9). The attribute words are stimuli 4 and 5, one batch: rank 1 sees
    neither A nor B."""
    experiments = ["cross_modal", "textual", "visual", "zero_shot"]
    suite = MMBiasSuite.from_path(
        sharded_data(),
        MMBiasOptions(pairs=PAIRS, experiments=experiments, batch_size=2).with_statistics(n_bootstrap=40),
    )
    return suite, VectorAdapter()


def sharded_match_case():
    suite = MMBiasSuite.from_path(
        sharded_data(), MMBiasOptions(pairs=PAIRS, probe="match", batch_size=2).with_statistics(n_bootstrap=40)
    )
    return suite, VectorAdapter()


def test_sharded_cases_measure_every_kind_of_test():
    embed, match = single_process([sharded_case, sharded_match_case])
    stimuli = sharded_case()[0].stimuli()
    assert len(stimuli) == 19 and [s.key for s in stimuli[4:6]] == ["attributes/unpleasant", "attributes/pleasant"]
    assert len(sharded_match_case()[0].stimuli()) == 7
    assert {row["test"] for row in embed["items"]} >= {
        "muslim_vs_hindu/cross_modal",
        "muslim_vs_christian/visual",
        "zero_shot/hindu",
    }
    assert any("NaN or inf" in entry["reason"] for entry in embed["skipped"])
    assert (
        "muslim_vs_hindu/itm/effect_size" in match["metrics"] and "zero_shot/hindu/pleasant_share" in match["metrics"]
    )


@pytest.mark.parametrize(("model", "match_score"), [("open_clip", "softmax"), ("siglip", "sigmoid")])
def test_the_match_probe_records_the_pair_score_and_takes_the_sigmoid_of_the_adapters_match_logits(
    model, match_score, tiny_data, tmp_path, run_cli
):
    """The results' config names what the pair logit is (``sigmoid``: SigLIP's log-odds, whose sigmoid is its own
    match probability; ``softmax``: open_clip's scaled cosine, whose sigmoid is no probability); each ranked word's
    score is the mean over the group's images of the sigmoid of the adapter's own match logits."""
    from vlbias.models.registry import load

    options = "{probe: match, pairs: [[muslim, christian]], statistics: {n_permutations: 50, n_bootstrap: 20}}"
    code, _, err = run_cli(measure_argv(model, tiny_data, tmp_path / "out", options))
    assert code == 0, err
    assert read_results(tmp_path / "out" / "mmbias.json").config["match_score"] == match_score
    items = read_items(tmp_path / "out" / "mmbias.json")
    ranked = items[items["test"] == "zero_shot/muslim"].set_index("word")["score"]
    adapter = load(model, tiny=True, device="cpu")
    assert adapter.match_score == match_score
    words = list(ranked.index)
    images = sorted((tiny_data / "images" / "Religion" / "Muslim").glob("*.jpg"))
    with torch.no_grad():
        pixels = adapter.prepare_images([path for path in images for _ in words])
        logits = adapter.match_logits(pixels, adapter.prepare_texts(words * len(images))).view(len(images), -1)
    expected = torch.sigmoid(logits.double()).mean(dim=0)
    torch.testing.assert_close(torch.tensor(ranked.to_numpy()), expected, rtol=0, atol=1e-6)
