"""Golden tests of the named MaxSkew/NDKL protocols (:mod:`vlbias.metrics.ranking_protocols`): each against a
transcription of its source's computation, written here in plain Python from the source (file and lines in each
function's docstring), on hand-made rankings that separate the conventions: a value absent from the gallery, a
value absent from the top K (a zero count), and images tied at the cut-off."""

import math
from collections import Counter
from typing import get_args

import pytest
import torch
import torch.testing

from vlbias.errors import ConfigError
from vlbias.metrics import RankingBias
from vlbias.metrics.functional import max_skew_at_k, min_skew_at_k, ndkl, ranking_bias
from vlbias.metrics.functional.ranking_bias import SkewConventions
from vlbias.metrics.ranking_protocols import BENDVLM, DEBIASCLIP, GEYIK, PROTOCOLS, SFID, ranking_protocol
from vlbias.options import RankingProtocolName

TOLERANCE = 1e-12
A = 3  # attribute values 0, 1, 2; value 1 is in no gallery image below
#: gallery of 10 images: values 0 and 2 only (value 1 absent from the gallery)
GALLERY = [0, 0, 2, 0, 2, 2, 0, 0, 2, 0]
#: query rows (scores of the 10 images); K = 4 for every case below
RANKINGS = {
    # top 4: 0, 0, 0, 0 (value 2 has a zero count); no ties
    "zero count": [10.0, 9.0, 1.0, 8.0, 0.5, 0.4, 7.0, 0.3, 0.2, 0.1],
    # top 3: 0, 2, 0; the 4th score 5.0 is shared by images 2 (value 2), 7 (value 0) and 8 (value 2)
    "ties at K": [9.0, 1.0, 5.0, 8.0, 7.0, 0.5, 1.5, 5.0, 5.0, 0.2],
    # top 4: 2, 2, 0, 2; no ties
    "mostly value 2": [0.1, 0.2, 9.0, 7.0, 8.0, 6.0, 0.3, 0.4, 0.5, 0.6],
    # top 3: 2, 0, 2; images 0, 1, 3 (all value 0) tie at the 4th score
    "ties of one value": [4.0, 4.0, 9.0, 4.0, 7.0, 1.0, 8.0, 0.5, 0.2, 0.1],
}
K = 4


def _order(row: list[float]) -> list[int]:
    """Images by descending score, ties by the lower index (a stable sort, as pandas' ``nlargest`` keeps)."""
    return sorted(range(len(row)), key=lambda i: (-row[i], i))


def _kept(row: list[float], k: int) -> list[int]:
    """``df.nlargest(k, columns="score", keep="all")``: the first k and every image tied with the k-th."""
    order = _order(row)
    return [i for i in order if row[i] >= row[order[k - 1]]]


def geyik_skews(row, labels, k, num_attributes, eps):
    """Geyik et al. (2019), Eq. 2-4: ln((p + eps) / (1/A + eps)) over all A values, exactly k images."""
    counts = Counter(labels[i] for i in _order(row)[:k])
    skews = [math.log((counts[a] / k + eps) / (1 / num_attributes + eps)) for a in range(num_attributes)]
    return max(skews), min(skews)


def geyik_ndkl(row, labels, k, desired):
    """Geyik et al. (2019), Eq. 6, with the ``desired`` shares (0 ln 0 = 0; a value of share 0 adds nothing)."""
    order, total = _order(row), 0.0
    for i in range(1, k + 1):
        counts = Counter(labels[j] for j in order[:i])
        kl = sum((counts[a] / i) * math.log((counts[a] / i) / d) for a, d in enumerate(desired) if counts[a] and d)
        total += kl / math.log2(i + 1)
    return total / sum(1 / math.log2(i + 1) for i in range(1, k + 1))


def debiasclip_max_skew(row, labels, top_n):
    """oxai/debias-vision-lang ``debias_clip/measuring_bias.py`` lines 47-72, ``maxskew_eq_opp``."""
    result = 0
    label_counts = Counter(labels)  # line 56: the values present in the gallery
    top_n_counts = Counter(labels[i] for i in _kept(row, top_n))  # lines 57-58
    for label_class in label_counts:
        dist = 1 / len(label_counts)  # line 60, eq_opp
        p_positive = top_n_counts[label_class] / top_n  # line 61
        if p_positive == 0:  # lines 64-65
            p_positive = 1 / top_n
        result = max(result, math.log(p_positive) - math.log(dist))  # lines 68-70
    return result


