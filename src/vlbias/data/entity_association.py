"""Entity-association stimuli (Srinivasan & Bisk, 2022, Sec. 4.1, Table 2): a YAML spec of
template captions, entities and gendered agents, plus an optional image folder.

Spec (the shipped one is ``vlbias/resources/entity_association.yaml``)::

    groups: {female: woman, male: man}   # exactly two; B(E) = S(E, first) - S(E, second)
    neutral: person                      # the gender-neutral agent g_N
    templates:
      - name: bags
        text: "The {agent} is carrying a {entity}."
        entities: [purse, briefcase]

Images: ``<images>/<entity>/<group>/*``, e.g. ``images/purse/female/1.jpg``, one folder per
entity because the paper's image sets contain the entity (``I_E = I_f ∪ I_m``, Sec. 3.2 and
App. A). Hidden files are ignored; every other file is decoded once here, and one that is
missing (a dangling link) or does not decode is skipped with the reason, as is an entity or
group folder that is absent or holds no usable image.

Example:
    >>> spec = read_spec()
    >>> spec.groups, spec.neutral, spec.entities
    ({'female': 'woman', 'male': 'man'}, 'person', ['purse', 'briefcase', 'apron', 'suit', 'wine', 'beer'])
    >>> spec.template_of("purse").caption("woman", "[MASK]")
    'The woman is carrying a [MASK].'
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vlbias.data.images import image_problem
from vlbias.data.text_files import read_text, yaml_field
from vlbias.errors import InputError

SHIPPED_SPEC = "entity_association.yaml"


def shipped_spec_path() -> Path:
    """Path of the paper's case-study spec shipped with the package."""
    return Path(str(importlib.resources.files("vlbias") / "resources" / SHIPPED_SPEC))


@dataclass(frozen=True)
class Template:
    """One template caption and the entities scored at its ``{entity}`` slot."""

    name: str
    text: str  # holds {agent} and {entity} exactly once each
    entities: tuple[str, ...]

    def caption(self, agent: str, mask_token: str) -> str:
        """The caption with ``agent`` filled in and the entity slot masked."""
        return self.text.format(agent=agent, entity=mask_token)


@dataclass(frozen=True)
class EntitySpec:
    """Groups (name -> agent word, in bias-score order), the neutral agent and the templates."""

    groups: dict[str, str]
    neutral: str
    templates: tuple[Template, ...]
    source: str = "<in memory>"

    @property
    def entities(self) -> list[str]:
        return [entity for template in self.templates for entity in template.entities]

    def template_of(self, entity: str) -> Template:
        return next(t for t in self.templates if entity in t.entities)

    def agents(self) -> dict[str, str]:
        """Group name -> agent word, the neutral agent last under the key ``"neutral"``."""
        return {**self.groups, "neutral": self.neutral}


def _need(mapping: dict, key: str, kind: type, where: str, source: str):
    if key not in mapping:
        raise InputError(f"Spec {source!r}: missing key {where}{key!r}.")
    value = mapping[key]
    if not isinstance(value, kind) or (kind is str and not value.strip()):
        raise InputError(f"Spec {source!r}: key {where}{key!r} should be a non-empty {kind.__name__} but is {value!r}.")
    return value


