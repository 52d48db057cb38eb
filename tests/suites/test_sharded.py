"""Every suite gives the same output on each of two gloo ranks, each probing its own shard, as on one process.

The cases are the suites' own ``sharded_case`` functions (odd stimulus counts, ranks that see no item of some
set or group, skips of every kind); one spawn runs them all."""

import pytest

from tests.suites.sharded import assert_same_output, outputs_per_rank, single_process
from tests.suites.test_bias_qa import sharded_case as bias_qa_case
from tests.suites.test_counterbias import sharded_case as counterbias_case
from tests.suites.test_counterfactual_answers import sharded_case as counterfactual_answers_case
from tests.suites.test_entity_association import sharded_case as entity_association_case
from tests.suites.test_gallery_skew import sharded_case as gallery_skew_case
from tests.suites.test_mmbias import sharded_case as mmbias_case
from tests.suites.test_mmbias import sharded_match_case as mmbias_match_case
from tests.suites.test_open_generation import sharded_case as open_generation_case
from tests.suites.test_retrieval_bias import sharded_case as retrieval_bias_case
from tests.suites.test_vlstereoset import sharded_case as vlstereoset_case
from tests.suites.test_weat import sharded_case as weat_case
from tests.suites.test_zero_shot_fairness import sharded_case as zero_shot_fairness_case

CASES = [
    mmbias_case,
    mmbias_match_case,
    weat_case,
    vlstereoset_case,
    entity_association_case,
    counterbias_case,
    retrieval_bias_case,
    zero_shot_fairness_case,
    gallery_skew_case,
    bias_qa_case,
    counterfactual_answers_case,
    open_generation_case,
]


@pytest.mark.slow  # two spawned ranks running every suite: ~20 s on 2 cores
def test_two_ranks_give_the_one_process_output():
    expected = single_process(CASES)
    ranks = outputs_per_rank(CASES)
    for case, want, *per_rank in zip(CASES, expected, *ranks, strict=True):
        for actual in per_rank:
            assert_same_output(actual, want)
        shards, batch_size = per_rank[0]["stimuli_per_rank"], case()[0].batch_size
        assert len(shards) == 2 and abs(shards[0] - shards[1]) <= batch_size, (case.__name__, shards)  # about half each
