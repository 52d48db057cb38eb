"""Masked-LM (+ ITM) pre-training: the masking, a short fit through the CLI, the export."""

import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from vlbias.cli import main
from vlbias.data.biasworld import BiasWorld
from vlbias.errors import CapabilityError, ConfigError
from vlbias.models.base import Capability
from vlbias.models.registry import load
from vlbias.modules.contrastive import ContrastivePretraining
from vlbias.modules.masked_lm import IGNORE_INDEX, MaskedLMPretraining, mask_tokens
from vlbias.modules.model_spec import ModelSpec
from vlbias.results import read_results

ROOT = Path(__file__).resolve().parents[2]
CLS, SEP, PAD, MASK = 2, 3, 0, 4


def _ids(rows: int = 400) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(10, 30, (rows, 8))
    ids[:, 0], ids[:, 6], ids[:, 7] = CLS, SEP, PAD
    return ids, torch.isin(ids, torch.tensor([CLS, SEP, PAD]))


def test_mask_tokens_forces_exactly_one_key_word_per_text_that_has_one():
    ids, special = _ids()
    ids[:200, 1:6] = 10  # no key word in the first half
    ids[200:, 2], ids[200:, 4] = 7, 8  # two key words in the second half
    _, labels, forced = mask_tokens(ids, special, torch.tensor([7, 8]), MASK, 30, mask_rate=0.0)
    assert forced[:200].sum() == 0
    assert forced[200:].sum(dim=1).tolist() == [1] * 200
    assert set(ids[forced].tolist()) == {7, 8}  # both key words get their turn
    assert torch.equal(labels != IGNORE_INDEX, forced)  # nothing else is chosen at rate 0
    assert torch.equal(labels[forced], ids[forced])


def test_mask_tokens_never_touches_special_tokens_and_replaces_80_10_10():
    ids, special = _ids(4000)
    generator = torch.Generator().manual_seed(0)
    masked, labels, _ = mask_tokens(ids, special, torch.tensor([], dtype=torch.long), MASK, 30, 1.0, generator)
    assert torch.equal(masked[special], ids[special]) and (labels[special] == IGNORE_INDEX).all()
    chosen = ~special  # rate 1: every other token is chosen
    assert torch.equal(labels[chosen], ids[chosen])
    became_mask = (masked[chosen] == MASK).float().mean().item()
    unchanged = (masked[chosen] == ids[chosen]).float().mean().item()  # the kept 10% (+ random draws equal to it)
    assert became_mask == pytest.approx(0.8, abs=0.01)
    assert unchanged == pytest.approx(0.1 + 0.1 / 30, abs=0.01)


def test_mask_tokens_rate_is_the_fraction_of_chosen_ordinary_tokens():
    ids, special = _ids(4000)
    _, labels, _ = mask_tokens(
        ids, special, torch.tensor([], dtype=torch.long), MASK, 30, 0.15, torch.Generator().manual_seed(1)
    )
    assert (labels[~special] != IGNORE_INDEX).float().mean().item() == pytest.approx(0.15, abs=0.01)


def test_a_model_without_fill_mask_is_refused():
    with pytest.raises(CapabilityError, match="FILL_MASK|fill_mask"):
        MaskedLMPretraining(model=ModelSpec("clip", tiny=True))


@pytest.mark.parametrize("module_class", [MaskedLMPretraining, ContrastivePretraining])
def test_adapter_options_are_checked_by_the_registry(module_class):
    with pytest.raises(ConfigError, match="needs a `checkpoint`"):
        module_class(model=ModelSpec("albef"))
    with pytest.raises(ConfigError, match=r"does not take option\(s\) \['hidden_sise'\] in tiny"):
        module_class(model=ModelSpec("albef", tiny=True, tiny_sizes={"hidden_sise": 16}))


def test_modules_train_the_adapter_in_training_mode():
    assert MaskedLMPretraining().adapter.training and ContrastivePretraining().adapter.training


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")
@pytest.mark.parametrize("model", ["albef", "vilt"])
def test_one_training_step_backpropagates_mlm_and_itm(model):
    module = MaskedLMPretraining(model=ModelSpec(model, tiny=True))
    assert module.use_itm  # both have MATCH
    dataset = BiasWorld(bias_strength=0.9, n_train=8, eval_per_combination=1).dataset("train")
    batch = torch.utils.data.default_collate([dataset[i] for i in range(8)])
    prepared: list[int] = []
    prepare_texts = module.adapter.prepare_texts
    module.adapter.prepare_texts = lambda texts: prepared.append(len(texts)) or prepare_texts(texts)
    loss = module.training_step(batch, 0)
    loss.backward()
    assert math.isfinite(loss.item()) and prepared == [8]  # the captions tokenised once for MLM and ITM
    grads = [p.grad for p in module.parameters() if p.requires_grad]
    assert sum(g is not None and bool(g.abs().sum() > 0) for g in grads) > len(grads) // 2


