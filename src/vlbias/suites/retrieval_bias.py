r"""Ranking bias of retrieval: what a model ranks first for gender-neutral queries.

Every query ranks a gallery of images, each annotated ``man`` or ``woman``, by the cosine similarity of
the model's EMBED embeddings (CLIP-like dual encoders: ``clip``, ``blip``, ``albef``, ``flava``, a pruned
embedding space; models with only MATCH cannot rank a gallery this way). The ranking's bias is measured by
:class:`~vlbias.metrics.RankingBias` at each cut-off K of ``k``: MaxSkew@K and MinSkew@K (Geyik et al.,
2019, Eq. 3-4), NDKL@K (their Eq. 6) with the desired shares 1/2 each, and
:math:`\mathrm{Bias}@K = (N_\text{man} - N_\text{woman}) / K` (Wang et al., 2021), averaged over queries with
percentile bootstrap intervals over queries; formulas in :mod:`vlbias.metrics.functional.ranking_bias`.
These are the ``geyik`` protocol's conventions; ``protocol`` names another source's
(:mod:`vlbias.metrics.ranking_protocols`: ``debiasclip``, ``bendvlm``, ``sfid``), which sets the desired shares, the
default K and ε, the zero handling, the ties at the cut-off (also in the item table's counts) and the skew's form,
and is recorded in the results' config. The intervals stay bootstrap intervals over queries under every protocol
(BendVLM's intervals over gallery folds are not applied here).
Reported over all queries (``all/<statistic>@<K>``) and per query group (``group/<name>/<statistic>@<K>``).

Stimuli (:meth:`RetrievalBiasSuite.from_biasworld`, :meth:`RetrievalBiasSuite.from_path`):

* BiasWorld: the gallery is a split's images with their ground-truth group; the queries are the
  neutral-subject phrases of every activity ("a person cooking.", ``queries_from="activities"``) or the split's
  captions neutralised (``queries_from="captions"``), in the groups ``man_stereotyped`` and ``woman_stereotyped``
  by the activity's stereotype. A model that learned the planted bias ranks men first for the
  ``man_stereotyped`` queries (Bias@K > 0) and women first for the others.
* COCO / Flickr30K (a Karpathy split JSON or an ALBEF/LAVIS annotation JSON, :mod:`vlbias.data.captions`):
  the gallery is a split's images, annotated by the gender words of their own captions
  (:mod:`vlbias.data.retrieval_bias`). Images whose captions name both genders or neither are left out of
  the ranking, since they have no value to count, and are counted (``gallery/n_both``,
  ``gallery/n_neither``). The queries are the split's captions that name a gender, neutralised with the
  shipped lexicon (groups ``from_man``, ``from_woman``, ``from_both``: the gender the caption named), or
  ``prompts`` of your own ("a photo of a doctor"; a list, group ``prompts``, or ``{group: [prompts]}``).

The queries are the stimuli, sharded over ranks. The gallery's embeddings are computed once per rank in
:meth:`RetrievalBiasSuite.start`, in the same batches on every rank: every query needs the whole gallery,
and gathering a sharded gallery would put a collective into ``start`` and make the embeddings depend on
how images were batched across ranks; embedding a test gallery (1K-5K images) is a small cost next to a
run. Each query's scores against the gallery reach the metrics at ``update``, so nothing the size of
queries x gallery is kept.

Outputs: the metrics above with their intervals; ``all/n_queries`` and ``group/<name>/n_queries``; the
gallery's ``gallery/n_man`` and ``gallery/n_woman`` (the ranked images) and ``gallery/n_both``,
``gallery/n_neither`` (left out). The item table has one row per query: ``query``, ``group``, ``source``
and, for every K, ``n_man@K``, ``n_woman@K`` (its top-K counts) and ``bias@K``. Skipped, with reasons:
captions that cannot be neutralised, gallery images that are missing or do not decode, queries or images
whose embeddings hold NaN or inf, groups left without a query, and queries the model cannot see
(:mod:`vlbias.models.unseen_text`: empty, or unknown tokens only; ``kind`` ``empty`` / ``unknown``). A query
longer than the model's maximum is ranked on what the model reads, with the reason in its row's ``note``
(a column only those rows fill).
Counted: ``n_skipped/empty``, ``n_skipped/unknown`` and ``n_truncated``. Under the ``sfid`` protocol a query whose
top K lacks a group has an infinite skew (``ln 0``): such queries are counted (``<scope>/n_infinite/<statistic>@<K>``)
and a mean they make infinite is written as null, with the reason in the skip list (:func:`report_ranking`). A ``k``
above the gallery's size is refused; the protocol's K, when above it, is lowered to it and flagged
(``n_protocol_k_above_gallery``, config ``protocol_k``; :func:`report_lowered_k`): every top K is then the whole
gallery. A group's interval that rests on one query is null (:func:`report_ranking`).

Measures:
    Whom a retrieval model shows first for queries that name no gender ("a person cooking"): the shares of men
    and women among the top K images of each query, against equal shares, over all queries and per query group.

Direction:
    ``bias@K`` above 0 means more men than women among the top K, below 0 more women (on BiasWorld a model that
    learned the planted bias is above 0 for the ``man_stereotyped`` queries and below 0 for the
    ``woman_stereotyped`` ones). ``max_skew@K``, ``min_skew@K`` and ``ndkl@K`` measure the distance from equal
    shares whichever group is favoured: 0 is fair.

Glossary:
    * ``bias@K``: (N_men − N_women) / K in each query's top K, averaged over queries; from -1 to 1 (Wang, Liu &
      Wang, 2021). ``all/...`` over every query, ``group/<group>/...`` over a query group.
    * ``max_skew@K``: the largest over-representation of a group in the top K, the largest ln(p_a / ½) over the
      groups a, averaged over queries; at least 0, 0 is fair (Geyik et al., 2019, Eq. 3).
    * ``min_skew@K``: the largest under-representation, the smallest ln(p_a / ½); at most 0, 0 is fair (Geyik et
      al., Eq. 4).
    * ``ndkl@K``: the KL divergence of every top-k prefix's shares from equal shares, discounted by
      1 / log₂(k + 1) and normalised; at least 0, 0 is fair, no sign (Geyik et al., Eq. 6).
    * ``n_queries``: queries measured, in all (``all/n_queries``) or in a group.
    * ``gallery``: ``gallery/n_man``, ``gallery/n_woman``: the ranked images of each gender;
      ``gallery/n_both``, ``gallery/n_neither``: images whose captions name both genders or neither, left out.
    * ``n_skipped``: ``n_skipped/empty``, ``n_skipped/unknown``: queries skipped as empty or made of unknown tokens
      only.
    * ``n_truncated``: queries ranked truncated to the model's maximum length.
    * ``n_protocol_k_above_gallery``: 1 when the protocol's K was above the images ranked and was lowered to them
      (config ``protocol_k``, the K used in ``k``): every top K is then the whole gallery, and the statistics at that
      K but ``ndkl@K`` measure the gallery's shares, not the ranking.
    * ``n_infinite``: queries whose skew is infinite (``sfid`` protocol: a group absent from the top K); a mean
      they make infinite is written as null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vlbias.counterfactual.neutralise import NeutralLexicon
from vlbias.data.biasworld import ACTIVITIES, STEREOTYPES, BiasWorld, activity_phrases
from vlbias.data.captions import read_captions
from vlbias.data.lexicon import text_words
from vlbias.data.retrieval_bias import GENDERS, LABELS, GenderWords, Query, annotate
from vlbias.errors import ConfigError, InputError
from vlbias.metrics import RankingBias
from vlbias.metrics.functional.ranking_bias import SkewConventions, top_counts
from vlbias.metrics.ranking_protocols import RankingProtocol, ranking_protocol
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
from vlbias.suites.retrieval_bias_options import RetrievalBiasOptions

if TYPE_CHECKING:
    from torchmetrics import Metric

ALL = "all"  # the scope of every query
#: The statistics of :class:`~vlbias.metrics.RankingBias` this suite reports (KL@K is the gallery-skew suite's).
REPORTED = ("max_skew", "min_skew", "ndkl", "bias")


@dataclass(frozen=True)
class Gallery:
    """The images every query ranks: ``images`` (a float ``(N, 3, H, W)`` tensor in [0, 1], or paths / PIL
    images), their ``names`` and their ``attributes`` (each one of :data:`~vlbias.data.retrieval_bias.GENDERS`)."""

    images: Tensor | list
    names: list[str]
    attributes: list[str]

    def __len__(self) -> int:
        return len(self.names)


def biasworld_queries(
    world: BiasWorld, split: str, queries_from: str, lexicon: NeutralLexicon
) -> tuple[list[Query], int]:
    """BiasWorld's queries in the groups ``<group>_stereotyped`` by their activity's stereotype, and the number
    of repeated captions dropped (``queries_from="captions"``)."""
    stereotype = {activity: f"{group}_stereotyped" for group, acts in STEREOTYPES.items() for activity in acts}
    if queries_from == "activities":
        return [Query(p, stereotype[a], a) for a in ACTIVITIES for p in activity_phrases(a)], 0
    items = world.items(split)
    captions = [item.caption for item in items]
    found, _, repeats = caption_queries(
        captions, [stereotype[item.activity] for item in items], lexicon, GenderWords.default()
    )
    return found, repeats


def prompt_queries(prompts: Sequence[str] | dict[str, Sequence[str]], words: GenderWords) -> list[Query]:
    """``prompts`` as queries: a list (group ``prompts``) or ``{group: [prompts]}`` (non-empty, as
    :class:`~vlbias.suites.options.RetrievalBiasOptions` checks); a prompt that names a gender is refused."""
    grouped = prompts if isinstance(prompts, dict) else {"prompts": prompts}
    queries = [Query(text, str(group), text) for group, texts in grouped.items() for text in dict.fromkeys(texts)]
    gendered = [(query.text, words.found(query.text)) for query in queries if words.found(query.text)]
    if gendered:
        raise ConfigError(
            f"Expected `prompts` to be gender-neutral but {gendered[0][0]!r} holds {gendered[0][1]} "
            f"(gender words of {words.source!r})"
        )
    return queries


class RetrievalBiasSuite(Suite):
    """Ranking bias of what EMBED similarity retrieves for gender-neutral queries; see the module docstring.

    Args:
        queries: the gender-neutral queries (the stimuli), each in a group.
        gallery: the annotated images every query ranks.
        data_config: how the stimuli were made (recorded in results).
        options: the suite's options (:class:`~vlbias.suites.options.RetrievalBiasOptions`); each cut-off K is
            checked here against the gallery's size (:meth:`~vlbias.suites.ranking_options.RankingOptions.cut_offs`).
        skipped: captions and images already known not to be used, with reasons.
    """

    name = "retrieval_bias"
    capability = Capability.EMBED
    capability_hint = "retrieval_bias ranks the gallery by the cosine of EMBED embeddings (CLIP-like models)."

    def __init__(
        self,
        queries: list[Query],
        gallery: Gallery,
        data_config: dict[str, object],
        options: RetrievalBiasOptions,
        skipped: list[dict[str, str]] | None = None,
    ) -> None:
        data = data_config.get("data", "the data")
        if not len(gallery):
            counts = {label: data_config.get(f"n_{label}", 0) for label in LABELS}
            raise InputError(f"No gallery image of {data} is annotated man or woman (images by annotation: {counts})")
        if not queries:
            raise InputError(f"No gender-neutral query could be made from {data}")
        wrong = sorted(set(gallery.attributes) - set(GENDERS))
        if wrong:
            raise ConfigError(f"Expected gallery attributes among {list(GENDERS)} but got {wrong}")
        self.protocol = ranking_protocol(options.protocol)
        self.ranked = f"the gallery size, {len(gallery)} annotated images of {data}"
        self.ks = options.cut_offs(self.protocol.k, len(gallery), self.ranked)
        self.k_lowered = options.protocol_k_lowered(self.protocol.k, len(gallery))
        self.conventions = _conventions(options, self.protocol)
        self.queries, self.gallery, self.data_config, self.options = queries, gallery, data_config, options
        self.skipped = skipped or []
        self.groups = list(dict.fromkeys(query.group for query in queries))  # in order of first appearance

    @classmethod
    def from_biasworld(cls, world: BiasWorld, options: RetrievalBiasOptions) -> RetrievalBiasSuite:
        """The images of ``split`` with their ground-truth group, ranked for the neutral phrases of every
        activity (``queries_from="activities"``) or the split's captions neutralised with ``lexicon`` (a
        :class:`~vlbias.counterfactual.neutralise.NeutralLexicon` file; ``None``: the shipped one)."""
        split, queries_from = options.split, options.queries_from
        neutral = NeutralLexicon.load(options.lexicon)
        found, repeats = biasworld_queries(world, split, queries_from, neutral)
        items = world.items(split)
        gallery = Gallery(
            world.images(split).float() / 255.0, [f"{split}/{i.index}" for i in items], [i.group for i in items]
        )
        config = {
            "data": "biasworld",
            "split": split,
            "queries_from": queries_from,
            "lexicon": neutral.source,
            "n_repeated_queries": repeats,
            **_label_counts(gallery.attributes),
            **world.config,
        }
        return cls(found, gallery, config, options)

    @classmethod
    def from_path(cls, path: Path, options: RetrievalBiasOptions) -> RetrievalBiasSuite:
        """``split`` of a Karpathy or ALBEF/LAVIS caption file (:func:`~vlbias.data.captions.read_captions`),
        images under ``image_root`` (``None``: the file's folder), each annotated by the gender words of its
        own captions (``gender_words``: a swap lexicon file whose pairs read [men's word, women's word];
        ``None``: the shipped one). Queries: ``prompts`` when given, else the split's gendered captions
        neutralised with ``lexicon`` (``None``: the shipped neutral lexicon). ``verify_images`` decodes every
        image up front; ``cache_dir`` is the ``datasets`` cache of the parsed file."""
        path, split, prompts = Path(path), options.split, options.prompts
        words, neutral = GenderWords.load(options.gender_words), NeutralLexicon.load(options.lexicon)
        root = path.parent if options.image_root is None else Path(options.image_root)
        corpus = read_captions(
            path, split, root, verify_images=options.verify_images, cache_dir=options.cache_dir
        ).retrieval()
        labels = [annotate([corpus.captions[c] for c in captions], words) for captions in corpus.image_to_captions]
        annotated = [i for i, label in enumerate(labels) if label in GENDERS]
        gallery = Gallery(
            [corpus.image_paths[i] for i in annotated],
            [corpus.images[i] for i in annotated],
            [labels[i] for i in annotated],
        )
        skipped = list(corpus.skipped)
        if prompts is not None:
            queries, repeats = prompt_queries(prompts, words), 0
        else:
            groups = [f"from_{annotate([caption], words)}" for caption in corpus.captions]
            queries, not_neutral, repeats = caption_queries(corpus.captions, groups, neutral, words)
            skipped += not_neutral
        config = {
            "data": str(path),
            "split": split,
            "image_root": str(root),
            "queries_from": "prompts" if prompts is not None else "captions",
            "prompts": prompts,
            "lexicon": neutral.source,
            "gender_words": words.source,
            "n_repeated_queries": repeats,
            **_label_counts(labels),
        }
        return cls(queries, gallery, config, options, skipped)

    def stimuli(self) -> list[Query]:
        return self.queries

    def start(self, adapter: ModelAdapter, seed: int) -> _RetrievalBiasMeasurement:
        return _RetrievalBiasMeasurement(self, adapter, seed)

    @property
    def config(self) -> dict[str, object]:
        return {
            "data": self.data_config,
            "k": list(self.ks),
            "groups": self.groups,
            "n_queries": len(self.queries),
            "n_gallery": len(self.gallery),
            "protocol": self.protocol.name,
            "protocol_k": self.protocol.k,
            "eps": self.conventions.eps,
            "batch_size": self.options.batch_size,
            "statistics": self.options.recorded_statistics(),
        }


def _conventions(options: RetrievalBiasOptions, protocol: RankingProtocol) -> SkewConventions:
    """The protocol's conventions, its ε replaced by the options' ``eps`` when given (refused where the protocol has
    no ε: DebiasCLIP replaces a zero share by 1/K)."""
    conventions = protocol.conventions
    if options.eps is not None:
        if conventions.zero == "one_over_k":
            raise ConfigError(
                f"Expected no `eps` under protocol {protocol.name!r}, which replaces a zero share by 1/K and smooths "
                f"nothing, but got {options.eps}"
            )
        conventions = replace(conventions, eps=options.eps)
    return conventions


def _label_counts(labels: Sequence[str]) -> dict[str, int]:
    return {f"n_{label}": sum(1 for value in labels if value == label) for label in LABELS}


class _RetrievalBiasMeasurement(Measurement):
    """One run of :class:`RetrievalBiasSuite`: the gallery embedded at construction (images that do not decode
    or embed to NaN/inf are left out, with reasons), then a :class:`~vlbias.metrics.RankingBias` per cut-off
    and scope (all queries, each group) fed the scores of every query of the scope."""

    def __init__(self, suite: RetrievalBiasSuite, adapter: ModelAdapter, seed: int) -> None:
        super().__init__()
        self.suite, self.adapter = suite, adapter
        self.embeddings, kept, self.gallery_skipped = embed_gallery(
            adapter, suite.gallery.images, suite.gallery.names, suite.batch_size
        )  # (N', D), N' indices into the gallery
        data = suite.data_config.get("data")
        if len(kept) < suite.ks[-1]:
            raise InputError(
                f"Only {len(kept)} of the {len(suite.gallery)} gallery images of {data} could be embedded, fewer than "
                f"`k` = {suite.ks[-1]}: {self.gallery_skipped[:3]}"
            )
        self.attributes = torch.tensor([GENDERS.index(suite.gallery.attributes[i]) for i in kept])  # (N',)
        statistics = suite.options.statistics
        options = {"n_bootstrap": statistics.n_bootstrap, "confidence": statistics.confidence, "seed": seed}
        options["conventions"] = suite.conventions
        self.ranking = {
            (k, scope): RankingBias(k=k, sync_on_compute=False, **options)
            for k in suite.ks
            for scope in (ALL, *suite.groups)
        }

    def metrics(self) -> list[Metric]:
        return list(self.ranking.values())

    def probe(self, batch: Batch) -> tuple[Tensor, list[UnseenText | None]]:
        """``(b, N')`` cosine similarities of the batch's queries with the gallery images, and why the model cannot
        see each query, if so (:func:`~vlbias.suites.gallery_ranking.score_queries`)."""
        return score_queries(self.adapter, [query.text for query in batch.items], self.embeddings)

    def update(self, batch: Batch, outputs: tuple[Tensor, list[UnseenText | None]]) -> None:
        measured, scores = measured_queries(self, batch, *outputs)  # scores (b', N')
        if not measured:
            return
        rows = [
            {"query": query.text, "group": query.group, "source": query.source} | ({"note": note} if note else {})
            for _, query, note in measured
        ]
        for k in self.suite.ks:
            counts = top_counts(scores, self.attributes, k, len(GENDERS), self.suite.conventions.ties)  # (b', 2)
            men, women = counts[:, 0].long().tolist(), counts[:, 1].long().tolist()
            for row, n_man, n_woman in zip(rows, men, women, strict=True):
                row |= {f"n_man@{k}": n_man, f"n_woman@{k}": n_woman, f"bias@{k}": (n_man - n_woman) / k}
            self.ranking[k, ALL].update(scores, self.attributes)
            for group in self.suite.groups:
                mask = torch.tensor([query.group == group for _, query, _ in measured])
                if bool(mask.any()):
                    self.ranking[k, group].update(scores[mask], self.attributes)
        for (index, _, _), row in zip(measured, rows, strict=True):
            self.note_row(index, row)

    def compute(self, gathered: Gathered) -> SuiteOutput:
        suite = self.suite
        output = SuiteOutput(metrics={}, skipped=[*suite.skipped, *self.gallery_skipped, *gathered.skipped])
        measured = {row["group"] for row in gathered.rows}
        for group in suite.groups:
            if group not in measured:
                output.skipped.append({"item": f"group/{group}", "reason": "no query of the group was measured"})
        for (k, scope), metric in self.ranking.items():
            if not gathered.rows or (scope != ALL and scope not in measured):
                continue
            name = ALL if scope == ALL else f"group/{scope}"
            result = metric.compute()
            report_ranking(output, f"{name}/", k, result, REPORTED)
            output.metrics[f"{name}/n_queries"] = float(result["n_queries"])
        if suite.k_lowered:
            report_lowered_k(
                output, suite.protocol.name, suite.protocol.k, suite.ks[0], suite.ranked, "every top K is the gallery"
            )
        counts = self.attributes.bincount(minlength=len(GENDERS)).tolist()
        output.metrics |= {f"gallery/n_{gender}": float(n) for gender, n in zip(GENDERS, counts)}
        excluded = ("both", "neither")
        output.metrics |= {f"gallery/n_{label}": float(suite.data_config.get(f"n_{label}", 0)) for label in excluded}
        if gathered.rows:
            output.metrics |= {
                f"n_skipped/{kind}": float(gathered.counts.get(f"skipped/{kind}", 0)) for kind in (EMPTY, UNKNOWN)
            }
            output.metrics["n_truncated"] = float(gathered.counts.get(TRUNCATED, 0))
        output.items = gathered.rows
        output.n_items = len(gathered.rows)
        return output


def caption_queries(
    captions: Sequence[str], groups: Sequence[str], lexicon: NeutralLexicon, words: GenderWords
) -> tuple[list[Query], list[dict[str, str]], int]:
    """Neutralised queries from the ``captions`` that name a gender, caption ``i`` reported in ``groups[i]``
    (module docstring): the queries, the skipped captions ``{"item", "reason"}``, and how many repeats were
    dropped."""
    queries: dict[tuple[str, str], Query] = {}
    skipped: list[dict[str, str]] = []
    repeats = 0
    for caption, group in zip(captions, groups, strict=True):
        if not words.found(caption):
            continue
        neutral = lexicon.neutralise(caption)
        left = words.found(neutral) + [word for word in text_words(neutral) if word in lexicon.ambiguous]
        if left:
            reason = (
                f"neutralised caption {neutral!r} still holds {left[0]!r}, which the neutral lexicon "
                f"{lexicon.source!r} has no single neutral form for"
            )
            skipped.append({"item": caption, "reason": reason})
        elif (group, neutral) in queries:
            repeats += 1
        else:
            queries[group, neutral] = Query(neutral, group, caption)
    return list(queries.values()), skipped, repeats
