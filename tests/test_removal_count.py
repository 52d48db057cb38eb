"""N, the embedding dimensions to remove, has one rule (:mod:`vlbias.mitigation.removal_count`) that ``vlbias prune``
(:class:`~vlbias.mitigation.removal_count.PruningChoice`) and the dimension-removing debiasers
(:class:`~vlbias.mitigation.dimension_removal.RemovalOptions`) share: the same default, the same refusals, the same
count for the same D; and Θ, the threshold on the mutual information, likewise for prune and `mmbias_pruning`."""

import pytest

from vlbias.errors import ConfigError
from vlbias.mitigation.dimension_removal import RemovalOptions
from vlbias.mitigation.mmbias_pruning import MMBiasPruningOptions
from vlbias.mitigation.removal_count import PruningChoice, removal_count

CHOICES = [PruningChoice, RemovalOptions, MMBiasPruningOptions]


@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: c.__name__)
def test_every_choice_counts_by_the_one_rule(choice):
    assert choice().fraction == 0.1 and choice().n_dims is None
    assert choice().count(512) == removal_count(0.1, 512) == 51
    assert choice(fraction=0.25).count(64) == 16
    assert choice(n_dims=5).count(64) == 5 and choice(n_dims=5).fraction is None


@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"n_dims": 2, "fraction": 0.1},
            r"Give one of `n_dims` \(N\) and `fraction` \(N as a share of D\), not both\.",
        ),
        ({"n_dims": True}, r"Expected `n_dims` to be an int count but got True"),
        ({"n_dims": 2.0}, r"Expected `n_dims` to be an int count but got 2.0"),
        ({"fraction": 1}, r"Expected `fraction` to be a float in \(0, 1\) but got 1"),
        ({"fraction": 1.5}, r"Expected `fraction` to be a float in \(0, 1\) but got 1.5"),
    ],
    ids=["both", "bool", "float_count", "int_fraction", "fraction_above_one"],
)
def test_every_choice_refuses_alike(choice, given, message):
    with pytest.raises(ConfigError, match=message):
        choice(**given)


@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: c.__name__)
def test_a_count_that_does_not_fit_d_names_the_option(choice):
    with pytest.raises(ConfigError, match=r"Expected `n_dims` to give a count in \[1, 63\] for D = 64 but got 64"):
        choice(n_dims=64).count(64)
    with pytest.raises(ConfigError, match=r"Expected `fraction` to give a count in \[1, 15\] for D = 16 but got 0.01"):
        choice(fraction=0.01).count(16)


THRESHOLDS = [PruningChoice, MMBiasPruningOptions]


@pytest.mark.parametrize("choice", THRESHOLDS, ids=lambda c: c.__name__)
def test_every_mmbias_choice_takes_theta_by_the_one_rule(choice):
    assert choice().theta_quantile == 0.9 and choice().theta is None
    assert choice(theta=0.05).theta_quantile is None
    with pytest.raises(ConfigError, match=r"Give one of `theta` \(Θ\) and `theta_quantile`"):
        choice(theta=0.05, theta_quantile=0.5)


def test_clip_clip_takes_no_theta():
    assert PruningChoice(strategy="clip_clip").theta_quantile is None
    with pytest.raises(ConfigError, match="Strategy 'clip_clip' takes no Θ"):
        PruningChoice(strategy="clip_clip", theta_quantile=0.5)
