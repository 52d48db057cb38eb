"""ALBEF adapter (protocol checks: test_protocol.py): the official checkpoint
format (key names, momentum/queue entries, retrieval layout, position-embedding interpolation),
and plumbing checks against transformers' own BERT."""

import dataclasses
import logging

import pytest
import torch
from transformers import BertForMaskedLM, BertModel

from vlbias.errors import CapabilityError, InputError
from vlbias.models.base import Capability
from vlbias.models.families.albef import ALBEFAdapter
from vlbias.models.families.albef_modeling import ALBEF, binary_groups, interpolate_pos_embed, read_checkpoint
from vlbias.models.registry import load

NAME = "albef"
CAPABILITIES = sorted(ALBEFAdapter.capabilities)
TEXTS = ["a man is cooking.", "the woman who is driving in a picture.", "someone sewing."]


@pytest.fixture(scope="module")
def model():
    return load(NAME, tiny=True, device="cpu")


@pytest.fixture(scope="module")
def inputs(model):
    pixels = model.prepare_images(torch.rand(len(TEXTS), 3, 32, 32, generator=torch.Generator().manual_seed(3)))
    return pixels, model.prepare_texts(TEXTS)


def outputs(adapter, pixels, tokens, capabilities=CAPABILITIES):
    with torch.no_grad():
        return {c: adapter.run_capability(c, pixels, tokens) for c in capabilities}


def assert_same(first, second, atol=0.0):
    for capability in first:
        a, b = first[capability], second[capability]
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            torch.testing.assert_close(
                x, y, rtol=0, atol=atol, msg=lambda m, capability=capability: f"{capability.value}: {m}"
            )


