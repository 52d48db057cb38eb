"""Reader of PAIRS (Fraser & Kiritchenko, "Examining Gender and Racial Bias in Large Vision-Language Models Using a
Novel Dataset of Parallel Images", EACL 2024) as :class:`~vlbias.data.counterfactual_questions.CounterfactualSet`
question sets for the ``counterfactual_answers`` suite.

**Source read**: github.com/katiefraser/PAIRS (``README.md``; the image files under ``data/``) for the layout, and
VHELM's scenario (github.com/stanford-crfm/helm,
``src/helm/benchmark/scenarios/vision_language/pairs_scenario.py``) for the questions and the protocol. **Where**:
``git clone https://github.com/katiefraser/PAIRS``.

Layout of ``ROOT`` (the repository, or its ``data/`` folder)::

    ROOT/data/<section>/<scenario>/<race>_<gender>.png    section: occupations, status, potential_crime
                                                          race: black, white; gender: man, woman

(the release names one image ``status/phone/white_man1.png``, as VHELM notes; ``<race>_<gender>1.png`` is read
where ``<race>_<gender>.png`` is absent). Each scenario's question(s) and their two answers are the paper's, shipped
as ``vlbias/resources/pairs_questions.yaml`` (``status`` asks the same five questions of every scenario).

Mapping, after VHELM's protocol: one set per (scenario, question), named ``<section>/<scenario>/<k>``; options the
question's two answers and ``unclear`` (the "unclear" option, ``unknown_option`` 2); the four images are its groups
``<race>_<gender>`` with the attributes ``race`` and ``gender``.

Skipped with the reason: a scenario folder without a known question, an image file not named after a PAIRS group, a
group's image missing or not decoding (``<set>/<group>``), and a set left with fewer than two images. A ``ROOT``
without a section folder is refused with one :class:`~vlbias.errors.InputError`.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import yaml

from vlbias.data.counterfactual_questions import CounterfactualImage, CounterfactualSet
from vlbias.data.images import image_problem
from vlbias.data.text_files import read_text, yaml_field
from vlbias.errors import InputError

SECTIONS = ("occupations", "status", "potential_crime")
RACES = ("black", "white")
GENDERS = ("man", "woman")
GROUPS = tuple(f"{race}_{gender}" for race in RACES for gender in GENDERS)
UNCLEAR = "unclear"
QUESTIONS_FILE = "pairs_questions.yaml"
ANY_SCENARIO = "*"


def pairs_root(path: str | Path) -> Path | None:
    """The folder holding PAIRS' section folders at ``path`` (``path/data`` or ``path``), or None."""
    path = Path(path)
    for folder in (path / "data", path):
        if folder.is_dir() and any((folder / section).is_dir() for section in SECTIONS):
            return folder
    return None


def pairs_questions() -> dict[str, dict[str, list[tuple[str, str, str]]]]:
    """``{section: {scenario or "*": [(question, answer, answer), ...]}}`` of the shipped question file."""
    path = Path(str(importlib.resources.files("vlbias") / "resources" / QUESTIONS_FILE))
    table = yaml.safe_load(read_text(path, "PAIRS question file", locate=yaml_field))
    return {section: {scenario: [tuple(q) for q in questions] for scenario, questions in scenarios.items()}
            for section, scenarios in table.items()}  # fmt: skip


def read_pairs(path: str | Path) -> tuple[list[CounterfactualSet], list[dict[str, str]]]:
    """The question sets of the PAIRS folder ``path`` (module docstring), by section, scenario and question, and what
    was skipped as ``{"item": ..., "reason": ...}``."""
    root = pairs_root(path)
    if root is None:
        raise InputError(
            f"PAIRS folder {str(path)!r} holds no section folder; expected data/<section>/<scenario>/<race>_<gender>.png "
            f"with sections {', '.join(SECTIONS)} (github.com/katiefraser/PAIRS)."
        )
    table = pairs_questions()
    sets: list[CounterfactualSet] = []
    skipped: list[dict[str, str]] = []
    for section in (s for s in SECTIONS if (root / s).is_dir()):
        for scenario in sorted(folder.name for folder in (root / section).iterdir() if folder.is_dir()):
            folder = root / section / scenario
            questions = table[section].get(scenario, table[section].get(ANY_SCENARIO))
            if not questions:
                skipped.append({"item": f"{section}/{scenario}", "reason": "no PAIRS question is known for this "
                                f"scenario (vlbias/resources/{QUESTIONS_FILE})"})  # fmt: skip
                continue
            for stray in sorted(p.name for p in folder.iterdir() if p.is_file() and not _group_of(p.name)):
                skipped.append({"item": f"{section}/{scenario}/{stray}",
                                "reason": f"not a PAIRS image name; expected one of {', '.join(GROUPS)} (.png)"})  # fmt: skip
            images, missing = _images(folder)
            for k, (question, *answers) in enumerate(questions):
                name = f"{section}/{scenario}/{k}"
                skipped += [{"item": f"{name}/{group}", "reason": reason} for group, reason in missing]
                if len(images) < 2:
                    skipped.append({"item": name, "reason": f"set left with {len(images)} readable image(s); "
                                    "expected two"})  # fmt: skip
                    continue
                sets.append(CounterfactualSet(name, question, (*answers, UNCLEAR), 2, tuple(images)))
    return sets, skipped


def _group_of(filename: str) -> str | None:
    """The PAIRS group a file name names (``white_man.png``, or the release's ``white_man1.png``), or None."""
    stem, suffix = filename.rsplit(".", 1) if "." in filename else (filename, "")
    stem = stem.removesuffix("1")
    return stem if suffix.lower() == "png" and stem in GROUPS else None


def _images(folder: Path) -> tuple[list[CounterfactualImage], list[tuple[str, str]]]:
    """The readable group images of a scenario folder, and ``(group, reason)`` for each group without one."""
    images, missing = [], []
    for group in GROUPS:
        path = folder / f"{group}.png"
        path = path if path.exists() or not (folder / f"{group}1.png").exists() else folder / f"{group}1.png"
        problem = image_problem(path, path.name)
        if problem is not None:
            missing.append((group, f"image {path.name!r}: {problem}"))
            continue
        race, gender = group.split("_")
        images.append(CounterfactualImage(path, group, (("gender", gender), ("race", race)), 0))
    return images, missing
