"""Keys that were renamed or moved: the old spelling -> what to write now.

A config file, a ``--key`` flag or an options mapping that still uses an old key is refused with one line naming
the new one (:func:`renamed_hint`). Keys are dotted paths as a user writes them: ``seed_everything`` (a
LightningCLI config), ``model.init_args.learning_rate`` (a training module's option), ``suite_options.n_bootstrap``
(an option of ``vlbias measure --suite_options``). When a change is listed in ``CHANGELOG.md``, its keys are here.
This module imports nothing.
"""

from __future__ import annotations

#: old dotted key -> the new key (or what to write instead), one line per renamed key.
RENAMED: dict[str, str] = {
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
