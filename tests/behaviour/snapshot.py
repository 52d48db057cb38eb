"""Behaviour kept to the digit: record every entry point's numbers on tiny models and BiasWorld, then compare.

    python -m tests.behaviour.snapshot record before.json      # on the code before a refactor
    python -m tests.behaviour.snapshot record after.json       # on the code after it
    python -m tests.behaviour.snapshot compare before.json after.json

Each case runs the ``vlbias`` console script as a user would (so it holds across internal changes): ``measure``
of every suite on a model that serves it, ``audit --tiny``, ``prune``, the quickstart fit (two epochs) and a
``fast_dev_run`` of every experiment config (the logged values and a checksum of the trained weights, written by
:class:`Dump`). ``compare`` lists every number that differs; a case whose command line changed on purpose
(a renamed option) is given in :data:`CASES` with its new spelling, and the numbers must still agree.
One thread everywhere, so float sums are taken in the same order.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import lightning.pytorch as pl
import torch
import yaml

from tests.data.corpus import write_karpathy_corpus

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
SMALL_WORLD = ["--biasworld.eval_per_combination", "4"]
QUICK = "{statistics: {n_permutations: 500, n_bootstrap: 100}}"

#: case -> the arguments of ``vlbias measure`` after ``--out``.
MEASURE_CASES = {
    "mmbias-clip": ["--suite", "mmbias", "--model", "clip", "--tiny", *SMALL_WORLD, "--suite_options", QUICK],
    "mmbias-albef-match": ["--suite", "mmbias", "--model", "albef", "--tiny", *SMALL_WORLD, "--suite_options",
                           "{probe: match, statistics: {n_permutations: 500, n_bootstrap: 100}}"],
    "counterbias-albef": ["--suite", "counterbias", "--model", "albef", "--tiny", *SMALL_WORLD, "--suite_options",
                          "{statistics: {n_permutations: 500, n_bootstrap: 100}, attack: {steps: 2}}"],
    "vlstereoset-clip": ["--suite", "vlstereoset", "--model", "clip", "--tiny", *SMALL_WORLD,
                         "--suite_options", "{statistics: {n_bootstrap: 100}}"],
    "vlstereoset-vilt": ["--suite", "vlstereoset", "--model", "vilt", "--tiny", *SMALL_WORLD,
                         "--suite_options", "{probe: match, statistics: {n_bootstrap: 100}}"],
    "entity_association-albef": ["--suite", "entity_association", "--model", "albef", "--tiny", *SMALL_WORLD,
                                 "--suite_options", "{statistics: {n_bootstrap: 100}}"],
    "retrieval_bias-clip": ["--suite", "retrieval_bias", "--model", "clip", "--tiny", *SMALL_WORLD,
                            "--suite_options", "{statistics: {n_bootstrap: 100}, k: [5, 10]}"],
    "weat-bert-seat": ["--suite", "weat", "--model", "bert", "--tiny", "--data", str(DATA / "seat"),
                       "--suite_options", "{statistics: {n_bootstrap: 100}}"],
    "weat-clip-seat": ["--suite", "weat", "--model", "clip", "--tiny", "--data", str(DATA / "seat"),
                       "--suite_options", "{source: embed, statistics: {n_permutations: 500, n_bootstrap: 100}}"],
}  # fmt: skip


class Dump(pl.Callback):
    """At the end of a fit, write the logged values and a checksum of the weights to ``$VLBIAS_SNAPSHOT``."""

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._dump(trainer, pl_module)

    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._dump(trainer, pl_module)

    def _dump(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        weights = [p.detach().double() for p in pl_module.parameters()]
        numbers = {key: float(value) for key, value in trainer.callback_metrics.items()}
        numbers["weights/sum"] = float(sum(w.sum() for w in weights))
        numbers["weights/abs_sum"] = float(sum(w.abs().sum() for w in weights))
        summary = (getattr(pl_module, "outcome", None) or {}).get("summary", {})  # a pruning run's choice
        numbers |= {f"summary/{key}": summary[key] for key in ("removed", "effect_sizes_after") if key in summary}
        Path(os.environ["VLBIAS_SNAPSHOT"]).write_text(json.dumps(numbers))


def _vlbias(args: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run([sys.executable, "-m", "vlbias.cli", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"vlbias {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def _numbers(results: Path) -> dict[str, object]:
    """metrics, intervals and p-values of a results JSON (keys prefixed)."""
    data = json.loads(results.read_text())
    found = {f"metrics/{k}": v for k, v in data["metrics"].items()}
    found |= {f"intervals/{k}": v for k, v in data["intervals"].items()}
    return found | {f"p_values/{k}": v for k, v in data["p_values"].items()}


def _fit(config: list[str], extra: list[str], work: Path, command: str = "fit") -> dict[str, object]:
    work.mkdir(parents=True, exist_ok=True)
    dump = work / "fit.json"
    env = {**os.environ, "VLBIAS_SNAPSHOT": str(dump)}
    args = [command, *config, *extra, "--trainer.default_root_dir", str(work), "--trainer.enable_progress_bar", "false"]
    _vlbias([*args, "--trainer.callbacks+=tests.behaviour.snapshot.Dump"], env)
    return json.loads(dump.read_text())


def _experiment_overrides(config: Path, work: Path) -> list[str]:
    """A fast_dev_run of ``config`` offline on a CPU: tiny models, a tiny Karpathy corpus for caption data."""
    section = yaml.safe_load(config.read_text())
    args = ["--trainer.fast_dev_run", "2", "--trainer.logger", "false"]
    if section.get("data", {}).get("class_path") == "vlbias.data.caption_datamodule.CaptionDataModule":
        args += ["--data.init_args.annotations", str(write_karpathy_corpus(work)),
                 "--data.init_args.image_root", str(work / "images"), "--data.init_args.num_workers", "0"]  # fmt: skip
    else:
        args += ["--data.init_args.n_train", "64", "--data.init_args.eval_per_combination", "2"]
    if section.get("model", {}).get("init_args", {}).get("model", {}).get("checkpoint"):
        tiny = {"tiny": True, "checkpoint": None, "tiny_vocabulary": _tiny_words()}
        args += ["--model.init_args.model", json.dumps(tiny)]  # a mapping: a `null` flag reads as "None"
    if "k_test" in section.get("model", {}).get("init_args", {}):
        args += ["--model.init_args.k_test", "2", "--model.init_args.ks", "[1, 2]"]  # the tiny val gallery
    if section.get("trainer", {}).get("accelerator") == "gpu":
        args += ["--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.strategy", "auto",
                 "--trainer.precision", "32-true"]  # fmt: skip
    return args


def _tiny_words() -> list[str]:
    """The tiny models' words and every word of the shipped swap lexicon (FairVLP swaps them)."""
    resources = ROOT / "src" / "vlbias" / "resources"
    words = (resources / "tiny_vocabulary.txt").read_text().split()
    pairs = yaml.safe_load((resources / "gender_swap_lexicon.yaml").read_text())["pairs"]
    return sorted(set(words) | {word for pair in pairs for word in pair})


