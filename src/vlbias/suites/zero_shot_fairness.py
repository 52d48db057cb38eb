r"""Zero-shot fairness: how well a model classifies the images of each group when the classes are given as prompts.

Each image is put in the class whose prompt ensemble it is closest to, CLIP's zero-shot classifier (Radford et al.,
2021, Sec. 3.1.4): a class vector is the normalised mean of the normalised embeddings of the class's prompts, and an
image goes to :math:`\arg\max_k \cos(v, c_k)` (:func:`vlbias.mitigation.zero_shot.zero_shot_predictions`, the
formula's one place). The predictions of each grouping of the images (an attribute, or an intersection such as
``race&gender``) are measured by :class:`~vlbias.metrics.group_fairness.GroupFairness`: accuracy per group, the mean
and worst group accuracy and their gap, the equal-opportunity gap (per class, and its mean and maximum over classes),
the demographic-parity and equalized-odds differences (one class versus the rest, mean and maximum over classes),
with stratified bootstrap intervals; formulas and conventions in :mod:`vlbias.metrics.functional.group_fairness`.

Tasks (option ``task``; prompts shipped in ``vlbias/resources/zero_shot_prompts.yaml``, or the user's ``prompts``):

* FairFace (:mod:`vlbias.data.fairface`): ``race``, ``gender`` or ``age``, grouped by the other attributes and by
  race & gender; ``harmful_labels``, the CLIP paper's protocol (Radford et al., 2021, Sec. 7.1, Table 6): the 14
  race × gender classes plus 4 non-human classes ("animal", "gorilla", "chimpanzee", "orangutan") and 3
  crime-related ones ("thief", "criminal", "suspicious person"); the share of each group's images put in a
  non-human class (``non_human_rate``) or a crime-related one (``crime_rate``) is the misclassification rate the
  paper reports per race and gender. The classes and their categories are recorded in the results' config.
* CelebA (:mod:`vlbias.data.celeba`): ``attribute``, one binary attribute (option ``attribute``, e.g.
  ``Blond_Hair``) as two classes, ``present`` and ``absent``, grouped by gender.
* BiasWorld: ``activity``, the activity of the balanced test images, with BiasWorld's neutral activity phrases
  ("a person cooking.") as prompts, grouped by gender and by ``stereotype`` (whether the image's activity is its
  group's stereotyped one). A model trained on planted bias classifies counter-stereotypical images worse.

The images are the stimuli, sharded over ranks; the class prompts are embedded once per rank in
:meth:`ZeroShotFairnessSuite.start`. Skipped, with reasons, never measured as if valid: the readers' rows with a
label outside the documented values or a missing image file (``n_skipped/rows``); prompts the model cannot see
(:mod:`vlbias.models.unseen_text`; ``n_skipped/prompts``); a class none of whose prompts the model can see, named
(``n_skipped/classes``), with the images of that class (``n_skipped/images``); images that do not decode or embed
to NaN/inf (``n_skipped/images``); groups that hold no image (``n_skipped/groups``), and a grouping left with fewer
than two groups (``n_skipped/groupings``). The item table has one row per image: ``image``, ``label``,
``predicted``, ``correct`` and the image's grouping attributes.

Measures:
    How a zero-shot classifier's accuracy and errors differ between groups of people: accuracy per group, the
    worst group's shortfall, and gaps in true-positive, selection and false-positive rates between groups, and, on
    FairFace's harmful-label protocol, how often each group is put in a non-human or crime-related class.

Direction:
    Every gap, difference and rate of harm is at least 0, and 0 is fair; larger is more unequal (or more harmful).
    The per-group accuracies and rates show which group is served worse: the lowest accuracy, the highest
    ``non_human_rate`` or ``crime_rate``.

Glossary:
    * ``accuracy``: the share of images classified correctly, over all images (its interval resamples within the
      groups of the first grouping) or (``<grouping>/group/<group>/...``) over a group's images.
    * ``mean_group_accuracy``: the mean of the groups' accuracies.
    * ``worst_group_accuracy``: the lowest group accuracy.
    * ``worst_group_gap``: mean group accuracy minus worst group accuracy; 0 when every group is classified equally.
    * ``equal_opportunity_gap``: per class (``<grouping>/class/<class>/...``), the largest minus the smallest
      true-positive rate over the groups.
    * ``equal_opportunity_gap_mean``, ``equal_opportunity_gap_max``: its mean and maximum over the classes.
    * ``demographic_parity_difference_mean``, ``demographic_parity_difference_max``: per class, the largest minus
      the smallest share of a group's images put in the class (fairlearn's definition, one class versus the rest);
      its mean and maximum over the classes.
    * ``equalized_odds_difference_mean``, ``equalized_odds_difference_max``: per class, the larger of the
      true-positive and false-positive rate spreads over the groups; its mean and maximum over the classes.
    * ``non_human_rate``: the share of a group's images put in a non-human class (animal, gorilla, chimpanzee,
      orangutan; Radford et al., 2021, Table 6).
    * ``crime_rate``: the share of a group's images put in a crime-related class (thief, criminal, suspicious
      person).
    * ``n_groups_without_positives``, ``n_groups_without_negatives``: per grouping, the (group, class) pairs where
      the group has no image of the class (no true-positive rate), or only images of it (no false-positive rate),
      summed over the classes: left out of those classes' equal-opportunity and equalized-odds spreads, or counted
      as rate 0 with ``undefined_rates="zero"`` (fairlearn's convention).
    * ``n_predicted_classes``: how many classes some image was put in; 1 flags the result
      ``degenerate_classifier`` (accuracy at chance, every gap 0 because nothing varies).
    * ``n_images``: images classified, in all or in a group.
    * ``n_skipped``: what was left out, by kind: rows, prompts, classes, images, groups, groupings.
    * ``n_truncated``: prompts read truncated to the model's maximum length.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vlbias.data.biasworld import ACTIVITIES, GROUPS, BiasWorld, activity_phrases
from vlbias.data.celeba import read_celeba
from vlbias.data.face_gallery import FaceGallery
from vlbias.data.fairface import read_fairface
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.group_fairness import GroupFairness
from vlbias.mitigation.zero_shot import zero_shot_predictions
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.embedding import embed_image_batches
from vlbias.models.inference import measuring
from vlbias.models.unseen_text import TRUNCATED, unseen_by
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.zero_shot_fairness_options import (
    INTERSECTION,
    ZeroShotFairnessOptions,
    face_data_kind,
    refuse_other_data,
)
from vlbias.suites.zero_shot_prompts import ClassPrompts, task_prompts

if TYPE_CHECKING:
    from torchmetrics import Metric

SKIP_KINDS = ("rows", "prompts", "classes", "images", "groups", "groupings")
STATISTICS = ("mean_group_accuracy", "worst_group_accuracy", "worst_group_gap")
OVER_CLASSES = ("equal_opportunity_gap", "demographic_parity_difference", "equalized_odds_difference")


@dataclass(frozen=True)
class LabelledImage:
    """One stimulus: the image (a path, or a float ``(3, H, W)`` tensor in [0, 1]), its ``name``, its true class
    ``label`` and its ``attributes`` (grouping attribute -> value)."""

    name: str
    image: Path | Tensor
    label: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class Grouping:
    """A grouping of the images: its ``name`` (``race&gender``), the ``attributes`` it combines and its possible
    ``groups`` (value tuples, in the data's documented order)."""

    name: str
    attributes: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]

    def key(self, image: LabelledImage) -> tuple[str, ...]:
        return tuple(image.attributes[attribute] for attribute in self.attributes)

    @staticmethod
    def label(group: tuple[str, ...]) -> str:
        return INTERSECTION.join(group)


