r"""Named MaxSkew / NDKL protocols: the conventions each paper's code measures the skew of a ranking with.

Papers that report MaxSkew@K disagree on the desired shares, the cut-off K, how a zero share is kept out of the
log, what happens to images tied at the cut-off, and the skew's form, so a number is reproduced only under its
source's conventions. Each protocol below is a preset of the arguments of
:mod:`vlbias.metrics.functional.ranking_bias` (whose docstring states every formula), not a copy of the metric:
``max_skew_at_k(scores, attributes, protocol.k, conventions=protocol.conventions)``,
``RankingBias(protocol.k, conventions=protocol.conventions)`` with ``protocol = ranking_protocol("debiasclip")``.

| protocol | desired shares | K | zero share | ties at K | skew | intervals |
|---|---|---|---|---|---|---|
| geyik | uniform over all A values | 10 | ε = 1e-4 added | cut by index | ln ratio | over queries |
| debiasclip | uniform over the values present | 1000 | replaced by 1/K | all tied kept, divisor K | ln ratio | over queries |
| bendvlm | the gallery's own shares | 500 | ratio floored at ε = 1e-10 | cut by index | ln ratio | 5 gallery folds |
| sfid | uniform (1/2 for two values) | 100 | none (ln 0 = -inf) | cut by index | abs ln ratio | over queries |

The sources were read at these commits: oxai/debias-vision-lang ``f481bde``, waltergerych/bend_vlm ``3777904``,
HoinJung/Unified-Debiaisng-VLM-SFID ``a811a49``. Where a source's code does something the arguments do not (its
MaxSkew starts its running max at 0; an order among ties left to ``torch.topk``), the protocol's docstring says
what vlbias does instead and whether the number can differ.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

from vlbias.errors import ConfigError
from vlbias.metrics.functional.ranking_bias import SkewConventions
from vlbias.options import RankingProtocolName


@dataclass(frozen=True)
class RankingProtocol:
    """One source's conventions for the skews and NDKL of a ranking.

    Args:
        name: the protocol's name (``--suite_options '{protocol: <name>}'``).
        k: the source's cut-off K.
        conventions: its desired shares, zero and tie handling and skew form, the ``conventions`` argument of the
            metric functions and :class:`~vlbias.metrics.RankingBias`.
        folds: gallery folds the source's intervals are over (0: the intervals are over queries).
        source: the paper and the file and lines of its computation.
    """

    name: RankingProtocolName
    k: int
    conventions: SkewConventions
    folds: int
    source: str


GEYIK = RankingProtocol(
    name="geyik",
    k=10,
    conventions=SkewConventions(),  # the defaults: Geyik et al.'s formulas, eps = DEFAULT_EPS (1e-4)
    folds=0,
    source="Geyik, Ambler & Kenthapadi (2019), KDD, Eq. 2-4 (Skew, MaxSkew, MinSkew) and Eq. 6 (NDKL)",
)
r"""Geyik, Ambler & Kenthapadi (2019), "Fairness-Aware Ranking in Search & Recommendation Systems", KDD, Eq. 2-4
and 6 (no released code): :math:`\ln\frac{p_{\tau,K,a} + \varepsilon}{1/A + \varepsilon}` over every attribute
value (one absent from the gallery still counts, at share 0), ε = 1e-4 (vlbias's smoothing, which keeps MinSkew
finite; ε = 0 is the paper's formula), exactly K images (ties by the lower index), K = 10 (vlbias's default
cut-off; the paper fixes none). vlbias's default."""

DEBIASCLIP = RankingProtocol(
    name="debiasclip",
    k=1000,
    conventions=SkewConventions(desired="present", zero="one_over_k", eps=0.0, ties="keep", skew="log_ratio"),
    folds=0,
    source="Berg et al. (2022), oxai/debias-vision-lang debias_clip/measuring_bias.py:47-72 (NDKL 17-44)",
)
r"""Berg et al. (2022), "A Prompt Array Keeps the Bias Away", AACL (DebiasCLIP); oxai/debias-vision-lang,
``debias_clip/measuring_bias.py``, ``compute_skew_metrics`` (lines 47-72), its ``eq_opp`` value (the one of the
README's table):

* desired shares :math:`1/|G|` over the values :math:`G` present in the gallery (``Counter(df.label)``, lines 56,
  60); a value absent from the gallery takes no part;
* ``df.nlargest(top_n, columns="score", keep="all")`` (line 57): every image tied with the K-th is kept, in score
  order, ties in index order (pandas sorts the kept rows with a stable sort), and the share is
  ``count / top_n`` (line 61), so the divisor stays K;
* a zero share becomes ``1 / top_n`` (lines 64-65), and the skew is ``log(p) - log(dist)`` (line 68);
* the running max starts at 0 (lines 54, 69-70). It never binds here: the kept shares of the present values sum
  to at least 1, as the desired shares sum to 1, so some ratio is at least 1;
* NDKL (``normalized_discounted_KL``, lines 17-44): the same desired shares and kept images; the KL of the first
  :math:`i` kept images divided by :math:`i` is discounted by :math:`1/\log_2(i + 1)` for every kept position
  (lines 32-37), and :math:`Z` sums only over :math:`i \le K` (line 39). Its ``top_n_label_counts[label]``
  (line 34) assumes the labels present are 0..n-1; vlbias indexes by value, which is the same when they are.

K = 1000 is the cut-off reported for the paper (MaxSkew@1000; not checked against the paper here); the
repository's ``eval_ranking`` defaults to the whole gallery (``topn=1.0``, lines 103, 109-110, as ``measure_bias``
calls it, line 154): pass ``k`` = the gallery's size for that. The queries' values are averaged (line 119), as here."""

