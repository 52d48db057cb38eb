"""Reader for MMBias (Janghorbani & de Melo, 2023): attribute words, group phrases, group images and the
valence images.

Layout of a data directory ``DIR`` (each part can be pointed elsewhere, see :func:`read_mmbias`)::

    DIR/textual_phrases.json             {"pleasant_phrases": [60 words], "unpleasant_phrases": [60 words],
                                          "category_phrases": {group: [phrases], ...}}
    DIR/images/<category>/<group>/*      group images, e.g. images/Religion/Muslim/0001.jpg
    DIR/valence_images/Pleasant/*        pleasant and unpleasant valence images (intra-visual tests)
    DIR/valence_images/Unpleasant/*

``textual_phrases.json`` is the MMBias repository's ``data/textual_phrases.txt``. Group names are matched
through :func:`group_id`: case, ``_``/``-`` and repeated spaces are ignored (the JSON itself mixes
``"muslim"`` with ``"American"`` and ``"No disability"``), and the names of the paper's Tables 1 and 2
(``Islam``, ``Physical disability``, ``Abled``, ``LGBTQ``, ...) are aliases of the JSON's keys. Image
files are those with an image suffix (:data:`IMAGE_SUFFIXES`), hidden files excepted, sorted by name;
each is read in full by the project's image reader (:func:`~vlbias.data.images.image_problem`), and those
that fail (a truncated file, a dangling link, an unreadable file, an unsupported mode) are reported with the
reason, not dropped silently: a test then runs on its other images.

Example:
    >>> group_id("No_Disability"), group_id("Islam"), group_id("Physical disability")
    ('no disability', 'muslim', 'disability')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from vlbias.data.images import IMAGE_SUFFIXES, image_problem
from vlbias.data.set_rules import drop_shared, kept_once
from vlbias.data.text_files import read_json
from vlbias.errors import InputError

PHRASES_FILE = "textual_phrases.json"
IMAGES_DIR = "images"
VALENCE_DIR = "valence_images"
PLEASANT_KEY, UNPLEASANT_KEY, GROUPS_KEY = "pleasant_phrases", "unpleasant_phrases", "category_phrases"
VALENCE_FOLDERS = ("pleasant", "unpleasant")  # matched case-insensitively: Pleasant/, Unpleasant/

# Other names of the JSON's groups (after normalisation): the paper's Table 1 (religions by name) and
# Table 2 (Physical, Mental, Abled, LGBTQ, Hetero.). "disability" holds the physical-disability phrases
# ("disabled", "handicapped", "wheelchair", ...).
ALIASES: dict[str, str] = {
    "islam": "muslim",
    "christianity": "christian",
    "judaism": "jewish",
    "jew": "jewish",
    "buddhism": "buddhist",
    "hinduism": "hindu",
    "usa": "american",
    "physical": "disability",
    "physical disability": "disability",
    "mental": "mental disability",
    "visual": "visual disability",
    "hearing": "hearing disability",
    "abled": "no disability",
    "non disabled": "no disability",
    "lgbtq": "lgbt",
    "homosexual": "lgbt",
    "hetero": "heterosexual",
}

#: Target pairs (X, Y) of the paper's Table 2, in its order, as group ids.
TABLE2_PAIRS: tuple[tuple[str, str], ...] = (
    ("muslim", "christian"),
    ("jewish", "christian"),
    ("muslim", "jewish"),
    ("muslim", "buddhist"),
    ("christian", "buddhist"),
    ("hindu", "buddhist"),
    ("jewish", "buddhist"),
    ("muslim", "hindu"),
    ("arab", "american"),
    ("arab", "french"),
    ("arab", "italian"),
    ("mexican", "arab"),
    ("chinese", "american"),
    ("mexican", "american"),
    ("visual disability", "no disability"),
    ("hearing disability", "no disability"),
    ("mental disability", "no disability"),
    ("disability", "no disability"),
    ("lgbt", "heterosexual"),
)


def group_id(name: str) -> str:
    """The canonical id of a group name: lower case, ``_``/``-`` as spaces, single spaces, aliases resolved."""
    normalised = re.sub(r"[\s_\-]+", " ", str(name)).strip().casefold()
    return ALIASES.get(normalised, normalised)


@dataclass
class MMBiasData:
    """Everything read from an MMBias data directory.

    ``group_images`` maps a group id to its readable image files; ``unreadable`` and
    ``unreadable_valence`` list the group and valence image files that did not open
    (``{"item": path, "reason": ...}``); ``missing_images`` and ``missing_valence`` list the expected
    folders that are absent; ``duplicates`` the phrases dropped as repeats (see :func:`read_mmbias`).
    """

    pleasant: list[str]
    unpleasant: list[str]
    group_phrases: dict[str, list[str]]
    group_images: dict[str, list[Path]] = field(default_factory=dict)
    group_folders: dict[str, Path] = field(default_factory=dict)
    valence_images: dict[str, list[Path]] = field(default_factory=dict)
    unreadable: list[dict[str, str]] = field(default_factory=list)
    unreadable_valence: list[dict[str, str]] = field(default_factory=list)
    missing_images: list[dict[str, str]] = field(default_factory=list)
    missing_valence: list[dict[str, str]] = field(default_factory=list)
    duplicates: list[dict[str, str]] = field(default_factory=list)


def _string_list(value: object, path: Path, key: str) -> list[str]:
    if not isinstance(value, list):
        raise InputError(f"{str(path)!r}: key {key!r} should be a list of strings but is {type(value).__name__}")
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not entry.strip():
            raise InputError(f"{str(path)!r}: {key}[{index}] should be a non-empty string but is {entry!r}")
    return [entry.strip() for entry in value]


def read_phrases(path: str | Path) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """``(pleasant, unpleasant, {group id: phrases})`` from an MMBias ``textual_phrases.json``.

    The attribute lists must be non-empty; a group may hold no phrases (its textual tests are skipped).
    Two keys that normalise to the same group id are refused.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"MMBias phrases file {str(path)!r} does not exist (expected {PHRASES_FILE} with keys {PLEASANT_KEY!r}, {UNPLEASANT_KEY!r}, {GROUPS_KEY!r})"
        )
    payload = read_json(path, "MMBias phrases file")
    if not isinstance(payload, dict):
        raise InputError(f"{str(path)!r}: expected a JSON object but got {type(payload).__name__}")
    missing = [key for key in (PLEASANT_KEY, UNPLEASANT_KEY, GROUPS_KEY) if key not in payload]
    if missing:
        raise InputError(f"{str(path)!r}: missing key(s) {missing}; it has {sorted(payload)}")
    pleasant = _string_list(payload[PLEASANT_KEY], path, PLEASANT_KEY)
    unpleasant = _string_list(payload[UNPLEASANT_KEY], path, UNPLEASANT_KEY)
    for key, words in ((PLEASANT_KEY, pleasant), (UNPLEASANT_KEY, unpleasant)):
        if not words:
            raise InputError(f"{str(path)!r}: attribute set {key!r} is empty; every association test needs it")
    groups = payload[GROUPS_KEY]
    if not isinstance(groups, dict):
        raise InputError(
            f"{str(path)!r}: key {GROUPS_KEY!r} should map group names to phrase lists but is {type(groups).__name__}"
        )
    phrases: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for name, value in groups.items():
        gid = group_id(name)
        if gid in names:
            raise InputError(f"{str(path)!r}: {GROUPS_KEY} keys {names[gid]!r} and {name!r} both name group {gid!r}")
        names[gid] = name
        phrases[gid] = _string_list(value, path, f"{GROUPS_KEY}.{name}")
    return pleasant, unpleasant, phrases


