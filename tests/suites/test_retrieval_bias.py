"""The retrieval ranking-bias suite: hand-computed MaxSkew/MinSkew/NDKL/Bias@K through the whole pipeline on a
fake adapter whose embeddings set every query's ranking, the gallery's annotation and the queries' neutralisation
on a tiny Karpathy file, bad input, the sharded case, and ``vlbias measure`` with a tiny CLIP on BiasWorld."""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from tests.suites.sharded import single_process
from vlbias.data.biasworld import BiasWorld
from vlbias.data.images import load_image
from vlbias.data.retrieval_bias import GenderWords, Query, annotate
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.results import read_items, read_results
from vlbias.suites.options import check_suite_options
from vlbias.suites.retrieval_bias import Gallery, RetrievalBiasSuite
from vlbias.suites.retrieval_bias_options import RetrievalBiasOptions
from vlbias.suites.run import measure_suite

EPS = 1e-4  # the suite's default smoothing of the skews


def unit(degrees: float) -> tuple[float, float]:
    return math.cos(math.radians(degrees)), math.sin(math.radians(degrees))


class AngleAdapter(ModelAdapter):
    """EMBED with chosen 2-D vectors, so cosines (and rankings) follow angles: the text ``"at 27"`` embeds to the
    unit vector at 27 degrees and ``"nan"`` to NaN; a text in ``texts`` to its vector there. An image tensor
    ``(B, 3, 1, 1)`` embeds to its first two channels; an image file to its pixel's (red, green) / 255."""

    name = "angles"
    capabilities = frozenset({Capability.EMBED})

    def __init__(self, texts: dict[str, tuple[float, float]] | None = None) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # gives the adapter a device
        self.texts = texts or {}

    def prepare_images(self, images):
        if isinstance(images, torch.Tensor):
            return images[:, :2, 0, 0]  # (B, 2)
        colours = [np.asarray(load_image(image), dtype=np.float64)[0, 0, :2] / 255.0 for image in images]
        return torch.tensor(np.stack(colours), dtype=torch.float32)

    def prepare_texts(self, texts):
        vectors = []
        for text in texts:
            if text == "nan":
                vectors.append((math.nan, math.nan))
            elif text.startswith("at "):
                vectors.append(unit(float(text.removeprefix("at "))))
            else:
                vectors.append(self.texts[text])  # a KeyError: the suite asked for an unexpected text
        return {"vectors": torch.tensor(vectors, dtype=torch.float32)}

    def embed_images(self, pixel_values):
        return F.normalize(pixel_values, dim=1)

    def embed_texts(self, tokens):
        return F.normalize(tokens["vectors"], dim=1)


def angle_gallery(angles: list[float], attributes: list[str]) -> Gallery:
    vectors = torch.tensor([unit(angle) for angle in angles], dtype=torch.float32)
    images = torch.cat([vectors, torch.zeros(len(angles), 1)], dim=1)[:, :, None, None]  # (N, 3, 1, 1)
    return Gallery(images, [f"image at {angle:g}" for angle in angles], attributes)


# Images at 0, 10, ..., 50 degrees: man, man, woman, man, woman, woman. A query ranks them by angular distance:
#   "at 0":  m m w m w w     "at 50": w w m w m m     "at 27" (30, 20, 40, 10, 50, 0): m w w m w m
GALLERY = ([0, 10, 20, 30, 40, 50], ["man", "man", "woman", "man", "woman", "woman"])
QUERIES = [Query("at 0", "g1", "first"), Query("at 50", "g2", "second"), Query("at 27", "g1", "third")]


def skew(share: float) -> float:
    """Geyik et al.'s Skew with the suite's smoothing, desired share 1/2."""
    return math.log((share + EPS) / (0.5 + EPS))


