"""CounterfactualConsistencyTuning: its loss is the answers' loss plus lambda times the consistency of the factual and
counterfactual answer distributions (each term by the project's own functions, on the same scores); with LoRA only
the adapter trains and the export is the merged model, which transformers alone loads with the trained logits; the
experiment config trains every chat family with fast_dev_run; bad choices are one line each."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForImageTextToText

from vlbias.commands.lightning_cli import make_cli
from vlbias.data.biasworld_qa import BiasWorldQA, collate_questions
from vlbias.data.biasworld_qa_options import BiasWorldQAOptions
from vlbias.errors import ConfigError
from vlbias.mitigation.chat_lora import MERGE_FILE, LoraOptions
from vlbias.models.catalog import models_with
from vlbias.modules.chat_answer_tuning import ChatAnswerTuning
from vlbias.modules.counterfactual_consistency import CounterfactualConsistencyTuning
from vlbias.modules.model_spec import ModelSpec
from vlbias.objectives.answer_consistency import answer_consistency_loss
from vlbias.objectives.answer_likelihood import answer_nll
from vlbias.results import read_results

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "experiment" / "biasworld_qa_consistency.yaml"


def batch(n: int = 3) -> dict:
    world = BiasWorldQA(BiasWorldQAOptions(n_train=n, eval_per_combination=1))
    return collate_questions([world.dataset("train")[i] for i in range(n)])


@pytest.mark.parametrize("divergence, gradient", [("kl", "both"), ("js", "factual")])
def test_the_loss_is_the_answer_loss_plus_lambda_times_the_consistency(divergence, gradient):
    torch.manual_seed(0)
    module = CounterfactualConsistencyTuning(consistency_weight=0.7, divergence=divergence, gradient=gradient)
    module.eval()  # no dropout: the same scores on every call
    questions = batch()
    loss = module._step(questions, "train")
    factual = module.option_log_probs(questions)
    counterfactual = module.option_log_probs(questions, "counterfactual_image")
    answer = questions["answer_index"]
    expected = answer_nll(factual.log_prob, factual.n_tokens, answer) + 0.7 * answer_consistency_loss(
        factual.log_prob, counterfactual.log_prob, None, divergence, gradient
    )
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-7)
    assert factual.log_prob.shape == counterfactual.log_prob.shape == (3, 3)
    assert not torch.allclose(factual.log_prob, counterfactual.log_prob)  # the swapped figure moves the scores


def test_lambda_zero_is_instruction_tuning():
    questions = batch()
    torch.manual_seed(0)
    plain = ChatAnswerTuning().eval()
    torch.manual_seed(0)
    consistent = CounterfactualConsistencyTuning(consistency_weight=0.0).eval()
    torch.testing.assert_close(consistent._step(questions, "train"), plain._step(questions, "train"))


def fit(tmp_path, *extra):
    cli = make_cli(
        ["--config", str(CONFIG), "--data.init_args.n_train", "4", "--data.init_args.eval_per_combination", "1",
         "--data.init_args.batch_size", "2", "--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path),
         *extra],
        run=False,
    )  # fmt: skip
    cli.trainer.fit(cli.model, cli.datamodule)
    return cli


def test_lora_trains_the_adapter_only_and_exports_the_merged_model(tmp_path):
    cli = fit(tmp_path, "--trainer.max_steps", "2", "--trainer.limit_val_batches", "0",
              "--trainer.logger", "lightning.pytorch.loggers.CSVLogger",
              "--trainer.logger.init_args.save_dir", str(tmp_path))  # fmt: skip
    module = cli.model
    exported = Path(cli.trainer.log_dir) / "model"
    assert (exported / MERGE_FILE).is_file() and module.lora is None  # merged at the end of fit
    assert not any("lora_" in name for name, _ in module.named_parameters())  # merged: no LoRA layer is left
    adapter = module.adapter.eval()
    questions = batch(2)
    prompts = [module.prompt(q, list(o)) for q, o in zip(questions["question"], questions["options"], strict=True)]
    inputs = adapter.prompt_inputs(questions["image"], prompts)
    loaded = AutoModelForImageTextToText.from_pretrained(exported).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).logits, adapter.model(**inputs).logits, rtol=1e-5, atol=1e-5)


def test_only_the_lora_weights_take_gradients():
    module = CounterfactualConsistencyTuning(lora=LoraOptions(rank=2))
    trained = [name for name, p in module.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in name for name in trained)
    module._step(batch(2), "train").backward()
    assert all(p.grad is not None for p in module.parameters() if p.requires_grad)
    assert all(p.grad is None for p in module.parameters() if not p.requires_grad)


@pytest.mark.parametrize("family", models_with("answer"))
def test_the_config_trains_each_chat_family_with_fast_dev_run(tmp_path, family):
    cli = fit(tmp_path, "--model.init_args.model.name", family, "--trainer.fast_dev_run", "true")
    assert cli.trainer.state.finished and torch.isfinite(cli.trainer.callback_metrics["train/loss"])


@pytest.mark.parametrize(
    "options, match",
    [
        ({"consistency_weight": -1.0}, r"Expected `consistency_weight` >= 0 but got -1.0"),
        ({"divergence": "cosine"}, r"Expected `divergence` to be one of \['kl', 'symmetric_kl', 'js'\]"),
        ({"lora": LoraOptions(target_modules=("not_a_layer",))}, r"LoRA target modules \['not_a_layer'\] are not"),
    ],
)
def test_bad_choices_are_one_line(options, match):
    with pytest.raises(ConfigError, match=match):
        CounterfactualConsistencyTuning(model=ModelSpec("llava", tiny=True), **options)


def test_the_bias_callback_measures_the_chat_suites_on_the_worlds_val_split(tmp_path):
    cli = fit(tmp_path, "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "1",
              "--trainer.limit_val_batches", "1", "--trainer.num_sanity_val_steps", "0")  # fmt: skip
    logged = cli.trainer.callback_metrics
    for name in ("bias/bias_qa/bias_ambiguous", "bias/bias_qa/accuracy_disambiguated",
                 "bias/counterfactual_answers/max_change"):  # fmt: skip
        assert name in logged and torch.isfinite(logged[name])
    results = read_results(tmp_path / "bias" / "bias_qa.json")
    assert (
        results.config["suite_config"]["data"]
        == {"data": "biasworld_qa", "split": "val", **results.config["suite_config"]["data"]}
        and results.n_items == 54
    )


def vlbias_process(*argv: str) -> None:
    """``vlbias argv`` in a fresh process (DDP launches its other ranks from the command line)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "vlbias.cli", *argv], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow  # two trainer launches, one of them two processes: ~1 min on 2 cores
