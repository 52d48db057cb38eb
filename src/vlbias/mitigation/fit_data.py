r"""What a debiaser is fitted on (:class:`~vlbias.mitigation.debiaser.FitData`), built from a model and a data
source: BiasWorld (:func:`biasworld_fit_data`) or a user's prompt file (:func:`file_fit_data`).

**BiasWorld** (one split, ``val`` by default; measure the debiased model on ``test``):

* ``reference_images``: the split's images, each labelled with its group (``man`` / ``woman``) and, as
  ``reference_classes``, with its activity;
* ``attribute_prompts``: each group's activity-free phrases (``GROUP_TEMPLATES``: "a photo of a man.", ...);
* ``prompt_pairs``: for each caption template and activity, the template with each group ("a photo of a man
  cooking." / "a photo of a woman cooking."): the pair differs only in the group;
* ``concept_prompts``: every activity's neutral-subject phrases (``ACTIVITY_TEMPLATES``: "a person cooking.");
* ``attribute_words``: ``{"man": ["man"], "woman": ["woman"]}``; ``encode_text``: the model's text encoder;
* ``helpful_pairs``: none (RoboShot's insights are the user's: give them in a prompt file).

**A prompt file** (YAML or JSON; every key optional, a method refuses to fit without the ones it needs)::

    attribute_prompts: {male: ["a photo of a man"], female: ["a photo of a woman"]}
    prompt_pairs: [["a photo of a male doctor", "a photo of a female doctor"]]
    concept_prompts: ["a photo of a doctor", "a photo of a nurse"]
    helpful_pairs: [["a photo of a doctor", "a photo of a person"]]
    attribute_words: {male: [man, male], female: [woman, female]}
    reference:            # attribute-labelled reference images, from a face gallery (vlbias.data)
      gallery: fairface   # fairface | utkface | celeba
      root: /data/fairface
      split: val          # fairface and celeba only
      attribute: gender
      limit: 2000         # the first images of each value, at most (default all)

Texts the model cannot see (:func:`~vlbias.models.unseen_text.unseen_by`, the check every measuring suite makes:
empty to its tokenizer, such as a prompt of U+200B only, or unknown tokens only, a script its vocabulary lacks) are
not fitted on: each is skipped by name (a pair with such a text, the whole pair), with a warning, and listed with its
reason in :attr:`FitData.description`'s ``skipped``; a field, or a value of ``attribute_prompts``, left with no text
is refused. So is a reference image the gallery reader skips (a FairFace row with a race outside the release's):
listed in ``skipped`` as ``vlbias measure`` lists it.

Every text is embedded by the model (unit rows, :func:`~vlbias.models.embedding.text_encoder`); images are embedded in
batches (:func:`~vlbias.models.embedding.unit_image_embeddings`). :attr:`FitData.description` records the source
(BiasWorld's split and world, or the file's path and what it gave) for ``debias.json``, and :func:`fit_selection` what
:func:`~vlbias.mitigation.outputs.same_selection` compares with the data measured afterwards.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

import yaml
from torch import Tensor

from vlbias.data.biasworld import (
    ACTIVITIES,
    CAPTION_TEMPLATES,
    GROUPS,
    BiasWorld,
    activity_phrases,
    group_phrases,
)
from vlbias.data.text_files import read_text, yaml_field
from vlbias.errors import InputError
from vlbias.mitigation.debiaser import FitData
from vlbias.models.base import ModelAdapter
from vlbias.models.embedding import text_encoder, unit_image_embeddings
from vlbias.models.unseen_text import unseen_by

logger = logging.getLogger(__name__)

#: The keys a prompt file may hold.
FILE_KEYS = ("attribute_prompts", "prompt_pairs", "concept_prompts", "helpful_pairs", "attribute_words", "reference")
#: The :class:`FitData` fields :func:`biasworld_fit_data` gives (all but ``helpful_pairs``).
BIASWORLD_GIVES = frozenset(
    {
        "reference_images",
        "reference_labels",
        "reference_classes",
        "attribute_prompts",
        "prompt_pairs",
        "concept_prompts",
        "encode_text",
        "attribute_words",
        "description",
    }
)
#: The face galleries a prompt file's ``reference`` may name: reader and whether it takes a split.
GALLERIES = {
    "fairface": ("vlbias.data.fairface:read_fairface", True),
    "utkface": ("vlbias.data.utkface:read_utkface", False),
    "celeba": ("vlbias.data.celeba:read_celeba", True),
}


def biasworld_pairs() -> list[tuple[str, str]]:
    """The prompt pairs of BiasWorld: every caption template and activity with each of the two groups."""
    first, second = GROUPS
    return [
        (template.format(group=first, activity=activity), template.format(group=second, activity=activity))
        for template in CAPTION_TEMPLATES
        for activity in ACTIVITIES
    ]


def biasworld_fit_data(adapter: ModelAdapter, world: BiasWorld, split: str = "val", batch_size: int = 64) -> FitData:
    """BiasWorld's ``split`` as fitting data (module docstring)."""
    encode = text_encoder(adapter)
    items = world.items(split)
    seen = SeenTexts(adapter)
    attribute_prompts = seen.attribute_prompts({group: group_phrases(group) for group in GROUPS})
    pairs = seen.pairs("prompt_pairs", biasworld_pairs())
    phrases = [phrase for activity in ACTIVITIES for phrase in activity_phrases(activity)]
    concepts = seen.texts("concept_prompts", phrases)
    description = {"data": "biasworld", "split": split, **world.config, "n_reference": len(items)}
    return FitData(
        reference_images=unit_image_embeddings(adapter, world.images(split), batch_size),
        reference_labels=[item.group for item in items],
        reference_classes=[item.activity for item in items],
        attribute_prompts={group: encode(texts) for group, texts in attribute_prompts.items()},
        prompt_pairs=_pair_embeddings(encode, pairs),
        concept_prompts=encode(concepts),
        encode_text=encode,
        attribute_words={group: [group] for group in GROUPS},
        description=description | ({"skipped": seen.skipped} if seen.skipped else {}),
    )


