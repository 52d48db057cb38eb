"""BiasWorld-QA as the data of a chat suite (``bias_qa``, ``counterfactual_answers``, ``open_generation``): the
world's split (the suite's ``split`` option) written, in the suites' public formats, to a temporary folder that the
suite holds while it lives (:meth:`vlbias.data.biasworld_qa.BiasWorldQA.write`), and read by the suite's own reader
from the file of its format, exactly as ``vlbias measure --data`` reads the files ``BiasWorldQA.write`` leaves. This
is how the bias callback measures a chat model every epoch on the world it trains on (``data: biasworld`` beside
:class:`~vlbias.data.biasworld_qa_datamodule.BiasWorldQADataModule`)."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path

from vlbias.data.biasworld_qa import COUNTERFACTUAL_FILE, QUESTIONS_FILE, BiasWorldQA
from vlbias.errors import ConfigError
from vlbias.suites.base import Suite
from vlbias.suites.options import SuiteOptions

#: The file of a written BiasWorld-QA split each chat suite reads.
SUITE_FILES = {
    "bias_qa": QUESTIONS_FILE,
    "counterfactual_answers": COUNTERFACTUAL_FILE,
    "open_generation": COUNTERFACTUAL_FILE,  # the sets' question is the prompt; their options go unread
}


def suite_on_world(cls: type[Suite], world: BiasWorldQA, options: SuiteOptions) -> Suite:
    """Suite ``cls`` over ``world``'s ``options.split`` (module docstring); a suite that reads none of the written
    files is refused by name."""
    if options.SUITE not in SUITE_FILES:
        raise ConfigError(
            f"Suite {options.SUITE!r} reads BiasWorld, not BiasWorld-QA (the training run's world); give a data path "
            "in its format."
        )
    folder = tempfile.TemporaryDirectory(prefix="biasworld-qa-")
    world.write(Path(folder.name), options.split)
    suite = cls.from_path(Path(folder.name) / SUITE_FILES[options.SUITE], options)
    suite.data_config = {"data": "biasworld_qa", "split": options.split, **asdict(world.options)}
    suite.world_folder = folder  # the files live as long as the suite that reads them
    return suite
