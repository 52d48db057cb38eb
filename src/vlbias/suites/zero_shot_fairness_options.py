"""The options of the zero-shot fairness suite (:mod:`vlbias.suites.zero_shot_fairness`), declared in a module of
their own and found by :func:`vlbias.suites.options.suite_options_class`. Imports no torch.

Which tasks a data source has, and each task's default groupings, are here too, so that a task the data cannot
give is refused before any data or model is loaded (:meth:`ZeroShotFairnessOptions.check_source`), and the data's
kind is known by its files (:func:`face_data_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from jsonargparse.typing import PositiveInt

from vlbias.data.celeba import ATTRIBUTES_FILE
from vlbias.data.face_datasets import detect_face_dataset
from vlbias.data.fairface import label_file
from vlbias.errors import ConfigError, InputError
from vlbias.options import StatisticsOptions
from vlbias.suites.options import NO_PERMUTATION_TEST, Split, SuiteOptions

Task = Literal["race", "gender", "age", "harmful_labels", "attribute", "activity"]
#: data kind -> its tasks (the first is the default) and default split.
TASKS: dict[str, tuple[str, ...]] = {
    "biasworld": ("activity",),
    "fairface": ("race", "gender", "age", "harmful_labels"),
    "celeba": ("attribute",),
}
DEFAULT_SPLITS: dict[str, str] = {"biasworld": "test", "fairface": "val", "celeba": "test"}
#: The attribute separator of an intersectional grouping (``race&gender``: one group per race and gender).
INTERSECTION = "&"
#: task -> the groupings it reports by default: the data's other attributes, and race & gender on FairFace.
DEFAULT_GROUPINGS: dict[str, tuple[str, ...]] = {
    "race": ("gender", "age", "race&gender"),
    "gender": ("race", "age", "race&gender"),
    "age": ("race", "gender", "race&gender"),
    "harmful_labels": ("race", "gender", "race&gender"),
    "attribute": ("gender",),
    "activity": ("gender", "stereotype"),
}
#: data kind -> the attributes a grouping may name.
GROUPING_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "biasworld": ("gender", "stereotype"),
    "fairface": ("race", "gender", "age"),
    "celeba": ("gender",),
}


@dataclass(frozen=True)
class ZeroShotFairnessOptions(SuiteOptions):
    """Zero-shot fairness (``vlbias.suites.zero_shot_fairness``).

    Args:
        task: what to classify: race, gender, age or harmful_labels (the CLIP paper's protocol) on FairFace;
            attribute (a binary attribute, present or absent) on CelebA; activity on BiasWorld (default: the data's
            first).
        attribute: CelebA's attribute of the attribute task (e.g. Blond_Hair, Smiling).
        split: split to classify (default: val on FairFace, test on CelebA and BiasWorld).
        padding: FairFace's image folder, 0.25 or 1.25, where both are present.
        prompts: {class: [prompts]}, each class's prompt ensemble, instead of the shipped prompts of the task.
        groupings: attributes whose values are the groups compared, an intersection written race&gender (default:
            the data's other attributes, and race&gender on FairFace).
        batch_size: images per forward pass.
        undefined_rates: what a group's true- or false-positive rate of a class is where the group has no image of
            the class (or only images of it): leave_out (default) leaves the group out of that class's
            equal-opportunity and equalized-odds spreads; zero counts the rate as 0, fairlearn's convention.
        statistics: stratified bootstrap intervals (within each group) of every statistic.
    """

    SUITE: ClassVar[str] = "zero_shot_fairness"
    PATH_ONLY: ClassVar[tuple[str, ...]] = ("attribute", "padding")
    FIXED_STATISTICS: ClassVar[dict[str, str]] = {
        "n_permutations": NO_PERMUTATION_TEST,
        "exact_limit": NO_PERMUTATION_TEST,
    }

    task: Task | None = None
    attribute: str = "Blond_Hair"
    split: Split | None = None
    padding: Literal[0.25, 1.25] | None = None
    prompts: dict[str, list[str]] | None = None
    groupings: list[str] | None = None
    batch_size: PositiveInt = 64
    undefined_rates: Literal["leave_out", "zero"] = "leave_out"
    statistics: StatisticsOptions = StatisticsOptions(interval_method="bca")

    def __post_init__(self) -> None:
        super().__post_init__()
        prompts = self.prompts
        if prompts is not None and (
            len(prompts) < 2 or any(isinstance(texts, str) or not texts for texts in prompts.values())
        ):
            raise ConfigError(
                f"Expected `prompts` as {{class: [prompts]}} with at least two classes, each with a non-empty list of "
                f"prompts, but got {prompts!r}"
            )
        if self.groupings is not None and not self.groupings:
            raise ConfigError("Expected `groupings` to name at least one attribute but got [].")

    def check_source(self, biasworld: bool) -> None:
        super().check_source(biasworld)
        if biasworld:
            self.chosen_task("biasworld")

    def chosen_task(self, kind: str) -> str:
        """The task on data of ``kind`` (``biasworld``, ``fairface``, ``celeba``): ``task``, or the data's default;
        a task the data does not have is refused with the ones it has."""
        tasks = TASKS[kind]
        if self.task is None:
            return tasks[0]
        if self.task not in tasks:
            raise ConfigError(f"Expected `task` to be one of {', '.join(tasks)} on {kind} data but got {self.task!r}.")
        return self.task

    def chosen_split(self, kind: str) -> str:
        """``split``, or the data's default split."""
        return self.split or DEFAULT_SPLITS[kind]

    def chosen_groupings(self, kind: str, task: str) -> list[str]:
        """The groupings to report: ``groupings`` (each once), or the task's default; a grouping that names an
        attribute the data does not have, or the classified attribute alone, is refused."""
        groupings = list(dict.fromkeys(self.groupings or DEFAULT_GROUPINGS[task]))
        known = GROUPING_ATTRIBUTES[kind]
        for grouping in groupings:
            parts = grouping.split(INTERSECTION)
            if any(part not in known for part in parts) or len(set(parts)) != len(parts):
                raise ConfigError(
                    f"Expected each of `groupings` to be one of {', '.join(known)} or an intersection of distinct ones "
                    f"(race{INTERSECTION}gender) but got {grouping!r}."
                )
            if parts == [task]:
                raise ConfigError(f"Expected `groupings` other than the classified attribute {task!r} itself.")
        return groupings


def face_data_kind(path: Path) -> str | None:
    """``"celeba"`` or ``"fairface"``: which of the suite's face data sets the folder ``path`` holds, by its files
    (:func:`vlbias.data.face_datasets.detect_face_dataset`), or ``None`` when it holds neither (UTKFace has no
    classes this suite's tasks use)."""
    return {"FairFace": "fairface", "CelebA": "celeba"}.get(detect_face_dataset(path) or "")


def refuse_other_data(path: Path, split: str | None) -> InputError:
    """The error for a data path that is neither a FairFace nor a CelebA folder."""
    return InputError(
        f"Data path {str(path)!r} holds neither FairFace's {label_file(split or DEFAULT_SPLITS['fairface'])} nor "
        f"CelebA's {ATTRIBUTES_FILE}; expected a FairFace or CelebA folder in the release's layout (or 'biasworld')."
    )