class SeenTexts:
    """The fitting texts ``adapter`` can see: each text :func:`~vlbias.models.unseen_text.unseen_by` would have a
    measuring suite skip (empty to the tokenizer, or unknown tokens only) is left out, warned about and listed in
    :attr:`skipped` (``{"item": "<field>: <text>", "reason": ...}``); a field, or a value of ``attribute_prompts``,
    with no text left is refused by name."""

    def __init__(self, adapter: ModelAdapter) -> None:
        self.adapter = adapter
        self.skipped: list[dict[str, str]] = []

    def _kept(self, field: str, texts: Sequence[str]) -> list[bool]:
        """Per text of ``field``, whether the model can see it (one not is skipped by name)."""
        kept = []
        for text, problem in zip(texts, unseen_by(self.adapter, texts), strict=True):
            kept.append(problem is None or not problem.skip)
            if not kept[-1]:
                self.skipped.append({"item": f"{field}: {text!r}", "reason": problem.reason})
                logger.warning(f"warning: not fitting on {field} text {text!r}: {problem.reason}")
        if not any(kept):
            raise InputError(
                f"Every text of `{field}` is one the model cannot see ({self.skipped[-1]['reason']}): "
                "nothing is left to fit on; give texts in words its tokenizer knows"
            )
        return kept

    def texts(self, field: str, texts: Sequence[str]) -> list[str]:
        """``texts`` of ``field`` the model can see."""
        return [text for text, kept in zip(texts, self._kept(field, texts), strict=True) if kept]

    def pairs(self, field: str, pairs: Sequence[Sequence[str]]) -> list[Sequence[str]]:
        """The ``pairs`` of ``field`` both of whose texts the model can see."""
        kept = self._kept(field, [text for pair in pairs for text in pair])
        chosen = [pair for k, pair in enumerate(pairs) if kept[2 * k] and kept[2 * k + 1]]
        if not chosen:
            raise InputError(f"No pair of `{field}` has two texts the model can see: nothing is left to fit on")
        return chosen

    def attribute_prompts(self, prompts: Mapping[Hashable, Sequence[str]]) -> dict[Hashable, list[str]]:
        """Each value's prompts the model can see."""
        return {value: self.texts(f"attribute_prompts[{value!r}]", texts) for value, texts in prompts.items()}


def _pair_embeddings(encode: Callable[[Sequence[str]], Tensor], pairs: Sequence[Sequence[str]]) -> Tensor:
    """``(p, 2, D)`` embeddings of ``pairs`` of texts."""
    embedded = encode([text for pair in pairs for text in pair])
    return embedded.view(len(pairs), 2, -1)


