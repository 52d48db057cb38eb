"""BiasWorld-QA as the data of a chat question suite: the world's split written, in the suites' public formats, to a
temporary folder that the suite holds while it lives (:meth:`vlbias.data.biasworld_qa.BiasWorldQA.write`), so the
suite reads it with its own reader, exactly as ``vlbias measure --data`` reads the folder ``BiasWorldQA.write``
leaves. This is how the bias callback measures a chat model every epoch on the world it trains on
(``data: biasworld`` beside :class:`~vlbias.data.biasworld_qa_datamodule.BiasWorldQADataModule`)."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path

from vlbias.data.biasworld_qa import BiasWorldQA
from vlbias.errors import ConfigError


def written_world(world: object, split: str, suite: str) -> tempfile.TemporaryDirectory:
    """``world``'s ``split`` written to a new temporary folder (removed when the returned object is); a world that
    is not BiasWorld-QA is refused naming ``suite``."""
    if not isinstance(world, BiasWorldQA):
        raise ConfigError(
            f"Suite {suite!r} asks a chat model questions: its BiasWorld is BiasWorld-QA (a BiasWorldQADataModule's "
            f"world), not {type(world).__name__}; give a question file as its data."
        )
    folder = tempfile.TemporaryDirectory(prefix="biasworld-qa-")
    world.write(Path(folder.name), split)
    return folder


def world_config(world: BiasWorldQA, split: str) -> dict[str, object]:
    """What a results file records of the data: BiasWorld-QA, the split and the world's options."""
    return {"data": "biasworld_qa", "split": split, **asdict(world.options)}