def debiasclip_ndkl(row, labels, top_n):
    """oxai/debias-vision-lang ``debias_clip/measuring_bias.py`` lines 17-44, ``ndkl_eq_opp``. The source indexes
    its counts by label (line 34), so it needs the present labels to be 0..n-1: ``labels`` are mapped so here."""
    compact = {value: rank for rank, value in enumerate(sorted(set(labels)))}
    labels = [compact[value] for value in labels]
    _, label_counts = zip(*sorted(Counter(labels).items()), strict=True)  # line 23
    dist = [1 / len(label_counts) for _ in label_counts]  # line 26
    counts, result = [0.0] * len(label_counts), 0.0
    for index, i in enumerate(_kept(row, top_n), start=1):  # lines 29-32
        counts[labels[i]] += 1
        p = [c / index for c in counts]
        kl = sum(x * (math.log(x) - math.log(q)) for x, q in zip(p, dist, strict=True) if x != 0)  # line 19
        result += kl / math.log2(index + 1)  # line 37
    return result / sum(1 / math.log2(i + 1) for i in range(1, top_n + 1))  # lines 39-42


def bendvlm_max_skew(row, labels, k, num_attributes):
    """waltergerych/bend_vlm ``bend_utils.py`` lines 150-166 (``log_with_eps``, ``max_skew``), with
    ``target_dist`` the gallery's own shares (``demo_debias.ipynb`` lines 255-257) over every value; a value absent
    from the gallery gives 0/0 = NaN there, which never exceeds the running max: it is left out here."""
    returned = [labels[i] for i in _order(row)[:k]]  # torch.topk; ties at K are cut by index here

    def log_with_eps(x, eps=1e-10):
        return math.log(eps) if x < eps else math.log(x)

    maxskew = 0
    for cl in range(num_attributes):
        p_y_ds = labels.count(cl) / len(labels)
        if p_y_ds == 0:
            continue
        p_y_returned = returned.count(cl) / len(returned)
        candidate_skew = log_with_eps(p_y_returned / p_y_ds)
        if candidate_skew > maxskew:
            maxskew = candidate_skew
    return maxskew


def sfid_max_skew(row, labels, top_k):
    """HoinJung/Unified-Debiaisng-VLM-SFID ``src/utils.py`` lines 72-85 for one query: value 0 is ``male``, any
    other ``female`` (line 78); ``np.log`` of 0 is -inf, whose absolute value is inf."""
    counts = {"male": 0, "female": 0}
    for i in _order(row)[:top_k]:
        counts["male" if labels[i] == 0 else "female"] += 1

    def log(x):
        return math.log(x) if x > 0 else -math.inf

    male_skew, female_skew = log((counts["male"] / top_k) / 0.5), log((counts["female"] / top_k) / 0.5)
    return max(abs(male_skew), abs(female_skew))


def _ours(statistic, protocol, row, labels, k, num_attributes):
    scores, attributes = torch.tensor([row], dtype=torch.float64), torch.tensor(labels)
    return float(statistic(scores, attributes, k, num_attributes, conventions=protocol.conventions))


def _close(actual: float, expected: float) -> bool:
    return actual == expected or abs(actual - expected) <= TOLERANCE


@pytest.mark.parametrize("case", RANKINGS)
def test_geyik_is_geyik_et_al(case):
    row = RANKINGS[case]
    expected_max, expected_min = geyik_skews(row, GALLERY, K, A, GEYIK.conventions.eps)
    assert _close(_ours(max_skew_at_k, GEYIK, row, GALLERY, K, A), expected_max)
    assert _close(_ours(min_skew_at_k, GEYIK, row, GALLERY, K, A), expected_min)
    scores, attributes = torch.tensor([row], dtype=torch.float64), torch.tensor(GALLERY)
    assert _close(float(ndkl(scores, attributes, K, A)), geyik_ndkl(row, GALLERY, K, [1 / A] * A))


@pytest.mark.parametrize("case", RANKINGS)
def test_debiasclip_is_its_code(case):
    row = RANKINGS[case]
    assert _close(_ours(max_skew_at_k, DEBIASCLIP, row, GALLERY, K, A), debiasclip_max_skew(row, GALLERY, K))
    scores, attributes = torch.tensor([row], dtype=torch.float64), torch.tensor(GALLERY)
    ours = float(ndkl(scores, attributes, K, A, conventions=DEBIASCLIP.conventions))
    assert _close(ours, debiasclip_ndkl(row, GALLERY, K))


