"""ChatAnswerTuning: the loss is the answer tokens' cross-entropy with the prompt masked (by hand on a tiny batch),
its option scores carry gradients, and the experiment config trains with fast_dev_run."""

from pathlib import Path

import pytest
import torch
from torch.nn.functional import cross_entropy

from vlbias.commands.lightning_cli import make_cli
from vlbias.data.biasworld_qa import BiasWorldQA, collate_questions
from vlbias.data.biasworld_qa_options import BiasWorldQAOptions
from vlbias.errors import ConfigError
from vlbias.modules.chat_answer_tuning import ChatAnswerTuning
from vlbias.modules.model_spec import ModelSpec

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "experiment" / "biasworld_qa_answers.yaml"


def batch(n: int = 2) -> dict:
    world = BiasWorldQA(BiasWorldQAOptions(n_train=n, eval_per_combination=1))
    return collate_questions([world.dataset("train")[i] for i in range(n)])


@pytest.mark.parametrize("family", ["llava", "paligemma"])
def test_the_loss_is_the_answer_tokens_cross_entropy_with_the_prompt_masked(family):
    module = ChatAnswerTuning(model=ModelSpec(family, tiny=True))
    questions = batch()
    loss = module._step(questions, "train")
    adapter, total, count = module.adapter, torch.tensor(0.0), 0
    for k in range(2):  # one unpadded sequence per question: prompt tokens labelled -100, answer tokens kept
        options = list(questions["options"][k])
        inputs = adapter.prompt_inputs([questions["image"][k]], [module.prompt(questions["question"][k], options)])
        answer = torch.tensor([adapter.option_ids([questions["answer"][k]])[0]])
        ids = torch.cat([inputs["input_ids"], answer], dim=1)
        labels = torch.cat([torch.full_like(inputs["input_ids"], -100), answer], dim=1)
        joined = {**inputs, "input_ids": ids, "attention_mask": torch.ones_like(ids)}
        logits = adapter.model(**{**joined, **adapter.family.joined_inputs(inputs, answer)}).logits
        total = total + cross_entropy(logits[0, :-1], labels[0, 1:], ignore_index=-100, reduction="sum")
        count += answer.shape[1]
    torch.testing.assert_close(loss, total / count, rtol=1e-5, atol=1e-6)


def test_option_log_probs_carry_gradients_to_the_vision_tower():
    module = ChatAnswerTuning()
    questions = batch()
    scores = module.option_log_probs(questions, "counterfactual_image")
    assert scores.log_prob.shape == (2, 3)
    scores.log_prob.sum().backward()
    patches = [p.grad for name, p in module.adapter.model.named_parameters() if "patch_embedding" in name]
    assert patches and all(grad is not None and bool(grad.abs().sum()) for grad in patches)


def test_a_bad_template_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"Expected `template` to hold \{question\} and \{options\}"):
        ChatAnswerTuning(template="{question} only")


def test_the_experiment_config_trains_with_fast_dev_run(tmp_path):
    cli = make_cli(
        ["--config", str(CONFIG), "--data.init_args.n_train", "4", "--data.init_args.eval_per_combination", "1",
         "--data.init_args.batch_size", "2", "--trainer.fast_dev_run", "true", "--trainer.logger", "false",
         "--trainer.default_root_dir", str(tmp_path)],
        run=False,
    )  # fmt: skip
    optimizer = cli.model.configure_optimizers()
    assert type(optimizer) is torch.optim.AdamW and optimizer.defaults["lr"] == 0.003
    before = [p.detach().clone() for p in cli.model.parameters()]
    cli.trainer.fit(cli.model, cli.datamodule)
    assert cli.trainer.state.finished
    assert any(not torch.equal(a, b) for a, b in zip(before, cli.model.parameters(), strict=True))
    assert torch.isfinite(cli.trainer.callback_metrics["train/loss"])