def test_hand_computed_ranking_bias_overall_and_per_group():
    suite = RetrievalBiasSuite(
        QUERIES,
        angle_gallery(*GALLERY),
        {"data": "angles"},
        RetrievalBiasOptions(k=[2, 4]).with_statistics(n_bootstrap=50),
    )
    output = measure_suite(suite, AngleAdapter(), seed=0)
    m = output.metrics
    # K = 2: "at 0" m m (Bias 1), "at 50" w w (-1), "at 27" m w (0).
    assert m["all/bias@2"] == pytest.approx(0.0) and m["group/g1/bias@2"] == pytest.approx(0.5)
    assert m["group/g2/bias@2"] == pytest.approx(-1.0)
    assert m["all/max_skew@2"] == pytest.approx((2 * skew(1.0) + skew(0.5)) / 3)
    assert m["all/min_skew@2"] == pytest.approx((2 * skew(0.0) + skew(0.5)) / 3)
    # NDKL@2: one gender in both prefixes: KL = ln 2 twice, NDKL = ln 2; "at 27": ln 2 at i = 1, 0 at i = 2.
    z = 1 + 1 / math.log2(3)
    assert m["group/g2/ndkl@2"] == pytest.approx(math.log(2))
    assert m["group/g1/ndkl@2"] == pytest.approx((math.log(2) + math.log(2) / z) / 2)
    # K = 4: "at 0" m m w m (Bias 0.5, shares 3/4, 1/4), "at 50" w w m w (-0.5), "at 27" m w w m (0).
    assert m["all/bias@4"] == pytest.approx(0.0) and m["group/g1/bias@4"] == pytest.approx(0.25)
    assert m["group/g2/max_skew@4"] == pytest.approx(skew(0.75))
    assert m["group/g2/min_skew@4"] == pytest.approx(skew(0.25))
    assert (m["all/n_queries"], m["group/g1/n_queries"], m["group/g2/n_queries"]) == (3, 2, 1)
    assert (m["gallery/n_man"], m["gallery/n_woman"], m["gallery/n_both"], m["gallery/n_neither"]) == (3, 3, 0, 0)
    low, high = output.intervals["all/bias@2"]
    assert -1 <= low <= 0 <= high <= 1
    # g2 rests on one query ("at 50"): its value stands, its intervals are undefined, not [-1, -1], and say why
    assert all(math.isnan(end) for end in output.intervals["group/g2/bias@2"])
    assert "group/g2/*@4" in {entry["item"] for entry in output.skipped if entry.get("scope") == "interval"}
    assert output.items[0] == {
        "query": "at 0",
        "group": "g1",
        "source": "first",
        "n_man@2": 2,
        "n_woman@2": 0,
        "bias@2": 1.0,
        "n_man@4": 3,
        "n_woman@4": 1,
        "bias@4": 0.5,
    }
    assert [row["bias@4"] for row in output.items] == [0.5, -0.5, 0.0] and output.n_items == 3


def test_named_protocols_set_the_conventions_by_hand():
    """The same rankings under DebiasCLIP's, SFID's and BendVLM's conventions. K = 2: "at 0" m m, "at 50" w w,
    "at 27" m w; the gallery is half men, half women."""

    outputs = {}

    def measured(protocol: str) -> dict[str, float]:
        options = RetrievalBiasOptions(protocol=protocol, k=2).with_statistics(n_bootstrap=20)
        suite = RetrievalBiasSuite(QUERIES, angle_gallery(*GALLERY), {"data": "angles"}, options)
        assert suite.config["protocol"] == protocol
        outputs[protocol] = measure_suite(suite, AngleAdapter(), seed=0)
        return outputs[protocol].metrics

    # DebiasCLIP: a zero share is made 1/K = 1/2, so the woman of "at 0" has skew 0, not ln(eps / (1/2 + eps))
    m = measured("debiasclip")
    assert m["all/max_skew@2"] == pytest.approx(2 * math.log(2) / 3) and m["all/min_skew@2"] == 0.0
    # SFID: |ln(0 / (1/2))| = inf for "at 0" and "at 50"; the smaller absolute skew is ln 2 there, 0 for "at 27"
    # An infinite mean is no number a result can hold: null, with the queries counted and the reason in the skip list
    m = measured("sfid")
    assert math.isnan(m["all/max_skew@2"]) and m["all/n_infinite/max_skew@2"] == 2
    assert all(math.isnan(end) for end in outputs["sfid"].intervals["all/max_skew@2"])
    assert {
        "item": "all/max_skew@2",
        "reason": "2 queries' max_skew@2 is infinite (a group absent from the top 2, "
        "ln 0 under this protocol): the mean is written as null",
    } in outputs["sfid"].skipped
    assert m["all/min_skew@2"] == pytest.approx(2 * math.log(2) / 3) and "all/n_infinite/min_skew@2" not in m
    # BendVLM: the desired shares are the gallery's (1/2 each here); a zero ratio is floored at 1e-10
    m = measured("bendvlm")
    assert m["all/min_skew@2"] == pytest.approx((2 * math.log(1e-10) + 0.0) / 3)
    assert m["all/max_skew@2"] == pytest.approx(2 * math.log(2) / 3)


