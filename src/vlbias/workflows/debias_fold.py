"""Step 3 and 4 of ``vlbias debias`` (:mod:`vlbias.workflows.debias`) for one fold: the fitting data embedded, the
model measured, a new debiaser of each method fitted and measured the same way, and each trained model measured as
the model itself is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from vlbias.data.biasworld import ACTIVITIES, BiasWorld, activity_phrases
from vlbias.errors import InputError
from vlbias.mitigation.debiased_embeddings import DebiasedEmbeddings
from vlbias.mitigation.debiaser import Debiaser, FitData, RemovedSpanError
from vlbias.mitigation.fit_data import biasworld_fit_data, file_fit_data
from vlbias.mitigation.tradeoff import ACCURACY
from vlbias.models.base import ModelAdapter
from vlbias.models.embedding import text_encoder, unit_image_embeddings
from vlbias.results import Results
from vlbias.suites.base import Suite
from vlbias.suites.run import run_suite
from vlbias.workflows.caption_corpus import CaptionCorpus
from vlbias.workflows.comparison import (
    NO_METHOD,
    Interval,
    accuracy_with_interval,
    comparison_rows,
    recall_with_intervals,
)
from vlbias.workflows.loaded_model import refuse_empty
from vlbias.workflows.options import DebiasOptions


@dataclass
class Fold:
    """One fold of a run: the world it is measured on, each method's (and ``none``'s) results, the numbers measured
    on its embeddings directly (zero-shot accuracy and R@K, each with its interval), and the debiasers fitted on it."""

    world: dict
    fit_data: FitData
    measured: dict[str, dict[str, tuple[Results, list[dict]]]] = field(default_factory=dict)
    scores: dict[str, dict[str, Interval]] = field(default_factory=dict)
    fitted: dict[str, Debiaser] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # method -> why its fit on this fold's data failed

    def drop(self, method: str) -> None:
        """Leave ``method`` out of this fold's results (it failed on another fold: every row has the same folds)."""
        for held in (self.measured, self.scores, self.fitted):
            held.pop(method, None)

    def rows(self) -> list[dict[str, object]]:
        """:func:`~vlbias.workflows.comparison.comparison_rows` of this fold."""
        results = {method: {suite: r for suite, (r, _) in suites.items()} for method, suites in self.measured.items()}
        return comparison_rows(results, self.scores)


def fold_fit_data(options: DebiasOptions, adapter: ModelAdapter, world: dict) -> FitData:
    """The fitting data embedded by ``adapter``; a model already debiased whose debiaser removed the span of the
    fitting texts (debiasing its output again on the same prompts) is refused saying so."""
    try:
        if options.data == "biasworld":
            return biasworld_fit_data(adapter, BiasWorld(**world), options.split, options.batch_size)
        return file_fit_data(adapter, options.data, options.batch_size)
    except RemovedSpanError as err:
        if not isinstance(adapter, DebiasedEmbeddings):
            raise
        name = adapter.debiaser.name
        same = " (the method fitted now)" if name in options.methods else ""
        raise InputError(
            f"Model {options.model!r} {options.checkpoint!r} is already debiased by {name!r}{same}: its debiaser "
            f"removed the span of these fitting texts, so it embeds nothing of them ({err}); debias the model it was "
            "made from (its inner model, the checkpoint's inner/ folder) instead, or fit on other data (a prompt "
            "file as --data)."
        ) from err


