"""FairVLP: token-aligned counterfactuals, the branches of every method, the image-counterfactual policies,
bad input, a fast_dev_run of every method, and the export that `vlbias measure` reads."""

import json
from pathlib import Path

import pytest
import torch
from transformers import BertTokenizer

from vlbias.cli import main
from vlbias.counterfactual.image import AttackConfig
from vlbias.counterfactual.text import SwapLexicon
from vlbias.counterfactual.tokens import TokenSwap
from vlbias.counterfactual.training import TrainingImageCounterfactuals
from vlbias.data.biasworld import BiasWorld
from vlbias.errors import ConfigError, InputError
from vlbias.models.registry import load
from vlbias.modules.fairvlp import METHODS, FairVLP, FairVLPMethod, switch_method, uses_images
from vlbias.modules.model_spec import ModelSpec
from vlbias.objectives import IGNORE_INDEX, itc_loss
from vlbias.results import read_results

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "experiment" / "fairvlp_biasworld.yaml"
ACTIVITIES = ["repairing", "driving", "coding", "cooking", "cleaning", "sewing"]
TINY = {"image_size": 32, "patch_size": 8}
TINY_ALBEF = ModelSpec("albef", tiny=True, tiny_sizes=TINY)


def _module(method: str, itc_weight: float = 0.0, **settings) -> FairVLP:
    """A tiny FairVLP on BiasWorld's words with ``method``'s ``settings`` (a one-step attack for the image methods)."""
    attack = {"attack": {"steps": 1}} if method in METHODS and uses_images(method) else {}
    return FairVLP(
        method=FairVLPMethod(method, **attack, **settings), itc_weight=itc_weight, model=TINY_ALBEF,
        groups=["man", "woman"], key_words=ACTIVITIES, content_label_key="activity", group_label_key="group",
    )  # fmt: skip


def _batch(n: int = 12) -> dict:
    dataset = BiasWorld(bias_strength=0.9, n_train=n, eval_per_combination=1, image_size=32).dataset("train")
    return torch.utils.data.default_collate([dataset[i] for i in range(n)])


def _wordpiece(tmp_path) -> BertTokenizer:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "woman", "is", "cooking", "gentleman"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab + ["la", "##dy", "."]))
    return BertTokenizer(str(path))


# -- token-aligned text counterfactuals ----------------------------------------------------------
@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")  # a private step, called outside a Trainer
def test_masked_positions_coincide_in_factual_and_counterfactual_texts():
    module = _module("fairvlp_l")
    captions = ["the man is cooking.", "a photo of a woman sewing.", "someone is coding."]
    tokens = module.adapter.prepare_texts(captions)
    masked, labels, _ = module._mask(tokens, torch.Generator().manual_seed(0))
    rows, _, _, cf_masked, cf_labels = module._counterfactuals(
        torch.rand(3, 3, 32, 32),
        module.adapter.prepare_images(torch.rand(3, 3, 32, 32)),
        captions,
        tokens,
        masked,
        labels,
    )
    assert rows.tolist() == [0, 1]  # the neutral caption has no text counterfactual
    assert torch.equal(
        cf_masked == module.adapter.tokenizer.mask_token_id, masked[rows] == module.adapter.tokenizer.mask_token_id
    )
    assert torch.equal(cf_labels != IGNORE_INDEX, labels[rows] != IGNORE_INDEX)
    decoded = module.adapter.tokenizer.batch_decode(module.swap.swap(tokens["input_ids"][:2]), skip_special_tokens=True)
    assert decoded == ["the woman is cooking.", "a photo of a man sewing."]


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")  # a private step, called outside a Trainer
@pytest.mark.parametrize("targets", ["swapped", "factual"])
def test_counterfactual_targets_at_a_masked_bias_word(targets):
    # "the man is cooking." with "man" and "cooking" masked: L_cf keeps the [MASK]s; at "man" its target is "woman"
    # when swapped, "man" (Eq. 15's M) when factual; gender_swap (which reads no targets) always scores its own
    # swapped words
    for method, settings in (("fairvlp_l", {"counterfactual_targets": targets}), ("gender_swap", {})):
        module = _module(method, **settings)
        captions = ["the man is cooking."]
        tokens = module.adapter.prepare_texts(captions)
        tokenizer = module.adapter.tokenizer
        man, woman, cooking = tokenizer.convert_tokens_to_ids(["man", "woman", "cooking"])
        ids = tokens["input_ids"]
        position = (ids[0] == man).nonzero().item()
        labels = torch.where((ids == man) | (ids == cooking), ids, IGNORE_INDEX)
        masked = torch.where(labels != IGNORE_INDEX, tokenizer.mask_token_id, ids)
        _, _, _, cf_masked, cf_labels = module._counterfactuals(
            torch.rand(1, 3, 32, 32), module.adapter.prepare_images(torch.rand(1, 3, 32, 32)), captions, tokens, masked,
            labels,
        )  # fmt: skip
        assert cf_masked[0, position] == tokenizer.mask_token_id
        expected = woman if targets == "swapped" or method == "gender_swap" else man
        assert cf_labels[0, position] == expected, (method, targets)
        others = labels[0] != IGNORE_INDEX
        others[position] = False
        assert torch.equal(cf_labels[0, others], labels[0, others]) and others.sum() == 1  # "cooking": the same


