"""What the FairVLP table measures on a trained model besides CounterBias (:mod:`vlbias.experiments.fairvlp_table`):
accuracy on BiasWorld's balanced split, and B@V-L over any subset of the attacked images."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

from vlbias.data.biasworld import ACTIVITIES, GROUPS
from vlbias.metrics.functional import dataset_bias, mean_absolute_bias
from vlbias.models.masked_words import word_log_probs


@torch.no_grad()
def accuracies(adapter, world, split: str = "test") -> dict[str, float]:
    """Accuracy of a trained ALBEF on BiasWorld's balanced ``split``, in percent:

    * ``masked_activity``: each caption that names its activity, the activity masked, argmax over the six
      activities at the mask == the activity;
    * ``itm``: each image with its own caption (label 1) and with the caption of its group and the next activity
      (label 0), ``match_logits > 0`` == label;
    * ``i2t_r1``: each image against the twelve captions "a photo of a {group} {activity}." of every (group,
      activity) pair, the best match == its own pair; and its two parts, how often the best match names the
      image's activity (``i2t_r1_activity``) and how often its group (``i2t_r1_group``): a model that stops reading
      gender from images loses the second, one that stops reading the activity the first.
    """
    items = world.items(split)
    pixels = adapter.prepare_images(world.images(split).float() / 255.0)
    mask = adapter.tokenizer.mask_token
    named = [
        i
        for i, item in enumerate(items)
        if item.activity in item.caption.split() or f"{item.activity}." in item.caption
    ]
    templates = [items[i].caption.replace(items[i].activity, mask) for i in named]
    scores = word_log_probs(adapter, pixels[named], templates, list(ACTIVITIES))
    truth = torch.tensor([ACTIVITIES.index(items[i].activity) for i in named])
    masked_activity = (scores.argmax(dim=1) == truth).float().mean().item()
    own = [item.caption for item in items]
    other = [
        item.caption.replace(item.activity, ACTIVITIES[(ACTIVITIES.index(item.activity) + 1) % len(ACTIVITIES)])
        for item in items
    ]
    positive = adapter.match_logits(pixels, adapter.prepare_texts(own)) > 0
    negative = adapter.match_logits(pixels, adapter.prepare_texts(other)) <= 0
    itm = torch.cat([positive, negative]).float().mean().item()
    pairs = [(g, a) for g in GROUPS for a in ACTIVITIES]
    candidates = adapter.prepare_texts([f"a photo of a {g} {a}." for g, a in pairs])
    n, c = len(items), len(pairs)
    logits = adapter.match_logits(
        pixels.repeat_interleave(c, dim=0), {k: v.repeat(n, 1) for k, v in candidates.items()}
    ).view(n, c)
    truth = torch.tensor([pairs.index((item.group, item.activity)) for item in items])
    best, a = logits.argmax(dim=1), len(ACTIVITIES)  # a pair's index: its group's index * a + its activity's
    right = {"i2t_r1": best == truth, "i2t_r1_activity": best % a == truth % a, "i2t_r1_group": best // a == truth // a}
    return {"masked_activity": 100 * masked_activity, "itm": 100 * itm} | {
        key: 100 * hits.float().mean().item() for key, hits in right.items()
    }


def image_records(items: Sequence[dict], b0: Sequence[str]) -> dict[str, dict]:
    """Each attacked test image of the activities, measured whether or not its attack succeeded: its activity,
    Eq. 7's direction (+1 where its bias concept is B0), whether its attack succeeded, and its B@V-L (Eq. 6) per
    template (``None`` where Eq. 6 excludes it). From these :func:`bias_on` measures any subset of the images."""
    records: dict[str, dict] = {}
    for row in items:
        if row["group"] != "activity":
            continue
        record = records.setdefault(
            row["item"],
            {
                "target": row["target"],
                "direction": 1 if row["bias"] in b0 else -1,
                "attack_succeeded": row["attack_succeeded"],
                "B@V-L": {},
            },
        )
        value = row["bias_B@V-L"]
        record["B@V-L"][row["template"]] = None if math.isnan(value) else value
    return records


def bias_on(records: dict[str, dict], images: Iterable[str]) -> float:
    """B@V-L of the activities (Table 2, percent) over ``images`` only: per template bias(T) of each activity
    (Eq. 7) and the mean of its absolute values, then the mean over templates, as the suite computes it over the
    images it measures (NaN when no image is given)."""
    images = sorted(images)
    if not images:
        return math.nan
    per_template = []
    for template in records[images[0]]["B@V-L"]:
        bias = torch.tensor([math.nan if (v := records[i]["B@V-L"][template]) is None else v for i in images])
        target = torch.tensor([ACTIVITIES.index(records[i]["target"]) for i in images])
        direction = torch.tensor([records[i]["direction"] for i in images])
        per_target, _ = dataset_bias(bias, target, direction, len(ACTIVITIES))
        per_template.append(mean_absolute_bias(per_target))
    return torch.stack(per_template).nanmean().item()