def record(path: Path, only: str | None = None) -> None:
    os.environ.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", WANDB_MODE="disabled", VLBIAS_PROGRESS="0")
    torch.set_num_threads(1)
    cases: dict[str, dict] = json.loads(path.read_text()) if path.exists() and only else {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, args in MEASURE_CASES.items():
            if only and only not in name:
                continue
            out = work / name
            _vlbias(["measure", "--out", str(out), "--threads", "1", *args])
            cases[f"measure/{name}"] = _numbers(next(out.glob("*.json")))
        if not only or "audit" in only:
            out = work / "audit"
            _vlbias(["audit", "--model", "clip", "--tiny", "--out", str(out), "--data_root", str(DATA),
                     "--threads", "1", *SMALL_WORLD, "--suites", "[mmbias, vlstereoset, weat, retrieval_bias]"])  # fmt: skip
            for results in sorted((out / "results").glob("*/*.json")):
                cases[f"audit/{results.parent.name}"] = _numbers(results)
        if not only or "prune" in only:
            out = work / "prune"
            _vlbias(["prune", "--model", "clip", "--tiny", "--out", str(out), "--split", "val", "--fraction", "0.1",
                     "--theta_quantile", "0.9", *SMALL_WORLD])  # fmt: skip
            summary = json.loads((out / "prune.json").read_text())
            cases["prune/clip"] = {k: summary[k] for k in ("removed", "effect_sizes_before", "effect_sizes_after",
                                                          "zero_shot_accuracy")}  # fmt: skip
        if not only or "quickstart" in only:
            quickstart = ["--config", str(ROOT / "configs/experiment/quickstart.yaml")]
            cases["fit/quickstart"] = _fit(quickstart, ["--trainer.max_epochs", "2"], work / "quickstart")
        for config in sorted((ROOT / "configs" / "experiment").glob("*.yaml")):
            if only and only not in config.stem:
                continue
            overrides = _experiment_overrides(config, work / config.stem)
            command = "predict" if "prune" in config.stem else "fit"  # a pruning run is Trainer.predict
            cases[f"fast_dev_run/{config.stem}"] = _fit(
                ["--config", str(config)], overrides, work / config.stem, command
            )
    path.write_text(json.dumps(cases, indent=1, sort_keys=True))
    print(f"wrote {len(cases)} cases to {path}")


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare(before: Path, after: Path) -> int:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    differences = [f"case {case}: only in {before if case in old else after}" for case in sorted(set(old) ^ set(new))]
    for case in sorted(set(old) & set(new)):
        for key in sorted(set(old[case]) | set(new[case])):
            a, b = old[case].get(key, "<absent>"), new[case].get(key, "<absent>")
            if not _same(a, b):
                differences.append(f"{case} {key}: {a} -> {b}")
    print("\n".join(differences) or f"identical: {len(old)} cases")
    return 1 if differences else 0


if __name__ == "__main__":
    action, *paths = sys.argv[1:]
    if action == "record":
        record(Path(paths[0]), paths[1] if len(paths) > 1 else None)
    else:
        sys.exit(compare(Path(paths[0]), Path(paths[1])))