def test_protocol_options_are_checked():
    with pytest.raises(ConfigError, match=r"`protocol` to be one of 'geyik', 'debiasclip', 'bendvlm', 'sfid'"):
        check_suite_options("retrieval_bias", {"protocol": "geyick"})
    with pytest.raises(ConfigError, match="no `eps` under protocol 'debiasclip', which replaces a zero share by 1/K"):
        RetrievalBiasSuite(
            QUERIES,
            angle_gallery(*GALLERY),
            {"data": "angles"},
            RetrievalBiasOptions(protocol="debiasclip", eps=0.1, k=2),
        )
    options = RetrievalBiasOptions(eps=0.0, k=2)
    suite = RetrievalBiasSuite(QUERIES, angle_gallery(*GALLERY), {"data": "angles"}, options)
    assert (suite.ks, suite.config["protocol"], suite.config["eps"]) == ((2,), "geyik", 0.0)


def test_nan_queries_and_images_are_skipped_with_reasons():
    angles, attributes = GALLERY
    gallery = angle_gallery(angles, attributes)
    gallery.images[5, 0] = math.nan  # the woman at 50 degrees
    queries = [*QUERIES, Query("nan", "g3", "broken")]
    output = measure_suite(
        RetrievalBiasSuite(
            queries, gallery, {"data": "angles"}, RetrievalBiasOptions(k=2).with_statistics(n_bootstrap=20)
        ),
        AngleAdapter(),
    )
    reasons = {entry["item"]: entry["reason"] for entry in output.skipped}
    assert reasons == {
        "image at 50": "its embedding holds NaN or inf",
        "nan": "its embedding holds NaN or inf",
        "group/g3": "no query of the group was measured",
        "group/g2/*@2": "one query: the intervals of its statistics @2 are undefined (a bootstrap over one value has "
        "no spread) and written as null",
    }
    # without the image at 50, "at 50" ranks 40 (w), 30 (m): Bias@2 = 0
    assert output.metrics["group/g2/bias@2"] == pytest.approx(0.0) and output.metrics["gallery/n_woman"] == 2
    assert "group/g3/bias@2" not in output.metrics and output.metrics["all/n_queries"] == 3


# ----------------------------------------------------------------------------- captions: annotation, queries
CORPUS = {  # image: (pixel (red, green), captions)
    "m1.png": ((255, 0), ["A man riding a horse.", "A person on a horse."]),  # man
    "m2.png": ((255, 60), ["The boy flies his kite."]),  # man
    "w1.png": ((0, 255), ["A woman riding a horse."]),  # woman
    "w2.png": ((90, 255), ["She holds her umbrella."]),  # woman; "her" has no single neutral form
    "both.png": ((128, 128), ["A man and a woman talking."]),  # both: left out of the gallery
    "none.png": ((20, 10), ["A plate of food."]),  # neither: left out, and not a query
    "king.png": ((255, 200), ["A king on a throne."]),  # man; "king" is not in the neutral lexicon
}
QUERY_VECTORS = {
    "A person riding a horse.": unit(0),  # ranks m1 (0 deg), m2 (13), king (38), w2 (71), w1 (90)
    "The child flies their kite.": unit(80),  # ranks w2 (71), w1 (90), king (38), m2 (13), m1 (0)
    "A person and a person talking.": unit(45),  # ranks king (38), w2 (71)
}


def write_corpus(root: Path, corpus: dict = CORPUS) -> Path:
    images = root / "images"
    images.mkdir(parents=True, exist_ok=True)
    for name, ((red, green), _) in corpus.items():
        Image.fromarray(np.full((4, 4, 3), (red, green, 0), dtype=np.uint8)).save(images / name)
    entries = [
        {"filename": name, "split": "test", "sentences": [{"raw": caption} for caption in captions]}
        for name, (_, captions) in corpus.items()
    ]
    path = root / "dataset.json"
    path.write_text(json.dumps({"images": entries}))
    return path


def test_gallery_annotation_from_the_images_own_captions():
    words = GenderWords.default()
    assert {"man", "he", "his", "boy", "husband"} <= words.man and {"woman", "she", "her", "girl"} <= words.woman
    assert annotate(["The Woman's hat.", "A person."], words) == "woman"
    assert annotate(["A man.", "Her dog."], words) == "both" and annotate(["A humane shepherd."], words) == "neither"


