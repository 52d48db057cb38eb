"""Which methods cut a chat VLM's planted answer bias, and at what accuracy: every chat mitigation of vlbias on
BiasWorld-QA at planted strength 0.9, on the same initialisations, data and seeds (``scripts/chat_mitigation_table.py``).

Per seed, a tiny random PaliGemma is instruction-tuned on BiasWorld-QA (:mod:`vlbias.data.biasworld_qa`) with the
settings of the planted-bias table (:func:`~vlbias.experiments.planted.biasworld_qa.planted_qa_table`, chosen there on
the val split): the row ``none``. The seed fixes the world, the initialisation and the batches' order. Then:

* the training-free methods (:mod:`vlbias.mitigation.chat_registry`) on that trained model, each with its defaults:
  ``instruction_prefix``, ``activation_steering`` (fitted on the counterfactual sets of the world's ``val`` split:
  the middle decoder layer, every position, the pairs' mean difference) and ``contextual_calibration``;
* ``consistency_tuning``: :class:`~vlbias.modules.counterfactual_consistency.CounterfactualConsistencyTuning` from
  the same initialisation, on the same questions in the same order for the same epochs, full fine-tuning as the
  baseline, with :math:`\\lambda = 1`, FairVLP's KL and the gradient through both sides.

Every choice above was fixed before any run measured the ``test`` split; none was tuned. Each model is measured on
the ``test`` split with ``bias_qa`` and ``counterfactual_answers`` (the world's files, read by the suites' readers):
BBQ's ``s_AMB``, ``s_DIS``, the disambiguated accuracy and the stereotype-signed counterfactual gap
(:func:`~vlbias.experiments.planted.biasworld_qa.counterfactual_gap`). Per method the table gives each measure's mean ±
standard deviation over the seeds with the 95 % Student-t interval of the mean, and the change against ``none`` of
the same seed, so the spread between seeds (their worlds and initialisations) cancels.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import torch
from jsonargparse.typing import PositiveInt
from lightning.pytorch import seed_everything

from vlbias.data.biasworld_qa import COUNTERFACTUAL_FILE
from vlbias.data.biasworld_qa_datamodule import BiasWorldQADataModule
from vlbias.data.counterfactual_questions import read_counterfactual_questions
from vlbias.experiments.planted.biasworld_qa import MEASURES, SETTINGS, measure, trained
from vlbias.experiments.tables import mean_sd_interval, run_table
from vlbias.mitigation.chat_debiaser import fit_chat_debiaser
from vlbias.mitigation.chat_registry import list_chat_debiasers
from vlbias.models.base import ModelAdapter
from vlbias.modules.chat_answer_tuning import ChatAnswerTuning
from vlbias.modules.counterfactual_consistency import CounterfactualConsistencyTuning
from vlbias.modules.model_spec import ModelSpec

#: The rows of the table, in order: the trained model, the training-free methods, the fine-tuning.
BASELINE, TUNING = "none", "consistency_tuning"
#: The planted strength every method is compared at.
STRENGTH = 0.9
#: The fine-tuning's consistency weight, KL and gradient side (fixed before the test split was measured).
CONSISTENCY = {"consistency_weight": 1.0, "divergence": "kl", "gradient": "both"}


def methods() -> list[str]:
    """The table's rows: ``none``, every registered chat debiaser, ``consistency_tuning``."""
    return [BASELINE, *list_chat_debiasers(), TUNING]


