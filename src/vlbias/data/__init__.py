"""Datasets: readers for the public formats, the synthetic BiasWorld (:mod:`vlbias.data.biasworld`) and the
LightningDataModules (:mod:`vlbias.data.biasworld_datamodule`, :mod:`vlbias.data.caption_datamodule`).

Import each name from the module that defines it. This file imports nothing, so the readers and
:mod:`vlbias.data.images` import without Lightning or Hugging Face ``datasets``.
"""