def official_keys(layers: int, fusion_layer: int, vision_layers: int) -> set[str]:
    """Inference keys of an official ALBEF pre-training checkpoint, spelled out from
    ``models/vit.py``, ``models/xbert.py`` and ``models/model_pretrain.py`` of salesforce/ALBEF."""

    def linear(*names: str) -> set[str]:  # Linear and LayerNorm modules: weight and bias
        return {f"{name}.{tensor}" for name in names for tensor in ("weight", "bias")}

    vit, bert, head = "visual_encoder.", "text_encoder.bert.", "text_encoder.cls.predictions."
    keys = {"temp", vit + "cls_token", vit + "pos_embed"}
    keys |= linear("vision_proj", "text_proj", "itm_head", vit + "patch_embed.proj", vit + "norm")
    for i in range(vision_layers):
        keys |= linear(
            *(f"{vit}blocks.{i}.{m}" for m in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"))
        )
    keys |= {f"{bert}embeddings.{m}_embeddings.weight" for m in ("word", "position", "token_type")}
    keys |= linear(bert + "embeddings.LayerNorm")
    for i in range(layers):
        layer = f"{bert}encoder.layer.{i}."
        for block in ["attention"] + (["crossattention"] if i >= fusion_layer else []):
            parts = ("self.query", "self.key", "self.value", "output.dense", "output.LayerNorm")
            keys |= linear(*(f"{layer}{block}.{m}" for m in parts))
        keys |= linear(layer + "intermediate.dense", layer + "output.dense", layer + "output.LayerNorm")
    keys |= {head + "bias", head + "decoder.weight", head + "decoder.bias"}
    return keys | linear(head + "transform.dense", head + "transform.LayerNorm")


def official_checkpoint(adapter, retrieval: bool = False) -> dict:
    """What ``Pretrain.py`` (or ``Retrieval.py``) saves: the model with momentum copies, queues and
    the position-id buffer, under ``"model"``, next to optimiser state and config."""
    state = {key: value.clone() for key, value in adapter.model.state_dict().items()}
    if retrieval:  # model_retrieval.py: a bare BertModel as text_encoder, no MLM head
        state = {
            key.replace("text_encoder.bert.", "text_encoder."): v for key, v in state.items() if ".cls." not in key
        }
    momentum = {
        key.replace(part, part + "_m", 1): value + 0.01
        for key, value in state.items()
        for part in ("visual_encoder", "text_encoder", "vision_proj", "text_proj")
        if key.startswith(part + ".")
    }
    embed_dim, queue = adapter.model.config.embed_dim, 8
    extra = {
        "image_queue": torch.randn(embed_dim, queue),
        "text_queue": torch.randn(embed_dim, queue),
        "queue_ptr": torch.zeros(1, dtype=torch.long),
    }
    if retrieval:
        extra["idx_queue"] = torch.full((1, queue), -100)
    bert = "text_encoder." if retrieval else "text_encoder.bert."
    extra[bert + "embeddings.position_ids"] = torch.arange(adapter.model.config.max_position_embeddings)[None]
    return {
        "model": {**state, **momentum, **extra},
        "optimizer": {"state": {}},
        "config": {"image_res": 32},
        "epoch": 29,
    }


# -- the protocol checks ----------------------------------------------------------------------
# -- official checkpoints ---------------------------------------------------------------------
def test_parameter_names_are_the_official_ones(model):
    config = model.model.config
    expected = official_keys(config.num_layers, config.fusion_layer, config.vision_layers)
    assert set(model.model.state_dict()) == expected


def test_loads_official_pretraining_checkpoint(model, inputs, tmp_path, caplog):
    path = tmp_path / "ALBEF.pth"
    checkpoint = official_checkpoint(model)
    torch.save(checkpoint, path)
    with caplog.at_level(logging.INFO, logger="vlbias.models.families.albef"):
        loaded = ALBEFAdapter.from_pretrained(path, tokenizer=model.tokenizer, config=model.model.config).eval()
    assert (
        "ignored entries: image_queue (1), queue_ptr (1), text_encoder.bert.embeddings.position_ids (1), text_encoder_m ("
        in caplog.text
    )
    assert_same(outputs(model, *inputs), outputs(loaded, *inputs))
    report = loaded.loading_report
    assert report.layout == "pretrain" and report.pos_embed_grid == (4, 4)
    ignored = set(checkpoint["model"]) - set(model.model.state_dict())
    assert set(report.ignored) == ignored
    assert {
        "image_queue",
        "text_queue",
        "queue_ptr",
        "visual_encoder_m.pos_embed",
        "text_encoder_m.cls.predictions.bias",
        "text_encoder.bert.embeddings.position_ids",
    } <= ignored


def test_loads_official_retrieval_checkpoint_without_mlm_head(model, inputs, tmp_path):
    path = tmp_path / "flickr30k.pth"
    torch.save(official_checkpoint(model, retrieval=True), path)
    loaded = ALBEFAdapter.from_pretrained(path, tokenizer=model.tokenizer, config=model.model.config).eval()
    assert loaded.loading_report.layout == "retrieval" and "idx_queue" in loaded.loading_report.ignored
    assert Capability.FILL_MASK not in loaded.capabilities
    kept = [c for c in CAPABILITIES if c is not Capability.FILL_MASK]
    assert_same(outputs(model, *inputs, kept), outputs(loaded, *inputs, kept))
    with pytest.raises(CapabilityError, match="'albef' does not have capability 'fill_mask'"):
        loaded.fill_mask_logits(*inputs)


def test_other_image_size_interpolates_position_embeddings(model, inputs, tmp_path):
    path = tmp_path / "ALBEF.pth"
    torch.save(official_checkpoint(model), path)
    loaded = ALBEFAdapter.from_pretrained(
        path, tokenizer=model.tokenizer, config=model.model.config, image_size=48
    ).eval()
    assert loaded.loading_report.pos_embed_grid == (4, 6)
    pos_embed = loaded.model.visual_encoder.pos_embed
    assert pos_embed.shape == (1, 1 + 6 * 6, 32)
    torch.testing.assert_close(pos_embed[:, 0], model.model.visual_encoder.pos_embed[:, 0], rtol=0, atol=0)  # CLS kept
    pixels = loaded.prepare_images(torch.rand(len(TEXTS), 3, 48, 48))
    assert pixels.shape[-1] == 48
    for output in outputs(loaded, pixels, inputs[1]).values():
        for tensor in output if isinstance(output, tuple) else (output,):
            assert torch.isfinite(tensor).all()


def test_interpolate_pos_embed_same_grid_is_identity_and_keeps_constants():
    pos_embed = torch.randn(1, 1 + 16, 8)
    assert interpolate_pos_embed(pos_embed, 4) is pos_embed
    constant = torch.cat([torch.randn(1, 1, 8), torch.full((1, 16, 8), 0.5)], dim=1)
    resized = interpolate_pos_embed(constant, 7)
    assert resized.shape == (1, 50, 8)
    torch.testing.assert_close(resized[:, 1:], torch.full((1, 49, 8), 0.5))
    with pytest.raises(InputError, match="square"):
        interpolate_pos_embed(torch.randn(1, 1 + 15, 8), 4)


def test_checkpoint_with_missing_and_unexpected_keys_is_refused_listing_them(model, tmp_path):
    checkpoint = official_checkpoint(model)
    del checkpoint["model"]["itm_head.weight"]
    checkpoint["model"]["itm_head.extra"] = torch.zeros(1)
    path = tmp_path / "broken.pth"
    torch.save(checkpoint, path)
    with pytest.raises(
        InputError, match=r"1 missing key\(s\): itm_head\.weight; 1 unexpected key\(s\): itm_head\.extra"
    ):
        ALBEFAdapter.from_pretrained(path, tokenizer=model.tokenizer, config=model.model.config)


def test_checkpoint_with_wrong_shapes_is_refused_naming_them(model, tmp_path):
    checkpoint = official_checkpoint(model)
    checkpoint["model"]["itm_head.weight"] = torch.zeros(3, 32)
    path = tmp_path / "wrong.pth"
    torch.save(checkpoint, path)
    with pytest.raises(InputError, match=r"itm_head\.weight \(3, 32\) \(expected \(2, 32\)\)"):
        ALBEFAdapter.from_pretrained(path, tokenizer=model.tokenizer, config=model.model.config)


def test_file_without_model_entry_is_refused(tmp_path):
    path = tmp_path / "bare.pth"
    torch.save({"state_dict": {}}, path)
    with pytest.raises(InputError, match=r"no state dict under key 'model' \(top level: \['state_dict'\]\)"):
        read_checkpoint(path)
    with pytest.raises(InputError, match="does not exist"):
        read_checkpoint(tmp_path / "absent.pth")


def test_tokenizer_from_a_directory_holding_bert_base_uncased_vocab(minilm_dir, minilm_tokenizer, tmp_path):
    adapter = ALBEFAdapter.tiny(tokenizer=minilm_tokenizer).eval()
    path = tmp_path / "ALBEF.pth"
    torch.save(official_checkpoint(adapter), path)
    loaded = ALBEFAdapter.from_pretrained(path, tokenizer=minilm_dir, config=adapter.model.config).eval()
    assert len(loaded.tokenizer) == adapter.model.config.vocab_size == 30522
    tokens = loaded.prepare_texts(["a woman with a briefcase"])
    torch.testing.assert_close(
        tokens["input_ids"][0], torch.tensor(minilm_tokenizer("a woman with a briefcase")["input_ids"])
    )
    torch.testing.assert_close(loaded.token_states(None, tokens), adapter.token_states(None, tokens), rtol=0, atol=0)


def test_tokenizer_larger_than_the_vocabulary_is_refused(model, minilm_dir, tmp_path):
    path = tmp_path / "ALBEF.pth"
    torch.save(official_checkpoint(model), path)
    with pytest.raises(
        InputError, match=rf"Tokenizer has 30522 tokens but the ALBEF model's vocabulary has {len(model.tokenizer)}"
    ):
        ALBEFAdapter.from_pretrained(path, tokenizer=minilm_dir, config=model.model.config)


def test_default_tokenizer_unavailable_offline_says_how_to_pass_one(model, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "ALBEF.pth"
    torch.save(official_checkpoint(model), path)
    with pytest.raises(InputError, match="'bert-base-uncased' could not be loaded.*tokenizer="):
        ALBEFAdapter.from_pretrained(path, config=model.model.config)


# -- plumbing ---------------------------------------------------------------------------------
def test_text_layers_equal_transformers_bert(model, inputs):
    """The text-only layers are BERT: transformers' BertModel with the same weights agrees."""
    config = model.model.config
    bert = BertModel(
        dataclasses.replace(config, num_layers=config.fusion_layer).bert_config(), add_pooling_layer=False
    ).eval()
    weights = {
        key: value
        for key, value in model.model.text_encoder.bert.state_dict().items()
        if not key.startswith("encoder.layer.") or int(key.split(".")[2]) < config.fusion_layer
    }
    bert.load_state_dict(weights, strict=True)
    tokens = inputs[1]
    with torch.no_grad():
        theirs = bert(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"]).last_hidden_state
        ours = model.model.text_embeds(tokens["input_ids"], tokens["attention_mask"])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def test_mlm_without_fusion_layers_equals_transformers_bert_for_masked_lm(inputs):
    """With ``fusion_layer == num_layers`` ALBEF's MLM is BertForMaskedLM (tied decoder included)."""
    adapter = ALBEFAdapter.tiny(sizes=dataclasses.replace(ALBEFAdapter.tiny_sizes, fusion_layer=4)).eval()
    assert adapter.model.config.num_layers == 4
    bert = BertForMaskedLM(adapter.model.config.bert_config()).eval()
    bert.load_state_dict(adapter.model.text_encoder.state_dict(), strict=True)
    tokens = adapter.prepare_texts(TEXTS)
    with torch.no_grad():
        theirs = bert(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"]).logits
        ours = adapter.fill_mask_logits(inputs[0], tokens)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def test_image_reaches_fused_outputs_but_not_text_embeddings(model, inputs):
    pixels, tokens = inputs
    other = model.prepare_images(torch.rand(len(TEXTS), 3, 32, 32, generator=torch.Generator().manual_seed(9)))
    first, second = outputs(model, pixels, tokens), outputs(model, other, tokens)
    torch.testing.assert_close(first[Capability.EMBED][1], second[Capability.EMBED][1], rtol=0, atol=0)
    for capability in (Capability.MATCH, Capability.FILL_MASK, Capability.TOKEN_STATES):
        assert not torch.allclose(first[capability], second[capability]), capability


def test_no_image_is_a_white_image(model, inputs):
    tokens = inputs[1]
    white = model.prepare_images(torch.ones(len(TEXTS), 3, 32, 32))
    mean, std = torch.tensor(model.transform.mean), torch.tensor(model.transform.std)
    torch.testing.assert_close(model.no_image(len(TEXTS)), ((1 - mean) / std)[None, :, None, None].expand_as(white))
    with torch.no_grad():
        torch.testing.assert_close(
            model.fill_mask_logits(None, tokens), model.fill_mask_logits(white, tokens), rtol=0, atol=0
        )


def test_match_logit_is_log_odds_and_logit_scale_is_inverse_temperature(model, inputs):
    pixels, tokens = inputs
    with torch.no_grad():
        text = model.model.text_embeds(tokens["input_ids"], tokens["attention_mask"])
        fused = model.model.fuse(text, model.model.image_embeds(pixels), tokens["attention_mask"])
        probability = model.model.itm_logits(fused).softmax(-1)[:, 1]
        torch.testing.assert_close(model.match_logits(pixels, tokens), torch.logit(probability), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model.logit_scale.exp(), 1 / model.model.temp)


@pytest.mark.parametrize(
    "image_rows",
    [
        [2, 2, 2, 2, 2, 2, 0, 1],
        [0, 1, 2, 3, 0, 1, 2, 3],
        [3, 3, 3, 3, 3, 3, 3, 3],
        [1, 0, 0, 2, 2, 2, 0, 3],
        [0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0],
    ],
    ids=["one image read by most rows", "each image twice", "one image", "uneven", "groups of 8, 4 and 1"],
)
@pytest.mark.parametrize("given_queries", [False, True], ids=["projected", "queries given"])
def test_cached_cross_attention_equals_the_cross_attention_of_gathered_images(model, image_rows, given_queries):
    """Rows grouped by image (an image's rows in groups of powers of two) give the block's own cross-attention,
    with the queries projected there or given."""
    g = torch.Generator().manual_seed(1)
    layer = model.model.text_encoder.bert.encoder.layer[model.model.config.fusion_layer]
    rows = torch.tensor(image_rows)
    images, hidden = torch.randn(4, 17, 32, generator=g), torch.randn(len(rows), 5, 32, generator=g)
    with torch.no_grad():
        keys, values = layer.image_keys_values(images)
        queries = layer.cross_queries(hidden) if given_queries else None
        cached = layer.cross_attend_cached(hidden, keys, values, binary_groups(rows), queries)
        expected = layer.crossattention(hidden, encoder_hidden_states=images[rows])[0]
    torch.testing.assert_close(cached, expected, rtol=0, atol=1e-5)


def test_binary_groups_cover_every_row_once_in_groups_of_one_image():
    """13 rows of image 0 (8 + 4 + 1), 7 of image 3 (4 + 2 + 1), 2 of image 1, 1 of image 2, shuffled."""
    rows = torch.tensor([0] * 13 + [1, 2, 1] + [3] * 7)
    rows = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(0))]
    groups = binary_groups(rows)
    assert [(size, images.tolist()) for size, _, images in groups] == [
        (8, [0]),
        (4, [0, 3]),
        (2, [1, 3]),
        (1, [0, 2, 3]),
    ]
    for size, members, images in groups:
        torch.testing.assert_close(rows[members].view(-1, size), images[:, None].expand(-1, size))
    assert sorted(torch.cat([members for _, members, _ in groups]).tolist()) == list(range(len(rows)))


def test_fused_cls_equals_the_fused_states_at_cls(model, inputs):
    pixels, tokens = inputs
    albef, mask = model.model, tokens["attention_mask"]
    rows = torch.tensor([1, 1, 0, 1])[: len(TEXTS)]
    with torch.no_grad():
        text, images = albef.text_embeds(tokens["input_ids"], mask), albef.image_embeds(pixels)
        started, keys_values = albef.fusion_start(text, mask), albef.fusion_keys_values(images)
        fused = albef.fused_cls(started, mask, keys_values, rows)
        with_queries = albef.fused_cls(started, mask, keys_values, rows, albef.fusion_queries(started))
        expected = albef.fuse(text, images[rows], mask)[:, :1]
    torch.testing.assert_close(fused, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(with_queries, expected, rtol=0, atol=1e-5)


def test_mismatched_batch_sizes_are_refused(model, inputs):
    pixels, tokens = inputs
    with pytest.raises(InputError, match="2 images and 3 texts"):
        model.match_logits(pixels[:2], tokens)


def test_config_refuses_unequal_widths():
    from vlbias.errors import ConfigError
    from vlbias.models.families.albef_modeling import ALBEFConfig

    with pytest.raises(ConfigError, match="vision_width"):
        ALBEF(ALBEFConfig(vision_width=32, hidden_size=64))