@pytest.mark.parametrize("case", RANKINGS)
def test_bendvlm_is_its_code(case):
    row = RANKINGS[case]
    assert _close(_ours(max_skew_at_k, BENDVLM, row, GALLERY, K, A), bendvlm_max_skew(row, GALLERY, K, A))
    shares = [GALLERY.count(a) / len(GALLERY) for a in range(A)]  # the source has no NDKL: Geyik's, its shares
    scores, attributes = torch.tensor([row], dtype=torch.float64), torch.tensor(GALLERY)
    assert _close(
        float(ndkl(scores, attributes, K, A, conventions=BENDVLM.conventions)), geyik_ndkl(row, GALLERY, K, shares)
    )


@pytest.mark.parametrize("case", RANKINGS)
def test_sfid_is_its_code(case):
    row, binary = RANKINGS[case], [min(value, 1) for value in GALLERY]  # SFID's two values: 0 and the others
    assert _close(_ours(max_skew_at_k, SFID, row, binary, K, 2), sfid_max_skew(row, binary, K))


def test_the_cases_separate_the_protocols():
    """On these rankings no two protocols agree everywhere: every convention is exercised."""
    values = {
        name: tuple(_ours(max_skew_at_k, protocol, row, GALLERY, K, A) for row in RANKINGS.values())
        for name, protocol in PROTOCOLS.items()
        if name != "sfid"
    }
    values["sfid"] = tuple(
        _ours(max_skew_at_k, SFID, row, [min(v, 1) for v in GALLERY], K, 2) for row in RANKINGS.values()
    )
    assert len(set(values.values())) == len(PROTOCOLS), values
    zero_count = RANKINGS["zero count"]
    assert _ours(max_skew_at_k, SFID, zero_count, [min(v, 1) for v in GALLERY], K, 2) == math.inf


def test_the_issues_example():
    """Issue 41: "MaxSkew 0.105 where DebiasCLIP's code gives 1.609 for the same ranking with a zero count". A
    ranking that gives both (a reconstruction; the issue does not give its ranking): 10 values, value 9 absent from
    the gallery (a zero count that geyik's uniform target still counts), K = 9, one image of each value 0-8 in
    the top 9, and 4 more images of value 8 tied with the 9th."""
    labels = [0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 8, 8, 8, 0, 1, 2]
    row = [20.0, 19.0, 18.0, 17.0, 16.0, 15.0, 14.0, 13.0, 12.0, 12.0, 12.0, 12.0, 12.0, 1.0, 0.5, 0.25]
    geyik = _ours(max_skew_at_k, GEYIK, row, labels, 9, 10)
    debiasclip = _ours(max_skew_at_k, DEBIASCLIP, row, labels, 9, 10)
    assert (round(geyik, 3), round(debiasclip, 3)) == (0.105, 1.609)
    assert _close(geyik, geyik_skews(row, labels, 9, 10, 1e-4)[0])
    assert _close(debiasclip, debiasclip_max_skew(row, labels, 9))
    assert _close(debiasclip, math.log(5))  # value 8: 5 kept over K = 9, against 1/9


def test_geyik_is_todays_definition_exactly():
    """The defaults and ``geyik``'s conventions give, bit for bit, the formulas vlbias computed before protocols:
    ln((p + 1e-4) / (1/A + 1e-4)) of the first K by a stable sort, and NDKL by xlogy over the prefixes."""
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (7, 30), generator=g).double()  # many ties
    attributes = torch.randint(0, 3, (30,), generator=g)
    attributes[attributes == 1] = 2  # value 1 absent from the gallery
    for k in (1, 5, 30):
        top = attributes[torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]]
        counts = torch.nn.functional.one_hot(top, 3).double().cumsum(dim=1)
        shares = counts / torch.arange(1, k + 1, dtype=torch.float64)[None, :, None]
        desired = torch.full((3,), 1 / 3, dtype=torch.float64)
        skew = torch.log((shares[:, -1] + 1e-4) / (desired + 1e-4))
        discount = 1 / torch.log2(torch.arange(2, k + 2, dtype=torch.float64))
        kl = torch.special.xlogy(shares, shares / desired).sum(dim=2)
        expected = {
            "max_skew": skew.amax(dim=1).mean(),
            "min_skew": skew.amin(dim=1).mean(),
            "ndkl": ((kl * discount).sum(dim=1) / discount.sum()).mean(),
            "bias": (((top == 0).sum(dim=1) - (top == 1).sum(dim=1)).double() / k).mean(),
        }
        default = ranking_bias(scores, attributes, k, 3, n_bootstrap=50)
        named = ranking_bias(scores, attributes, k, 3, conventions=GEYIK.conventions, n_bootstrap=50)
        for name, value in expected.items():
            assert torch.equal(default[name], value), (name, k)
            assert torch.equal(named[name], value), (name, k)
            assert torch.equal(named[f"{name}_interval"], default[f"{name}_interval"])


