"""Model adapters: one protocol (:mod:`vlbias.models.base`) over every VLM family.

Each family is a module of :mod:`vlbias.models.families`; this package holds what they share (the protocol, the
catalog and registry, loading, preprocessing, batched embedding, region features, tiny sizes, ...).

Import each name from the module that defines it: :func:`~vlbias.models.registry.load` (and the checks of its
arguments), the protocol (:class:`~vlbias.models.base.ModelAdapter`, :class:`~vlbias.models.base.Capability`,
:func:`~vlbias.models.base.require_capability`), the torch-free catalog of names and capabilities
(:mod:`vlbias.models.catalog`, what ``vlbias models`` lists), :func:`~vlbias.models.inference.measuring`. This
file imports nothing, so the catalog imports without torch.
"""