def test_unknown_counterfactual_targets_are_refused():
    with pytest.raises(ConfigError, match="counterfactual_targets.*'opposite'"):
        _module("fairvlp", counterfactual_targets="opposite")


def test_a_bias_word_split_into_other_pieces_gets_no_text_counterfactual(tmp_path):
    tokenizer = _wordpiece(tmp_path)
    swap = TokenSwap(SwapLexicon([("man", "woman"), ("gentleman", "lady")]), tokenizer)
    assert tokenizer.tokenize("lady") == ["la", "##dy"]
    assert {"gentleman", "lady"} <= swap.unswappable and "man" not in swap.unswappable
    texts = ["the man is cooking", "the gentleman is cooking", "the lady is cooking", "the man is la"]
    ids = tokenizer(texts, padding=True, return_tensors="pt")["input_ids"]
    assert swap.aligned(texts, ids).tolist() == [True, False, False, True]
    assert torch.equal(swap.swap(ids)[1], ids[1])  # an unswappable text is left as it is


def test_unknown_bias_words_and_texts_without_one_get_no_text_counterfactual():
    module = _module("fairvlp_l")
    texts = ["the gal is cooking", "someone is cooking", "the man is cooking"]  # the tiny vocabulary lacks "gal"
    ids = module.adapter.prepare_texts(texts)["input_ids"]
    assert module.swap.aligned(texts, ids).tolist() == [False, False, True]