def seed_rows(seed: int, settings: dict, n_bootstrap: int) -> list[dict]:
    """One seed's rows, one per method (module docstring), each with the seconds it took (training or fitting, and
    measuring)."""
    torch.set_num_threads(1)
    world = {key: settings[key] for key in ("n_train", "ambiguous_rate", "identification_rate", "batch_size")}
    spec = ModelSpec("paligemma", tiny=True, tiny_sizes=settings["sizes"], seed=seed)
    template, rows = settings["template"], []

    def optimizer(params):
        return torch.optim.AdamW(params, lr=settings["learning_rate"], weight_decay=0.01)

    def fitted(module: ChatAnswerTuning) -> ModelAdapter:  # the same initialisation, questions and batch order
        seed_everything(seed, verbose=False)
        data = BiasWorldQADataModule(bias_strength=STRENGTH, seed=seed, **world)
        return trained(module, data, settings["epochs"], folder)

    with tempfile.TemporaryDirectory() as folder:
        world_qa = BiasWorldQADataModule(bias_strength=STRENGTH, seed=seed, **world).world
        for split in ("val", "test"):
            world_qa.write(Path(folder) / split, split)
        sets, _ = read_counterfactual_questions(Path(folder) / "val" / COUNTERFACTUAL_FILE)
        test, start = Path(folder) / "test", time.perf_counter()
        baseline = fitted(ChatAnswerTuning(spec, template, optimizer=optimizer))
        models = {BASELINE: lambda: baseline}
        models |= {method: partial(_debiased, method, baseline, sets) for method in list_chat_debiasers()}
        models[TUNING] = lambda: fitted(CounterfactualConsistencyTuning(spec, **CONSISTENCY, template=template,
                                                                         optimizer=optimizer))  # fmt: skip
        for method, model in models.items():
            measured = measure(model(), test, seed, template, n_bootstrap)
            rows.append({"method": method, "seed": seed, **measured, "seconds": time.perf_counter() - start})
            start = time.perf_counter()
    return rows


def _debiased(method: str, model: ModelAdapter, sets: list) -> ModelAdapter:
    """``model`` through the chat debiaser ``method``, fitted with its defaults (on ``sets`` for steering)."""
    return fit_chat_debiaser(method, model, sets).wrap(model)


def _show(rows: list[dict]) -> None:
    for row in rows:
        print(
            f"| {row['method']} | {row['seed']} | {row['s_amb']:+.3f} | {row['s_dis']:+.3f} | {row['accuracy_dis']:.3f} "
            f"| {row['gap']:+.3f} | {row['seconds']:.0f} |",
            flush=True,
        )


def chat_mitigation_table(
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    epochs: PositiveInt = SETTINGS["epochs"],
    n_bootstrap: PositiveInt = 200,
    workers: PositiveInt = 2,
    out: Path | None = None,
) -> list[dict]:
    """Compare every chat mitigation on BiasWorld-QA at strength 0.9 (module docstring) and print the runs, then per
    method each measure and its change against ``none`` of the same seed.

    Returns the rows.

    Args:
        seeds: Seeds (world, initialisation, batch order), the same for every method.
        epochs: Training epochs of the baseline and of the fine-tuning.
        n_bootstrap: Bootstrap draws of the suites' intervals.
        workers: Processes running the seeds (one torch thread each).
        out: Write the rows here as JSON after every seed.
    """
    settings = {**SETTINGS, "epochs": epochs}
    print(f"BiasWorld-QA at strength {STRENGTH}; {settings}; consistency tuning {CONSISTENCY}")
    print("| method | seed | s_AMB | s_DIS | accuracy, disambiguated | counterfactual gap | s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    per_seed = run_table(_seed_job, [(seed, settings, n_bootstrap) for seed in seeds], workers, _show_job, out)
    rows = [row for job in per_seed for row in job["rows"]]
    baseline = {row["seed"]: row for row in rows if row["method"] == BASELINE}
    print("\n| method | " + " | ".join(heading for _, heading in MEASURES) + " | " + " | ".join(
        f"change in {heading}" for _, heading in MEASURES) + " |")  # fmt: skip
    print("|---|" + "---|" * (2 * len(MEASURES)))
    for method in methods():
        runs = [row for row in rows if row["method"] == method]
        cells = [mean_sd_interval([row[key] for row in runs], digits=3) for key, _ in MEASURES]
        changes = [mean_sd_interval([row[key] - baseline[row["seed"]][key] for row in runs], digits=3)
                   for key, _ in MEASURES]  # fmt: skip
        print(f"| {method} | " + " | ".join(cells + changes) + " |")
    return rows


def _seed_job(seed: int, settings: dict, n_bootstrap: int) -> dict:
    """:func:`seed_rows` as one row of :func:`~vlbias.experiments.tables.run_table` (which runs one row a job)."""
    return {"seed": seed, "rows": seed_rows(seed, settings, n_bootstrap)}


def _show_job(job: dict) -> None:
    _show(job["rows"])