def test_fit_logs_the_losses_runs_counterbias_and_exports_a_loadable_model(tmp_path):
    main(
        [
            "fit",
            "--config", str(ROOT / "configs/experiment/biasworld_mlm.yaml"),
            "--trainer.max_epochs", "3",
            "--trainer.log_every_n_steps", "1",
            "--trainer.logger.init_args.save_dir", str(tmp_path),
            "--trainer.enable_progress_bar", "false",
            "--trainer.enable_checkpointing", "false",
            "--trainer.callbacks.init_args.every_n_epochs", "3",
            "--model.init_args.optimizer.init_args.lr", "0.003",
            "--data.init_args.n_train", "256",
            "--data.init_args.eval_per_combination", "2",
            "--data.init_args.batch_size", "32",
        ]
    )  # fmt: skip
    run = tmp_path / "biasworld_mlm" / "version_0"
    metrics = pd.read_csv(run / "metrics.csv")
    train = metrics["train/mlm_loss"].dropna()
    val = metrics["val/mlm_loss"].dropna()  # fixed validation masks: comparable across epochs
    assert len(train) == 3 * 8 and len(val) == 3
    assert train.map(math.isfinite).all()
    assert val.iloc[-1] < val.iloc[0], f"validation MLM loss did not decrease: {val.tolist()}"
    assert metrics["val/mlm_accuracy"].dropna().between(0, 1).all()
    assert metrics["train/itm_loss"].dropna().map(math.isfinite).all()
    results = read_results(run / "bias" / "counterbias.json")  # the callback ran after epoch 3
    assert results.config["trainer_epoch"] == 2
    assert "activity/B@V-L/avg" in results.metrics
    adapter = load("albef", checkpoint=str(run / "model"), device="cpu")
    assert Capability.FILL_MASK in adapter.capabilities
    tokens = adapter.prepare_texts(["the [MASK] is cooking."])
    assert adapter.fill_mask_logits(adapter.no_image(1), tokens).shape == (1, 7, len(adapter.tokenizer))


@pytest.fixture(scope="module")
def labelled_module():
    return MaskedLMPretraining(
        groups=["man", "woman"],
        key_words=["cooking", "sewing", "juggling"],
        content_label_key="activity",
        group_label_key="group",
    )


def test_key_words_and_groups_come_from_configuration(labelled_module):
    tokenizer = labelled_module.adapter.tokenizer
    assert labelled_module._group_ids.tolist() == sorted(tokenizer.convert_tokens_to_ids(["man", "woman"]))
    expected = sorted(tokenizer.convert_tokens_to_ids(["man", "woman", "cooking", "sewing"]))  # 'juggling' is unknown
    assert labelled_module._key_ids.tolist() == expected
    assert MaskedLMPretraining()._key_ids.numel() == 0  # nothing is forced unless configured


def test_itm_labels_follow_the_configured_labels_and_else_only_identical_captions(labelled_module):
    captions = ["a man is cooking.", "someone is cooking.", "a woman is cooking.", "a man is sewing."]
    batch = {"activity": torch.tensor([0, 0, 0, 1]), "group": torch.tensor([0, 1, 1, 0])}
    order = torch.tensor([1, 2, 0, 0])  # image b is given caption order[b]
    # image 0 (man, cooking) gets "someone is cooking.": no group named, same activity -> still describes it;
    # image 1 (woman) gets "a woman is cooking." -> yes; image 2 (woman) gets "a man is cooking." -> no;
    # image 3 (sewing) gets a cooking caption -> no
    assert labelled_module._describes(batch, captions)[torch.arange(4), order].tolist() == [True, True, False, False]
    unlabelled = ["a man is cooking.", "a man is cooking.", "a woman is sewing."]
    describes = labelled_module._describes({}, unlabelled)
    assert describes[torch.arange(3), torch.tensor([1, 0, 2])].tolist() == [True, True, True]
    assert describes[torch.arange(3), torch.tensor([2, 0, 1])].tolist() == [False, True, False]


def test_a_tiny_model_takes_the_configured_vocabulary():
    module = MaskedLMPretraining(
        model=ModelSpec("albef", tiny=True, tiny_vocabulary=["a", "cat", "sits"]), groups=["cat"]
    )
    assert module.adapter.tokenizer.tokenize("a cat sits on a mat") == ["a", "cat", "sits", "[UNK]", "a", "[UNK]"]
    with pytest.raises(ConfigError, match="needs `tiny: true`"):
        ModelSpec("albef", checkpoint="unused", tiny_vocabulary=["a"])
