"""Texts the model cannot see as written (:mod:`vlbias.models.unseen_text`) in the mmbias, vlstereoset,
entity_association and counterbias suites: a bad text is skipped with the reason (or measured and noted when it is
only truncated) and counted, and what is left gives the numbers a run without it gives."""

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

import vlbias.suites.entity_association as entity_module
from tests.suites.test_counterbias import ATTACK
from tests.suites.test_entity_association import TEXT_LOGITS, VL_LOGITS, FixedLogits
from tests.suites.test_mmbias import TEXT_VECTORS, VectorAdapter, write_vector_data
from tests.suites.test_vlstereoset import TextOnlyStereotyper
from vlbias.data.biasworld import BiasWorld
from vlbias.data.entity_association import parse_spec
from vlbias.models.registry import load
from vlbias.models.unseen_text import EMPTY, TRUNCATED, UNKNOWN
from vlbias.models.vocab import tiny_tokenizer, word_tokenizer
from vlbias.suites.counterbias import CounterBiasSuite
from vlbias.suites.entity_association import EntityAssociationSuite
from vlbias.suites.mmbias import MMBiasSuite
from vlbias.suites.options import CounterBiasOptions, EntityAssociationOptions, MMBiasOptions, VLStereoSetOptions
from vlbias.suites.run import measure_suite
from vlbias.suites.vlstereoset import ProbeItem, VLStereoSetSuite, biasworld_items


# ----------------------------------------------------------------------------- entity_association
class ShortFixedLogits(FixedLogits):
    """:class:`FixedLogits` reading at most 9 tokens: "[CLS] the woman is carrying a [MASK] . [SEP]"."""

    def __init__(self, logits: dict[str, dict[str, float]]) -> None:
        super().__init__(logits)
        self.max_text_length = 9


def entity_output(monkeypatch, templates: list[dict]) -> object:
    """The text-only entity association scores of ``templates`` (agents woman / man / person), measured and text
    model both :class:`ShortFixedLogits`."""
    monkeypatch.setattr(entity_module, "load", lambda *args, **kwargs: ShortFixedLogits(TEXT_LOGITS))
    spec = parse_spec({"groups": {"female": "woman", "male": "man"}, "neutral": "person", "templates": templates})
    return measure_suite(
        EntityAssociationSuite(spec, None, {}, EntityAssociationOptions(text_checkpoint="fixed")),
        ShortFixedLogits(VL_LOGITS),
    )


BAGS = {"name": "bags", "text": "the {agent} is carrying a {entity}.", "entities": ["purse"]}


def test_entity_association_skips_an_entity_whose_mask_is_cut_and_notes_one_cut_after_it(monkeypatch):
    late = {"name": "late", "text": "the {agent} is carrying a a a a {entity}.", "entities": ["briefcase"]}
    alone = entity_output(monkeypatch, [BAGS])
    output = entity_output(monkeypatch, [BAGS, late])
    (entry,) = output.skipped
    assert entry["item"] == "briefcase" and entry["kind"] == TRUNCATED
    assert entry["reason"] == (
        "model 'fixed', caption 'the woman is carrying a a a a [MASK].': 12 tokens, over the model's maximum of 9: "
        "measured on its first 9 tokens (3 cut); [MASK] is past the cut: nothing is measured"
    )
    assert output.metrics.pop("n_skipped/truncated") == 1 and output.metrics.pop("n_truncated") == 0
    assert output.metrics.pop("n_skipped") == 1 and alone.metrics.pop("n_skipped") == 0
    assert alone.metrics.pop("n_skipped/truncated") == alone.metrics.pop("n_truncated") == 0  # counts always there
    assert output.metrics == alone.metrics and output.items == alone.items
    assert "note" not in alone.items[0]


def test_entity_association_measures_and_notes_a_caption_cut_after_its_mask(monkeypatch):
    tail = {"name": "bags", "text": "the {agent} is carrying a {entity} . .", "entities": ["purse"]}
    alone = entity_output(monkeypatch, [BAGS])
    with pytest.warns(UserWarning, match="were truncated"):
        output = entity_output(monkeypatch, [tail])
    assert output.skipped == [] and output.metrics.pop("n_truncated") == 1
    assert output.metrics.pop("n_skipped/truncated") == 0
    assert alone.metrics.pop("n_skipped/truncated") == alone.metrics.pop("n_truncated") == 0
    assert output.metrics == alone.metrics
    notes = {row["source"]: row.pop("note") for row in output.items}
    assert notes["vl_no_image"] == notes["text_model"] and notes["vl_no_image"].startswith(
        "caption 'the woman is carrying a [MASK] . .': 10 tokens, over the model's maximum of 9"
    )
    assert output.items == alone.items