def test_captions_are_neutralised_into_queries_and_the_rest_is_counted(tmp_path):
    path = write_corpus(tmp_path)
    suite = RetrievalBiasSuite.from_path(
        path,
        RetrievalBiasOptions(
            image_root=str(tmp_path / "images"), cache_dir=str(tmp_path / "cache"), k=2
        ).with_statistics(n_bootstrap=20),
    )
    assert [(q.text, q.group, q.source) for q in suite.stimuli()] == [
        ("A person riding a horse.", "from_man", "A man riding a horse."),
        ("The child flies their kite.", "from_man", "The boy flies his kite."),
        ("A person riding a horse.", "from_woman", "A woman riding a horse."),
        ("A person and a person talking.", "from_both", "A man and a woman talking."),
    ]
    assert suite.gallery.names == ["m1.png", "m2.png", "w1.png", "w2.png", "king.png"]
    assert suite.gallery.attributes == ["man", "man", "woman", "woman", "man"]
    reasons = {entry["item"]: entry["reason"] for entry in suite.skipped}
    assert set(reasons) == {"She holds her umbrella.", "A king on a throne."}
    assert "'The person holds her umbrella.' still holds 'her'" in reasons["She holds her umbrella."]
    assert "still holds 'king'" in reasons["A king on a throne."]
    output = measure_suite(suite, AngleAdapter(QUERY_VECTORS))
    m = output.metrics
    assert (m["gallery/n_man"], m["gallery/n_woman"], m["gallery/n_both"], m["gallery/n_neither"]) == (3, 2, 1, 1)
    # top 2: riding (both groups) m1 m2 -> +1; kite w2 w1 -> -1; talking king w2 -> 0
    assert m["group/from_man/bias@2"] == pytest.approx(0.0) and m["group/from_woman/bias@2"] == pytest.approx(1.0)
    assert m["group/from_both/bias@2"] == pytest.approx(0.0) and m["all/bias@2"] == pytest.approx(0.25)


def test_prompts_replace_the_caption_queries_and_must_be_gender_neutral(tmp_path):
    path = write_corpus(tmp_path)
    options = RetrievalBiasOptions(image_root=str(tmp_path / "images"), cache_dir=str(tmp_path / "cache"), k=1)
    suite = RetrievalBiasSuite.from_path(path, replace(options, prompts={"jobs": ["at 0", "at 80", "at 0"]}))
    assert [(q.text, q.group) for q in suite.stimuli()] == [("at 0", "jobs"), ("at 80", "jobs")]
    assert suite.skipped == [] and suite.config["data"]["queries_from"] == "prompts"
    assert RetrievalBiasSuite.from_path(path, replace(options, prompts=["at 45"])).groups == ["prompts"]
    with pytest.raises(ConfigError, match=r"gender-neutral but 'a photo of a nurse and her patient' holds \['her'\]"):
        RetrievalBiasSuite.from_path(
            path, replace(options, prompts=["a photo of a doctor", "a photo of a nurse and her patient"])
        )
    with pytest.raises(ConfigError, match="non-empty list of texts"):
        replace(options, prompts={"jobs": []})


def test_biasworld_queries_and_the_lexicon_neutralisation_of_its_captions():
    world = BiasWorld(n_train=8, eval_per_combination=2, image_size=32)
    phrases = RetrievalBiasSuite.from_biasworld(world, RetrievalBiasOptions())
    assert len(phrases.stimuli()) == 18 and phrases.groups == ["man_stereotyped", "woman_stereotyped"]
    assert phrases.stimuli()[9] == Query("a person cooking.", "woman_stereotyped", "cooking")
    assert phrases.gallery.attributes == [item.group for item in world.items("test")]
    captions = RetrievalBiasSuite.from_biasworld(world, RetrievalBiasOptions(queries_from="captions"))
    gendered = [item for item in world.items("test") if {"man", "woman"} & set(item.caption.split())]
    assert gendered and len(captions.stimuli()) + captions.data_config["n_repeated_queries"] == len(gendered)
    for query in captions.stimuli():
        assert "person" in query.text and query.text == query.source.replace("woman", "person").replace("man", "person")
        assert (
            query.group
            == ("man" if query.text.split()[-1] in ("repairing.", "driving.", "coding.") else "woman") + "_stereotyped"
        )


