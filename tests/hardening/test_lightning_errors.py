"""``vlbias fit|validate|test|predict`` answer bad input as ``vlbias measure`` does: one ``vlbias: error:`` line,
exit status 2, nothing printed before it (no usage block, no "Seed set to 0"), the closest names of a misspelt
key, the new name of a renamed one, and no abbreviated long options.

The cases run in this process (``run_cli``); one of each kind also runs as a user would, in a fresh process
(:func:`fit_in_a_new_process`), where Lightning's own log lines would reach stderr."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vlbias.commands.lightning_cli import check_checkpoint
from vlbias.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "experiment" / "quickstart.yaml"


@pytest.fixture
def fit(run_cli):
    """``fit(*argv)``: ``vlbias fit --config <quickstart> *argv`` in this process -> (status, stdout, stderr)."""
    return lambda *argv: run_cli(["fit", "--config", str(QUICKSTART), *argv])


def fit_in_a_new_process(*argv: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "vlbias.cli", "fit", "--config", str(QUICKSTART), *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


def assert_only_the_error(result: tuple[int, str, str], *fragments: str) -> None:
    code, out, err = result
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and err.startswith("vlbias: error: "), err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--trainer.max_epoch", "1"], ["Unknown option `--trainer.max_epoch`", "did you mean `--trainer.max_epochs`"]),
        (["--trainr.max_epochs", "1"], ["Unknown option `--trainr.max_epochs`"]),
        (
            ["--data.init_args.bias_strenght", "0.3"],
            [
                "`data.init_args.bias_strenght` of vlbias.data.biasworld_datamodule.BiasWorldDataModule",
                "`bias_strength`",
            ],
        ),
        (["--data.init_args.n_train", "many"], ["`data.init_args.n_train`", "but got many"]),
        (["--trainer.max_epochs", "-3"], ["`max_epochs` must be a non-negative integer"]),
        (["--seed_everything", "3"], ["`--seed_everything` was renamed: write `seed` instead"]),
    ],
    ids=["abbreviation", "misspelt_section", "misspelt_init_arg", "wrong_type", "lightning_refusal", "renamed"],
)
def test_a_bad_flag_is_one_line(argv, fragments, fit):
    assert_only_the_error(fit(*argv), *fragments)


def test_a_missing_config_file_names_the_closest_file(fit):
    assert_only_the_error(fit("--config", str(QUICKSTART.with_suffix(".yml"))), "does not exist", "quickstart.yaml")


def test_a_config_file_with_an_old_or_misspelt_key_is_one_line(tmp_path, fit):
    old = tmp_path / "old.yaml"
    old.write_text("seed_everything: 3\n")
    assert_only_the_error(fit("--config", str(old)), "`seed_everything` was renamed: write `seed` instead")
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("trainer:\n  max_epoks: 3\n")
    assert_only_the_error(fit("--config", str(misspelt)), "Unknown key `trainer.max_epoks`", "`trainer.max_epochs`")


def test_a_checkpoint_that_is_not_one_is_refused_before_lightning_reads_it(tmp_path, fit):
    noise = tmp_path / "noise.ckpt"
    noise.write_bytes(bytes(range(256)) * 8)
    assert_only_the_error(fit("--ckpt_path", str(noise)), "noise.ckpt' cannot be read", "not a Lightning checkpoint")
    torch.save({"state_dict": {"w": torch.zeros(3)}, "hyper_parameters": {"a": 1}}, tmp_path / "whole.ckpt")
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes((tmp_path / "whole.ckpt").read_bytes()[:200])
    assert_only_the_error(fit("--ckpt_path", str(truncated)), "truncated.ckpt' cannot be read", "truncated")


def test_the_checkpoint_of_another_module_is_refused_by_name(tmp_path, fit):
    other = tmp_path / "mlm.ckpt"
    hyper = {"_class_path": "vlbias.modules.MaskedLMPretraining"}
    torch.save({"state_dict": {}, "hyper_parameters": hyper}, other)
    with pytest.raises(ConfigError, match="is of vlbias.modules.MaskedLMPretraining, but the config asks for"):
        check_checkpoint(other, "vlbias.modules.ContrastivePretraining")
    check_checkpoint(other, "vlbias.modules.MaskedLMPretraining")  # its own module: accepted
    assert_only_the_error(fit("--ckpt_path", str(other)), "mlm.ckpt' is of vlbias.modules.MaskedLMPretraining")


def test_a_resumed_run_whose_config_changes_the_module_is_refused_naming_the_setting(tmp_path, fit):
    """Lightning restores a checkpoint's module settings over the config's: a changed one would be dropped."""
    short = ["--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "1", "--trainer.callbacks", "[]"]
    short += ["--trainer.logger.init_args.save_dir", str(tmp_path)]
    code, _, err = fit("--trainer.max_epochs", "1", *short)
    assert code == 0, err
    (checkpoint,) = tmp_path.glob("quickstart/version_0/checkpoints/*.ckpt")
    resume = ["--trainer.max_epochs", "2", *short, "--ckpt_path", str(checkpoint)]
    assert_only_the_error(
        fit(*resume, "--model.init_args.model.tiny_sizes", "{projection_dim: 32}"),
        "`model.init_args.model.tiny_sizes` is {'projection_dim': 32} here, None there",
        "without --ckpt_path",
    )
    assert_only_the_error(
        fit(*resume, "--model.init_args.optimizer.init_args.lr", "0.1"),
        "`model.init_args.optimizer.init_args.lr` is 0.1 here, 0.003 there",
    )
    code, _, err = fit(*resume)  # the settings it was saved with: resumed
    assert code == 0, err
    assert len(list(tmp_path.glob("quickstart/version_*"))) == 2  # the refusals left no run folder


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU config runs where there is a GPU")
def test_a_gpu_config_on_a_machine_without_one_says_how_to_run_on_the_cpu(fit):
    assert_only_the_error(fit("--trainer.accelerator", "gpu"), "configs/trainer/cpu.yaml")


def test_a_class_path_that_moved_is_named_with_its_new_path(tmp_path, fit):
    old = tmp_path / "old_data.yaml"
    old.write_text("data:\n  class_path: vlbias.data.BiasWorldDataModule\n")
    assert_only_the_error(
        fit("--config", str(old)), "`vlbias.data.BiasWorldDataModule` was renamed", "biasworld_datamodule"
    )


def test_a_class_path_that_moved_inside_a_strategy_is_named_with_its_new_path(tmp_path, fit):
    """An FSDP run's saved config.yaml names ALBEF's layer class by the module it had before models/families/."""
    old = tmp_path / "config.yaml"
    old.write_text((ROOT / "configs" / "trainer" / "fsdp.yaml").read_text().replace(".families.", "."))
    assert_only_the_error(
        fit("--config", str(old)),
        "`vlbias.models.albef_modeling.ALBEFLayer` was renamed: write `vlbias.models.families.albef_modeling.ALBEFLayer`",
    )


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--trainer.max_epoch", "1"], id="refused_by_the_parser"),
        # Lightning imported and the seed set before the refusal: ~14 s on 2 cores
        pytest.param(["--trainer.max_epochs", "-3"], id="refused_by_lightning_after_seeding", marks=pytest.mark.slow),
    ],
)
def test_in_a_new_process_nothing_is_printed_before_the_error(argv):
    assert_only_the_error(fit_in_a_new_process(*argv))
