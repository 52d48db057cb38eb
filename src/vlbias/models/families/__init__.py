"""The model families: one module per family (its adapter class, and the family's own helpers beside it), and the
wrappers that are model kinds of their own (``pruned``, ``prompt_array``). What several families share (the
protocol, loading, preprocessing, region features, ...) stays in :mod:`vlbias.models`. The catalog
(:mod:`vlbias.models.catalog`) names each adapter by its ``"module:Class"`` string, so this file imports nothing.
"""
