"""DebiasCLIP's prompt array as a LightningModule (``vlbias.modules.PromptArrayDebiasing``): it runs under
``vlbias fit`` from its experiment config, trains the prompts and the adversary alone, exports a model that
``vlbias measure`` reads, refuses what it cannot train by name, and (slow) gives on two DDP processes what one
process gives."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from safetensors.torch import load_file

from vlbias.data.biasworld import ACTIVITIES, GROUPS, activity_phrases
from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.errors import ConfigError, InputError
from vlbias.models.registry import load
from vlbias.modules import ModelSpec, PromptArrayDebiasing

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "experiment" / "debiasclip_biasworld.yaml"
QUERIES = [activity_phrases(activity)[0] for activity in ACTIVITIES]  # "a person repairing." ...
TINY = ["--model.init_args.model", "{tiny: true, checkpoint: null}"]


def small(n_train: int, batch_size: int) -> list[str]:
    return [
        "--data.init_args.n_train", str(n_train), "--data.init_args.eval_per_combination", "1",
        "--data.init_args.batch_size", str(batch_size), "--trainer.enable_progress_bar", "false",
    ]  # fmt: skip


def test_the_experiment_config_runs_under_vlbias_fit_with_fast_dev_run(run_cli, tmp_path):
    save = ["--trainer.logger.init_args.save_dir", str(tmp_path)]
    code, _, err = run_cli(
        ["fit", "--config", str(CONFIG), *TINY, *small(32, 16), *save, "--trainer.fast_dev_run", "true"]
    )
    assert code == 0, err


def test_the_config_queries_are_biasworlds_neutral_phrases_and_groups_its_labels():
    import yaml

    init = yaml.safe_load(CONFIG.read_text())["model"]["init_args"]
    assert init["queries"] == QUERIES and init["groups"] == list(GROUPS)


def test_the_config_debiases_the_checkpoint_given_on_the_command_line(tmp_path):
    """As the config's "Run me" says: the quickstart's export, given by path alone, is the frozen inner CLIP."""
    from vlbias.commands.lightning_cli import make_cli

    clip = load("clip", tiny=True, device="cpu")
    clip.save_pretrained(tmp_path / "model")
    given = ["--model.init_args.model.checkpoint", str(tmp_path / "model")]
    cli = make_cli(["--config", str(CONFIG), *given, *small(8, 8)], run=False)
    assert cli.model.spec.checkpoint == str(tmp_path / "model") and not cli.model.spec.tiny
    inner = cli.model.adapter.inner.model.state_dict()
    assert all(torch.equal(value, inner[name]) for name, value in clip.model.state_dict().items())


def test_the_config_builds_an_optimizer_for_the_prompts_and_one_for_the_adversary():
    from vlbias.commands.lightning_cli import make_cli

    cli = make_cli(["--config", str(CONFIG), *TINY, *small(8, 8)], run=False)
    prompts, adversary = cli.model.configure_optimizers()
    assert [type(prompts), type(adversary)] == [torch.optim.Adam, torch.optim.Adam]
    assert prompts.param_groups[0]["params"] == [cli.model.adapter.prompts]
    assert adversary.param_groups[0]["params"] == list(cli.model.adversary.parameters())
    assert prompts.defaults["lr"] == adversary.defaults["lr"] == 0.01


def fitted(tmp_path: Path, **options) -> tuple[PromptArrayDebiasing, PromptArrayDebiasing]:
    """A module before and after one epoch of 4 steps on BiasWorld (and a log dir with the export)."""
    module = PromptArrayDebiasing(queries=QUERIES, groups=list(GROUPS), **options)
    before = {name: value.detach().clone() for name, value in module.state_dict().items()}
    trainer = L.Trainer(
        accelerator="cpu", max_epochs=1, limit_val_batches=1, num_sanity_val_steps=0, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=tmp_path, logger=L.pytorch.loggers.CSVLogger(tmp_path),
    )  # fmt: skip
    trainer.fit(module, datamodule=BiasWorldDataModule(n_train=32, eval_per_combination=1, batch_size=8))
    return module, before


def test_only_the_prompts_and_the_adversary_train_and_the_export_measures(tmp_path, run_cli):
    module, before = fitted(tmp_path, adversary_steps=2)
    after = module.state_dict()
    moved = sorted(name for name in after if not torch.equal(after[name], before[name]))
    assert moved and set(moved) == {"adapter.prompts", *(n for n in after if n.startswith("adversary."))}
    assert module.trainer.fit_loop.epoch_loop.manual_optimization.optim_step_progress.total.completed == 4 * 3
    logged = module.trainer.logged_metrics
    for key in ("train/adversary_loss", "train/itc_loss", "train/loss", "val/loss", "val/adversary_accuracy"):
        assert torch.isfinite(logged[key]), key
    exported = Path(module.trainer.log_dir) / "model"
    restored = load("prompt_array", checkpoint=exported, device="cpu")
    torch.testing.assert_close(restored.prompts, module.adapter.prompts.detach(), rtol=0, atol=0)
    out = tmp_path / "measured"
    code, _, err = run_cli(
        ["measure", "--model", "prompt_array", "--checkpoint", str(exported), "--suite", "mmbias",
         "--data", "biasworld", "--biasworld.eval_per_combination", "2", "--out", str(out)]
    )  # fmt: skip
    assert code == 0, err
    assert (out / "mmbias.json").is_file()


def test_what_it_cannot_train_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"model 'clip'\) but got model 'open_clip'"):
        PromptArrayDebiasing(queries=QUERIES, groups=list(GROUPS), model=ModelSpec("open_clip", tiny=True))
    with pytest.raises(ConfigError, match="cannot read these `queries` as written: 'zebra crossing' "):
        PromptArrayDebiasing(queries=[*QUERIES, "zebra crossing"], groups=list(GROUPS))
    with pytest.raises(ConfigError, match="at least two groups but got \\['man'\\]"):
        PromptArrayDebiasing(queries=QUERIES, groups=["man"])
    with pytest.raises(ConfigError, match="`lam`"):
        PromptArrayDebiasing(queries=QUERIES, groups=list(GROUPS), lam=-0.5)
    module = PromptArrayDebiasing(queries=QUERIES, groups=list(GROUPS), group_label_key="gender")
    with pytest.raises(InputError, match=r"reads batch keys \['gender'\] .* but the batch has \['caption', 'group'"):
        module.training_step({"pixel_values": torch.rand(2, 3, 64, 64), "caption": ["a", "b"], "group": [0, 1]}, 0)


def vlbias(*argv: str) -> None:
    """``vlbias argv`` in a fresh process (DDP launches its other ranks from the command line)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "vlbias.cli", *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow  # two trainer launches, one of them two processes: ~1 min on 2 cores
