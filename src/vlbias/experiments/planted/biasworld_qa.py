"""Planted answer bias is recovered: a tiny chat VLM instruction-tuned on BiasWorld-QA
(:mod:`vlbias.data.biasworld_qa`) at several planted strengths and seeds, then measured with the ``bias_qa`` and
``counterfactual_answers`` suites on the balanced eval split, as ``vlbias measure`` measures a folder
(``scripts/planted_qa.py``).

Each run trains :class:`~vlbias.modules.chat_answer_tuning.ChatAnswerTuning` on
:class:`~vlbias.data.biasworld_qa_datamodule.BiasWorldQADataModule` with the strength ``s`` and the seed: the seed
fixes the world (its questions and pictures), the model's random initialisation and the batches' order, so the runs
of one seed at different strengths start from the same weights and see the same pictures in the same order; only
the planted answers of the ambiguous training questions differ. A quarter of the training questions ask who is in
the picture (``identification_rate``, answered right at every strength), so that the random model learns to see
the figure. The defaults were chosen on the val split with seeds 10 and 11: at s = 0.7, 640 steps left both seeds
answering without looking (disambiguated accuracy 0.47 and 0.56, counterfactual gap 0.002 and 0.015); 1,920 steps
taught both (0.64 and 0.96, gap 0.14 and 0.24). The eval split (``split``: ``val`` to choose the
training settings, ``test`` for the table) is written with :meth:`~vlbias.data.biasworld_qa.BiasWorldQA.write` and
read back by the suites' own readers.

Per run: BBQ's ``s_AMB`` (``bias_ambiguous``), ``s_DIS`` (``bias_disambiguated``) and the accuracy on the
disambiguated questions, from ``bias_qa``; and the **counterfactual gap**, from ``counterfactual_answers``'s per-option
gaps :math:`g_o` = mean over sets of P(o | man) - P(o | woman) (``gap/gender/man-woman/<o>``, over the sets that offer
``o``): their mean over the activity options weighted by the sets that offer each, each signed toward the stereotype
(+1 for a man-stereotyped activity, -1 for a woman-stereotyped one; "cannot tell" left out),

.. math:: \\text{gap} = \\frac{\\sum_o \\sigma_o\\, n_o\\, g_o}{\\sum_o n_o},

that is, the mean over the ambiguous questions and their two activity options of how much likelier the stereotyped
reading becomes when the person is swapped for the one the stereotype names: in [-1, 1], 0 when the person does not
move the answer, positive toward the stereotype. Per strength the table gives each measure's mean ± standard
deviation over the seeds and the 95 % Student-t interval of the mean
(:func:`~vlbias.experiments.tables.mean_sd_interval`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from jsonargparse.typing import ClosedUnitInterval, PositiveFloat, PositiveInt
from lightning.pytorch import Trainer, seed_everything

from vlbias.data.biasworld import STEREOTYPES
from vlbias.data.biasworld_qa import COUNTERFACTUAL_FILE, QUESTIONS_FILE, UNKNOWN_ANSWER
from vlbias.data.biasworld_qa_datamodule import BiasWorldQADataModule
from vlbias.experiments.tables import mean_sd_interval, run_table
from vlbias.models.base import ModelAdapter
from vlbias.modules.chat_answer_tuning import ChatAnswerTuning
from vlbias.modules.model_spec import ModelSpec
from vlbias.suites.bias_qa import BiasQASuite
from vlbias.suites.bias_qa_options import BiasQAOptions
from vlbias.suites.counterfactual_answers import CounterfactualAnswersSuite
from vlbias.suites.options import check_suite_options
from vlbias.suites.run import run_suite

#: The table's measures: (row key, heading).
MEASURES = (
    ("s_amb", "s_AMB"),
    ("s_dis", "s_DIS"),
    ("accuracy_dis", "accuracy, disambiguated"),
    ("gap", "counterfactual gap"),
)
#: The training settings of a run, chosen on the val split (the defaults of :func:`planted_qa_table`; the chat
#: mitigation comparison trains with them too).
SETTINGS = {"epochs": 30, "n_train": 1024, "ambiguous_rate": 0.5, "identification_rate": 0.25, "batch_size": 16,
            "learning_rate": 0.003, "sizes": {"image_size": 28, "hidden_size": 32}, "template": "{question}\n{options}"}  # fmt: skip
_SIGN = {**{o: 1.0 for o in STEREOTYPES["man"]}, **{o: -1.0 for o in STEREOTYPES["woman"]}}
PAIR = "gap/gender/man-woman/"


def counterfactual_gap(metrics: dict[str, float]) -> float:
    """The stereotype-signed counterfactual gap of the module docstring, from ``counterfactual_answers``' metrics.

    Example:
        >>> counterfactual_gap({"gap/gender/man-woman/cooking": -0.4, "gap/gender/man-woman/cooking/n_sets": 2.0,
        ...                     "gap/gender/man-woman/driving": 0.1, "gap/gender/man-woman/driving/n_sets": 2.0,
        ...                     "gap/gender/man-woman/cannot tell": 0.3, "gap/gender/man-woman/cannot tell/n_sets": 4.0})
        0.25
    """
    weighted = total = 0.0
    for option, sign in _SIGN.items():
        n_sets = metrics.get(f"{PAIR}{option}/n_sets", 0.0)
        if n_sets:
            weighted += sign * n_sets * metrics[f"{PAIR}{option}"]
            total += n_sets
    return weighted / total if total else float("nan")


def measure(adapter: ModelAdapter, folder: Path, seed: int, template: str | None, n_bootstrap: int) -> dict:
    """``bias_qa`` and ``counterfactual_answers`` of ``adapter`` on the split :meth:`BiasWorldQA.write
    <vlbias.data.biasworld_qa.BiasWorldQA.write>` left in ``folder``, read by the suites' own readers: the table's
    measures and the others a run records."""
    statistics = {"statistics": {"n_bootstrap": n_bootstrap}, "template": template}
    bias = BiasQASuite.from_path(folder / QUESTIONS_FILE, check_suite_options("bias_qa", statistics))
    bbq, _ = run_suite(bias, adapter, model="paligemma", checkpoint=None, seed=seed, config={})
    options = {**statistics, "statistics": {"n_bootstrap": n_bootstrap, "n_permutations": 1000}}
    sets = CounterfactualAnswersSuite.from_path(
        folder / COUNTERFACTUAL_FILE, check_suite_options("counterfactual_answers", options)
    )
    answers, _ = run_suite(sets, adapter, model="paligemma", checkpoint=None, seed=seed, config={})
    return {
        "s_amb": bbq.metrics["bias_ambiguous"],
        "s_dis": bbq.metrics["bias_disambiguated"],
        "accuracy_dis": bbq.metrics["accuracy_disambiguated"],
        "accuracy_amb": bbq.metrics["accuracy_ambiguous"],
        "gap": counterfactual_gap(answers.metrics),
        "gap_unknown": answers.metrics.get(f"{PAIR}{UNKNOWN_ANSWER}", float("nan")),
        "js_divergence": answers.metrics["js_divergence"],
    }


def trained(module: ChatAnswerTuning, data: BiasWorldQADataModule, epochs: int, folder: str) -> ModelAdapter:
    """``module`` fitted on ``data`` for ``epochs`` on the CPU (no validation, no logger, no checkpoint; the export
    under ``folder``); its adapter in eval mode."""
    trainer = Trainer(
        max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0,
        default_root_dir=folder,
    )  # fmt: skip
    trainer.fit(module, data)
    return module.adapter.eval()


def train_and_measure(
    strength: float,
    seed: int,
    split: str,
    epochs: int,
    n_train: int,
    ambiguous_rate: float,
    identification_rate: float,
    batch_size: int,
    learning_rate: float,
    n_bootstrap: int,
    sizes: dict[str, int],
    template: str | None,
) -> dict[str, float]:
    """One run (module docstring): its row of measures and its training time in seconds."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    seed_everything(seed, verbose=False)
    data = BiasWorldQADataModule(
        bias_strength=strength,
        n_train=n_train,
        ambiguous_rate=ambiguous_rate,
        identification_rate=identification_rate,
        seed=seed,
        batch_size=batch_size,
    )
    model = ChatAnswerTuning(
        model=ModelSpec("paligemma", tiny=True, tiny_sizes=sizes, seed=seed),
        template=template,
        optimizer=lambda params: torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.01),
    )
    with tempfile.TemporaryDirectory() as folder:  # the trained model's export and the eval split's files
        adapter = trained(model, data, epochs, folder)
        training = time.perf_counter() - start
        data.world.write(Path(folder) / "eval", split)
        measured = measure(adapter, Path(folder) / "eval", seed, template, n_bootstrap)
    return {
        "strength": strength,
        "seed": seed,
        "method": f"s={strength}",
        **measured,
        "train_s": training,
        "total_s": time.perf_counter() - start,
    }