# -- every method touches exactly its branches ----------------------------------------------------
class _Spy:
    def __init__(self, module: FairVLP):
        self.logged: dict[str, float] = {}
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.attacks = 0
        module.log = lambda key, value, **_: self.logged.__setitem__(key, float(torch.as_tensor(value).detach()))
        encodings: list[tuple[torch.Tensor, torch.Tensor]] = []  # (image states, the pixels they encode)
        encode, forward = module.adapter.image_states, module.adapter.fill_mask_logits_of_states

        def image_states(pixel_values):
            states = encode(pixel_values)
            encodings.append((states, pixel_values.detach().clone()))
            return states

        def fill_mask(states, tokens, image_rows=None):  # records the pixels each row reads and its ids
            pixels = next(pixels for encoded, pixels in encodings if encoded is states)
            self.calls.append((pixels if image_rows is None else pixels[image_rows], tokens["input_ids"].clone()))
            return forward(states, tokens, image_rows)

        module.adapter.image_states = image_states
        module.adapter.fill_mask_logits_of_states = fill_mask
        if module.images is not None:
            attack = module.images._attack

            def counted(pixels):
                self.attacks += 1
                made = attack(pixels)
                made.success[:] = True  # count every attack as a success: the branch must then be used
                made.pixels = (made.pixels + 0.05).clamp(0, 1)
                return made

            module.images._attack = counted


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")
@pytest.mark.parametrize("method", sorted(METHODS))
def test_each_method_touches_exactly_its_branches(method):
    module = _module(method, **({"image_counterfactuals": "every_step"} if uses_images(method) else {}))
    spy = _Spy(module)
    batch = _batch()
    loss = module.training_step(batch, 0)
    loss.backward()
    branches = METHODS[method]
    pixels, ids = spy.calls[0]
    n = len(batch["caption"])
    if branches is None:
        assert len(ids) == n and spy.attacks == 0
        assert not any(key.startswith(("train/kl", "train/cf", "train/mlm_cf")) for key in spy.logged)
        return
    factual_pixels, factual_ids, cf_pixels, cf_ids = pixels[:n], ids[:n], pixels[n:], ids[n:]
    rows = (
        torch.ones(n, dtype=torch.bool)
        if branches.image
        else torch.tensor(["man" in c.split() or "woman" in c.split() for c in batch["caption"]])
    )
    assert len(cf_ids) == int(rows.sum())
    assert (spy.attacks == 1) == branches.image
    assert torch.equal(cf_pixels, factual_pixels[rows]) != branches.image
    assert torch.equal(cf_ids, factual_ids[rows]) != branches.text
    assert ("train/kl_loss" in spy.logged) == branches.kl
    assert ("train/cf_text_rate" in spy.logged) == branches.text
    assert ("train/cf_image_success" in spy.logged) == branches.image


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")
def test_itc_weight_adds_albef_contrastive_loss_with_every_describing_caption_a_positive():
    module = _module("vanilla", itc_weight=0.5).eval()  # eval: no dropout, so the loss can be recomputed
    spy = _Spy(module)
    batch = _batch()
    module.training_step(batch, 0)
    adapter = module.adapter
    pixels, tokens = adapter.prepare_images(batch["pixel_values"]), adapter.prepare_texts(batch["caption"])
    describes = module._describes(batch, list(batch["caption"]))
    assert describes.diagonal().all() and describes.sum() > len(describes)  # several positives in some rows
    expected = itc_loss(
        adapter.embed_images(pixels), adapter.embed_texts(tokens), adapter.logit_scale, positives=describes
    )
    assert spy.logged["train/itc_loss"] == pytest.approx(expected.item(), rel=1e-5)
    plain = _module("vanilla")
    plain_spy = _Spy(plain)
    plain.training_step(batch, 0)
    assert "train/itc_loss" not in plain_spy.logged


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")
def test_a_step_encodes_each_image_and_tokenises_each_caption_once_for_mlm_itc_and_itm():
    """One vision pass over the B images; the text layers once over the B masked captions (MLM) and once over
    the B captions, which ITC and ITM share."""
    module = _module("vanilla", itc_weight=0.5)
    _Spy(module)
    passes: list[int] = []
    module.adapter.model.visual_encoder.patch_embed.register_forward_hook(
        lambda layer, inputs, output: passes.append(len(output))
    )
    text_passes: list[int] = []
    module.adapter.model.text_encoder.bert.embeddings.register_forward_hook(
        lambda layer, inputs, output: text_passes.append(len(output))
    )
    prepared: list[int] = []
    prepare_texts = module.adapter.prepare_texts
    module.adapter.prepare_texts = lambda texts: prepared.append(len(texts)) or prepare_texts(texts)
    batch = _batch()
    module.training_step(batch, 0).backward()
    n = len(batch["caption"])
    assert passes == [n] and prepared == [n] and text_passes == [n, n]


def test_dropout_method_raises_every_dropout_layer_and_others_leave_them():
    raised = _module("dropout", dropout=0.4)
    layers = [m for m in raised.adapter.modules() if isinstance(m, torch.nn.Dropout)]
    assert layers and all(layer.p == 0.4 for layer in layers)
    default = [m.p for m in load("albef", tiny=True, options=TINY).modules() if isinstance(m, torch.nn.Dropout)]
    assert [m.p for m in _module("vanilla").adapter.modules() if isinstance(m, torch.nn.Dropout)] == default