# ----------------------------------------------------------------------------- mmbias
class WordVectors(VectorAdapter):
    """:class:`VectorAdapter` with a word tokenizer over its words, reading at most ``max_text_length`` tokens;
    ``bad bad bad`` (5 tokens) embeds as ``bad``. A text outside its table cannot be embedded at all."""

    def __init__(self, max_text_length: int = 4) -> None:
        super().__init__()
        self.words.append("bad bad bad")
        self.table = torch.cat([self.table, torch.tensor([[1.0, 0.0]])])
        self.tokenizer, self.max_text_length = word_tokenizer(TEXT_VECTORS), max_text_length


def mmbias_output(root: Path, phrases: dict, adapter: VectorAdapter, **options) -> object:
    """The muslim / christian tests of ``phrases`` on the vector data (:func:`write_vector_data`)."""
    write_vector_data(root)
    (root / "textual_phrases.json").write_text(json.dumps(phrases))
    options = MMBiasOptions(pairs=[["muslim", "christian"]], top_k=2, **options).with_statistics(n_bootstrap=30)
    suite = MMBiasSuite.from_path(root, options)
    return measure_suite(suite, adapter, seed=0)


def mmbias_phrases(unpleasant: list[str], muslim: list[str]) -> dict:
    groups = {"muslim": muslim, "christian": ["church", "bible"]}
    return {"unpleasant_phrases": unpleasant, "pleasant_phrases": ["good"], "category_phrases": groups}


UNKNOWN_REASON = "every token of {!r} is the unknown token '[UNK]': the model sees no word of it"


@pytest.mark.parametrize("probe", ["embed", "match"])
def test_mmbias_skips_words_the_model_cannot_see_and_measures_the_rest_as_without_them(tmp_path, probe):
    clean = mmbias_output(tmp_path / "clean", mmbias_phrases(["bad"], ["islam", "quran"]), WordVectors(), probe=probe)
    bad = mmbias_phrases(["bad", "zebra"], ["islam", "okapi", "quran"])
    output = mmbias_output(tmp_path / "bad", bad, WordVectors(), probe=probe)
    textual = [("phrases/muslim: 'okapi'", UNKNOWN)] if probe == "embed" else []  # match: no textual test
    expected = [("attributes/unpleasant: 'zebra'", UNKNOWN), *textual, ("attributes/all: 'zebra'", UNKNOWN)]
    assert [(entry["item"], entry["kind"]) for entry in output.skipped] == expected
    assert output.skipped[0]["reason"] == UNKNOWN_REASON.format("zebra")
    counts = {key: output.metrics.pop(key) for key in ("n_skipped/empty", "n_skipped/unknown", "n_truncated")}
    assert counts == {"n_skipped/empty": 0, "n_skipped/unknown": 2 if probe == "embed" else 1, "n_truncated": 0}
    assert all(clean.metrics.pop(key) == 0 for key in counts)  # the counts are there when nothing is skipped
    assert output.metrics == clean.metrics and output.p_values == clean.p_values
    assert output.intervals == clean.intervals and output.items == clean.items
    assert output.n_items == clean.n_items


def test_mmbias_measures_and_notes_a_truncated_word(tmp_path):
    phrases = mmbias_phrases(["bad", "bad bad bad"], ["islam", "quran"])
    whole = mmbias_output(tmp_path / "whole", phrases, WordVectors(max_text_length=8), experiments=["cross_modal"])
    output = mmbias_output(tmp_path / "cut", phrases, WordVectors(), experiments=["cross_modal"])
    assert output.skipped == [] and output.metrics.pop("n_truncated") == 1
    assert output.metrics.pop("n_skipped/unknown") == output.metrics.pop("n_skipped/empty") == 0
    assert all(whole.metrics.pop(key) == 0 for key in ("n_skipped/unknown", "n_skipped/empty", "n_truncated"))
    assert output.metrics == whole.metrics
    (row,) = output.items
    assert (row.pop("n_truncated"), row.pop("notes")) == (
        1,
        "attributes/unpleasant: 'bad bad bad': 5 tokens, over the model's maximum of 4: measured on its first 4 "
        "tokens (1 cut)",
    )
    (clean,) = whole.items
    assert (clean.pop("n_truncated"), clean.pop("notes")) == (0, "") and row == clean and row["n_a"] == 2


def test_mmbias_skips_a_test_whose_set_is_left_empty(tmp_path):
    output = mmbias_output(tmp_path / "data", mmbias_phrases(["zebra"], ["islam"]), WordVectors())
    reasons = {entry["item"]: entry["reason"] for entry in output.skipped}
    assert reasons["muslim_vs_christian/cross_modal"] == (
        "empty set(s) ['attributes/unpleasant'] once the texts the model cannot see are skipped"
    )
    assert {row["kind"] for row in output.items} == {"visual", "zero_shot"}
    assert output.metrics["n_skipped/unknown"] == 1


# ----------------------------------------------------------------------------- vlstereoset
class ReadingStereotyper(TextOnlyStereotyper):
    """:class:`TextOnlyStereotyper` (scores from the raw caption, whatever is cut) with the tiny models' word
    tokenizer, reading at most 9 tokens: "[CLS] the woman is cleaning . [SEP]" fits."""

    def __init__(self) -> None:
        super().__init__()
        self.tokenizer, self.max_text_length = tiny_tokenizer(), 9