def read_prompt_file(path: str | Path) -> dict:
    """The prompt file at ``path`` (YAML or JSON), its keys and value shapes checked (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"Debiasing data {str(path)!r} is neither 'biasworld' nor a prompt file (YAML or JSON)")
    text = read_text(path, "Prompt file", locate=yaml_field)  # bytes that are not UTF-8: named by line and offset
    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(f"Prompt file {str(path)!r} is not valid YAML or JSON: {str(err).splitlines()[0]}") from err
    if not isinstance(content, dict) or not content:
        raise InputError(f"Prompt file {str(path)!r}: expected a mapping with some of {', '.join(FILE_KEYS)}")
    unknown = sorted(set(content) - set(FILE_KEYS))
    if unknown:
        raise InputError(
            f"Prompt file {str(path)!r}: unknown key(s) {unknown}; expected some of {', '.join(FILE_KEYS)}"
        )
    for key in ("attribute_prompts", "attribute_words"):
        if key in content and not _is_mapping_of_texts(content[key]):
            raise InputError(
                f"Prompt file {str(path)!r}: expected `{key}` to map each attribute value to a list of texts"
            )
    for key in ("prompt_pairs", "helpful_pairs"):
        pairs = content.get(key, [])
        if not isinstance(pairs, list) or not all(_is_texts(pair) and len(pair) == 2 for pair in pairs):
            raise InputError(f"Prompt file {str(path)!r}: expected `{key}` to be a list of [text, text] pairs")
    if not _is_texts(content.get("concept_prompts", [])):
        raise InputError(f"Prompt file {str(path)!r}: expected `concept_prompts` to be a list of texts")
    if "reference" in content:
        _check_reference(content["reference"], path)
    return content


def fields_given(data: str | Path) -> frozenset[str]:
    """The :class:`FitData` fields that ``data`` (``"biasworld"`` or a prompt file) gives, known before any model
    embeds it: what lets a method that needs another be refused at the door."""
    if data == "biasworld":
        return BIASWORLD_GIVES
    content = read_prompt_file(data)
    given = {key for key in FILE_KEYS if content.get(key) and key != "reference"}
    if content.get("reference"):
        given |= {"reference_images", "reference_labels"}
    return frozenset(given | {"encode_text", "description"})


def _is_texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(text, str) and text.strip() for text in value)


def _is_mapping_of_texts(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and all(_is_texts(texts) and texts for texts in value.values())


def file_fit_data(adapter: ModelAdapter, path: str | Path, batch_size: int = 64) -> FitData:
    """The prompt file at ``path`` as fitting data, its texts (and reference images) embedded by ``adapter``."""
    content = read_prompt_file(path)
    encode = text_encoder(adapter)
    given = {key: content[key] for key in FILE_KEYS if content.get(key)}
    fields: dict[str, object] = {"encode_text": encode}
    seen = SeenTexts(adapter)
    if "attribute_prompts" in given:
        prompts = seen.attribute_prompts(given["attribute_prompts"])
        fields["attribute_prompts"] = {value: encode(texts) for value, texts in prompts.items()}
    for key in ("prompt_pairs", "helpful_pairs"):
        if key in given:
            fields[key] = _pair_embeddings(encode, seen.pairs(key, given[key]))
    if "concept_prompts" in given:
        fields["concept_prompts"] = encode(seen.texts("concept_prompts", given["concept_prompts"]))
    if "attribute_words" in given:
        fields["attribute_words"] = dict(given["attribute_words"])
    description: dict[str, object] = {
        "data": str(Path(path).resolve()),
        "given": {key: len(value) for key, value in given.items() if key != "reference"},
    }
    skipped = seen.skipped
    if "reference" in given:
        paths, labels, reference, left_out = reference_gallery(given["reference"])
        fields["reference_images"] = unit_image_embeddings(adapter, [str(p) for p in paths], batch_size)
        fields["reference_labels"] = labels
        description["reference"] = {**reference, "n_reference": len(labels)}
        for entry in left_out:
            logger.warning(f"warning: reference image {entry['item']} left out: {entry['reason']}")
        skipped = [*skipped, *left_out]
    if skipped:
        description["skipped"] = skipped
    return FitData(**fields, description=description)


def reference_gallery(spec: Mapping[str, object]) -> tuple[list[Path], list[Hashable], dict, list[dict[str, str]]]:
    """The image paths and labels a prompt file's ``reference`` (checked by :func:`read_prompt_file`) names: a face
    gallery's images with one attribute, the first ``limit`` of each value; its resolved description; and what the
    gallery's reader skipped (``{"item", "reason"}`` each, as a measuring suite's results list it)."""
    import importlib

    module, _, function = GALLERIES[spec["gallery"]][0].partition(":")
    reader = getattr(importlib.import_module(module), function)
    gallery = reader(spec["root"], spec["split"]) if "split" in spec else reader(spec["root"])
    attribute, limit = spec.get("attribute", "gender"), spec.get("limit")
    chosen = sorted(i for indices in gallery.groups(attribute).values() for i in indices[:limit])
    every = gallery.image_paths
    paths = [every[i] for i in chosen]
    labels = [gallery.labels[attribute][i] for i in chosen]
    described = {"gallery": gallery.dataset, "root": str(gallery.image_root), "split": gallery.split,
                 "attribute": attribute, "limit": limit}  # fmt: skip
    return paths, labels, described, [{"item": e["item"], "reason": e["reason"]} for e in gallery.skipped]


def _check_reference(spec: object, path: Path) -> None:
    """A prompt file's ``reference``: a gallery of :data:`GALLERIES`, its ``root``, and only the keys it takes."""
    if not isinstance(spec, Mapping) or spec.get("gallery") not in GALLERIES or "root" not in spec:
        raise InputError(
            f"Prompt file {str(path)!r}: expected `reference` to give `gallery` (one of {', '.join(GALLERIES)}), "
            f"`root` and `attribute` but got {json.dumps(spec, default=str)[:200]}"
        )
    unknown = sorted(set(spec) - {"gallery", "root", "split", "attribute", "limit"})
    if unknown:
        raise InputError(f"Prompt file {str(path)!r}: unknown `reference` key(s) {unknown}")
    if "split" in spec and not GALLERIES[spec["gallery"]][1]:
        raise InputError(f"Prompt file {str(path)!r}: gallery {spec['gallery']!r} has no splits; remove `split`")
    limit = spec.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(
            f"Prompt file {str(path)!r}: expected `reference.limit` to be a positive integer, got {limit!r}"
        )