# -- image-counterfactual policies ------------------------------------------------------------------
def _policy(policy: str, k: int) -> tuple[TrainingImageCounterfactuals, list[int]]:
    adapter = load("albef", tiny=True, options=TINY)
    images = TrainingImageCounterfactuals(
        adapter, ["man", "woman"], SwapLexicon.default(), AttackConfig(steps=1), policy, k
    )
    sizes: list[int] = []
    attack = images._attack
    images._attack = lambda pixels: sizes.append(len(pixels)) or attack(pixels)
    return images, sizes


def test_every_n_steps_attacks_every_kth_batch_only():
    images, sizes = _policy("every_n_steps", 3)
    pixels = torch.rand(4, 3, 32, 32)
    made = [images(pixels, step) for step in range(6)]
    assert [m is not None for m in made] == [True, False, False, True, False, False] and sizes == [4, 4]


def test_cached_attacks_each_image_once_per_model_version():
    images, sizes = _policy("cached", 2)
    first, second = torch.rand(2, 3, 32, 32), torch.rand(2, 3, 32, 32)
    a = images(first, 0)
    b = images(torch.cat([first, second]), 1)  # same version: only the new images are attacked
    c = images(first, 2)  # new version: attacked again
    assert sizes == [2, 2, 2]
    assert a.attacked.all() and b.attacked.tolist() == [False, False, True, True] and c.attacked.all()
    assert torch.equal(b.pixels[:2], a.pixels)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [-0.5, 1.01])
def test_alpha_outside_unit_interval_is_refused(alpha):
    with pytest.raises(
        ConfigError, match=r"FairVLP method option `alpha` to be a number v>=0 and v<=1 or null but got"
    ):
        _module("fairvlp", alpha=alpha)


@pytest.mark.parametrize("weight", [-0.1, True])
def test_a_negative_or_boolean_itc_weight_is_refused(weight):
    with pytest.raises(ConfigError, match=r"Expected FairVLP option `itc_weight` to be a number v>=0 but got"):
        _module("vanilla", itc_weight=weight)


def test_unknown_method_policy_and_bias_words_without_counterparts_are_refused():
    with pytest.raises(ConfigError, match="`name` to be one of 'vanilla', 'dropout'"):
        _module("fair")
    with pytest.raises(ConfigError, match="`image_counterfactuals` to be one of 'every_step'"):
        _module("fairvlp", image_counterfactuals="sometimes")
    with pytest.raises(ConfigError, match="no counterpart among them: \\['man', 'person'\\]"):
        FairVLP(method=FairVLPMethod("fairvlp_v"), model=TINY_ALBEF, groups=["man", "person"])


@pytest.mark.parametrize(
    "method, settings, unused",
    [
        ("vanilla", {"image_counterfactuals": "cached"}, "`image_counterfactuals`"),  # issue 44's case
        ("vanilla", {"alpha": 0.5, "lexicon": "swaps.yaml"}, "`alpha`, `lexicon`"),
        (
            "gender_swap",
            {"counterfactual_targets": "factual", "attack": {"steps": 1}},
            "`counterfactual_targets`, `attack`",
        ),
        ("fairvlp", {"image_counterfactuals": "every_step", "k": 4}, "`k`"),
        ("fairvlp_l", {"dropout": 0.1}, "`dropout`"),
    ],
)
def test_a_setting_the_method_does_not_read_is_refused_by_name(method, settings, unused):
    with pytest.raises(ConfigError, match=f"FairVLP method '{method}' does not use {unused} \\(read: "):
        FairVLPMethod(method, **settings)


def test_a_bad_value_is_refused_whichever_the_method():
    with pytest.raises(ConfigError, match="`image_counterfactuals` to be one of 'every_step'"):
        FairVLPMethod("vanilla", image_counterfactuals="sometimes")
    with pytest.raises(ConfigError, match="Unknown attack option `stepz`; did you mean `steps`"):
        FairVLPMethod("visual_swap", attack={"stepz": 1})


