"""The class prompts of the zero-shot fairness suite: the shipped ones of each task
(``vlbias/resources/zero_shot_prompts.yaml``, whose header describes its layout) or the user's ``{class: [prompts]}``.

Example:
    >>> prompts = task_prompts("gender", "Blond_Hair", None)
    >>> prompts.classes["Female"][:2], prompts.harmful
    (['a photo of a woman.', 'a photo of a female person.'], {})
    >>> sorted(task_prompts("harmful_labels", "", None).harmful["crime"])
    ['criminal', 'suspicious person', 'thief']
"""

from __future__ import annotations

from dataclasses import dataclass

from vlbias.data.lexicon import read_lexicon
from vlbias.errors import ConfigError, InputError

PROMPTS_FILE = "zero_shot_prompts.yaml"


@dataclass(frozen=True)
class ClassPrompts:
    """A task's classes: ``classes`` (class -> its prompts, in order), ``harmful`` (harmful-label category -> its
    classes; empty outside the harmful-label protocol) and where the prompts come from (``source``)."""

    task: str
    classes: dict[str, list[str]]
    harmful: dict[str, list[str]]
    source: str

    def given(self, prompts: dict[str, list[str]]) -> ClassPrompts:
        """The user's ``prompts`` for this task: the harmful categories keep the classes of theirs the user names."""
        classes = {str(name): [str(text) for text in texts] for name, texts in prompts.items()}
        harmful = {category: [c for c in names if c in classes] for category, names in self.harmful.items()}
        return ClassPrompts(self.task, classes, harmful, "suite option `prompts`")


def task_prompts(task: str, attribute: str, given: dict[str, list[str]] | None) -> ClassPrompts:
    """The prompts of ``task`` (``attribute``: CelebA's attribute of the ``attribute`` task), the user's ``given``
    ones when there are."""
    content, source = read_lexicon(None, PROMPTS_FILE, "Zero-shot prompt file")
    entry = content[task]
    if task == "attribute":
        shipped = entry["attributes"]
        if attribute not in shipped:
            if given is None:
                raise ConfigError(
                    f"No shipped prompts for CelebA attribute {attribute!r} (shipped: {', '.join(shipped)}); give them "
                    "as `prompts: {present: [...], absent: [...]}`."
                )
            phrases = {}
        else:
            phrases = shipped[attribute]
    else:
        phrases = entry["classes"]
    classes = {str(name): [t.format(p) for t in entry["templates"] for p in texts] for name, texts in phrases.items()}
    harmful = {category: list(names) for category, names in entry.get("harmful", {}).items()}
    unknown = [name for names in harmful.values() for name in names if name not in classes]
    if unknown:
        raise InputError(
            f"Zero-shot prompt file {source!r}: harmful classes {unknown} of task {task!r} have no prompts"
        )
    prompts = ClassPrompts(task, classes, harmful, source)
    return prompts if given is None else prompts.given(given)