def test_two_ddp_processes_train_the_prompts_one_process_trains(tmp_path):
    """16 training items: one process in one batch of 16, two (gloo) in a batch of 8 each, so every step sees
    the same items; the adversary's loss is a mean over images and the contrastive loss gathers both ranks'
    captions, so after 3 epochs the exported prompts agree to float rounding."""
    prompts = {}
    for processes, batch in ((1, 16), (2, 8)):
        save = tmp_path / f"p{processes}"
        vlbias(
            "fit", "--config", str(CONFIG), *TINY, *small(16, batch), "--trainer.max_epochs", "3",
            "--trainer.limit_val_batches", "1", "--trainer.callbacks", "[]", "--trainer.log_every_n_steps", "1",
            "--trainer.devices", str(processes), "--trainer.strategy", "ddp" if processes > 1 else "auto",
            "--trainer.logger.init_args.save_dir", str(save),
        )  # fmt: skip
        (model,) = save.glob("debiasclip_biasworld/version_*/model")
        prompts[processes] = load_file(str(model / "prompt_array.safetensors"))["prompts"]
        rows = list(csv.DictReader(next(model.parent.glob("metrics.csv")).open()))
        assert any(row.get("train/loss") for row in rows)
    start = load("clip", tiny=True, device="cpu").model.text_model.embeddings.token_embedding.weight[0].detach()
    assert (prompts[1] - start).abs().max() > 1e-3  # the prompts trained
    torch.testing.assert_close(prompts[2], prompts[1], rtol=0, atol=1e-5)