def test_switching_a_configs_method_nulls_what_the_new_method_does_not_read():
    configured = {"name": "fairvlp", "alpha": 0.3, "image_counterfactuals": "cached", "k": 128, "attack": {"steps": 5}}
    switched = FairVLPMethod(**{**configured, **switch_method("fairvlp_l", counterfactual_targets="swapped")})
    assert switched == FairVLPMethod("fairvlp_l", alpha=0.3, counterfactual_targets="swapped")  # the config's alpha
    every_step = FairVLPMethod(**{**configured, **switch_method("visual_swap", image_counterfactuals="every_step")})
    assert every_step == FairVLPMethod("visual_swap", image_counterfactuals="every_step", attack={"steps": 5})


def test_settings_left_out_take_their_defaults_where_the_method_reads_them():
    assert FairVLPMethod("fairvlp").with_defaults() == FairVLPMethod(
        "fairvlp", alpha=0.5, counterfactual_targets="factual", image_counterfactuals="every_n_steps", k=4
    )
    assert FairVLPMethod("dropout").with_defaults() == FairVLPMethod("dropout", dropout=0.3)
    assert FairVLPMethod("vanilla").with_defaults() == FairVLPMethod("vanilla")
    every_step = FairVLPMethod("visual_swap", image_counterfactuals="every_step").with_defaults()
    assert every_step.k is None and every_step.alpha is None


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")
def test_an_empty_caption_is_refused_by_index():
    batch = _batch(4)
    batch["caption"] = ["the man is cooking.", "  ", "someone is sewing.", ""]
    with pytest.raises(InputError, match=r"non-empty captions but captions \[1, 3\]"):
        _module("fairvlp_l").training_step(batch, 0)


# -- fit through the CLI -----------------------------------------------------------------------------
SMALL = [
    "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
    "--model.init_args.model.tiny_sizes", "{image_size: 32, patch_size: 8}",
    "--data.init_args.image_size", "32", "--data.init_args.n_train", "16",
    "--data.init_args.eval_per_combination", "1", "--data.init_args.batch_size", "8",
]  # fmt: skip


def _method_group(method: str) -> str:
    """``--model.init_args.method`` switching the config to ``method``, with a one-step attack for the image methods."""
    return json.dumps(switch_method(method, **({"attack": {"steps": 1}} if uses_images(method) else {})))  # YAML


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("method", sorted(METHODS))
def test_fast_dev_run_of_every_method(method, tmp_path):
    main(["fit", "--config", str(CONFIG), "--trainer.fast_dev_run", "true", "--model.init_args.method",
          _method_group(method), "--trainer.default_root_dir", str(tmp_path), *SMALL])  # fmt: skip


@pytest.mark.filterwarnings("ignore")
def test_the_exported_model_reloads_and_measures(tmp_path, run_cli):
    main(
        ["fit", "--config", str(CONFIG), "--trainer.max_epochs", "1", "--trainer.callbacks", "[]",
         "--trainer.enable_checkpointing", "false", "--trainer.logger.init_args.save_dir", str(tmp_path), *SMALL,
         "--model.init_args.method.attack", "{steps: 1}"]
    )  # fmt: skip
    exported = tmp_path / "fairvlp_biasworld" / "version_0" / "model"
    adapter = load("albef", checkpoint=str(exported))
    assert adapter.transform.image_size == 32
    code, _, err = run_cli(
        ["measure", "--suite", "counterbias", "--model", "albef", "--checkpoint", str(exported),
         "--out", str(tmp_path / "measured"), "--biasworld.image_size", "32", "--biasworld.eval_per_combination", "1",
         "--suite_options", "{templates: [Sw/O], statistics: {n_bootstrap: 20}, attack: {steps: 1}, require_attack_success: false}"]
    )  # fmt: skip
    assert code == 0, err
    results = read_results(tmp_path / "measured" / "counterbias.json")
    assert results.checkpoint == str(exported) and "activity/B@V-L/avg" in results.metrics