def test_two_ddp_processes_train_the_lora_weights_one_process_trains(tmp_path):
    """8 training questions: one process in one batch of 8, two (gloo) in a batch of 4 each, so every step sees the
    same questions; the answers' loss is divided by the mean over ranks of their answer tokens and the consistency
    is a mean over equal halves, so the merged exports agree to float rounding."""
    weights = {}
    for processes, batch_size in ((1, 8), (2, 4)):
        save = tmp_path / f"p{processes}"
        vlbias_process(
            "fit", "--config", str(CONFIG), "--data.init_args.n_train", "8", "--data.init_args.batch_size",
            str(batch_size), "--data.init_args.eval_per_combination", "1", "--trainer.max_epochs", "2",
            "--trainer.limit_val_batches", "0", "--trainer.callbacks", "[]", "--trainer.accelerator", "cpu",
            "--trainer.devices", str(processes), "--trainer.strategy", "ddp" if processes > 1 else "auto",
            "--trainer.logger.init_args.save_dir", str(save),
        )  # fmt: skip
        (model,) = save.glob("biasworld_qa_consistency/version_*/model")
        weights[processes] = AutoModelForImageTextToText.from_pretrained(model).state_dict()
    start = CounterfactualConsistencyTuning(model=ModelSpec("llava", tiny=True)).adapter.model.state_dict()
    changed = [name for name in start if not torch.equal(start[name], weights[1][name])]
    assert changed and all("self_attn" in name for name in changed)  # only the merged LoRA layers moved
    for name in changed:
        torch.testing.assert_close(weights[2][name], weights[1][name], rtol=0, atol=1e-5)
