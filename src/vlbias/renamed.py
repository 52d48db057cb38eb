"""Keys that were renamed or moved: the old spelling -> what to write now.

A config file, a ``--key`` flag or an options mapping that still uses an old key is refused with one line naming
the new one (:func:`renamed_hint`). Keys are dotted paths as a user writes them: ``seed_everything`` (a
LightningCLI config), ``model.init_args.learning_rate`` (a training module's option), ``suite_options.n_bootstrap``
(an option of ``vlbias measure --suite_options``), or a ``class_path`` value that moved. When a change is listed
in ``CHANGELOG.md``, its keys are here. This module imports nothing.
"""

from __future__ import annotations

#: old dotted key -> the new key (or what to write instead), one line per renamed key.
RENAMED: dict[str, str] = {
    "seed_everything": "seed",
    # a suite's statistics settings are one nested object, vlbias.options.StatisticsOptions
    "suite_options.n_permutations": "suite_options.statistics.n_permutations",
    "suite_options.n_bootstrap": "suite_options.statistics.n_bootstrap",
    "suite_options.confidence": "suite_options.statistics.confidence",
    "suite_options.interval_method": "suite_options.statistics.interval_method",
    # training modules: the model block is one ModelSpec (`model: {name: clip, tiny: true}`), the optimizer's
    # arguments are its own (`optimizer: {class_path: torch.optim.AdamW, init_args: {lr: ..., weight_decay: ...}}`)
    "model.init_args.checkpoint": "model.init_args.model.checkpoint",
    "model.init_args.tiny": "model.init_args.model.tiny",
    "model.init_args.tiny_sizes": "model.init_args.model.tiny_sizes",
    "model.init_args.tiny_vocabulary": "model.init_args.model.tiny_vocabulary",
    "model.init_args.model_options": "model.init_args.model.options",
    "model.init_args.seed": "seed",
    "model.init_args.learning_rate": "model.init_args.optimizer.init_args.lr",
    "model.init_args.weight_decay": "model.init_args.optimizer.init_args.weight_decay",
    # FairVLP: the method and its settings are one group (`method: {name: fairvlp, alpha: 0.5, ...}`)
    "model.init_args.alpha": "model.init_args.method.alpha",
    "model.init_args.counterfactual_targets": "model.init_args.method.counterfactual_targets",
    "model.init_args.lexicon": "model.init_args.method.lexicon",
    "model.init_args.image_counterfactuals": "model.init_args.method.image_counterfactuals",
    "model.init_args.k": "model.init_args.method.k",
    "model.init_args.attack": "model.init_args.method.attack",
    "model.init_args.dropout": "model.init_args.method.dropout",
    # pruning: how the dimensions are chosen is one group (`pruning: {fraction: 0.1, theta_quantile: 0.9}`)
    "model.init_args.n_dims": "model.init_args.pruning.n_dims",
    "model.init_args.fraction": "model.init_args.pruning.fraction",
    "model.init_args.strategy": "model.init_args.pruning.strategy",
    "model.init_args.theta": "model.init_args.pruning.theta",
    "model.init_args.theta_quantile": "model.init_args.pruning.theta_quantile",
    "model.init_args.objective": "model.init_args.pruning.objective",
    "model.init_args.max_dims": "model.init_args.pruning.max_dims",
    "model.init_args.step": "model.init_args.pruning.step",
    # class paths: the data modules are named by the module that defines them
    "vlbias.data.BiasWorldDataModule": "vlbias.data.biasworld_datamodule.BiasWorldDataModule",
    "vlbias.data.CaptionDataModule": "vlbias.data.caption_datamodule.CaptionDataModule",
    # each model family is a module of vlbias.models.families (an FSDP config names ALBEF's layer class)
    "vlbias.models.albef_modeling.ALBEFLayer": "vlbias.models.families.albef_modeling.ALBEFLayer",
    # the scripts' options are their functions' parameters (vlbias.experiments.command_line), keyed <function>.<option>
    "bench_models.base-size": "bench_models.base_size",
    "bench_models.batch-size": "bench_models.batch_size",
    "bench_models.max-overhead": "bench_models.max_overhead",
    "bench_permutation.loop-permutations": "bench_permutation.loop_permutations",
    "bench_permutation.cold-runs": "bench_permutation.cold_runs",
    "bootstrap_coverage.effect-sizes": "bootstrap_coverage.effect_sizes",
    "bootstrap_coverage.n-bootstrap": "bootstrap_coverage.n_bootstrap",
}


def renamed_hint(key: str) -> str | None:
    """What to write instead of ``key`` (a dotted path, a prefix such as ``fit.`` removed), or ``None`` when
    ``key`` was not renamed. The longest listed suffix of ``key`` wins, so ``model.init_args.learning_rate``
    and ``learning_rate`` may be listed apart.

    Example:
        >>> RENAMED["example_old_key"] = "example_new_key"
        >>> renamed_hint("fit.example_old_key"), renamed_hint("unrelated")
        ('example_new_key', None)
        >>> del RENAMED["example_old_key"]
    """
    parts = key.split(".")
    for start in range(len(parts)):
        suffix = ".".join(parts[start:])
        if suffix in RENAMED:
            return RENAMED[suffix]
    return None
