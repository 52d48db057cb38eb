r"""Gallery skew: who a model shows for a text query, in a gallery labelled with gender, race, age (or BiasWorld's
skin tone), the face-attribute audit of DebiasCLIP, BendVLM and SFID.

Every query ranks the whole gallery by the cosine of the model's EMBED embeddings (CLIP-like dual encoders). For each
labelled attribute (``gender``, ``race``, ``age``, ``tone``) and each intersection (``race_x_gender``,
``tone_x_gender``: one value per pair of values), :class:`~vlbias.metrics.RankingBias` measures, at each cut-off K,
MaxSkew@K and MinSkew@K (Geyik et al., 2019, Eq. 3-4), KL@K (the top K's KL divergence from the desired shares) and
NDKL@K (their Eq. 6); formulas in :mod:`vlbias.metrics.functional.ranking_bias`. ``protocol`` names the conventions
of a source (:mod:`vlbias.metrics.ranking_protocols`: ``geyik`` by default, ``debiasclip``, ``bendvlm``, ``sfid``):
the desired shares, the default K, the zero handling, the ties at the cut-off and the skew's form, recorded in the
results' config. A value no gallery image holds (an empty group) is skipped by name and counted, never measured as
a share of 0: an attribute's values are those its gallery images hold, so ``uniform`` desired shares are
:math:`1/|\text{values held}|`; an attribute with fewer than two values held is skipped.

Precision@K (:class:`~vlbias.metrics.PrecisionAtK`) is reported for the queries whose concept the gallery labels: a
BiasWorld activity (the images showing it are relevant), a CelebA attribute of the ``bendvlm_hair`` set (the images
holding it are relevant).

**Intervals.** Every statistic has a percentile bootstrap interval over the queries (as ``retrieval_bias``). Where
the protocol has gallery folds (``bendvlm``: 5), each fold is a random half of the embedded gallery (fold ``f`` takes
the first half of a permutation drawn, in order, from a generator seeded with the run's seed, as BendVLM draws its
folds in ``create_dataset.py``); the queries rank each fold alone, a fold's value is the statistic's mean over every
query on that fold (its desired shares the fold's own under ``bendvlm``), and ``folds/<attribute>/<statistic>@K`` is
the mean of the F fold values with the Student-t interval over them, :math:`\bar x \pm t_{F-1,(1+c)/2}\, s/\sqrt F`
(:func:`~vlbias.metrics.functional.t_interval.t_interval`). Fold statistics are over all queries, not per group; K
must then be at most half the gallery. A ``k`` above the images ranked is refused; the protocol's K, when above them
(``debiasclip``'s 1000, ``bendvlm``'s 500 on a small gallery), is lowered to them and flagged
(``n_protocol_k_above_gallery``, config ``protocol_k``, the reason in the skip list): every top K (each fold's, under
folds) then holds every image ranked, whose skews measure the gallery's shares, not the ranking. A group's interval
that rests on one query is null, not zero-wide (:func:`~vlbias.suites.gallery_ranking.report_ranking`).

Stimuli (:meth:`GallerySkewSuite.from_biasworld`, :meth:`GallerySkewSuite.from_path`):

* BiasWorld: the planted gallery of :mod:`vlbias.data.biasworld_gallery` (``share`` of each activity's stereotyped
  gender, ``per_activity`` images each, the world's seed and image size), ranked for the activities' neutral phrases
  (``queries: activities``, each in the group of its activity) by default.
* A FairFace, UTKFace or CelebA folder in its release layout, told apart by its files
  (:mod:`vlbias.data.face_datasets`), ranked for the ``neutral`` prompts by default.

Queries (``queries``): a shipped set (``src/vlbias/resources/gallery_queries/<name>.yaml``, each naming the file and
commit it was taken from): ``neutral`` (vlbias's "a photo of a person." prompts), ``debiasclip`` (DebiasCLIP's 11
templates x 29 concepts, grouped by concept), ``bendvlm`` (BendVLM's 25 stereotype queries), ``bendvlm_hair``
(BendVLM's CelebA hair-colour queries, each labelled by its attribute); ``activities`` (BiasWorld); or your own list
(group ``queries``) or ``{group: [queries]}``. The attributes measured by default (:data:`DEFAULT_ATTRIBUTES`) are the
demographic ones each data set labels as groups; UTKFace's ``age`` (a number of years, 117 values) is measured only
when ``attributes`` names it.

The queries are the stimuli, sharded over ranks; the gallery is embedded once per rank in
:meth:`GallerySkewSuite.start` (:mod:`vlbias.suites.gallery_ranking`).

Outputs: the metrics above with their intervals, ``n_queries`` (and per group), ``gallery/n_images`` (the ranked
images), ``n_empty_groups``. The item table has one row per query: ``query``, ``group``, ``source``, ``concept`` and
``precision@K`` where the concept is labelled. Skipped, with reasons: gallery images that are missing (the readers'
skips) or do not decode or embed to NaN/inf, empty groups, attributes with one value held, groups left without a
query, and queries the model cannot see (:mod:`vlbias.models.unseen_text`, counted ``n_skipped/empty``,
``n_skipped/unknown``; a truncated query is ranked, noted and counted ``n_truncated``).

Measures:
    Whom a retrieval model shows first for a query: the shares of each gender, race, age group or skin tone (and
    race x gender) among the top K images, against the desired shares of the chosen protocol, per attribute, over
    all queries and per query group (a concept).

Direction:
    ``max_skew@K`` above 0 means a group is over-represented in the top K, ``min_skew@K`` below 0 that one is
    under-represented; ``kl@K`` and ``ndkl@K`` are at least 0 and 0 is fair. None says which group is favoured: the
    item table's counts do not either; measure per group of queries to see which concepts are skewed.

Glossary:
    * ``max_skew@K``: the largest over-representation of an attribute's value in the top K, max over values of
      ln(share / desired share), averaged over queries; 0 is fair (Geyik et al., 2019, Eq. 3). ``<attribute>/...``
      over every query, ``group/<group>/<attribute>/...`` over a query group.
    * ``min_skew@K``: the largest under-representation, the smallest ln(share / desired share); 0 is fair (Geyik et
      al., Eq. 4).
    * ``kl@K``: the KL divergence of the top K's shares from the desired shares; at least 0, 0 is fair.
    * ``ndkl@K``: the KL divergence of every top-k prefix's shares from the desired shares, discounted by
      1 / log₂(k + 1) and normalised; at least 0, 0 is fair (Geyik et al., Eq. 6).
    * ``precision@K``: the share of a query's top K images that hold its concept, averaged over the queries whose
      concept the gallery labels; from 0 to 1, higher is better retrieval.
    * ``folds``: ``folds/<attribute>/<statistic>@K``: the mean over the protocol's gallery folds (random halves) of
      the statistic, with a t-interval over the folds.
    * ``n_queries``: queries measured, in all or in a group (or with a labelled concept, ``precision/n_queries``).
    * ``gallery``: ``gallery/n_images``: the images ranked.
    * ``n_empty_groups``: attribute values (and intersections) no ranked image holds, skipped.
    * ``n_skipped``: ``n_skipped/empty``, ``n_skipped/unknown``: queries skipped as empty or made of unknown tokens
      only.
    * ``n_truncated``: queries ranked truncated to the model's maximum length.
    * ``n_protocol_k_above_gallery``: 1 when the protocol's K was above the images ranked and was lowered to them
      (config ``protocol_k``, the K used in ``k``): every top K (each fold's, under folds) then holds every image
      ranked, and the statistics at that K but ``ndkl@K`` measure the gallery's shares, not the ranking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import yaml
from torch import Tensor

from vlbias.data.biasworld import ACTIVITIES, BiasWorld, activity_phrases
from vlbias.data.biasworld_gallery import PlantedGallery
from vlbias.data.face_datasets import read_face_dataset
from vlbias.data.face_gallery import FaceGallery
from vlbias.errors import ConfigError, InputError
from vlbias.metrics import PrecisionAtK, RankingBias
from vlbias.metrics.functional.precision import per_query_precision
from vlbias.metrics.functional.t_interval import t_interval
from vlbias.metrics.ranking_protocols import ranking_protocol
from vlbias.models.base import Capability, ModelAdapter
from vlbias.models.unseen_text import EMPTY, TRUNCATED, UNKNOWN, UnseenText
from vlbias.suites.base import Batch, Gathered, Measurement, Suite, SuiteOutput
from vlbias.suites.gallery_ranking import (
    embed_gallery,
    measured_queries,
    report_lowered_k,
    report_ranking,
    score_queries,
)
from vlbias.suites.gallery_skew_options import GallerySkewOptions

if TYPE_CHECKING:
    from torchmetrics import Metric

ALL = "all"  # the scope of every query
REPORTED = ("max_skew", "min_skew", "kl", "ndkl")
#: data set -> the attributes measured when ``attributes`` is not given.
DEFAULT_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "BiasWorld": ("gender", "tone"),
    "FairFace": ("gender", "race", "age"),
    "UTKFace": ("gender", "race"),
    "CelebA": ("gender",),
}
#: (first, second): the intersection ``<first>_x_<second>`` measured where both are.
INTERSECTIONS: tuple[tuple[str, str], ...] = (("race", "gender"), ("tone", "gender"))


@dataclass(frozen=True)
class ConceptQuery:
    """A query: its ``text``, the ``group`` it is reported in, its ``source`` (the query set), and the gallery label
    ``(attribute, value)`` an image must hold to be relevant to it (``None``: its concept is not labelled)."""

    text: str
    group: str
    source: str
    concept: tuple[str, object] | None = None


def shipped_queries(name: str) -> tuple[list[ConceptQuery], str]:
    """The queries of the shipped set ``name`` (``resources/gallery_queries/<name>.yaml``) and its source line. A set
    with ``templates`` fills each with each of its ``concepts`` (group: the concept); a set with ``queries`` lists
    ``{group: [texts]}``; ``labelled: true`` makes each group a gallery attribute that relevant images hold."""
    spec = yaml.safe_load(files("vlbias.resources").joinpath("gallery_queries", f"{name}.yaml").read_text())
    source = spec["source"]
    if "templates" in spec:
        grouped = {concept: [t.format(concept) for t in spec["templates"]] for concept in spec["concepts"]}
    else:
        grouped = spec["queries"]
    labelled = bool(spec.get("labelled", False))
    queries = [
        ConceptQuery(text, str(group), name, (str(group), True) if labelled else None)
        for group, texts in grouped.items()
        for text in dict.fromkeys(texts)
    ]
    return queries, source


def chosen_queries(options: GallerySkewOptions, gallery: FaceGallery, default: str) -> tuple[list[ConceptQuery], str]:
    """The queries ``options.queries`` names (``default`` when not given) and their source, checked against the
    gallery: ``activities`` needs BiasWorld's gallery, a labelled set the attributes it labels."""
    given = default if options.queries is None else options.queries
    if isinstance(given, list | dict):
        grouped = given if isinstance(given, dict) else {"queries": given}
        return [ConceptQuery(t, str(g), "user") for g, texts in grouped.items() for t in dict.fromkeys(texts)], "user"
    if given == "activities":
        if "activity" not in gallery.values:
            raise ConfigError(f"Query set 'activities' needs BiasWorld's gallery; {gallery.dataset} shows no activity.")
        return [ConceptQuery(p, a, "activities", ("activity", a)) for a in ACTIVITIES for p in activity_phrases(a)], (
            "vlbias.data.biasworld.activity_phrases"
        )
    queries, source = shipped_queries(given)
    unlabelled = sorted({q.concept[0] for q in queries if q.concept and q.concept[0] not in gallery.values})
    if unlabelled:
        raise ConfigError(
            f"Query set {given!r} names the gallery attributes {unlabelled}, which {gallery.dataset} does not label."
        )
    return queries, source