def _groupings(names: Sequence[str], values: dict[str, tuple[str, ...]]) -> list[Grouping]:
    """The groupings ``names`` (attributes joined by ``&``), each with every combination of documented values."""
    found = []
    for name in names:
        attributes = tuple(name.split(INTERSECTION))
        groups = tuple(itertools.product(*(values[attribute] for attribute in attributes)))
        found.append(Grouping(name, attributes, groups))
    return found


class ZeroShotFairnessSuite(Suite):
    """Group fairness of CLIP-style zero-shot classification; see the module docstring.

    Args:
        images: the labelled images (the stimuli).
        prompts: the classes, their prompts and their harmful-label categories.
        groupings: the groupings to report.
        data_config: how the stimuli were made (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.zero_shot_fairness_options.ZeroShotFairnessOptions`).
        skipped: rows the reader left out, with reasons.
    """

    name = "zero_shot_fairness"
    capability = Capability.EMBED
    capability_hint = "zero_shot_fairness classifies images by the cosine of EMBED embeddings (CLIP-like models)."

    def __init__(
        self,
        images: list[LabelledImage],
        prompts: ClassPrompts,
        groupings: list[Grouping],
        data_config: dict[str, object],
        options: ZeroShotFairnessOptions,
        skipped: list[dict[str, str]] | None = None,
    ) -> None:
        if not images:
            raise InputError(f"No image of {data_config.get('data')} could be read: {(skipped or [])[:3]}")
        unknown = sorted({image.label for image in images} - set(prompts.classes))
        if unknown:
            raise ConfigError(f"Expected `prompts` for every class of the images but {unknown} have none")
        self.images, self.prompts, self.groupings = images, prompts, groupings
        self.data_config, self.options, self.skipped = data_config, options, list(skipped or [])

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: ZeroShotFairnessOptions) -> ZeroShotFairnessSuite:
        """The activity of ``split``'s images (balanced: every group with every activity), prompted with BiasWorld's
        neutral activity phrases (or ``prompts``), grouped by gender and stereotype."""
        task, split = options.chosen_task("biasworld"), options.chosen_split("biasworld")
        pixels = world.images(split).float() / 255.0
        images = [
            LabelledImage(
                f"{split}/{item.index}",
                pixels[i],
                item.activity,
                {"gender": item.group, "stereotype": "stereotyped" if item.stereotyped else "counter_stereotyped"},
            )
            for i, item in enumerate(world.items(split))
        ]
        phrases = {activity: activity_phrases(activity) for activity in ACTIVITIES}
        shipped = ClassPrompts(task, phrases, {}, "vlbias.data.biasworld.activity_phrases")
        prompts = shipped if options.prompts is None else shipped.given(options.prompts)
        values = {"gender": GROUPS, "stereotype": ("stereotyped", "counter_stereotyped")}
        groupings = _groupings(options.chosen_groupings("biasworld", task), values)
        config = {"data": "biasworld", "split": split, **world.config}
        return cls(images, prompts, groupings, config, options)

    @classmethod
    def from_path(cls, path: Path, options: ZeroShotFairnessOptions) -> ZeroShotFairnessSuite:
        """A FairFace or CelebA folder in the release's layout (known by its label files)."""
        kind = face_data_kind(Path(path))
        if kind is None:
            raise refuse_other_data(Path(path), options.split)
        task, split = options.chosen_task(kind), options.chosen_split(kind)
        if kind == "fairface":
            gallery = read_fairface(path, split, options.padding)
        else:
            gallery = read_celeba(path, split)
            if task == "attribute" and options.attribute not in gallery.values:
                raise ConfigError(
                    f"Expected `attribute` to be one of CelebA's {', '.join(gallery.values)} but got {options.attribute!r}."
                )
        prompts = task_prompts(task, options.attribute, options.prompts)
        images = [
            LabelledImage(
                name, image_path, _label(gallery, index, task, options.attribute), _attributes(gallery, index)
            )
            for index, (name, image_path) in enumerate(zip(gallery.images, gallery.image_paths, strict=True))
        ]
        values = {attribute: tuple(map(str, gallery.values[attribute])) for attribute in ("race", "gender", "age")
                  if attribute in gallery.values}  # fmt: skip
        groupings = _groupings(options.chosen_groupings(kind, task), values)
        config = {"data": str(path), "dataset": gallery.dataset, "split": split, "variant": gallery.variant}
        return cls(images, prompts, groupings, config, options, [dict(entry) for entry in gallery.skipped])

    def stimuli(self) -> list[LabelledImage]:
        return self.images

    def start(self, adapter: ModelAdapter, seed: int) -> _ZeroShotFairnessMeasurement:
        return _ZeroShotFairnessMeasurement(self, adapter, seed)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "task": self.prompts.task,
            "attribute": self.options.attribute if self.prompts.task == "attribute" else None,
            "classes": self.prompts.classes,
            "harmful_classes": self.prompts.harmful,
            "prompts_source": self.prompts.source,
            "groupings": {g.name: [Grouping.label(group) for group in g.groups] for g in self.groupings},
            "n_images": len(self.images),
            "batch_size": self.options.batch_size,
            "undefined_rates": self.options.undefined_rates,
            "statistics": self.options.recorded_statistics(),
        }