def vlstereoset_output(items: list[ProbeItem]) -> object:
    return measure_suite(
        VLStereoSetSuite(items, {"data": "test"}, VLStereoSetOptions(probe="match").with_statistics(n_bootstrap=20)),
        ReadingStereotyper(),
        seed=0,
    )


def same_rows(actual: list[dict], expected: list[dict]) -> bool:
    """Item tables equal, NaN (lmss and vlss of items without them) equal to NaN."""
    return pd.DataFrame(actual).equals(pd.DataFrame(expected))


def without_counts(metrics: dict[str, float]) -> dict[str, float]:
    return {key: value for key, value in metrics.items() if not key.startswith(("n_skipped", "n_truncated"))}


def test_vlstereoset_skips_an_item_with_a_caption_the_model_cannot_see():
    items = biasworld_items(BiasWorld(n_train=4, eval_per_combination=1))
    bad = dataclasses.replace(items[0], key="bad", captions=(*items[0].captions[:2], "zebra okapi"))
    blank = dataclasses.replace(items[1], key="blank", captions=(" ", *items[1].captions[1:]))
    clean, output = vlstereoset_output(items), vlstereoset_output([bad, *items, blank])
    assert [(entry["item"], entry["kind"], entry["scope"]) for entry in output.skipped] == [
        ("bad", UNKNOWN, "all"),
        ("blank", EMPTY, "all"),
    ]
    assert output.skipped[0]["reason"] == "unrelated caption 'zebra okapi': " + UNKNOWN_REASON.format("zebra okapi")
    assert output.skipped[1]["reason"].startswith("stereotype caption ' ': empty text")
    metrics = output.metrics
    assert (metrics["n_skipped"], metrics["n_skipped/unknown"], metrics["n_skipped/empty"]) == (2, 1, 1)
    assert metrics["n_truncated"] == clean.metrics["n_truncated"] == 0
    assert without_counts(metrics) == without_counts(clean.metrics) and output.intervals == clean.intervals
    assert same_rows(output.items, clean.items)


def test_vlstereoset_measures_and_notes_an_item_with_a_truncated_caption():
    items = biasworld_items(BiasWorld(n_train=4, eval_per_combination=1))
    long = dataclasses.replace(items[0], captions=(*items[0].captions[:2], "the man who is there is photo."))
    clean, output = vlstereoset_output(items), vlstereoset_output([long, *items[1:]])
    assert output.skipped == [] and output.metrics["n_truncated"] == 1
    assert without_counts(output.metrics) == without_counts(clean.metrics)
    first, *rest = output.items
    assert first.pop("note") == (
        "unrelated caption 'the man who is there is photo.': 10 tokens, over the model's maximum of 9: measured on "
        "its first 9 tokens (1 cut)"
    )
    assert same_rows([first, *rest], clean.items)


# ----------------------------------------------------------------------------- counterbias
def counterbias_output(adapter, **options) -> object:
    """CounterBias on BiasWorld's two cooking images (a man, a woman), a short attack."""
    world = CounterBiasSuite.from_biasworld(BiasWorld(eval_per_combination=1), CounterBiasOptions())
    items = [item for item in world.items if item.target == "cooking"]
    suite = CounterBiasSuite(
        items, world.data_config, CounterBiasOptions(attack=ATTACK, require_attack_success=False, **options)
    )
    return measure_suite(suite, adapter, seed=0)


def test_counterbias_skips_a_template_whose_mask_is_past_the_cut():
    adapter = load("albef", tiny=True, device="cpu")
    adapter.max_text_length = 6  # "[CLS] the woman is [MASK] [SEP]": Sw/O fits, the three longer templates do not
    with pytest.warns(UserWarning, match="were truncated"):  # the bias prompt's 8 tokens; its mask is the 3rd
        alone = counterbias_output(adapter, templates=["Sw/O"])
        output = counterbias_output(adapter)
    assert [(entry["item"], entry["kind"]) for entry in output.skipped] == [
        ("template/Sw/", TRUNCATED),
        ("template/Pw/O", TRUNCATED),
        ("template/Pw/", TRUNCATED),
    ]
    assert output.skipped[0]["reason"] == (
        "model 'albef', caption 'The man in the photo is [MASK]': 9 tokens, over the model's maximum of 6: measured "
        "on its first 6 tokens (3 cut); [MASK] is past the cut: nothing is measured"
    )
    assert output.metrics.pop("n_skipped") == output.metrics.pop("n_skipped/truncated") == 3
    assert alone.metrics.pop("n_skipped") == alone.metrics.pop("n_skipped/truncated") == 0
    assert output.metrics["n_truncated"] == 0 and output.metrics == alone.metrics
    assert output.intervals == alone.intervals and output.p_values == alone.p_values
    assert same_rows(output.items, alone.items) and {row["template"] for row in output.items} == {"Sw/O"}