def _image_files(folder: Path) -> list[Path]:
    """The entries of ``folder`` named like images (hidden ones excepted), sorted: files, and also links
    whose target is gone and anything else not a folder, so that :func:`_readable` reports them."""
    return sorted(
        p
        for p in folder.iterdir()
        if not p.name.startswith(".") and p.suffix.lower() in IMAGE_SUFFIXES and not p.is_dir()
    )


def _readable(files: list[Path], unreadable: list[dict[str, str]]) -> list[Path]:
    kept = []
    for path in files:
        reason = image_problem(path)
        if reason is None:
            kept.append(path)
        else:
            unreadable.append({"item": str(path), "reason": reason})
    return kept


def read_group_images(root: str | Path) -> tuple[dict[str, list[Path]], dict[str, Path], list[dict[str, str]]]:
    """Group images under ``root/<category>/<group>/*``: ``({group id: readable files}, {group id: folder},
    unreadable files)``. A group folder found under two categories is refused."""
    root = Path(root)
    images: dict[str, list[Path]] = {}
    folders: dict[str, Path] = {}
    unreadable: list[dict[str, str]] = []
    for category in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for folder in sorted(p for p in category.iterdir() if p.is_dir() and not p.name.startswith(".")):
            gid = group_id(folder.name)
            if gid in folders:
                raise InputError(f"Image folders {str(folders[gid])!r} and {str(folder)!r} both name group {gid!r}")
            folders[gid] = folder
            images[gid] = _readable(_image_files(folder), unreadable)
    return images, folders, unreadable


