"""Whole-word log-probabilities at a mask, including words of several word pieces."""

import pytest
import torch

from vlbias.errors import CapabilityError, InputError
from vlbias.models.families.bert import BertAdapter
from vlbias.models.masked_words import word_log_probs, word_pieces
from vlbias.models.registry import load

TEMPLATE = "the person who is [MASK] is here."


@pytest.fixture(scope="module")
def bert(minilm_tokenizer):
    """A tiny random BERT over the real 30,522-token WordPiece vocabulary."""
    return BertAdapter.tiny(tokenizer=minilm_tokenizer).eval()


def mask_log_probs(model, text):
    """``(n_masks, V)`` log-softmax at each mask of ``text``, computed by hand."""
    tokens = model.prepare_texts([text])
    logits = model.fill_mask_logits(None, tokens)[0]
    return logits[tokens["input_ids"][0] == model.tokenizer.mask_token_id].log_softmax(dim=-1)


def test_single_piece_word_is_its_log_probability_at_the_mask(bert):
    scores = word_log_probs(bert, None, TEMPLATE, ["nurse", "carpenter"])
    expected = mask_log_probs(bert, TEMPLATE)[0, bert.tokenizer.convert_tokens_to_ids(["nurse", "carpenter"])]
    torch.testing.assert_close(scores, expected[None])


def test_multi_piece_word_is_the_mean_over_its_pieces_all_masked(bert):
    assert bert.tokenizer.tokenize("hairdresser") == ["hair", "##dre", "##sser"]
    score = word_log_probs(bert, None, TEMPLATE, ["hairdresser"])
    at_masks = mask_log_probs(bert, TEMPLATE.replace("[MASK]", "[MASK] [MASK] [MASK]"))
    ids = bert.tokenizer.convert_tokens_to_ids(["hair", "##dre", "##sser"])
    expected = at_masks[torch.arange(3), ids].mean()
    torch.testing.assert_close(score, expected.reshape(1, 1))


def test_words_of_mixed_lengths_keep_their_columns(bert):
    words = ["nurse", "ballerina", "hairdresser", "carpenter"]
    together = word_log_probs(bert, None, TEMPLATE, words)
    alone = torch.cat([word_log_probs(bert, None, TEMPLATE, [word]) for word in words], dim=1)
    torch.testing.assert_close(together, alone)


def test_one_template_per_row(bert):
    templates = [TEMPLATE, "a [MASK] is cooking."]
    scores = word_log_probs(bert, None, templates, ["nurse", "ballerina"])
    assert scores.shape == (2, 2)
    torch.testing.assert_close(scores[1:], word_log_probs(bert, None, templates[1], ["nurse", "ballerina"]))


def test_refuse_strategy_lists_the_pieces(bert):
    assert word_log_probs(bert, None, TEMPLATE, ["nurse"], strategy="refuse").shape == (1, 1)
    pieces = r"'ballerina' -> \['ball', '##erina'\]; 'hairdresser' -> \['hair', '##dre', '##sser'\]"
    with pytest.raises(InputError, match=pieces):
        word_log_probs(bert, None, TEMPLATE, ["nurse", "ballerina", "hairdresser"], strategy="refuse")


def test_unknown_word_is_refused():
    model = load("bert", tiny=True, device="cpu")  # BiasWorld's whole-word vocabulary
    with pytest.raises(InputError, match=r"not in the tokenizer's vocabulary \(they map to \[UNK\]\): banana"):
        word_pieces(model.tokenizer, ["man", "banana"])


@pytest.mark.parametrize(
    ("template", "message"),
    [("the person is here.", "exactly once"), ("the [MASK] is [MASK].", "exactly once")],
)
def test_template_needs_exactly_one_mask(bert, template, message):
    with pytest.raises(InputError, match=message):
        word_log_probs(bert, None, template, ["nurse"])


def test_template_count_must_match_the_images(bert):
    with pytest.raises(InputError, match="Expected 1 template or 3 \\(one per image\\) but got 2"):
        word_log_probs(bert, torch.zeros(3, 3, 8, 8), [TEMPLATE, TEMPLATE], ["nurse"])


def test_mask_truncated_away_is_refused():
    model = load("bert", tiny=True, device="cpu")
    template = "a man is cooking " * 20 + "[MASK]."
    with pytest.warns(UserWarning, match="truncated"), pytest.raises(InputError, match="truncated away"):
        word_log_probs(model, None, template, ["man"])


def test_unknown_strategy_lists_the_choices(bert):
    with pytest.raises(InputError, match="one of mean_all_masked, refuse but got 'sum'"):
        word_log_probs(bert, None, TEMPLATE, ["nurse"], strategy="sum")


def test_model_without_fill_mask_is_refused_before_compute():
    with pytest.raises(CapabilityError, match=r"needs capability 'fill_mask', which model 'clip' lacks.*bert"):
        word_log_probs(load("clip", tiny=True, device="cpu"), None, TEMPLATE, ["man"])


def test_each_image_gets_its_own_row():
    """With a vision-language FILL_MASK model, row b is the score given image b alone."""
    from vlbias.models.base import Capability
    from vlbias.models.catalog import adapter_class, models_with

    name = next(n for n in models_with(Capability.FILL_MASK) if not adapter_class(n).text_only)
    model = load(name, tiny=True, device="cpu")
    pixels = model.prepare_images(torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    template = f"the {model.tokenizer.mask_token} is cooking."
    with torch.no_grad():
        both = word_log_probs(model, pixels, template, ["man", "woman"])
        alone = [word_log_probs(model, pixels[b : b + 1], template, ["man", "woman"]) for b in range(2)]
    torch.testing.assert_close(both, torch.cat(alone), rtol=0, atol=1e-5)
    assert not torch.equal(both[0], both[1])


@pytest.mark.parametrize("name", ["albef", "flava", "vilt"])
def test_image_rows_score_the_same_as_one_image_per_row(name):
    """``image_rows`` lets rows share images (each encoded once by two-stream models): the scores equal
    those of the gathered images, with per-row templates and a word of two pieces."""
    model = load(name, tiny=True, device="cpu")
    pixels = model.prepare_images(torch.rand(3, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    mask = model.tokenizer.mask_token
    templates = [f"the man is {mask}", f"a woman who is {mask}", f"the man is {mask}", f"the woman is {mask}"]
    image_rows = torch.tensor([2, 0, 0, 2])
    words = ["cooking", "man woman"]  # a phrase is scored over all its pieces
    with torch.no_grad():
        shared = word_log_probs(model, pixels, templates, words, image_rows=image_rows)
        gathered = word_log_probs(model, pixels[image_rows], templates, words)
    torch.testing.assert_close(shared, gathered, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("image_rows", "message"),
    [
        (torch.tensor([0, 3]), "indices below 3"),
        (torch.tensor([[0, 1]]), "1-d integer"),
        (torch.tensor([0.0, 1.0]), "1-d integer"),
    ],
)
def test_image_rows_must_index_the_images(image_rows, message):
    model = load("vilt", tiny=True, device="cpu")
    pixels = model.prepare_images(torch.rand(3, 3, 32, 32))
    with pytest.raises(InputError, match=message):
        word_log_probs(model, pixels, f"the {model.tokenizer.mask_token} is cooking", ["man"], image_rows=image_rows)
    with pytest.raises(InputError, match="not one"):
        word_log_probs(
            model, None, f"the {model.tokenizer.mask_token} is cooking", ["man"], image_rows=torch.tensor([0])
        )