def chosen_attributes(options: GallerySkewOptions, gallery: FaceGallery) -> list[str]:
    """The attributes measured: ``options.attributes`` (each labelled by the gallery), else the data set's
    :data:`DEFAULT_ATTRIBUTES`; then each intersection of :data:`INTERSECTIONS` whose two parts are measured."""
    chosen = options.attributes or [a for a in DEFAULT_ATTRIBUTES.get(gallery.dataset, ()) if a in gallery.values]
    unknown = [a for a in chosen if a not in gallery.values]
    if unknown:
        raise ConfigError(
            f"Expected `attributes` among {gallery.dataset}'s {', '.join(gallery.values)} but got {unknown}"
        )
    if not chosen:
        raise ConfigError(
            f"{gallery.dataset} has no default attributes to measure: give `attributes` among {', '.join(gallery.values)}."
        )
    return [*chosen, *(f"{a}_x_{b}" for a, b in INTERSECTIONS if a in chosen and b in chosen)]


class GallerySkewSuite(Suite):
    """Skew of what EMBED similarity retrieves from an attribute-labelled gallery; see the module docstring.

    Args:
        queries: the queries (the stimuli), each in a group.
        gallery: the labelled images every query ranks (a reader's :class:`~vlbias.data.face_gallery.FaceGallery`,
            files or pixels in memory).
        data_config: how the stimuli were made (recorded in results).
        options: the suite's options; each cut-off K is checked here against the gallery's size.
    """

    name = "gallery_skew"
    capability = Capability.EMBED
    capability_hint = "gallery_skew ranks the gallery by the cosine of EMBED embeddings (CLIP-like models)."

    def __init__(
        self,
        queries: list[ConceptQuery],
        gallery: FaceGallery,
        data_config: dict[str, object],
        options: GallerySkewOptions,
    ) -> None:
        if not len(gallery):
            raise InputError(f"The {gallery.dataset} gallery of {data_config.get('data')} holds no usable image")
        if not queries:
            raise InputError(f"No query to rank {gallery.dataset}'s gallery with")
        self.protocol = ranking_protocol(options.protocol)
        limit = len(gallery) // 2 if self.protocol.folds else len(gallery)
        what = "half the gallery (each fold is a random half)" if self.protocol.folds else "the gallery size"
        self.ranked = f"{what}, {limit} images of {gallery.dataset}"
        self.ks = options.cut_offs(self.protocol.k, limit, self.ranked)
        self.k_lowered = options.protocol_k_lowered(self.protocol.k, limit)
        self.attributes = chosen_attributes(options, gallery)
        self.queries, self.gallery, self.data_config, self.options = queries, gallery, data_config, options
        self.groups = list(dict.fromkeys(query.group for query in queries))
        self.concept_groups = list(dict.fromkeys(query.group for query in queries if query.concept is not None))

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: GallerySkewOptions) -> GallerySkewSuite:
        """BiasWorld's planted gallery (``share``, ``per_activity``; the world's seed and image size), ranked for
        ``queries`` (default the activities' neutral phrases)."""
        planted = PlantedGallery(options.share, options.per_activity, world.image_size, world.seed)
        gallery = planted.gallery()
        queries, source = chosen_queries(options, gallery, "activities")
        return cls(queries, gallery, {"data": "biasworld", "queries_from": source, **planted.config}, options)

    @classmethod
    def from_path(cls, path: Path, options: GallerySkewOptions) -> GallerySkewSuite:
        """The FairFace, UTKFace or CelebA folder ``path`` (told apart by its files), ``split`` of it, ranked for
        ``queries`` (default the neutral prompts)."""
        gallery = read_face_dataset(path, options.split)
        queries, source = chosen_queries(options, gallery, "neutral")
        config = {
            "data": str(path),
            "dataset": gallery.dataset,
            "split": gallery.split,
            "variant": gallery.variant,
            "queries_from": source,
        }
        return cls(queries, gallery, config, options)

    def stimuli(self) -> list[ConceptQuery]:
        return self.queries

    def start(self, adapter: ModelAdapter, seed: int) -> _GallerySkewMeasurement:
        return _GallerySkewMeasurement(self, adapter, seed)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "k": list(self.ks),
            "attributes": self.attributes,
            "groups": self.groups,
            "n_queries": len(self.queries),
            "n_gallery": len(self.gallery),
            "protocol": self.protocol.name,
            "protocol_k": self.protocol.k,
            "protocol_source": self.protocol.source,
            "folds": self.protocol.folds,
            "batch_size": self.options.batch_size,
            "statistics": self.options.recorded_statistics(),
        }


