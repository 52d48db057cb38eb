"""ViLT adapter: the protocol checks are in test_protocol.py; here ViLT specifics: two
checkpoints (MLM and retrieval), the white "no image", the adapter's own patch embedding and the
patch shuffle's RNG, strict loading."""

from pathlib import Path

import pytest
import torch

from vlbias.commands.measure import parser as measure_parser
from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.models.base import Capability, at_positions
from vlbias.models.families.vilt import ViLTAdapter, patch_embeddings
from vlbias.models.masked_words import word_log_probs
from vlbias.models.registry import load

NAME = "vilt"
CAPABILITIES = sorted(ViLTAdapter.capabilities)
TEXT_CAPABILITIES = [Capability.FILL_MASK, Capability.TOKEN_STATES]
CONFIG = Path(__file__).parents[2] / "configs" / "model" / "vilt.yaml"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    directory = tmp_path_factory.mktemp("vilt")
    model.save_pretrained(directory)
    return directory


def pairs(model, n=2):
    pixels = model.prepare_images(torch.rand(n, 3, 48, 40, generator=torch.Generator().manual_seed(1)))
    return pixels, model.prepare_texts(["a man is [MASK].", "the woman who is driving in a picture."][:n])


@pytest.mark.parametrize("capability", TEXT_CAPABILITIES)
def test_without_image_equals_direct_call_on_a_white_image(model, capability):
    _, tokens = pairs(model)
    white = model.prepare_images(torch.ones(2, 3, 32, 32))
    torch.testing.assert_close(model.no_image(2), white, rtol=0, atol=0)
    ours = model.run_capability(capability, None, tokens)
    torch.testing.assert_close(ours, model.run_capability(capability, white, tokens), rtol=0, atol=0)
    torch.testing.assert_close(ours, model.direct_call(capability, None, tokens), rtol=0, atol=1e-6)


def test_token_states_are_what_the_mlm_head_reads(model):
    """FILL_MASK = ``mlm_score(TOKEN_STATES)``: the states are the text slice of the MLM backbone."""
    pixels, tokens = pairs(model)
    with torch.no_grad():
        torch.testing.assert_close(
            model.mlm.mlm_score(model.token_states(pixels, tokens)), model.fill_mask_logits(pixels, tokens)
        )


def test_match_uses_the_retrieval_backbone_not_the_mlm_one(model):
    pixels, tokens = pairs(model)
    bias = model.mlm.vilt.pooler.dense.bias
    original = bias.detach().clone()
    with torch.no_grad():
        before = model.match_logits(pixels, tokens)
        bias.add_(1.0)
        try:
            after = model.match_logits(pixels, tokens)
        finally:
            bias.copy_(original)
    torch.testing.assert_close(before, after, rtol=0, atol=0)


@pytest.fixture
def few_patches_kept(model):
    """ViLT keeps a random 8 of the tiny model's 4 x 4 = 16 patches: the adapter leaves embedding to ViLT."""
    configs = [model.mlm.config, model.retrieval.config]
    for config in configs:
        config.max_image_length = 8
    yield
    for config in configs:
        config.max_image_length = 200


@pytest.mark.parametrize("patches", ["all kept", "subset kept"])
def test_patch_embedding_leaves_the_callers_random_stream_alone(model, patches, request):
    if patches == "subset kept":
        request.getfixturevalue("few_patches_kept")
    pixels, tokens = pairs(model)
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    first = model.match_logits(pixels, tokens)
    torch.testing.assert_close(torch.rand(3), expected, rtol=0, atol=0)
    torch.testing.assert_close(model.match_logits(pixels, tokens), first, rtol=0, atol=0)


def test_own_patch_embedding_is_vilts_up_to_patch_order(model):
    """All patches kept: the adapter's grid-order embedding gives ViLT's outputs (its loop and shuffle)."""
    pixels, tokens = pairs(model)
    for capability in CAPABILITIES:
        torch.testing.assert_close(
            model.run_capability(capability, pixels, tokens),
            model.direct_call(capability, pixels, tokens),
            rtol=0,
            atol=1e-5,
        )


