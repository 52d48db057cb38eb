"""What the suites that rank an image gallery for text queries share (``retrieval_bias``, ``gallery_skew``): the
gallery embedded once per rank, the queries scored against it by the cosine of EMBED embeddings, and the queries
the model cannot see skipped by name and counted, a ranking statistic written into a result
(:func:`report_ranking`), and a protocol's K lowered to the images ranked flagged (:func:`report_lowered_k`).

The gallery is embedded in batches of ``batch_size``, the same on every rank (:class:`~vlbias.suites.base.Suite`'s
contract: every query needs the whole gallery). A batch that fails to decode is embedded image by image, so only
the images that do not decode are left out; an image whose embedding holds NaN or inf is left out too, each with its
reason (``scope`` ``gallery``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.models.base import ModelAdapter
from vlbias.models.embedding import embed_image_batches
from vlbias.models.inference import measuring
from vlbias.models.unseen_text import UnseenText, unseen_by
from vlbias.suites.base import Batch, Measurement, SuiteOutput


def embed_gallery(
    adapter: ModelAdapter, images: Tensor | Sequence, names: Sequence[str], batch_size: int
) -> tuple[Tensor, list[int], list[dict[str, str]]]:
    """The ``(N', D)`` float embeddings of the usable images of ``images`` (a float tensor in [0, 1], or paths / PIL
    images), their indices into ``images``, and the images left out ``{"item": name, "reason", "scope"}``."""
    embeddings, kept, unread = embed_image_batches(adapter, images, batch_size, skip_unreadable=True)
    skipped = [{"item": names[index], "reason": reason, "scope": "gallery"} for index, reason in unread]
    finite = torch.isfinite(embeddings).all(dim=1).tolist()
    for index, ok in zip(kept, finite):
        if not ok:
            skipped.append({"item": names[index], "reason": "its embedding holds NaN or inf", "scope": "gallery"})
    return embeddings[torch.tensor(finite, dtype=torch.bool)], [i for i, ok in zip(kept, finite) if ok], skipped


def score_queries(
    adapter: ModelAdapter, texts: Sequence[str], embeddings: Tensor
) -> tuple[Tensor, list[UnseenText | None]]:
    """``(b, N')`` cosine similarities of ``texts`` with the gallery ``embeddings`` (NaN rows for the texts the model
    cannot see, which are not embedded), and why the model cannot see each text, if so
    (:func:`~vlbias.models.unseen_text.unseen_by`)."""
    unseen = unseen_by(adapter, texts)
    kept = [i for i, problem in enumerate(unseen) if problem is None or not problem.skip]
    scores = torch.full((len(texts), len(embeddings)), torch.nan)
    if kept:
        with measuring(adapter.device):
            embedded = adapter.embed_texts(adapter.prepare_texts([texts[i] for i in kept])).float().cpu()
        scores[kept] = embedded @ embeddings.T
    return scores, unseen


def measured_queries(
    measurement: Measurement, batch: Batch, scores: Tensor, unseen: list[UnseenText | None]
) -> tuple[list[tuple[int, object, str]], Tensor]:
    """The queries of ``batch`` (each with a ``text``) that can be ranked, as ``(stimulus index, query, note)`` (the
    note says why a truncated query is read in part), and their ``(b', N')`` scores. The others are noted as skipped
    on ``measurement``: a query the model cannot see (counted ``skipped/<kind>``), one whose scores hold NaN or inf;
    a truncated query is counted (``truncated``)."""
    finite = torch.isfinite(scores).all(dim=1)
    measured = []
    for index, query, ok, problem in zip(batch.indices, batch.items, finite.tolist(), unseen, strict=True):
        if problem is not None and problem.skip:
            measurement.count(f"skipped/{problem.kind}")
            entry = {"item": query.text, "reason": problem.reason, "scope": "query", "kind": problem.kind}
            measurement.note_skip(index, entry)
        elif ok:
            if problem is not None:
                measurement.count(problem.kind)
            measured.append((index, query, "" if problem is None else problem.reason))
        else:
            entry = {"item": query.text, "reason": "its embedding holds NaN or inf", "scope": "query"}
            measurement.note_skip(index, entry)
    return measured, scores[finite]


def report_ranking(
    output: SuiteOutput, prefix: str, k: int, result: dict[str, Tensor], statistics: Sequence[str]
) -> None:
    """Write the ``statistics`` of a :class:`~vlbias.metrics.RankingBias` ``result`` at cut-off ``k`` into ``output``
    as ``<prefix><statistic>@<k>`` with its interval.

    A statistic whose mean is infinite (a query's skew is ``ln 0`` under the ``sfid`` protocol, which adds nothing to
    a zero count) is undefined as a number a result can hold: it is written as ``null``, its interval ends that are
    infinite too, with ``<prefix>n_infinite/<statistic>@<k>`` counting the queries whose value is infinite and an
    entry in the skip list saying why. A result of one query has no interval (a bootstrap over one value has no
    spread, :func:`~vlbias.metrics.functional.bootstrap.resampled_means`): its interval ends are null, with an entry
    in the skip list saying why, never a zero-wide interval."""
    if int(result["n_queries"]) < 2:
        output.skipped.append(
            {
                "item": f"{prefix}*@{k}",
                "scope": "interval",
                "reason": f"one query: the intervals of its statistics @{k} are undefined (a bootstrap over one value "
                "has no spread) and written as null",
            }
        )
    for statistic in statistics:
        key = f"{prefix}{statistic}@{k}"
        value, interval = float(result[statistic]), [float(v) for v in result[f"{statistic}_interval"]]
        n_infinite = int(result[f"{statistic}_n_infinite"])
        if n_infinite:
            output.metrics[f"{prefix}n_infinite/{statistic}@{k}"] = float(n_infinite)
        if math.isinf(value):
            output.skipped.append(
                {
                    "item": key,
                    "reason": f"{n_infinite} queries' {statistic}@{k} is infinite (a group absent from the top {k}, "
                    "ln 0 under this protocol): the mean is written as null",
                }
            )
            value = math.nan
        output.metrics[key] = value
        output.intervals[key] = [math.nan if math.isinf(end) else end for end in interval]


def report_lowered_k(output: SuiteOutput, protocol: str, protocol_k: int, k: int, ranked: str, whole: str) -> None:
    """Flag in ``output`` that ``protocol``'s K, ``protocol_k``, was above the images a query ranks (``ranked``, in
    words) and ``k`` was used (:meth:`~vlbias.suites.ranking_options.RankingOptions.cut_offs`): ``whole`` (a top K is then
    every image ranked), so the statistics at ``k`` but NDKL measure the gallery's shares, not the ranking (under
    ``bendvlm``, whose desired shares are the gallery's own, MaxSkew is 0 whatever the model).
    ``n_protocol_k_above_gallery`` (1) is printed with the metrics, and the skip list says why."""
    output.metrics["n_protocol_k_above_gallery"] = 1.0
    output.skipped.append(
        {
            "item": f"k={k}",
            "scope": "cut_off",
            "reason": f"protocol {protocol!r}'s K = {protocol_k} is above {ranked}: K = {k} used, so {whole} and "
            f"its statistics @{k} but ndkl measure the gallery's shares, not the ranking; pass `k` below {k} to "
            "measure the ranking",
        }
    )