def attribute_codes(gallery: FaceGallery, kept: list[int], attribute: str) -> tuple[list[str], list[str], list[int]]:
    """The documented values of ``attribute`` (of ``<a>_x_<b>``: every pair, ``"<value a> x <value b>"``), those the
    ``kept`` images hold (in the documented order), and each kept image's index into the held values."""
    parts = attribute.split("_x_")
    documented: list[tuple] = [()]
    for part in parts:
        documented = [(*values, value) for values in documented for value in gallery.values[part]]
    labels = [tuple(gallery.labels[part][i] for part in parts) for i in kept]
    present = set(labels)
    held = [values for values in documented if values in present]
    index = {values: position for position, values in enumerate(held)}

    def name(values: tuple) -> str:
        return " x ".join(str(value) for value in values)

    return [name(v) for v in documented], [name(v) for v in held], [index[values] for values in labels]


class _GallerySkewMeasurement(Measurement):
    """One run of :class:`GallerySkewSuite`: the gallery embedded at construction, each attribute's values coded over
    the embedded images (empty groups skipped), then a :class:`~vlbias.metrics.RankingBias` per cut-off, scope and
    attribute, one per fold, cut-off and attribute, and a :class:`~vlbias.metrics.PrecisionAtK` per cut-off and scope
    of the labelled queries."""

    def __init__(self, suite: GallerySkewSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter, gallery = suite, adapter, suite.gallery
        self.embeddings, kept, self.gallery_skipped = embed_gallery(
            adapter, gallery.model_inputs, gallery.images, suite.batch_size
        )  # (N', D), N' indices into the gallery
        if len(kept) < suite.ks[-1] * (2 if suite.protocol.folds else 1):
            raise InputError(
                f"Only {len(kept)} of the {len(gallery)} images of {gallery.dataset} could be embedded, too few for "
                f"`k` = {suite.ks[-1]}: {self.gallery_skipped[:3]}"
            )
        self.kept, self.codes, self.n_empty = kept, {}, 0
        self.concept_masks: dict[tuple[str, object], Tensor] = {}  # concept -> (N',) its images, made when first asked
        for attribute in suite.attributes:
            documented, held, codes = attribute_codes(gallery, kept, attribute)
            for value in (value for value in documented if value not in held):
                reason = f"no ranked image holds {attribute} {value!r}: an empty group, not measured as a share of 0"
                self.gallery_skipped.append({"item": f"{attribute}={value}", "reason": reason, "scope": "group"})
                self.n_empty += 1
            if len(held) < 2:
                reason = f"the ranked images hold only {held}: no skew between values"
                self.gallery_skipped.append({"item": attribute, "reason": reason, "scope": "attribute"})
            else:
                self.codes[attribute] = (torch.tensor(codes), len(held))
        statistics = suite.options.statistics
        options = {"n_bootstrap": statistics.n_bootstrap, "confidence": statistics.confidence, "seed": seed}
        conventions = suite.protocol.conventions
        self.skew = {
            (k, scope, attribute): RankingBias(k, n, conventions, sync_on_compute=False, **options)
            for k in suite.ks
            for scope in (ALL, *suite.groups)
            for attribute, (_, n) in self.codes.items()
        }
        generator = torch.Generator().manual_seed(seed)
        self.folds = [
            torch.randperm(len(kept), generator=generator)[: len(kept) // 2].sort().values
            for _ in range(suite.protocol.folds)
        ]
        self.fold_skew = {
            (k, attribute, f): RankingBias(k, n, conventions, sync_on_compute=False, **options)
            for k in suite.ks
            for attribute, (_, n) in self.codes.items()
            for f in range(len(self.folds))
        }
        self.precision = {
            (k, scope): PrecisionAtK(k, sync_on_compute=False, **options)
            for k in suite.ks
            for scope in ((ALL, *suite.concept_groups) if suite.concept_groups else ())
        }

    def metrics(self) -> list[Metric]:
        return [*self.skew.values(), *self.fold_skew.values(), *self.precision.values()]

    def probe(self, batch: Batch) -> tuple[Tensor, list[UnseenText | None]]:
        """``(b, N')`` cosine similarities of the batch's queries with the embedded images, and why the model cannot
        see each query, if so (:func:`~vlbias.suites.gallery_ranking.score_queries`)."""
        return score_queries(self.adapter, [query.text for query in batch.items], self.embeddings)

    def _relevant(self, queries: list[ConceptQuery]) -> Tensor:
        """``(b, N')`` bool: whether each embedded image holds each query's concept."""
        for concept in {query.concept for query in queries} - set(self.concept_masks):
            column = self.suite.gallery.labels[concept[0]]
            self.concept_masks[concept] = torch.tensor([column[i] == concept[1] for i in self.kept])  # (N',)
        return torch.stack([self.concept_masks[query.concept] for query in queries])

    def update(self, batch: Batch, outputs: tuple[Tensor, list[UnseenText | None]]) -> None:
        measured, scores = measured_queries(self, batch, *outputs)  # scores (b', N')
        if not measured:
            return
        queries = [query for _, query, _ in measured]
        rows = [
            {"query": q.text, "group": q.group, "source": q.source, "concept": "" if q.concept is None else q.group}
            | ({"note": note} if note else {})
            for _, q, note in measured
        ]
        masks = {group: torch.tensor([q.group == group for q in queries]) for group in self.suite.groups}
        labelled = torch.tensor([q.concept is not None for q in queries])
        relevant = self._relevant([q for q in queries if q.concept is not None]) if bool(labelled.any()) else None
        for k in self.suite.ks:
            for attribute, (codes, _) in self.codes.items():
                self.skew[k, ALL, attribute].update(scores, codes)
                for group, mask in masks.items():
                    if bool(mask.any()):
                        self.skew[k, group, attribute].update(scores[mask], codes)
                for f, fold in enumerate(self.folds):
                    self.fold_skew[k, attribute, f].update(scores[:, fold], codes[fold])
            if relevant is None:
                continue
            labelled_scores = scores[labelled]
            self.precision[k, ALL].update(labelled_scores, relevant)
            for group in self.suite.concept_groups:
                mask = masks[group][labelled]
                if bool(mask.any()):
                    self.precision[k, group].update(labelled_scores[mask], relevant[mask])
            values = iter(per_query_precision(labelled_scores, relevant, k).tolist())
            for row, is_labelled in zip(rows, labelled.tolist(), strict=True):
                if is_labelled:
                    row[f"precision@{k}"] = next(values)
        for (index, _, _), row in zip(measured, rows, strict=True):
            self.note_row(index, row)

    def compute(self, gathered: Gathered) -> SuiteOutput:
        suite = self.suite
        output = SuiteOutput(metrics={}, skipped=[*suite.gallery.skipped, *self.gallery_skipped, *gathered.skipped])
        measured = {row["group"] for row in gathered.rows}
        for group in suite.groups:
            if group not in measured:
                output.skipped.append({"item": f"group/{group}", "reason": "no query of the group was measured"})
        confidence = suite.options.statistics.confidence
        for (k, scope, attribute), metric in self.skew.items():
            if not gathered.rows or (scope != ALL and scope not in measured):
                continue
            prefix = "" if scope == ALL else f"group/{scope}/"
            result = metric.compute()
            report_ranking(output, f"{prefix}{attribute}/", k, result, REPORTED)
            output.metrics[f"{prefix}n_queries"] = float(result["n_queries"])
        if gathered.rows:
            for k in suite.ks:
                for attribute in self.codes:
                    fold_results = [self.fold_skew[k, attribute, f].compute() for f in range(len(self.folds))]
                    for statistic in REPORTED if fold_results else ():
                        values = torch.stack([result[statistic] for result in fold_results])  # (F,)
                        key = f"folds/{attribute}/{statistic}@{k}"
                        if not bool(values.isfinite().all()):  # sfid: a fold's mean skew is ln 0
                            output.skipped.append({"item": key, "reason": "a fold's mean is infinite: written as null"})
                            output.metrics[key], output.intervals[key] = math.nan, [math.nan, math.nan]
                            continue
                        output.metrics[key] = float(values.mean())
                        output.intervals[key] = t_interval(values, confidence).tolist()
        concept_measured = {row["group"] for row in gathered.rows if row["concept"]}
        for (k, scope), metric in self.precision.items():
            if not concept_measured or (scope != ALL and scope not in concept_measured):
                continue
            prefix = "" if scope == ALL else f"group/{scope}/"
            result = metric.compute()
            output.metrics[f"{prefix}precision@{k}"] = float(result["precision"])
            output.intervals[f"{prefix}precision@{k}"] = result["precision_interval"].tolist()
            output.metrics[f"{prefix}precision/n_queries"] = float(result["n_queries"])
            if int(result["n_queries"]) < 2:  # resampled_means: no interval over one query
                reason = "one labelled query: the interval is undefined (a bootstrap over one value), written as null"
                output.skipped.append({"item": f"{prefix}precision@{k}", "scope": "interval", "reason": reason})
        if suite.k_lowered:
            whole = "each fold's top K is the whole fold" if suite.protocol.folds else "every top K is the gallery"
            report_lowered_k(output, suite.protocol.name, suite.protocol.k, suite.ks[0], suite.ranked, whole)
        output.metrics["gallery/n_images"] = float(len(self.kept))
        output.metrics["n_empty_groups"] = float(self.n_empty)
        if gathered.rows:
            for kind in (EMPTY, UNKNOWN):
                output.metrics[f"n_skipped/{kind}"] = float(gathered.counts.get(f"skipped/{kind}", 0))
            output.metrics["n_truncated"] = float(gathered.counts.get(TRUNCATED, 0))
        output.items = gathered.rows
        output.n_items = len(gathered.rows)
        return output
