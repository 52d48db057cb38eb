"""VLStereoSet caption-selection probe (Zhou et al., 2022, Sec. 3.3–3.5).

Each item is an image with three candidate captions ``(S_s, S_a, S_i)``; the model scores the three
(image, caption) pairs and the argmax is the caption it selects:

* ``probe="match"`` (MATCH models): the image–text matching logits ``l_s, l_a, l_i``;
* ``probe="embed"`` (EMBED models): the cosine similarities ``c_s, c_a, c_i`` of the image and caption
  embeddings.

The paper normalises both with a softmax. Selection (vlrs, vlbs, ivlas) uses only the argmax, which
no positive temperature changes. The probabilities saved per item and lmss/vlss use
``softmax(scores / temperature)``: temperature 1 for ITM logits (already log-odds), and by default
0.01 for cosines, i.e. CLIP's learned logit scale of 100 (the value it is clamped to in training), so
that a contrastive model's probabilities are the ones it was trained to produce; the paper's literal
softmax over raw cosines in [-1, 1] (temperature 1) makes every distribution nearly uniform and
every lmss/vlss nearly 0. The sign of lmss and vlss, and so their "fraction above zero", does not
depend on the temperature.

What the ``match`` probe's softmax is depends on what the model's pair logit :math:`s` is, recorded as
``match_score`` in the results' config (:attr:`~vlbias.models.base.ModelAdapter.match_score`):

* ``itm`` (ALBEF, BLIP, ViLT, FLAVA, ...): :math:`s` is an ITM head's match log-odds; the softmax over the three
  captions is the paper's;
* ``softmax`` (open_clip's CLIPs): :math:`s = e^{\\tau}\\cos`, the logit of the softmax over candidates that
  the contrastive loss trains, so ``softmax(s)`` over the captions is the model's own choice distribution: the
  ``embed`` probe at temperature :math:`e^{-\\tau}` gives the same numbers (0.01 for a trained CLIP's 100);
* ``sigmoid`` (SigLIP, SigLIP 2, open_clip's SigLIPs): :math:`s = e^{\\tau}\\cos + b` is the log-odds that the pair
  matches, :math:`\\sigma(s)` the model's own probability of each caption on its own. The bias :math:`b` cancels in
  the softmax, which is the probability of each caption being the match given that exactly one of the three is,
  not the three independent :math:`\\sigma(s)` (which need not sum to 1).

Selection (vlrs, vlbs, ivlas) is the argmax of :math:`s` under every reading.

lmss (Eq. 2) and vlss (Eq. 3) are computed for the anti-stereotypical items whose captions the
neutral lexicon (:mod:`vlbias.counterfactual.neutralise`) can neutralise, with a completely white
``blank_size`` x ``blank_size`` image as ``I'``; they are summarised over all such items and over the
subset where the model picked the stereotypical caption (the paper's Sec. 4.3 analysis).

The paper's hypothetical reference models IDM, BIM and RAM (Sec. 4.1) are scored by the same metric
code on the same measured items (``reference/<model>/<score>``).

Stimuli: ``from_path`` reads the public CSV and images from a local folder (see
:mod:`vlbias.data.vlstereoset`); ``from_biasworld`` builds the same item structure from BiasWorld
(:func:`biasworld_items`). An item whose CSV row, image file or image content is unusable is skipped
with its reason (``scope: "all"``); an anti-stereotypical item that cannot be neutralised is measured
but left out of lmss/vlss with its reason (``scope: "lmss_vlss"``). Every such entry is counted in
the metrics (``n_skipped``, ``n_not_neutralised``).

Captions the model cannot see as written (:mod:`vlbias.models.unseen_text`): an item with a caption that is
empty or whose every token is the unknown token is skipped whole (``scope: "all"``, ``kind`` ``empty`` /
``unknown``, counted in ``n_skipped/empty``, ``n_skipped/unknown``), since the model's selection among the three
captions would compare a caption it cannot read; a neutralised caption it cannot see leaves the item out of
lmss/vlss only (``scope: "lmss_vlss"``, counted in ``n_not_neutralised``). An item whose captions (or
neutralised captions) are longer than the model's maximum is measured on what the model reads, with the reason
in its row's ``note`` (a column only those rows fill), and counted in ``n_truncated`` (items).

Measures:
    Whether a model, shown an image of a person and three captions (stereotypical, anti-stereotypical,
    irrelevant), picks the stereotypical caption when the image shows the anti-stereotype; and how much naming
    the group in the caption, or showing the image at all, pushes its choice toward the stereotype.

Direction:
    The higher ``vlbs``, the more often the model picks the stereotypical caption for an image that shows the
    anti-stereotype: 0 never, 100 always (the reference models: ideal IDM 0, random RAM 33.33). ``lmss`` and
    ``vlss`` above 0 mean naming the group, or showing the image, pushes the choice toward the stereotypical
    caption. ``vlrs`` and ``ivlas`` are higher for a better model and have no direction.

Glossary:
    * ``vlrs``: relevance: the share of images on which the model picks a related caption (stereotypical or
      anti-stereotypical) over the irrelevant one, in % (Eq. 1); ``vlrs/<category>`` per bias category.
    * ``vlbs``: bias: on the anti-stereotypical images, the share on which it picks the stereotypical caption, in %
      (0 unbiased, 100 always the stereotype); ``vlbs/<category>`` per bias category.
    * ``ivlas``: the harmonic mean of vlrs and 100 - vlbs, in % (0 to 100, higher is better);
      ``ivlas/<category>`` per bias category.
    * ``reference``: ``reference/<model>/<score>``: the paper's reference models scored on the same items: IDM,
      the ideal model (always the right caption: 100, 0, 100), BIM, always the stereotype (100, 100, 0), and RAM,
      a uniform random pick.
    * ``lmss``: intra-modal shift (Eq. 2), on anti-stereotypical images: ln of the probability of the stereotypical
      caption (against the anti-stereotypical one) with the group named over that with the group neutralised;
      above 0 when naming the group pushes toward the stereotype.
    * ``vlss``: inter-modal shift (Eq. 3): ln of that probability, captions neutralised, with the image over that
      with a blank image; above 0 when the image pushes toward the stereotype.
    * ``mean``: the mean over the items, with a percentile bootstrap interval over items.
    * ``fraction_positive``: the share of the items whose score is above 0.
    * ``picked_stereotype``: over the items on which the model picked the stereotypical caption only.
    * ``n_items``: items measured (``n_items/<category>`` per bias category).
    * ``n_anti``: of these, the anti-stereotypical images (``n_anti/<category>`` per bias category).
    * ``n_shift_items``: items that enter lmss and vlss.
    * ``n_skipped``: items skipped, in all and by kind (``n_skipped/<kind>``; ``empty``, ``unknown``: a caption
      empty or made of unknown tokens only).
    * ``n_not_neutralised``: anti-stereotypical items left out of lmss and vlss (a caption not neutralised).
    * ``n_truncated``: items measured with a caption truncated to the model's maximum length.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor

from vlbias.counterfactual.neutralise import NeutralLexicon
from vlbias.data.biasworld import ACTIVITIES, STEREOTYPES, BiasWorld
from vlbias.data.images import ImageInput, load_image
from vlbias.data.vlstereoset import BIAS_TYPES, CSV_NAME, read_vlstereoset
from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.vlstereoset import (
    CAPTIONS,
    REFERENCE_MODELS,
    caption_probabilities,
    reference_scores,
    shift_scores,
)
from vlbias.metrics.vlstereoset import VLStereoSetScores, VLStereoSetShift
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.inference import measuring
from vlbias.models.unseen_text import EMPTY, TRUNCATED, UNKNOWN, UnseenText, unseen_by
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.options import VLStereoSetOptions

if TYPE_CHECKING:
    from torchmetrics import Metric

DEFAULT_TEMPERATURE = {Capability.MATCH: 1.0, Capability.EMBED: 0.01}
NEUTRAL_CAPTIONS = ("neutral stereotype", "neutral anti-stereotype")  # S'_s, S'_a of lmss and vlss


@dataclass(frozen=True)
class ProbeItem:
    """One item ``(I, S_s, S_a, S_i, y)``: an image (path or PIL image), its captions in the order
    ``(S_s, S_a, S_i)``, whether the image is anti-stereotypical, its category and target term."""

    key: str
    category: str
    target: str
    image: ImageInput
    captions: tuple[str, str, str]
    anti_stereotypical: bool


def csv_items(csv_path: Path, image_dir: Path) -> tuple[list[ProbeItem], list[dict[str, str]]]:
    """Probe items of a VLStereoSet CSV with images looked up in ``image_dir`` by their stable name,
    and the rows skipped while reading."""
    rows, skipped = read_vlstereoset(csv_path)
    items = [
        ProbeItem(row.key, row.bias_type, row.target, image_dir / row.image_name, row.captions, row.anti_stereotypical)
        for row in rows
    ]
    return items, [{**entry, "scope": "all"} for entry in skipped]


def biasworld_items(
    world: BiasWorld, split: str = "test", template: str = "the {group} is {activity}.", unrelated: str = "photo"
) -> list[ProbeItem]:
    """VLStereoSet-style items from BiasWorld's ``split`` (balanced: half the images are counter-stereotypical).

    The target term is the image's group ``g`` and the attribute its activity, so a caption is
    ``template`` filled with ``g`` and an activity, as StereoSet fills a context sentence about a
    target term with an attribute. For an image of ``g`` doing ``a``:

    * ``a`` counter-stereotypical for ``g`` (a man cooking): ``y = a``; ``S_a`` is the true caption
      (the man is cooking), ``S_s`` puts in the stereotyped activity of ``g`` paired with ``a``;
    * ``a`` stereotypical (a man repairing): ``y = s``; ``S_s`` is the true caption, ``S_a`` puts in the
      counter-stereotypical activity paired with ``a``;
    * ``S_i`` always puts in ``unrelated``, a word that is no activity (StereoSet's "My sister is hi").
      The default, "photo", is in captions of every activity ("a photo of a man cooking."), so a model
      trained on BiasWorld has learned it and it says nothing about any activity; a word in no caption
      (such as "picture") would leave S_i's score to that word's random initial embedding.

    The pairing is by position: the i-th of ``STEREOTYPES[g]`` with the i-th of the other activities in
    ``ACTIVITIES`` order (man: repairing-cooking, driving-cleaning, coding-sewing), so each image has
    one fixed stereotype/anti-stereotype pair, like a StereoSet triplet. Category: ``gender``.
    """
    items = []
    for item, pixels in zip(world.items(split), world.images(split)):
        stereotyped = list(STEREOTYPES[item.group])
        counter = [activity for activity in ACTIVITIES if activity not in stereotyped]
        if len(stereotyped) != len(counter):
            raise ConfigError(
                f"BiasWorld group {item.group!r} has {len(stereotyped)} stereotyped and {len(counter)} other activities; pairing needs equal numbers."
            )
        if item.stereotyped:
            stereotype, anti = item.activity, counter[stereotyped.index(item.activity)]
        else:
            stereotype, anti = stereotyped[counter.index(item.activity)], item.activity
        image = Image.fromarray(pixels.permute(1, 2, 0).numpy())
        key = f"{split}/{item.index}: {item.group} {item.activity}"
        items.append(
            ProbeItem(
                key,
                "gender",
                item.group,
                image,
                tuple(
                    template.format(group=item.group, activity=attribute) for attribute in (stereotype, anti, unrelated)
                ),
                not item.stereotyped,
            )
        )
    return items


def _caption_checks(
    adapter: ModelAdapter, groups: Sequence[Sequence[str]], names: Sequence[str]
) -> list[tuple[UnseenText | None, str]]:
    """For each group of captions (named ``names``, e.g. :data:`CAPTIONS`): why the model cannot see one of them
    (the first; :func:`~vlbias.models.unseen_text.unseen_by`), or ``None``, and a note of those it reads
    truncated (``""`` if none)."""
    problems = unseen_by(adapter, [caption for group in groups for caption in group])
    checks = []
    for start, group in zip(range(0, len(problems), len(names)), groups):
        found = [
            (f"{name} caption {caption!r}: {problem.reason}", problem)
            for name, caption, problem in zip(names, group, problems[start : start + len(names)], strict=True)
            if problem is not None
        ]
        blocking = [UnseenText(problem.kind, reason, skip=True) for reason, problem in found if problem.skip]
        checks.append((blocking[0] if blocking else None, "; ".join(reason for reason, _ in found)))
    return checks


def _caption_scores(
    adapter: ModelAdapter, probe: Capability, pixel_values: Tensor, captions: list[list[str]]
) -> Tensor:
    """Scores ``(B, k)`` of image b with each of its k captions: ITM logits or cosine similarities."""
    k = len(captions[0])
    tokens = adapter.prepare_texts([caption for group in captions for caption in group])
    if probe is Capability.EMBED:
        images = F.normalize(adapter.embed_images(pixel_values).float(), dim=-1)  # (B, D)
        texts = F.normalize(adapter.embed_texts(tokens).float(), dim=-1).view(len(captions), k, -1)  # (B, k, D)
        return torch.einsum("bd,bkd->bk", images, texts).double().cpu()
    logits = adapter.match_logits(pixel_values.repeat_interleave(k, dim=0), tokens)  # (B k,)
    return logits.float().view(len(captions), k).double().cpu()


class VLStereoSetSuite(Suite):
    """vlrs, vlbs, ivlas (overall and per category), lmss and vlss of one model (Zhou et al., 2022).

    Metrics: ``vlrs``, ``vlbs``, ``ivlas`` and ``<score>/<category>`` with intervals of the same
    names; counts ``n_items``, ``n_anti``, ``n_items/<category>``, ``n_anti/<category>``,
    ``n_skipped`` and ``n_skipped/<reason kind>`` (``empty`` and ``unknown`` always), ``n_truncated``;
    ``lmss/mean``, ``lmss/fraction_positive`` (interval
    ``lmss/mean``), the same for vlss, and both again under ``.../picked_stereotype/...``, with
    ``n_shift_items`` and ``n_not_neutralised``; ``reference/<IDM|BIM|RAM>/<score>``.
    Per-item table: key, category, target, label, the three scores and probabilities, the selected
    caption, lmss and vlss (nan where not computed) and the neutralised captions. A score undefined on
    the measured items (vlbs without anti-stereotypical images, lmss without neutralisable items) is
    left out rather than reported as nan; a run that measures no item at all raises
    :class:`~vlbias.errors.InputError` naming the counts of each skip reason.

    Args:
        items: the probe items.
        data_config: how the stimuli were made (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.options.VLStereoSetOptions`); ``probe`` is the model
            capability used, and the temperature defaults to 1 for ``match`` and 0.01 for ``embed`` (see the module
            docstring).
        skipped: items already skipped while reading the data.
    """

    name = "vlstereoset"
    capability = Capability.EMBED  # per instance: the ``probe`` option

    def __init__(
        self,
        items: list[ProbeItem],
        data_config: dict[str, object],
        options: VLStereoSetOptions,
        skipped: list[dict[str, str]] | None = None,
    ) -> None:
        self.items, self.data_config, self.options, self.skipped = items, data_config, options, list(skipped or [])
        self.capability = Capability(options.probe)
        temperature = options.temperature
        self.temperature = DEFAULT_TEMPERATURE[self.capability] if temperature is None else temperature
        self.lexicon = NeutralLexicon.load(options.lexicon)

    @classmethod
    def from_path(cls, path: Path, options: VLStereoSetOptions) -> VLStereoSetSuite:
        """Items of ``path`` (a directory holding ``VLStereoSet.csv``, or the CSV itself) with images in
        ``image_dir`` (default: ``images/`` beside the CSV), named by :func:`~vlbias.data.vlstereoset.image_name`."""
        path = Path(path)
        csv_path = path / CSV_NAME if path.is_dir() else path
        images = Path(options.image_dir) if options.image_dir is not None else csv_path.parent / "images"
        if not images.is_dir():
            raise InputError(
                f"VLStereoSet image folder {str(images)!r} does not exist; fetch the images with scripts/fetch_vlstereoset_images.py or pass the suite option `image_dir`."
            )
        items, skipped = csv_items(csv_path, images)
        return cls(items, {"data": "csv", "csv": str(csv_path), "image_dir": str(images)}, options, skipped)

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: VLStereoSetOptions) -> VLStereoSetSuite:
        """Items of BiasWorld's ``split`` built by :func:`biasworld_items`."""
        split, template, unrelated = options.split, options.template, options.unrelated
        items = biasworld_items(world, split, template, unrelated)
        config = {"data": "biasworld", "split": split, "template": template, "unrelated": unrelated, **world.config}
        return cls(items, config, options)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "probe": self.capability.value,
            "temperature": self.temperature,
            "lexicon": self.options.lexicon or self.lexicon.source,
            "shift": self.options.shift,
            "blank_size": self.options.blank_size,
            "statistics": self.options.recorded_statistics(),
        }

    def stimuli(self) -> list[ProbeItem]:
        return self.items

    def start(self, adapter: ModelAdapter, seed: int) -> VLStereoSetMeasurement:
        return VLStereoSetMeasurement(self, adapter, seed)


@dataclass
class Probed:
    """Model outputs of one batch: ``skipped`` (stimulus index, skip entry) for images that did not load and
    anti-stereotypical items that could not be neutralised; ``measured`` (stimulus index, item) for the
    items whose image loaded, with their caption ``scores`` ``(M, 3)``; ``neutral`` the neutralised
    captions of the measured positions in ``shifted``, whose score pairs with the image ``I`` and with
    the blank image ``I'`` are ``with_image`` and ``with_blank`` ``(K, 2)``; ``notes`` per measured position: the
    captions the model reads truncated (``""``: none)."""

    skipped: list[tuple[int, dict[str, str]]]
    measured: list[tuple[int, ProbeItem]]
    scores: Tensor
    neutral: dict[int, list[str]]
    with_image: Tensor | None = None
    with_blank: Tensor | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def shifted(self) -> list[int]:
        """Positions in ``measured`` of the items with lmss and vlss."""
        return list(self.neutral)


class VLStereoSetMeasurement(Measurement):
    """One vlstereoset run of one adapter on one rank: the scores of the measured items, the same items
    scored as each reference model would (IDM, BIM, RAM: only their anti flags and categories matter),
    and lmss/vlss over all neutralised items and over those where the model picked S_s."""

    def __init__(self, suite: VLStereoSetSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        options = {
            "n_bootstrap": suite.options.statistics.n_bootstrap,
            "confidence": suite.options.statistics.confidence,
            "seed": seed,
            "sync_on_compute": False,
        }
        self.scores = VLStereoSetScores(categories=BIAS_TYPES, **options)
        self.references = {model: VLStereoSetScores(categories=BIAS_TYPES, **options) for model in REFERENCE_MODELS}
        self.shift_all, self.shift_picked = (
            VLStereoSetShift(temperature=suite.temperature, **options) for _ in range(2)
        )
        white = Image.new("RGB", (suite.options.blank_size, suite.options.blank_size), "white")
        self.blank = adapter.prepare_images([white]) if suite.options.shift else None

    def metrics(self) -> list[Metric]:
        shift = [self.shift_all, self.shift_picked] if self.suite.options.shift else []
        return [self.scores, *self.references.values(), *shift]

    def probe(self, batch: Batch) -> Probed:
        skipped, measured, images, notes = [], [], [], []
        checks = _caption_checks(self.adapter, [item.captions for item in batch.items], CAPTIONS)
        for index, item, (unseen, note) in zip(batch.indices, batch.items, checks, strict=True):
            try:
                image = load_image(item.image)
            except InputError as err:
                skipped.append((index, {"item": item.key, "reason": str(err), "scope": "all"}))
                continue
            if unseen is not None:  # the model sees no word of a caption: no selection among the three
                entry = {"item": item.key, "reason": unseen.reason, "scope": "all", "kind": unseen.kind}
                skipped.append((index, entry))
                continue
            images.append(image)
            measured.append((index, item))
            notes.append(note)
        if not measured:
            return Probed(skipped, measured, torch.empty(0, 3, dtype=torch.float64), {})
        neutral = self._neutralise(measured, skipped, notes)
        chosen = list(neutral)
        capability = self.suite.capability
        with measuring(self.adapter.device):
            pixel_values = self.adapter.prepare_images(images)
            scores = _caption_scores(
                self.adapter, capability, pixel_values, [list(item.captions) for _, item in measured]
            )
            if not chosen:
                return Probed(skipped, measured, scores, neutral, notes=notes)
            texts = [neutral[position] for position in chosen]
            with_image = _caption_scores(self.adapter, capability, pixel_values[chosen], texts)
            blanks = self.blank.repeat_interleave(len(chosen), dim=0)  # a tensor, or SigLIP 2's PatchImages
            with_blank = _caption_scores(self.adapter, capability, blanks, texts)
        return Probed(skipped, measured, scores, neutral, with_image, with_blank, notes)

    def _neutralise(
        self, measured: list[tuple[int, ProbeItem]], skipped: list[tuple[int, dict[str, str]]], notes: list[str]
    ) -> dict[int, list[str]]:
        """Neutralised ``(S'_s, S'_a)`` of the measured anti-stereotypical items, by position (none without
        ``shift``). An item the lexicon cannot neutralise, or with a neutralised caption the model cannot see
        (empty, unknown tokens only), gets a ``lmss_vlss`` skip entry; neutralised captions the model reads
        truncated are added to the item's note."""
        neutral: dict[int, list[str]] = {}
        if not self.suite.options.shift:
            return neutral
        for position, (index, item) in enumerate(measured):
            if item.anti_stereotypical:
                captions, reason = self.suite.lexicon.neutralise_item(item.target, item.captions[:2])
                if captions is None:
                    skipped.append((index, _not_neutralised(item, reason)))
                else:
                    neutral[position] = captions
        checks = _caption_checks(self.adapter, list(neutral.values()), NEUTRAL_CAPTIONS)
        for position, (unseen, note) in zip(list(neutral), checks, strict=True):
            index, item = measured[position]
            if unseen is not None:
                skipped.append((index, _not_neutralised(item, unseen.reason) | {"kind": unseen.kind}))
                del neutral[position]
            elif note:
                notes[position] = "; ".join(filter(None, (notes[position], note)))
        return neutral

    def update(self, batch: Batch, outputs: Probed) -> None:
        for index, entry in outputs.skipped:
            self.note_skip(index, entry)
        if not outputs.measured:
            return
        items = [item for _, item in outputs.measured]
        anti = torch.tensor([item.anti_stereotypical for item in items])
        category = torch.tensor([BIAS_TYPES.index(item.category) for item in items])
        self.scores.update(outputs.scores, anti, category)
        for model, reference in self.references.items():
            reference.update(reference_scores(model, anti), anti, category)
        rows = self._rows(outputs)
        self.count(TRUNCATED, sum(bool(note) for note in outputs.notes))
        if outputs.shifted:
            chosen = outputs.shifted
            original = outputs.scores[chosen, :2]
            picked = torch.tensor([rows[position]["selected"] == CAPTIONS[0] for position in chosen])
            self.shift_all.update(original, outputs.with_image, outputs.with_blank)
            self.shift_picked.update(original[picked], outputs.with_image[picked], outputs.with_blank[picked])
        for (index, _), row, note in zip(outputs.measured, rows, outputs.notes, strict=True):
            self.note_row(index, row | ({"note": note} if note else {}))

    def _rows(self, outputs: Probed) -> list[dict[str, object]]:
        """Item-table rows of the measured items: the three scores, their probabilities
        ``softmax(scores / temperature)``, the selected caption (``"tie"`` for a tied maximum), lmss (Eq. 2)
        and vlss (Eq. 3) where the item was neutralised (nan elsewhere), and the neutralised captions."""
        scores = outputs.scores
        probabilities = caption_probabilities(scores, self.suite.temperature)
        top = scores == scores.max(dim=1, keepdim=True).values
        selected = [CAPTIONS[int(hits.nonzero()[0])] if int(hits.sum()) == 1 else "tie" for hits in top]
        shifts = {position: (float("nan"), float("nan")) for position in range(len(scores))}
        if outputs.shifted:
            lmss = shift_scores(scores[outputs.shifted, :2], outputs.with_image, self.suite.temperature)  # Eq. 2
            vlss = shift_scores(outputs.with_image, outputs.with_blank, self.suite.temperature)  # Eq. 3
            shifts.update({position: (float(lmss[at]), float(vlss[at])) for at, position in enumerate(outputs.shifted)})
        return [
            _item_row(
                item,
                scores[position].tolist(),
                probabilities[position].tolist(),
                selected[position],
                shifts[position],
                outputs.neutral.get(position),
            )
            for position, (_, item) in enumerate(outputs.measured)
        ]

    def compute(self, gathered: Gathered) -> SuiteOutput:
        skipped = self.suite.skipped + gathered.skipped
        if not gathered.rows:
            kinds = Counter(_reason_kind(entry) for entry in skipped)
            raise InputError(
                f"No VLStereoSet item could be measured: all {len(skipped)} were skipped ({dict(kinds)}); check the data path and the image folder {self.suite.data_config.get('image_dir')!r}."
            )
        output = SuiteOutput(metrics={}, items=gathered.rows, skipped=skipped, n_items=len(gathered.rows))
        self._fill_scores(output)
        if self.suite.options.shift:
            self._fill_shift(output)
        output.metrics = {
            key: value for key, value in output.metrics.items() if math.isfinite(value)
        }  # nan: undefined, e.g. vlbs without anti-stereotypical items
        output.intervals = {key: value for key, value in output.intervals.items() if all(map(math.isfinite, value))}
        kinds = Counter(_reason_kind(entry) for entry in skipped)
        output.metrics["n_skipped"] = float(sum(count for kind, count in kinds.items() if kind != "not_neutralised"))
        output.metrics["n_not_neutralised"] = float(kinds.pop("not_neutralised", 0))
        output.metrics.update({f"n_skipped/{kind}": float(count) for kind, count in sorted(kinds.items())})
        for kind in (EMPTY, UNKNOWN):
            output.metrics.setdefault(f"n_skipped/{kind}", 0.0)
        output.metrics["n_truncated"] = float(gathered.counts.get(TRUNCATED, 0))
        return output

    def _fill_scores(self, output: SuiteOutput) -> None:
        """vlrs, vlbs, ivlas with their intervals and counts, overall and per category, and the reference
        models' vlrs, vlbs and ivlas on the same items."""
        for key, value in self.scores.compute().items():
            if key.endswith("/interval"):
                output.intervals[key.removesuffix("/interval")] = [float(v) for v in value]
            else:
                output.metrics[key] = float(value)
        for model, reference in self.references.items():
            for name, value in reference.compute().items():
                if name in ("vlrs", "vlbs", "ivlas"):
                    output.metrics[f"reference/{model}/{name}"] = float(value)

    def _fill_shift(self, output: SuiteOutput) -> None:
        """lmss and vlss mean, fraction above zero and interval of the mean, over all neutralised items and
        over those where the model picked S_s, with their item counts."""
        for prefix, metric in (("", self.shift_all), ("picked_stereotype/", self.shift_picked)):
            summary = metric.compute()
            for name in ("lmss", "vlss"):
                output.metrics[f"{name}/{prefix}mean"] = float(summary[f"{name}/mean"])
                output.metrics[f"{name}/{prefix}fraction_positive"] = float(summary[f"{name}/fraction_positive"])
                output.intervals[f"{name}/{prefix}mean"] = [float(v) for v in summary[f"{name}/interval"]]
            output.metrics[f"n_shift_items{'/' + prefix.rstrip('/') if prefix else ''}"] = float(summary["n_items"])


def _not_neutralised(item: ProbeItem, reason: str) -> dict[str, str]:
    """The ``lmss_vlss`` skip entry of an item measured but left out of lmss and vlss."""
    return {"item": item.key, "reason": f"not neutralised, left out of lmss/vlss: {reason}", "scope": "lmss_vlss"}


def _item_row(
    item: ProbeItem,
    scores: list[float],
    probabilities: list[float],
    selected: str,
    shifts: tuple[float, float],
    neutral: list[str] | None,
) -> dict[str, object]:
    """One row of the item table."""
    return {
        "item": item.key,
        "category": item.category,
        "target": item.target,
        "label": "anti-stereotypical" if item.anti_stereotypical else "stereotypical",
        **{f"score_{name}": value for name, value in zip(CAPTIONS, scores)},
        **{f"p_{name}": value for name, value in zip(CAPTIONS, probabilities)},
        "selected": selected,
        "lmss": shifts[0],
        "vlss": shifts[1],
        "neutral_stereotype": neutral[0] if neutral else None,
        "neutral_anti_stereotype": neutral[1] if neutral else None,
    }


# The reasons vlbias.data.images gives for an image file it cannot read (other than a missing file).
_IMAGE_PROBLEMS = (
    "could not be decoded",
    "could not be read",
    "dangling symbolic link",
    "is not a regular file",
    "is not supported",
    "EXIF block",
    "expected values in",
)


def _reason_kind(entry: dict[str, str]) -> str:
    """A short name for why an item was skipped, for the counts."""
    reason = entry["reason"]
    if entry.get("scope") == "lmss_vlss":
        return "not_neutralised"
    if "kind" in entry:  # a caption the model cannot see (empty, unknown)
        return entry["kind"]
    if "does not exist" in reason:
        return "image_missing"
    if any(problem in reason for problem in _IMAGE_PROBLEMS):
        return "image_unreadable"
    if "duplicate" in reason:
        return "duplicate_row"
    return "bad_row"