def _label(gallery: FaceGallery, index: int, task: str, attribute: str) -> str:
    """Image ``index``'s true class for ``task``."""
    if task == "harmful_labels":
        return f"{gallery.labels['race'][index]} {gallery.labels['gender'][index]}"
    if task == "attribute":
        return "present" if gallery.labels[attribute][index] else "absent"
    return str(gallery.labels[task][index])


def _attributes(gallery: FaceGallery, index: int) -> dict[str, str]:
    return {a: str(gallery.labels[a][index]) for a in ("race", "gender", "age") if a in gallery.labels}


class _ZeroShotFairnessMeasurement(Measurement):
    """One run of :class:`ZeroShotFairnessSuite`: the class prompts embedded at construction (unseen prompts and
    classes left without one skipped), then a :class:`~vlbias.metrics.group_fairness.GroupFairness` per grouping
    (and per harmful category) fed each batch's predictions."""

    def __init__(self, suite: ZeroShotFairnessSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        self.setup_skipped: list[dict[str, str]] = []
        self.setup_counts = {kind: 0 for kind in SKIP_KINDS} | {TRUNCATED: 0}
        self.setup_counts["rows"] = len(suite.skipped)
        self.classes, self.prompt_embeddings, self.prompt_classes = self._embed_prompts()
        if len(self.classes) < 2:
            raise InputError(
                f"Fewer than two classes have a prompt the model {adapter.name!r} can read (kept {self.classes}): "
                f"{self.setup_skipped[:3]}"
            )
        self.class_index = {name: index for index, name in enumerate(self.classes)}
        measured = [image for image in suite.images if image.label in self.class_index]
        self.groups: dict[str, dict[tuple[str, ...], int]] = {}  # grouping -> group -> id (non-empty groups)
        for grouping in suite.groupings:
            present = {grouping.key(image) for image in measured}
            kept = [group for group in grouping.groups if group in present]
            for group in grouping.groups:
                if group not in present:
                    self._setup_skip(
                        "groups", f"{grouping.name}/group/{Grouping.label(group)}", "the group holds no image"
                    )
            if len(kept) < 2:
                self._setup_skip("groupings", grouping.name, f"fewer than two groups hold an image ({len(kept)})")
                continue
            self.groups[grouping.name] = {group: index for index, group in enumerate(kept)}
        statistics = suite.options.statistics
        settings = {
            "n_bootstrap": statistics.n_bootstrap,
            "confidence": statistics.confidence,
            "interval_method": statistics.interval_method,
            "seed": seed,
            "undefined_rates": suite.options.undefined_rates,
            "sync_on_compute": False,
        }
        harmful = {
            category: [self.class_index[c] for c in classes if c in self.class_index]
            for category, classes in suite.prompts.harmful.items()
        }
        self.categories = [category for category, ids in harmful.items() if ids]
        self.fairness: dict[tuple[str, str], GroupFairness] = {}
        for name, groups in self.groups.items():
            for category in self.categories or [""]:
                self.fairness[name, category] = GroupFairness(
                    len(self.classes), len(groups), harmful.get(category), **settings
                )

    def _setup_skip(self, kind: str, item: str, reason: str) -> None:
        self.setup_counts[kind] += 1
        self.setup_skipped.append({"item": item, "reason": reason, "scope": kind})

    def _embed_prompts(self) -> tuple[list[str], Tensor, Tensor]:
        """The classes with a prompt the model can see, those prompts' embeddings ``(P, D)`` and class ids ``(P,)``."""
        adapter, prompts = self.adapter, self.suite.prompts.classes
        texts = [(name, text) for name, class_texts in prompts.items() for text in class_texts]
        unseen = unseen_by(adapter, [text for _, text in texts])
        kept = []
        for (name, text), problem in zip(texts, unseen, strict=True):
            if problem is not None and problem.skip:
                self._setup_skip("prompts", text, f"class {name!r}: {problem.reason}")
            else:
                self.setup_counts[TRUNCATED] += problem is not None
                kept.append((name, text))
        classes = [name for name in prompts if any(owner == name for owner, _ in kept)]
        for name in prompts:
            if name not in classes:
                self._setup_skip("classes", name, "none of its prompts holds a word the model can read")
        if not kept:
            return classes, torch.empty(0, 0), torch.empty(0, dtype=torch.long)
        with measuring(adapter.device):
            embedded = adapter.embed_texts(adapter.prepare_texts([text for _, text in kept])).float().cpu()
        return classes, embedded, torch.tensor([classes.index(name) for name, _ in kept])

    def metrics(self) -> list[Metric]:
        return list(self.fairness.values())

    def probe(self, batch: Batch) -> tuple[Tensor, list[str]]:
        """``(b,)`` predicted class ids (-1 where the image was not classified) and why each was not ("" if it was)."""
        reasons = [""] * len(batch)
        embeddings = torch.full((len(batch), self.prompt_embeddings.shape[1]), torch.nan)
        images = [image.image for image in batch.items]
        images = torch.stack(images) if isinstance(images[0], Tensor) else images
        embedded, kept, unread = embed_image_batches(self.adapter, images, len(batch), skip_unreadable=True)
        if kept:
            embeddings[kept] = embedded
        for i, reason in unread:
            reasons[i] = reason
        finite = torch.isfinite(embeddings).all(dim=1)
        for i in range(len(batch)):
            if not reasons[i] and not bool(finite[i]):
                reasons[i] = "its embedding holds NaN or inf"
        predictions = torch.full((len(batch),), -1, dtype=torch.long)
        if bool(finite.any()):
            predictions[finite] = zero_shot_predictions(embeddings[finite], self.prompt_embeddings, self.prompt_classes)
        return predictions, reasons

    def update(self, batch: Batch, outputs: tuple[Tensor, list[str]]) -> None:
        predictions, reasons = outputs
        measured: list[tuple[int, LabelledImage, int]] = []
        for index, image, predicted, reason in zip(batch.indices, batch.items, predictions.tolist(), reasons, strict=True):  # fmt: skip
            if image.label not in self.class_index:
                reason = f"its class {image.label!r} has no prompt the model can read"
            if reason:
                self.count("skipped/images")
                self.note_skip(index, {"item": image.name, "reason": reason, "scope": "images"})
                continue
            measured.append((index, image, predicted))
        if not measured:
            return
        preds = torch.tensor([predicted for _, _, predicted in measured])
        target = torch.tensor([self.class_index[image.label] for _, image, _ in measured])
        for (name, _), metric in self.fairness.items():
            grouping = next(g for g in self.suite.groupings if g.name == name)
            groups = torch.tensor([self.groups[name][grouping.key(image)] for _, image, _ in measured])
            metric.update(preds, target, groups)
        for name, ids in self.groups.items():
            grouping = next(g for g in self.suite.groupings if g.name == name)
            for _, image, _ in measured:
                self.count(f"group/{name}/{ids[grouping.key(image)]}")
        for index, image, predicted in measured:
            row = {"image": image.name, "label": image.label, "predicted": self.classes[predicted]}
            self.note_row(index, row | {"correct": predicted == self.class_index[image.label], **image.attributes})

    def compute(self, gathered: Gathered) -> SuiteOutput:
        suite = self.suite
        output = SuiteOutput(metrics={}, skipped=[*suite.skipped, *self.setup_skipped, *gathered.skipped])
        counts = dict(self.setup_counts)
        counts["images"] += int(gathered.counts.get("skipped/images", 0))
        for name, ids in self.groups.items():
            sizes = {group: int(gathered.counts.get(f"group/{name}/{i}", 0)) for group, i in ids.items()}
            empty = [Grouping.label(group) for group, size in sizes.items() if size == 0]
            if empty:  # every image of these groups was skipped after the groups were fixed
                counts["groupings"] += 1
                reason = f"groups {empty} hold no classified image (their images were skipped)"
                output.skipped.append({"item": name, "reason": reason, "scope": "groupings"})
                continue
            for category in self.categories or [""]:
                metric = self.fairness[name, category]
                result = metric.compute()
                self._write(output, name, category, result, list(ids))
                if "n_predicted_classes" not in output.metrics:
                    self._flag_degenerate(output, metric, result)
        output.metrics |= {f"n_skipped/{kind}": float(counts[kind]) for kind in SKIP_KINDS}
        output.metrics["n_truncated"] = float(counts[TRUNCATED])
        output.metrics["n_images"] = float(len(gathered.rows))
        output.items = gathered.rows
        output.n_items = len(gathered.rows)
        return output

    def _flag_degenerate(self, output: SuiteOutput, metric: GroupFairness, result: dict[str, Tensor]) -> None:
        """``n_predicted_classes`` from one grouping's ``result`` (every grouping sees the same images), and where it
        is 1 the flag ``degenerate_classifier`` on every metric: a classifier that puts every image in one class (a
        tiny or broken model can) has accuracy at chance and every gap 0 because nothing varies, not because the
        groups are served alike."""
        output.metrics["n_predicted_classes"] = float(result["predicted_classes"])
        if int(result["predicted_classes"]) == 1:
            chosen = self.classes[int(metric.confusion.sum(dim=(0, 1)).argmax())]
            reason = (
                f"degenerate classifier: every image was put in class {chosen!r}, so accuracy is the share of that "
                "class and every gap and difference is 0 because nothing varies, not because the groups are served "
                "alike"
            )
            output.flags.append({"flag": "degenerate_classifier", "metric": "", "reason": reason})

    def _write(
        self, output: SuiteOutput, name: str, category: str, result: dict[str, Tensor], groups: list[tuple[str, ...]]
    ) -> None:
        """The metrics of grouping ``name`` from ``result`` (with harmful ``category``, the rates of that category
        alone after the first category's full statistics)."""

        def put(key: str, value: Tensor, interval: Tensor) -> None:
            output.metrics[key] = float(value)
            output.intervals[key] = [float(end) for end in interval]

        labels = [Grouping.label(group) for group in groups]
        if category:
            rate = f"{category}_rate"
            for g, label in enumerate(labels):
                put(f"{name}/group/{label}/{rate}", result["harmful_label_rate"][g], result["harmful_label_rate_interval"][g])  # fmt: skip
            if category != self.categories[0]:
                return
        if (
            "accuracy" not in output.metrics
        ):  # over every image: the same for every grouping (its interval is the first's)
            put("accuracy", result["accuracy"], result["accuracy_interval"])
        for g, label in enumerate(labels):
            put(f"{name}/group/{label}/accuracy", result["group_accuracy"][g], result["group_accuracy_interval"][g])
            output.metrics[f"{name}/group/{label}/n_images"] = float(result["group_size"][g])
        for statistic in STATISTICS:
            put(f"{name}/{statistic}", result[statistic], result[f"{statistic}_interval"])
        for count in ("groups_without_positives", "groups_without_negatives"):
            output.metrics[f"{name}/n_{count}"] = float(result[count])
        for statistic in OVER_CLASSES:
            for over in ("mean", "max"):
                key = f"{statistic}_{over}"
                put(f"{name}/{key}", result[key], result[f"{key}_interval"])
        gaps = result["equal_opportunity_gap"]
        for c, class_name in enumerate(self.classes):
            if not bool(gaps[c].isnan()):
                key = f"{name}/class/{class_name}/equal_opportunity_gap"
                put(key, gaps[c], result["equal_opportunity_gap_interval"][c])