def parse_spec(payload: object, source: str = "<in memory>") -> EntitySpec:
    """Validate a loaded spec; every error names ``source`` and the key at fault."""
    if not isinstance(payload, dict):
        raise InputError(
            f"Spec {source!r}: expected a mapping with keys groups, neutral, templates but got {type(payload).__name__}."
        )
    unknown = sorted(set(payload) - {"groups", "neutral", "templates"})
    if unknown:
        raise InputError(f"Spec {source!r}: unknown key(s) {unknown}; expected groups, neutral, templates.")
    groups = _need(payload, "groups", dict, "", source)
    if len(groups) != 2:
        raise InputError(
            f"Spec {source!r}: key 'groups' needs exactly two groups (B(E) = S(E, first) - S(E, second)) but has {list(groups)}."
        )
    for name in groups:
        _need(groups, name, str, "groups.", source)
        if name == "neutral":
            raise InputError(
                f"Spec {source!r}: key 'groups' may not hold a group named 'neutral' (reserved for the neutral agent)."
            )
    neutral = _need(payload, "neutral", str, "", source)
    raw_templates = _need(payload, "templates", list, "", source)
    if not raw_templates:
        raise InputError(f"Spec {source!r}: key 'templates' is empty.")
    templates, seen = [], set()
    for index, raw in enumerate(raw_templates):
        where = f"templates[{index}]."
        if not isinstance(raw, dict):
            raise InputError(f"Spec {source!r}: templates[{index}] should be a mapping but is {raw!r}.")
        name, text = _need(raw, "name", str, where, source), _need(raw, "text", str, where, source)
        try:
            text.format(agent="", entity="")
        except (KeyError, IndexError, ValueError) as err:
            raise InputError(
                f"Spec {source!r}: key {where}text may hold only the slots {{agent}} and {{entity}} but is {text!r} ({err!r})."
            ) from err
        for slot in ("{agent}", "{entity}"):
            if text.count(slot) != 1:
                raise InputError(f"Spec {source!r}: key {where}text should hold {slot} exactly once but is {text!r}.")
        entities = _need(raw, "entities", list, where, source)
        for entity in entities:
            if not isinstance(entity, str) or not entity.strip():
                raise InputError(f"Spec {source!r}: key {where}entities holds {entity!r}; expected non-empty words.")
            if entity in seen:
                raise InputError(
                    f"Spec {source!r}: entity {entity!r} in {where}entities appears more than once in the spec."
                )
            seen.add(entity)
        if not entities:
            raise InputError(f"Spec {source!r}: key {where}entities is empty.")
        templates.append(Template(name=name, text=text, entities=tuple(entities)))
    return EntitySpec(groups=dict(groups), neutral=neutral, templates=tuple(templates), source=source)


def read_spec(path: str | Path | None = None) -> EntitySpec:
    """Read a spec YAML (default: the paper's case study, :func:`shipped_spec_path`)."""
    path = Path(path) if path is not None else shipped_spec_path()
    text = read_text(path, "Spec file", locate=yaml_field)
    try:
        payload = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(f"Spec file {str(path)!r} is not valid YAML: {err}") from err
    return parse_spec(payload, str(path))


@dataclass
class EntityImages:
    """Usable images per (entity, group) as ``(label, image)`` pairs (label: the file path, or an
    id for in-memory images; image: a path, PIL image or float (3, H, W) tensor in [0, 1]), and
    what was skipped and why."""

    source: str
    images: dict[tuple[str, str], list[tuple[str, object]]]
    skipped: list[dict[str, str]] = field(default_factory=list)

    def of(self, entity: str) -> list[tuple[str, str, object]]:
        """``(group, label, image)`` of every image of ``entity``: the set ``I_E`` (Sec. 3.2)."""
        return [(g, label, image) for (e, g), pairs in self.images.items() if e == entity for label, image in pairs]


def read_images(root: str | Path, spec: EntitySpec) -> EntityImages:
    """Scan ``<root>/<entity>/<group>/*`` for the spec's entities and groups (module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"Image folder {str(root)!r} does not exist or is not a directory.")
    found = EntityImages(source=str(root), images={})
    for entity in spec.entities:
        for group in spec.groups:
            folder = root / entity / group
            usable: list[tuple[str, object]] = []
            if not folder.is_dir():
                found.skipped.append({"item": f"{entity}/{group}", "reason": f"folder {str(folder)!r} does not exist"})
                continue
            for path in sorted(p for p in folder.iterdir() if not p.name.startswith(".")):
                if path.is_dir():
                    found.skipped.append(
                        {"item": str(path), "reason": f"is a folder; images go directly in {str(folder)!r}"}
                    )
                    continue
                problem = image_problem(path)
                if problem is not None:
                    found.skipped.append({"item": str(path), "reason": problem})
                    continue
                usable.append((str(path), path))
            if usable:
                found.images[(entity, group)] = usable
            else:
                found.skipped.append(
                    {"item": f"{entity}/{group}", "reason": f"folder {str(folder)!r} holds no usable image"}
                )
    return found