@pytest.mark.parametrize("name", PROTOCOLS)
def test_the_metric_twin_agrees(name):
    """``RankingBias`` fed the queries in two updates gives the functional values on all of them."""
    protocol = ranking_protocol(name)
    rows = torch.tensor(list(RANKINGS.values()), dtype=torch.float64)
    labels = torch.tensor(GALLERY) if name != "sfid" else torch.tensor(GALLERY).clamp(max=1)
    num_attributes = A if name != "sfid" else 2
    metric = RankingBias(K, num_attributes, conventions=protocol.conventions, n_bootstrap=50, seed=2)
    metric.update(rows[:1], labels)
    metric.update(rows[1:], labels)
    got = metric.compute()
    expected = ranking_bias(rows, labels, K, num_attributes, conventions=protocol.conventions, n_bootstrap=50, seed=2)
    for key, value in expected.items():
        torch.testing.assert_close(got[key], value, rtol=0, atol=0, msg=key)


def test_an_infinite_skew_gives_infinite_interval_ends_not_nan():
    """SFID's skew of a zero count is +inf: the mean and every resampled mean holding it are +inf, and so are the
    interval's ends (a quantile between infinite replicates), never NaN."""
    rows = torch.tensor(list(RANKINGS.values()), dtype=torch.float64)
    labels = torch.tensor(GALLERY).clamp(max=1)
    got = ranking_bias(rows, labels, K, 2, conventions=SFID.conventions, n_bootstrap=200, seed=0)
    assert got["max_skew"] == math.inf
    assert not got["max_skew_interval"].isnan().any() and got["max_skew_interval"][1] == math.inf


def test_protocol_table():
    assert set(PROTOCOLS) == {"geyik", "debiasclip", "bendvlm", "sfid"}
    assert (DEBIASCLIP.k, BENDVLM.k, SFID.k, BENDVLM.folds) == (1000, 500, 100, 5)
    for protocol in PROTOCOLS.values():
        ranking_bias(
            torch.tensor([RANKINGS["ties at K"]]), torch.tensor(GALLERY), K, A, conventions=protocol.conventions
        )


def test_an_unknown_protocol_or_convention_is_refused_with_the_list():
    with pytest.raises(ConfigError, match="Unknown ranking protocol 'geyick'; expected one of: bendvlm, debiasclip"):
        ranking_protocol("geyick")
    with pytest.raises(ConfigError, match=r"`ties` to be one of \['index', 'keep'\] but got 'all'"):
        SkewConventions(ties="all")
    with pytest.raises(ConfigError, match=r"`desired` to be one of \['uniform', 'present', 'gallery'\]"):
        SkewConventions(desired="equal")
    with pytest.raises(ConfigError, match=r"`desired` to be one of .* or a tensor of shares but got None"):
        SkewConventions(desired=None)
    with pytest.raises(ConfigError, match=r"`zero` to be one of"):
        SkewConventions(zero="clip")
    with pytest.raises(ConfigError, match=r"`eps` to be a finite number >= 0 but got -1"):
        SkewConventions(eps=-1)
    scores, attributes = torch.tensor([RANKINGS["ties at K"]]), torch.tensor(GALLERY)
    with pytest.raises(ConfigError, match=r"`conventions` to be a SkewConventions .* but got \{'ties': 'keep'\}"):
        max_skew_at_k(scores, attributes, K, A, conventions={"ties": "keep"})


def test_the_suite_options_name_every_protocol():
    """``RetrievalBiasOptions.protocol`` is a ``Literal`` (the options import no torch), kept equal to the table."""
    assert get_args(RankingProtocolName) == tuple(PROTOCOLS)