def test_subset_of_patches_is_left_to_vilt(model, few_patches_kept):
    pixels, tokens = pairs(model)
    assert patch_embeddings(model.mlm.vilt.embeddings, pixels) is None
    assert model.fill_mask_logits(pixels, tokens).shape[:2] == tokens["input_ids"].shape


def test_separate_mlm_and_itm_checkpoints_load_like_the_saved_pair(model, saved):
    pixels, tokens = pairs(model)
    pair = ViLTAdapter.from_pretrained(saved).eval()
    separate = ViLTAdapter.from_pretrained(saved / "mlm", itm_checkpoint=saved / "itm").eval()
    for capability in CAPABILITIES:
        torch.testing.assert_close(
            separate.run_capability(capability, pixels, tokens),
            pair.run_capability(capability, pixels, tokens),
            rtol=0,
            atol=0,
        )


def test_saved_pair_with_another_itm_checkpoint_is_refused(saved):
    with pytest.raises(ConfigError, match=r"already holds an `itm/` checkpoint"):
        ViLTAdapter.from_pretrained(saved, itm_checkpoint=saved / "itm")


def test_mlm_checkpoint_as_retrieval_checkpoint_is_refused_listing_keys(saved):
    with pytest.raises(
        InputError,
        match=r"missing key\(s\): rank_output\.bias, rank_output\.weight; \d+ unexpected key\(s\): mlm_score\.",
    ):
        ViLTAdapter.from_pretrained(saved / "mlm", itm_checkpoint=saved / "mlm")


def test_one_image_per_text(model):
    pixels, tokens = pairs(model)
    with pytest.raises(InputError, match="one image per text, but got 1 images and 2 texts"):
        model.match_logits(pixels[:1], tokens)


def test_embed_is_refused_naming_models_that_have_it(model):
    with pytest.raises(CapabilityError, match=r"'vilt' does not have capability 'embed'.*clip"):
        model.embed_texts(model.prepare_texts(["a man."]))


def test_real_vocabulary_scores_words_with_and_without_image(minilm_tokenizer):
    model = ViLTAdapter.tiny(tokenizer=minilm_tokenizer).eval()
    pixels = model.prepare_images(torch.rand(2, 3, 32, 32))
    words = ["nurse", "briefcase", "carpenter"]
    with torch.no_grad():
        seen = word_log_probs(model, pixels, "the [MASK] is cooking.", words)
        blind = word_log_probs(model, model.no_image(2), "the [MASK] is cooking.", words)
    assert seen.shape == blind.shape == (2, 3)
    assert (seen < 0).all() and (blind < 0).all()
    assert not torch.equal(seen, blind)


def test_model_config_parses_for_vlbias_measure():
    args = measure_parser().parse_args(["--config", str(CONFIG), "--suite", "mmbias", "--out", "unused"])
    assert (args.model, args.checkpoint) == (NAME, "dandelin/vilt-b32-mlm")


def test_paired_rows_with_a_subset_of_patches_kept(model, few_patches_kept):
    """When ViLT draws the patches, the rows' pixels are gathered and embedded by ViLT, the last
    layer at the positions still equals the full forward's states there."""
    pixels, tokens = pairs(model)
    image_rows, text_rows = torch.tensor([1, 0, 1]), torch.tensor([0, 0, 1])
    positions = torch.tensor([[1], [2], [0]])
    gathered = {key: value[text_rows] for key, value in tokens.items()}
    with torch.no_grad():
        expected = at_positions(model.fill_mask_logits(pixels[image_rows], gathered), positions)
        paired = model.paired_fill_mask_logits(pixels, tokens, image_rows, text_rows, positions)
    torch.testing.assert_close(paired, expected, rtol=0, atol=1e-5)