def run_fold(
    fold: Fold,
    corpus: CaptionCorpus | None,
    suites: Mapping[str, Suite],
    adapter: ModelAdapter,
    debiasers: Mapping[str, Debiaser],
    options: DebiasOptions,
    config: dict,
    seed: int,
) -> None:
    """Measure ``adapter`` on ``fold`` (its world; R@K on ``corpus`` when one is given), then fit a new debiaser of
    each method on its data and measure it. torch's generators are seeded with ``seed`` before each fit, so a
    method's fit does not depend on which ran before it."""
    evaluation = evaluation_inputs(adapter, BiasWorld(**fold.world), corpus, options.batch_size)
    fold.measured[NO_METHOD] = measure_suites(suites, adapter, options, config, seed)
    fold.scores[NO_METHOD] = fold_scores(evaluation, None, seed)
    for method, unfitted in debiasers.items():
        torch.manual_seed(seed)
        try:
            debiaser = type(unfitted)(unfitted.options).fit(fold.fit_data)
        except InputError as err:  # the data cannot fit it (e.g. too few references); one line in the compare mode
            if not options.compare:
                raise
            fold.failed[method] = f"Debiaser {method!r} could not be fitted on world {fold.world['seed']}: {err}"
            continue
        fold.fitted[method] = debiaser
        view = DebiasedEmbeddings(adapter, debiaser)
        fold.measured[method] = measure_suites(suites, view, options, {**config, "debiaser": method}, seed)
        fold.scores[method] = fold_scores(evaluation, debiaser, seed)


def measure_trained(
    fold: Fold,
    name: str,
    corpus: CaptionCorpus | None,
    suites: Mapping[str, Suite],
    model: ModelAdapter,
    choice: DebiasOptions,
    config: dict,
    seed: int,
) -> None:
    """Measure the trained model ``name`` (``model``, loaded from ``choice``) on ``fold`` as the model itself is."""
    evaluation = evaluation_inputs(model, BiasWorld(**fold.world), corpus, choice.batch_size)
    fold.measured[name] = measure_suites(suites, model, choice, config, seed)
    fold.scores[name] = fold_scores(evaluation, None, seed)


def measure_suites(
    suites: Mapping[str, Suite], adapter: ModelAdapter, options: DebiasOptions, config: dict, seed: int
) -> dict[str, tuple[Results, list[dict]]]:
    """Each suite's results and item table for ``adapter``."""
    measured = {}
    for name, suite in suites.items():
        results, items = run_suite(
            suite,
            adapter,
            model=options.model,
            checkpoint=options.checkpoint,
            seed=seed,
            config={**config, "suite": name, "suite_options": options.suite_options.get(name, {})},
        )
        refuse_empty(results, options.suite_data)
        measured[name] = (results, items)
    return measured


def evaluation_inputs(adapter: ModelAdapter, world: BiasWorld, corpus: CaptionCorpus | None, batch_size: int) -> dict:
    """BiasWorld's ``test`` images and activity prompts embedded by ``adapter``, with the prompts' classes and the
    images' labels: what the zero-shot accuracy of every method is computed on; and under ``corpus`` the caption
    corpus embedded by ``adapter`` (:meth:`~vlbias.workflows.caption_corpus.CaptionCorpus.embed`), for R@K."""
    texts = [phrase for activity in ACTIVITIES for phrase in activity_phrases(activity)]
    classes = [k for k, activity in enumerate(ACTIVITIES) for _ in activity_phrases(activity)]
    return {
        "images": unit_image_embeddings(adapter, world.images("test"), batch_size),
        "texts": texts,
        "prompts": text_encoder(adapter)(texts),
        "classes": torch.tensor(classes),
        "labels": torch.tensor([ACTIVITIES.index(item.activity) for item in world.items("test")]),
        "corpus": None if corpus is None else corpus.embed(adapter, batch_size),
    }


def fold_scores(evaluation: dict, debiaser: Debiaser | None, seed: int) -> dict[str, Interval]:
    """The zero-shot accuracy and, with a caption corpus, the R@K of ``evaluation``'s embeddings, transformed by
    ``debiaser`` when one is given."""
    images, prompts = evaluation["images"], evaluation["prompts"]
    if debiaser is not None:
        images, prompts = debiaser.transform_images(images), debiaser.transform_texts(prompts, evaluation["texts"])
    scores = {ACCURACY: accuracy_with_interval(images, prompts, evaluation["classes"], evaluation["labels"], seed)}
    corpus = evaluation["corpus"]
    if corpus is not None:
        images, captions = corpus["images"], corpus["captions"]
        if debiaser is not None:
            images, captions = debiaser.transform_images(images), debiaser.transform_texts(captions, corpus["texts"])
        scores |= recall_with_intervals(images, captions, corpus["caption_to_image"], seed)
    return scores
