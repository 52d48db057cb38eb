"""Which reader reads a chat-question data path, told by the path's layout: the question files of the ``bias_qa`` suite
(the generic JSONL, SB-Bench, VLBiasBench's closed-ended part) and the question sets of ``counterfactual_answers``
(the generic JSONL, PAIRS, GenderBias-VL's pair files). The suites' ``from_path`` and ``vlbias audit``'s data
discovery ask here, so that a layout is recognised in one place.

=========================  ====================================================================================
``bias_qa`` path           read by
=========================  ====================================================================================
``*.jsonl`` file           :func:`vlbias.data.bias_qa.read_bias_qa`
``*.parquet`` file, or a   :func:`vlbias.data.sb_bench.read_sb_bench` (SB-Bench's Hugging Face layout)
folder of such shards
a folder with              :func:`vlbias.data.vlbiasbench.read_vlbiasbench`
``close-ended/json/``
=========================  ====================================================================================

==============================  ===============================================================================
``counterfactual_answers`` path  read by
==============================  ===============================================================================
``*.jsonl`` file                 :func:`vlbias.data.counterfactual_questions.read_counterfactual_questions`
a folder with                    :func:`vlbias.data.pairs.read_pairs` (PAIRS' repository layout)
``data/<section>/``
a base ``*base*.json`` file, or  :func:`vlbias.data.genderbias_vl.read_genderbias_vl` (its ``cf`` sibling
a folder with one pair of them   beside it)
==============================  ===============================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vlbias.data.bias_qa import BiasQAItem, is_bias_qa_file, read_bias_qa
from vlbias.data.counterfactual_questions import (
    CounterfactualSet,
    is_counterfactual_questions_file,
    read_counterfactual_questions,
)
from vlbias.data.genderbias_vl import genderbias_vl_pairs, read_genderbias_vl
from vlbias.data.pairs import pairs_root, read_pairs
from vlbias.data.sb_bench import read_sb_bench, sb_bench_shards
from vlbias.data.vlbiasbench import read_vlbiasbench, vlbiasbench_folder
from vlbias.errors import ConfigError

Skipped = list[dict[str, str]]
BIAS_QA_LAYOUTS = "a JSONL question file, SB-Bench's Parquet shards, or VLBiasBench's close-ended/ folder"
SETS_LAYOUTS = "a JSONL question-set file, a PAIRS folder (data/<section>/...), or GenderBias-VL's base/cf pair files"


def bias_qa_layout(path: str | Path) -> tuple[str, Callable[[Path], tuple[list[BiasQAItem], Skipped]]] | None:
    """``(layout name, reader)`` of the ``bias_qa`` data at ``path`` (module docstring), or None."""
    path = Path(path)
    if path.is_file() and path.suffix == ".jsonl":
        return "jsonl", read_bias_qa
    if sb_bench_shards(path):
        return "sb_bench", read_sb_bench
    if path.is_dir() and vlbiasbench_folder(path) is not None:
        return "vlbiasbench", read_vlbiasbench
    return None


def question_sets_layout(
    path: str | Path,
) -> tuple[str, Callable[[Path], tuple[list[CounterfactualSet], Skipped]]] | None:
    """``(layout name, reader)`` of the ``counterfactual_answers`` data at ``path`` (module docstring), or None."""
    path = Path(path)
    if path.is_file() and path.suffix == ".jsonl":
        return "jsonl", read_counterfactual_questions
    if path.is_file() and path.suffix == ".json":
        return "genderbias_vl", read_genderbias_vl
    if path.is_dir() and pairs_root(path) is not None:
        return "pairs", read_pairs
    pairs = genderbias_vl_pairs(path)
    if len(pairs) == 1:
        return "genderbias_vl", lambda _: read_genderbias_vl(pairs[0][0])
    return None


def read_bias_questions(path: str | Path) -> tuple[list[BiasQAItem], Skipped, str]:
    """The ``bias_qa`` questions at ``path``, what was skipped, and the layout read."""
    found = bias_qa_layout(path)
    if found is None:
        raise ConfigError(f"Data path {str(path)!r} is not a bias QA data set; expected {BIAS_QA_LAYOUTS}.")
    layout, read = found
    items, skipped = read(Path(path))
    return items, skipped, layout


def read_question_sets(path: str | Path) -> tuple[list[CounterfactualSet], Skipped, str]:
    """The ``counterfactual_answers`` question sets at ``path``, what was skipped, and the layout read."""
    found = question_sets_layout(path)
    if found is None:
        several = len(genderbias_vl_pairs(path)) > 1
        raise ConfigError(
            f"Data path {str(path)!r} is not a counterfactual question-set data set; expected {SETS_LAYOUTS}"
            + ("; it holds several GenderBias-VL pairs: give one base file." if several else ".")
        )
    layout, read = found
    sets, skipped = read(Path(path))
    return sets, skipped, layout


def bias_qa_sources(folder: Path) -> list[Path]:
    """The ``bias_qa`` data sets in ``folder`` (for ``vlbias audit``): each generic JSONL question file, and the
    folder itself when it holds SB-Bench shards or VLBiasBench's closed-ended files."""
    found = [path for path in sorted(folder.glob("*.jsonl")) if is_bias_qa_file(path)]
    if sb_bench_shards(folder) or vlbiasbench_folder(folder) is not None:
        found.append(folder)
    return found


def question_set_sources(folder: Path) -> list[Path]:
    """The ``counterfactual_answers`` data sets in ``folder`` (for ``vlbias audit``): each generic JSONL question-set
    file, the folder itself when it is PAIRS', and each GenderBias-VL base file."""
    found = [path for path in sorted(folder.glob("*.jsonl")) if is_counterfactual_questions_file(path)]
    if pairs_root(folder) is not None:
        found.append(folder)
    return found + [base for base, _ in genderbias_vl_pairs(folder)]
