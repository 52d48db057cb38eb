"""``vlbias debias``: fit post-hoc debiasers (:mod:`vlbias.mitigation.registry`) on one EMBED model and measure what
they change, bias and accuracy together.

The service behind the subcommand, in the order it runs:

1. every choice is checked before any data or model is read: the device and the model's options, each method's
   name (an unknown one is refused with the registered ones) and its options (checked against the method's options
   dataclass, an unknown key named), each suite's options, a prompt file's keys, and each method's ``NEEDS``
   against the fields the data gives (:func:`~vlbias.mitigation.fit_data.fields_given`): a method that needs one
   the data does not give is refused naming the field (in the compare mode with ``'all'``, it is listed in the
   table as not fitted, with that reason);
2. the suites are built on ``suite_data`` (BiasWorld's ``test`` split unless a suite's ``split`` says otherwise)
   and must probe embeddings (EMBED); a suite measured on the BiasWorld split the methods are fitted on is
   measured, with a warning (:func:`~vlbias.mitigation.outputs.same_selection`);
3. the model is loaded and the fitting data built (:mod:`vlbias.mitigation.fit_data`: BiasWorld's ``split``,
   ``val`` by default, or a prompt file);
4. per fold (``folds`` BiasWorld worlds, of seeds ``biasworld.seed``, ``+1``, ...; the run's seed moves with
   them), the model is measured by each suite, and its zero-shot accuracy on the world's ``test`` activities
   (:func:`~vlbias.workflows.comparison.accuracy_with_interval`) and, where ``captions`` names a caption corpus
   (:mod:`vlbias.workflows.caption_corpus`: the fold's world's ``test`` split, or a file's), its retrieval R@K
   (:func:`~vlbias.workflows.comparison.recall_with_intervals`); then a new debiaser of each method is fitted on
   the fold's data (torch's generators seeded with the fold's seed before each fit, so a method's fit does not
   depend on which ran before it) and measured the same way, through
   :class:`~vlbias.mitigation.debiased_embeddings.DebiasedEmbeddings`, its accuracy and R@K from the transformed image and text
   embeddings; each of ``trained_models`` (a model debiased by training, such as a prompt array) is loaded and
   measured the same way as the model itself; every method sees the same folds;
5. the output folder is written as a unit (:mod:`vlbias.workflows.debias_outputs`).

Steps 1 and 2 are :func:`~vlbias.workflows.debias_plan.plan_debias`, steps 3 and 4 per fold
:mod:`vlbias.workflows.debias_fold`, step 5 :mod:`vlbias.workflows.debias_outputs`; this module runs them in order.
"""

from __future__ import annotations

import logging

from vlbias.data.biasworld import BiasWorld
from vlbias.runtime.threads import torch_threads
from vlbias.workflows.caption_corpus import BIASWORLD_CAPTIONS, biasworld_captions
from vlbias.workflows.debias_fold import Fold, fold_fit_data, measure_trained, run_fold
from vlbias.workflows.debias_outputs import debias_summary, write_debias_folder, write_parts
from vlbias.workflows.debias_plan import plan_debias
from vlbias.workflows.loaded_model import load_model, run_config
from vlbias.workflows.options import DebiasOptions

logger = logging.getLogger(__name__)


def debias(options: DebiasOptions) -> dict:
    """Fit and measure ``options.method`` (one, a list, or ``'all'``) and write ``options.out`` (module docstring);
    returns the content of ``debias.json``. A chat VLM's debiasers run as :func:`~vlbias.workflows.chat_debias.
    chat_debias` does."""
    if options.chat:
        from vlbias.workflows.chat_debias import chat_debias

        return chat_debias(options)
    with torch_threads(options.threads) as threads:
        plan = plan_debias(options)
        print(f"fitting {', '.join(plan.debiasers)} on {options.data}; writing {plan.out}", flush=True)  # all checked
        adapter = load_model(options)
        config = {**run_config(options, adapter, threads), "suite_data": options.suite_data}
        trained = {name: (choice, load_model(choice)) for name, choice in plan.trained.items()}
        folds = [Fold(world, fold_fit_data(options, adapter, world)) for world in plan.worlds]
        refusals = dict(plan.refusals)
        for reason in refusals.values():  # with 'all' only: one method refused is refused alone
            if reason is not None:
                logger.warning(f"warning: {reason} It is listed in the table as not fitted.")
        for k, (fold, suites) in enumerate(zip(folds, plan.suites, strict=True)):
            seed = options.seed + k
            corpus = (
                biasworld_captions(BiasWorld(**fold.world)) if options.captions == BIASWORLD_CAPTIONS else plan.corpus
            )
            run_fold(fold, corpus, suites, adapter, plan.fittable, options, {**config, "biasworld": fold.world}, seed)
            for name, (choice, model) in trained.items():  # measured as the model itself is
                model_config = {**run_config(choice, model, threads), "suite_data": options.suite_data}
                measure_trained(
                    fold, name, corpus, suites, model, choice, {**model_config, "biasworld": fold.world}, seed
                )
        for fold in folds:  # a method whose fit failed on any fold is in the table as not fitted, with the reason
            for method, reason in fold.failed.items():
                if refusals[method] is None:
                    logger.warning(f"warning: {reason} It is listed in the table as not fitted.")
                refusals[method] = refusals[method] or reason
        for method in [m for m, reason in refusals.items() if reason is not None]:
            for fold in folds:
                fold.drop(method)
        summary = debias_summary(options, adapter, folds, refusals)
        write_debias_folder(plan.out, summary, lambda folder: write_parts(folder, options, adapter, folds, summary))
    return summary
