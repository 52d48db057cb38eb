"""What a one-process command does, in one room: ``vlbias measure``, ``audit``, ``prune`` and ``debias``.

Each command's run function (:mod:`~vlbias.workflows.measure`, :mod:`~vlbias.workflows.audit`,
:mod:`~vlbias.workflows.prune`, :mod:`~vlbias.workflows.debias`), the options dataclass it takes
(:mod:`~vlbias.workflows.options`), the model it loads (:mod:`~vlbias.workflows.loaded_model`) and what it writes
(:mod:`~vlbias.workflows.debias_outputs`, :mod:`~vlbias.workflows.comparison`, with the caption corpus it measures
retrieval on, :mod:`~vlbias.workflows.caption_corpus`). The parsers stay in :mod:`vlbias.commands`, which calls
these; nothing below the commands imports this package. Importing it imports no torch.
"""