def read_valence_images(root: str | Path) -> tuple[dict[str, list[Path]], list[dict[str, str]], list[dict[str, str]]]:
    """``({"pleasant": files, "unpleasant": files}, unreadable files, missing folders)`` from
    ``root/{Pleasant,Unpleasant}`` (folder names matched case-insensitively)."""
    root = Path(root)
    subfolders = {p.name.casefold(): p for p in root.iterdir() if p.is_dir()} if root.is_dir() else {}
    images: dict[str, list[Path]] = {}
    unreadable: list[dict[str, str]] = []
    missing: list[dict[str, str]] = []
    for valence in VALENCE_FOLDERS:
        if valence not in subfolders:
            missing.append({"item": str(root / valence.capitalize()), "reason": "valence image folder does not exist"})
            continue
        images[valence] = _readable(_image_files(subfolders[valence]), unreadable)
    return images, unreadable, missing


def _resolve(root: Path, given: str | Path | None, default: str) -> Path:
    if given is None:
        return root / default
    given = Path(given)
    return given if given.is_absolute() else root / given


def read_mmbias(
    root: str | Path,
    phrases: str | Path | None = None,
    images: str | Path | None = None,
    valence_images: str | Path | None = None,
) -> MMBiasData:
    """Read an MMBias data directory.

    Args:
        root: the data directory.
        phrases: the phrases JSON; default ``root/textual_phrases.json``. Relative paths are taken from ``root``.
        images: the group-image root (``<category>/<group>/*``); default ``root/images``.
        valence_images: the valence-image root; default ``root/valence_images``.

    Missing folders and unreadable files are recorded, not raised; the suite decides whether they stop the run.
    As in the SEAT reader, a phrase repeated within a list is kept once and a word both pleasant and unpleasant
    is dropped from both; each is recorded in ``duplicates``.
    """
    root = Path(root)
    path = _resolve(root, phrases, PHRASES_FILE)
    pleasant, unpleasant, group_phrases = read_phrases(path)
    duplicates: list[dict[str, str]] = []
    pleasant = kept_once(pleasant, f"{path.name}: {PLEASANT_KEY}", duplicates)
    unpleasant = kept_once(unpleasant, f"{path.name}: {UNPLEASANT_KEY}", duplicates)
    pleasant, unpleasant = drop_shared(  # no attribute can stand for both A and B
        pleasant,
        unpleasant,
        (PLEASANT_KEY, UNPLEASANT_KEY),
        f"{path.name}: {PLEASANT_KEY}+{UNPLEASANT_KEY}",
        duplicates,
    )
    for key, words in ((PLEASANT_KEY, pleasant), (UNPLEASANT_KEY, unpleasant)):
        if not words:
            raise InputError(
                f"{str(path)!r}: attribute set {key!r} is empty once the words it shares with the other are dropped"
            )
    group_phrases = {
        group: kept_once(listed, f"{path.name}: {GROUPS_KEY}.{group}", duplicates)
        for group, listed in group_phrases.items()
    }
    data = MMBiasData(pleasant, unpleasant, group_phrases, duplicates=duplicates)
    image_root = _resolve(root, images, IMAGES_DIR)
    if image_root.is_dir():
        data.group_images, data.group_folders, data.unreadable = read_group_images(image_root)
    else:
        data.missing_images.append({"item": str(image_root), "reason": "group image folder does not exist"})
    data.valence_images, data.unreadable_valence, data.missing_valence = read_valence_images(
        _resolve(root, valence_images, VALENCE_DIR)
    )
    return data