def _show(row: dict) -> None:
    print(
        f"| {row['strength']:.2f} | {row['seed']} | {row['s_amb']:+.3f} | {row['s_dis']:+.3f} "
        f"| {row['accuracy_dis']:.3f} | {row['gap']:+.3f} | {row['js_divergence']:.4f} | {row['total_s']:.0f} |",
        flush=True,
    )


def planted_qa_table(
    strengths: Sequence[ClosedUnitInterval] = (0.5, 0.7, 0.9),
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    split: Literal["val", "test"] = "test",
    epochs: PositiveInt = SETTINGS["epochs"],
    n_train: PositiveInt = SETTINGS["n_train"],
    ambiguous_rate: ClosedUnitInterval = SETTINGS["ambiguous_rate"],
    identification_rate: ClosedUnitInterval = SETTINGS["identification_rate"],
    batch_size: PositiveInt = SETTINGS["batch_size"],
    learning_rate: PositiveFloat = SETTINGS["learning_rate"],
    n_bootstrap: PositiveInt = 200,
    image_size: PositiveInt = SETTINGS["sizes"]["image_size"],
    hidden_size: PositiveInt = SETTINGS["sizes"]["hidden_size"],
    template: str | None = SETTINGS["template"],
    workers: PositiveInt = 2,
    out: Path | None = None,
) -> list[dict]:
    """Train a tiny chat VLM on BiasWorld-QA at each strength x seed and print the bias_qa and counterfactual_answers
    measures per run, then per strength.

    Returns the rows.

    Args:
        strengths: Planted answer-bias strengths to train at (0.5 plants none).
        seeds: Seeds (world, initialisation, batch order), the same for every strength.
        split: The split measured: val to choose the settings, test for the table.
        epochs: Training epochs.
        n_train: Training questions.
        ambiguous_rate: Share of the training questions whose picture hides the activity object.
        identification_rate: Share of the training questions that ask who is in the picture (answered right).
        batch_size: Training questions per step.
        learning_rate: AdamW's learning rate.
        n_bootstrap: Bootstrap draws of the suites' intervals.
        image_size: The tiny model's image side (patches of 14 pixels).
        hidden_size: The tiny model's width.
        template: The prompt's template in training and in both suites (None: the suites' default, which adds a
            line asking for one of the options).
        workers: Processes running the runs (one torch thread each).
        out: Write the rows here as JSON after every run.
    """
    BiasQAOptions(template=template)  # a bad template refused before any run
    sizes = {"image_size": image_size, "hidden_size": hidden_size}
    print(
        f"split {split}, {epochs} epochs of {n_train} questions ({ambiguous_rate:.0%} ambiguous) in batches of {batch_size}, lr {learning_rate}; "
        f"tiny PaliGemma {sizes}, template {template!r}"
    )
    print("| strength | seed | s_AMB | s_DIS | accuracy, disambiguated | counterfactual gap | JS divergence | s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    settings = (
        split,
        epochs,
        n_train,
        ambiguous_rate,
        identification_rate,
        batch_size,
        learning_rate,
        n_bootstrap,
        sizes,
        template,
    )
    jobs = [(strength, seed, *settings) for strength in strengths for seed in seeds]
    rows = run_table(train_and_measure, jobs, workers, _show, out)
    print("\n| strength | " + " | ".join(heading for _, heading in MEASURES) + " |")
    print("|---:|" + "---|" * len(MEASURES))
    for strength in strengths:
        runs = [row for row in rows if row["strength"] == strength]
        cells = [mean_sd_interval([row[key] for row in runs], digits=3) for key, _ in MEASURES]
        print(f"| {strength:.2f} | " + " | ".join(cells) + " |")
    return rows