BENDVLM = RankingProtocol(
    name="bendvlm",
    k=500,
    conventions=SkewConventions(desired="gallery", zero="floor", eps=1e-10, ties="index", skew="log_ratio"),
    folds=5,
    source="Gerych et al. (2024), waltergerych/bend_vlm bend_utils.py:150-166, demo_debias.ipynb lines 235-377",
)
r"""Gerych et al. (2024), "BendVLM: Test-Time Debiasing of Vision-Language Embeddings", NeurIPS;
waltergerych/bend_vlm:

* ``bend_utils.py``, ``max_skew`` (lines 156-166): :math:`\ln` of ``p_y_returned / p_y_ds`` through
  ``log_with_eps`` (lines 150-154), which returns :math:`\ln\varepsilon` for a ratio below ε = 1e-10: the ratio
  floored at ε (``zero="floor"``), not ε added to the shares. The running max starts at 0 (line 158); it never
  binds, as both shares sum to 1 over the values. ``get_kl`` (lines 168-175) is the KL divergence of the top K
  (not discounted), reported beside it; vlbias's ``ndkl`` under this protocol is Geyik's NDKL with the same
  desired shares, which the source does not report;
* desired shares ``spurious_att_prior`` (``demo_debias.ipynb``, lines 255-257 of the file, used as
  ``prior_for_metric``, lines 275-277): the attribute's own shares in the gallery ranked (the fold's test half);
* K = 500 (lines 320, 323), the top K by ``torch.topk`` (``get_cos_neighbors``, ``bend_utils.py`` line 15),
  whose choice among images tied at the K-th score is unspecified; vlbias cuts by index, which can differ from
  the source only when images of different values tie there;
* intervals over 5 folds (lines 235-238): each fold is a random half of the gallery (``create_dataset.py`` lines
  109-122, ``np.random.seed(42)``), the value of a fold is the mean over queries, and the interval is the
  t-interval of the 5 fold means (lines 372-377, 412-442). ``folds=5`` records this; ``retrieval_bias`` gives
  bootstrap intervals over queries whatever the protocol (the fold scheme belongs to a gallery suite)."""

SFID = RankingProtocol(
    name="sfid",
    k=100,
    conventions=SkewConventions(desired="uniform", zero="add_eps", eps=0.0, ties="index", skew="abs_log_ratio"),
    folds=0,
    source="Jung et al. (2024), HoinJung/Unified-Debiaisng-VLM-SFID src/utils.py:60-90, src/evaluation.py:136",
)
r"""Jung, Jang & Wang (2024), "A Unified Debiasing Approach for Vision-Language Models across Modalities and
Tasks", NeurIPS (SFID); HoinJung/Unified-Debiaisng-VLM-SFID, ``src/utils.py``, ``evaluate_gender_difference``
(lines 60-90):

* two values (``gender_key``, line 78: value 0 is ``male``, any other ``female``), each against 1/2: with two
  attribute values, ``desired="uniform"`` is 1/2;
* ``np.log((count / top_k) / 0.5)`` (lines 80-81): no smoothing (ε = 0), so a value absent from the top K gives
  :math:`|\ln 0| = \infty`;
* MaxSkew = the larger absolute skew (line 85): ``skew="abs_log_ratio"``; MinSkew is then the smaller;
* K = 100 (``src/evaluation.py``, lines 136-137), the top K by ``torch.topk`` (line 72; its choice among ties
  at the K-th score is unspecified, vlbias cuts by index, as for ``bendvlm``).

Two things of the source are not reproduced: its scores are the softmax over the texts of 100 × the cosine
(line 62), a ranking input rather than a convention of the metric (pass such scores to reproduce it); and its
``max_skew_list.append`` (line 88) sits after the loop over the queries, so it reports the last query's value,
not the mean over queries that vlbias reports."""

#: protocol name -> its conventions; ``geyik`` is the default. Its names are :data:`vlbias.options.RankingProtocolName`.
PROTOCOLS: dict[RankingProtocolName, RankingProtocol] = {p.name: p for p in (GEYIK, DEBIASCLIP, BENDVLM, SFID)}
DEFAULT_PROTOCOL = GEYIK.name
if tuple(PROTOCOLS) != typing.get_args(RankingProtocolName):  # the options' type is this table's keys
    raise ImportError(f"vlbias.options.RankingProtocolName must list {tuple(PROTOCOLS)}, the protocols' names")


def ranking_protocol(name: str) -> RankingProtocol:
    """The protocol called ``name``; an unknown name is refused with the known ones.

    Example:
        >>> protocol = ranking_protocol("debiasclip")
        >>> protocol.k, protocol.conventions.desired, protocol.conventions.ties
        (1000, 'present', 'keep')
    """
    if name not in PROTOCOLS:
        raise ConfigError(f"Unknown ranking protocol {name!r}; expected one of: {', '.join(sorted(PROTOCOLS))}.")
    return PROTOCOLS[name]
