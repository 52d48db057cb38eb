"""BiasWorldDataModule takes the world's options as BiasWorld declares them (one declaration), and records every
option, defaults included, in its hyperparameters."""

import pytest
from jsonargparse import ArgumentParser
from lightning.pytorch import LightningDataModule

from vlbias.data.biasworld import BiasWorld
from vlbias.data.biasworld_datamodule import BiasWorldDataModule
from vlbias.errors import ConfigError

CLASS_PATH = "vlbias.data.biasworld_datamodule.BiasWorldDataModule"


def test_the_world_options_reach_the_world_and_every_option_is_a_hyperparameter():
    module = BiasWorldDataModule(batch_size=4, bias_strength=0.9, n_train=8, eval_per_combination=1)
    world = BiasWorld(bias_strength=0.9, n_train=8, eval_per_combination=1)
    assert module.world.config == world.config
    assert dict(module.hparams) == {**world.config, "batch_size": 4, "num_workers": 0, "predict_split": "test"}
    assert [item.caption for item in module.world.items("test")] == [item.caption for item in world.items("test")]
    with pytest.raises(ConfigError, match=r"Expected `bias_strength` in \[0, 1\] but got 2"):
        BiasWorldDataModule(bias_strength=2)


def test_lightning_cli_reads_the_world_options_from_biasworld_with_their_help(capsys):
    parser = ArgumentParser()
    parser.add_subclass_arguments(LightningDataModule, "data")
    config = parser.parse_args(["--data", CLASS_PATH, "--data.init_args.n_train", "16", "--data.init_args.seed", "3"])
    assert config.data.init_args.n_train == 16 and config.data.init_args.bias_strength == 0.5
    module = parser.instantiate_classes(config).data
    assert (module.world.n_train, module.world.seed, module.hparams.seed) == (16, 3, 3)
    with pytest.raises(SystemExit):
        parser.parse_args(["--data.help", CLASS_PATH])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--data.bias_strength BIAS_STRENGTH probability that a training item's activity" in help_text
    assert "--data.batch_size BATCH_SIZE items per batch." in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", CLASS_PATH, "--data.init_args.n_trian", "16"])
    assert "n_trian" in capsys.readouterr().err