# ----------------------------------------------------------------------------- bad input
def test_a_protocol_k_above_the_gallery_is_lowered_and_flagged():
    """DebiasCLIP's K = 1000 on 6 images: every top K is the whole gallery, said in the results, not plain zeros."""
    options = RetrievalBiasOptions(protocol="debiasclip").with_statistics(n_bootstrap=20)
    suite = RetrievalBiasSuite(QUERIES, angle_gallery(*GALLERY), {"data": "angles"}, options)
    output = measure_suite(suite, AngleAdapter())
    assert suite.ks == (6,) and (suite.config["k"], suite.config["protocol_k"]) == ([6], 1000)
    assert output.metrics["n_protocol_k_above_gallery"] == 1 and output.metrics["all/max_skew@6"] == 0.0
    reasons = {entry["item"]: entry["reason"] for entry in output.skipped}
    assert reasons["k=6"].startswith(
        "protocol 'debiasclip''s K = 1000 is above the gallery size, 6 annotated images of angles: K = 6 used"
    )
    given = RetrievalBiasSuite(QUERIES, angle_gallery(*GALLERY), {"data": "angles"}, replace(options, k=6))
    assert "n_protocol_k_above_gallery" not in measure_suite(given, AngleAdapter()).metrics  # K = 6 asked for


def test_k_larger_than_the_gallery_is_refused():
    with pytest.raises(
        ConfigError,
        match=r"`k` to be at most the gallery size, 6 annotated images of angles, but got 7 \(protocol 'sfid'\)",
    ):
        options = RetrievalBiasOptions(protocol="sfid", k=[2, 7])
        RetrievalBiasSuite(QUERIES, angle_gallery(*GALLERY), {"data": "angles"}, options)
    with pytest.raises(ConfigError, match="`k` to be an integer v>0"):
        check_suite_options("retrieval_bias", {"k": 0})
    with pytest.raises(ConfigError, match="`k` to be a positive integer or a non-empty list of them but got"):
        RetrievalBiasOptions(k=[])
    with pytest.raises(ConfigError, match=r"`queries_from` to be one of 'activities', 'captions'"):
        check_suite_options("retrieval_bias", {"queries_from": "prompts"})


def test_a_gallery_with_no_annotated_image_is_refused(tmp_path):
    corpus = {"none.png": ((20, 10), ["A plate of food."]), "both.png": ((1, 2), ["A man and a woman."])}
    path = write_corpus(tmp_path, corpus)
    with pytest.raises(InputError, match=r"No gallery image of .*dataset\.json is annotated man or woman .*'both': 1"):
        RetrievalBiasSuite.from_path(
            path, RetrievalBiasOptions(image_root=str(tmp_path / "images"), cache_dir=str(tmp_path / "cache"))
        )


def test_an_image_that_does_not_decode_is_skipped_and_too_few_left_stop_the_run(tmp_path):
    path = write_corpus(tmp_path)
    (tmp_path / "images" / "w2.png").write_bytes(b"not a picture")
    options = RetrievalBiasOptions(image_root=str(tmp_path / "images"), cache_dir=str(tmp_path / "cache"))
    options = options.with_statistics(n_bootstrap=20)
    output = measure_suite(RetrievalBiasSuite.from_path(path, replace(options, k=2)), AngleAdapter(QUERY_VECTORS))
    (entry,) = [entry for entry in output.skipped if entry.get("scope") == "gallery"]
    assert entry["item"] == "w2.png" and "could not be decoded" in entry["reason"]
    assert output.metrics["gallery/n_woman"] == 1
    with pytest.raises(InputError, match=r"Only 4 of the 5 gallery images of .* could be embedded, fewer than `k` = 5"):
        measure_suite(RetrievalBiasSuite.from_path(path, replace(options, k=5)), AngleAdapter(QUERY_VECTORS))


