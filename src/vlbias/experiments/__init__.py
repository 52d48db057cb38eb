"""What the scripts in ``scripts/`` run, importable and tested: each script is ``run(function)``
(:func:`vlbias.experiments.command_line.run`), its options the function's parameters.

* method tables on BiasWorld: :mod:`~vlbias.experiments.fairvlp_table` (FairVLP's Table 4; what it measures in
  :mod:`~vlbias.experiments.fairvlp_measures`, its summaries in :mod:`~vlbias.experiments.fairvlp_summary`),
  :mod:`~vlbias.experiments.prune_table` (post-hoc pruning; :mod:`~vlbias.experiments.prune_diagnostics`),
  :mod:`~vlbias.experiments.retrieval_table` (FairVLP's Table 5), :mod:`~vlbias.experiments.retrieval_from_scratch`;
* planted-bias sanity tables, one per suite: :mod:`vlbias.experiments.planted`;
* the bootstrap intervals' coverage: :mod:`~vlbias.experiments.bootstrap_coverage`;
* benchmarks and the timing they share: :mod:`vlbias.experiments.bench`;
* data preparation: :mod:`~vlbias.experiments.fetch_vlstereoset_images`;
* shared: :mod:`~vlbias.experiments.biasworld_runs` (a config trained on BiasWorld at a strength and seed),
  :mod:`~vlbias.experiments.tables` (runs in worker processes, ``mean ± sd`` cells).
"""
