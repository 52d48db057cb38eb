"""FLAVA adapter: the protocol checks are in test_protocol.py; here FLAVA specifics: the
text-only path, the ITM log-odds, the skipped image codebook, strict loading."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import FlavaForPreTraining

from vlbias.commands.measure import parser as measure_parser
from vlbias.errors import InputError
from vlbias.models.base import Capability
from vlbias.models.families.flava import FLAVAAdapter
from vlbias.models.masked_words import word_log_probs
from vlbias.models.registry import load

NAME = "flava"
TEXT_CAPABILITIES = [Capability.FILL_MASK, Capability.TOKEN_STATES]
CONFIG = Path(__file__).parents[2] / "configs" / "model" / "flava.yaml"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


def pairs(model, n=2):
    pixels = model.prepare_images(torch.rand(n, 3, 48, 40, generator=torch.Generator().manual_seed(1)))
    return pixels, model.prepare_texts(["a man is [MASK].", "the woman who is driving in a picture."][:n])


def rewrite_weights(directory: Path, drop: str | None = None, add: dict[str, torch.Tensor] | None = None) -> None:
    weights = load_file(directory / WEIGHTS)
    if drop is not None:
        del weights[drop]
    weights.update(add or {})
    save_file(weights, directory / WEIGHTS, metadata={"format": "pt"})


@pytest.mark.parametrize("capability", TEXT_CAPABILITIES)
def test_without_image_is_the_text_encoder_path(model, capability):
    """``None`` pixels give ``FlavaForPreTraining``'s text-only outputs (``mlm_logits``,
    ``text_embeddings``), which differ from the multimodal ones."""
    pixels, tokens = pairs(model)
    assert model.no_image(2) is None
    blind = model.run_capability(capability, None, tokens)
    torch.testing.assert_close(blind, model.direct_call(capability, None, tokens), rtol=0, atol=1e-6)
    assert blind.shape == model.run_capability(capability, pixels, tokens).shape
    assert not torch.allclose(blind, model.run_capability(capability, pixels, tokens))


def test_match_is_the_log_odds_of_the_itm_softmax(model):
    pixels, tokens = pairs(model)
    with torch.no_grad():
        itm = model.model(**tokens, input_ids_masked=tokens["input_ids"], pixel_values=pixels, return_loss=False)
        log_p = itm.itm_logits.log_softmax(dim=-1)
        torch.testing.assert_close(model.match_logits(pixels, tokens), log_p[:, 1] - log_p[:, 0])


def test_embeddings_give_flavas_contrastive_logits(model):
    """``exp(logit_scale) * cos`` of the adapter's embeddings is ``FlavaForPreTraining``'s
    ``contrastive_logits_per_image``."""
    pixels, tokens = pairs(model)
    with torch.no_grad():
        ours = model.logit_scale.exp() * model.embed_images(pixels) @ model.embed_texts(tokens).T
        out = model.model(**tokens, input_ids_masked=tokens["input_ids"], pixel_values=pixels, return_loss=False)
    torch.testing.assert_close(ours, out.contrastive_logits_per_image)


def test_checkpoint_with_image_codebook_loads_without_it(model, tmp_path):
    """A checkpoint saved with its codebook (as ``facebook/flava-full`` may be) loads with the
    codebook neither built nor reported; every other output is unchanged."""
    config = model.model.config.__class__.from_dict(
        {
            **model.model.config.to_dict(),
            "init_codebook": True,
            "image_codebook_config": {"hidden_size": 8, "num_blocks_per_group": 1, "vocab_size": 64},
        }
    )
    with_codebook = FlavaForPreTraining(config)
    with_codebook.load_state_dict(model.model.state_dict(), strict=False)
    FLAVAAdapter(with_codebook, model.tokenizer, model.transform).save_pretrained(tmp_path)
    assert any(key.startswith("image_codebook.") for key in load_file(tmp_path / WEIGHTS))
    restored = FLAVAAdapter.from_pretrained(tmp_path).eval()
    assert restored.model.image_codebook is None
    pixels, tokens = pairs(model)
    with torch.no_grad():
        ours, theirs = restored.match_logits(pixels, tokens), model.match_logits(pixels, tokens)
    # loaded tensors sit at another memory alignment, so allow float rounding
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_checkpoint_with_missing_and_unexpected_keys_is_refused_listing_them(model, tmp_path):
    model.save_pretrained(tmp_path)
    rewrite_weights(tmp_path, drop="itm_head.seq_relationship.weight", add={"extra_head.weight": torch.zeros(2)})
    with pytest.raises(
        InputError,
        match=r"'flava': 1 missing key\(s\): itm_head\.seq_relationship\.weight; "
        r"1 unexpected key\(s\): extra_head\.weight\.",
    ):
        load(NAME, checkpoint=tmp_path, device="cpu")


def test_one_image_per_text(model):
    pixels, tokens = pairs(model)
    with pytest.raises(InputError, match="one image per text, but got 1 images and 2 texts"):
        model.fill_mask_logits(pixels[:1], tokens)


def test_real_vocabulary_scores_words_with_and_without_image(minilm_tokenizer):
    model = FLAVAAdapter.tiny(tokenizer=minilm_tokenizer).eval()
    pixels = model.prepare_images(torch.rand(2, 3, 32, 32))
    words = ["nurse", "briefcase", "carpenter"]
    with torch.no_grad():
        seen = word_log_probs(model, pixels, "the [MASK] is cooking.", words)
        blind = word_log_probs(model, None, ["the [MASK] is cooking."] * 2, words)
    assert seen.shape == blind.shape == (2, 3)
    assert (seen < 0).all() and (blind < 0).all()
    assert not torch.equal(seen, blind)


def test_model_config_parses_for_vlbias_measure():
    args = measure_parser().parse_args(["--config", str(CONFIG), "--suite", "mmbias", "--out", "unused"])
    assert (args.model, args.checkpoint) == (NAME, "facebook/flava-full")


def test_bfloat16_weights_take_prepared_images():
    """FLAVA's patch embedding does not cast, so ``prepare_images`` returns the model's dtype."""
    model = load(NAME, tiny=True, device="cpu", dtype=torch.bfloat16)
    pixels, tokens = pairs(model)
    assert pixels.dtype == torch.bfloat16
    with torch.no_grad():
        assert model.match_logits(pixels, tokens).dtype == torch.bfloat16
        assert model.embed_images(pixels).dtype == torch.bfloat16