# ----------------------------------------------------------------------------- end to end, tiny CLIP
def test_measure_clip_on_biasworld_writes_the_results_and_one_row_per_query(tmp_path, run_cli):
    argv = ["measure", "--suite", "retrieval_bias", "--model", "clip", "--tiny", "--data", "biasworld"]
    argv += ["--out", str(tmp_path / "out"), "--biasworld.eval_per_combination", "2"]
    code, out, err = run_cli([*argv, "--suite_options", "{k: [3, 5], statistics: {n_bootstrap: 50}}"])
    assert code == 0, err
    results = read_results(tmp_path / "out" / "retrieval_bias.json")
    items = read_items(tmp_path / "out" / "retrieval_bias.json")
    assert (
        results.n_items == 18 and len(items) == 18 and set(items["group"]) == {"man_stereotyped", "woman_stereotyped"}
    )
    assert ((items["n_man@5"] + items["n_woman@5"]) == 5).all()
    assert results.metrics["all/bias@3"] == pytest.approx(items["bias@3"].mean())
    assert results.metrics["gallery/n_man"] == results.metrics["gallery/n_woman"] == 12
    for group in ("all", "group/man_stereotyped", "group/woman_stereotyped"):
        for statistic in ("max_skew", "min_skew", "ndkl", "bias"):
            low, high = results.intervals[f"{group}/{statistic}@5"]
            assert low <= results.metrics[f"{group}/{statistic}@5"] <= high
    assert results.config["suite_config"]["k"] == [3, 5] and "retrieval_bias/all/bias@5" in out
    assert results.config["suite_config"]["protocol"] == "geyik" and results.config["suite_config"]["eps"] == 1e-4
    code, _, err = run_cli([*argv, "--suite_options", "{protocol: debiasclip, k: 5, statistics: {n_bootstrap: 20}}"])
    assert code == 0, err
    results = read_results(tmp_path / "out" / "retrieval_bias.json")
    assert results.config["suite_config"]["protocol"] == "debiasclip" and results.config["suite_config"]["k"] == [5]
    items = read_items(tmp_path / "out" / "retrieval_bias.json")
    assert ((items["n_man@5"] + items["n_woman@5"]) >= 5).all()  # every image tied with the 5th is counted
    code, _, err = run_cli([*argv, "--suite_options", "{k: 25}"])
    assert code == 2 and "at most the gallery size, 24 annotated images of biasworld, but got 25" in err


def test_measure_refuses_a_model_without_embed(tmp_path, run_cli):
    argv = ["measure", "--suite", "retrieval_bias", "--model", "vilt", "--tiny", "--out", str(tmp_path / "out")]
    code, _, err = run_cli(argv)
    assert code == 2 and "needs capability 'embed'" in err


def test_the_suite_config_runs(tmp_path, run_cli):
    config = Path(__file__).resolve().parents[2] / "configs" / "suite" / "retrieval_bias.yaml"
    argv = ["measure", "--config", str(config), "--model", "clip", "--tiny", "--out", str(tmp_path / "out")]
    code, _, err = run_cli([*argv, "--biasworld.eval_per_combination", "2"])  # the options as written
    assert code == 0, err
    results = read_results(tmp_path / "out" / "retrieval_bias.json")
    assert {"all/max_skew@10", "all/ndkl@20", "group/woman_stereotyped/bias@20"} <= set(results.metrics)


# ----------------------------------------------------------------------------- two ranks
def sharded_case():
    """Seven queries in batches of two (rank 0 of two probes queries 0, 1, 4, 5; rank 1 queries 2, 3, 6): group
    g2 lies on rank 1 alone, query 6 (group g3) embeds to NaN, and one gallery image is NaN on every rank."""
    angles = [0, 10, 20, 30, 40, 50, 60, 70, 80]
    gallery = angle_gallery(angles, ["man", "woman", "man", "man", "woman", "woman", "man", "woman", "woman"])
    gallery.images[4, 1] = math.nan
    queries = [Query(f"at {a}", g, f"q{i}") for i, (a, g) in enumerate([(5, "g1"), (33, "g1"), (71, "g2"), (12, "g2")])]
    queries += [Query("at 47", "g1", "q4"), Query("at 88", "g1", "q5"), Query("nan", "g3", "q6")]
    suite = RetrievalBiasSuite(
        queries,
        gallery,
        {"data": "angles"},
        RetrievalBiasOptions(k=[1, 3], batch_size=2).with_statistics(n_bootstrap=40),
    )
    return suite, AngleAdapter()


def test_sharded_case_measures_every_group_and_skips():
    (output,) = single_process([sharded_case])
    assert output["metrics"]["group/g2/n_queries"] == 2 and output["metrics"]["all/n_queries"] == 6
    assert {entry["item"] for entry in output["skipped"]} == {"image at 40", "nan", "group/g3"}
