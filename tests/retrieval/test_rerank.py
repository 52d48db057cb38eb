"""Batched top-k ITM re-ranking equals the per-query loop on a tiny ALBEF, and bad k_test is refused."""

import pytest
import torch
from torch.testing import assert_close

from vlbias.errors import CapabilityError, ConfigError, InputError
from vlbias.metrics.functional import retrieval_recall
from vlbias.models.base import Capability
from vlbias.models.registry import load
from vlbias.retrieval import candidates, rerank, rerank_per_query

CAPTIONS = [
    "a man is cooking",
    "a woman is sewing in the kitchen",
    "a doctor",
    "a nurse is reading a book",
    "a person is cooking food",
    "a man",
    "a woman is reading",
    "a teacher is sewing a shirt for a child",
    "a person",
    "a doctor is cooking",
]


@pytest.fixture(scope="module")
def albef():
    return load("albef", tiny=True, device="cpu").eval()


def prepared(model):
    """Similarities ``(4, 10)``, pixel values and tokens of 4 random images and the captions."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        pixel_values = model.prepare_images(torch.rand(4, 3, 32, 32, generator=g))
        tokens = model.prepare_texts(CAPTIONS)
        return model.embed_images(pixel_values) @ model.embed_texts(tokens).T, pixel_values, tokens


def test_batched_equals_per_query_loop_through_run_capability():
    blip = load("blip", tiny=True, device="cpu").eval()  # the vision model once per image, the text encoder per pair
    similarity, pixel_values, tokens = prepared(blip)
    batched = rerank(blip, similarity, pixel_values, tokens, k_test=2, batch_size=3)
    loop = rerank_per_query(blip, similarity, pixel_values, tokens, k_test=2)
    for got, want in zip(batched, loop, strict=True):
        assert torch.equal(got.isfinite(), want.isfinite())
        assert_close(got, want, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def inputs(albef):
    return prepared(albef)


@pytest.mark.parametrize("add_similarity", [False, True])
def test_batched_equals_per_query_loop(albef, inputs, add_similarity):
    similarity, pixel_values, tokens = inputs
    batched = rerank(albef, similarity, pixel_values, tokens, k_test=3, add_similarity=add_similarity, batch_size=5)
    loop = rerank_per_query(albef, similarity, pixel_values, tokens, k_test=3, add_similarity=add_similarity)
    for got, want in zip(batched, loop, strict=True):
        assert torch.equal(got.isfinite(), want.isfinite())
        assert_close(got, want, atol=1e-5, rtol=0)
    text_scores, image_scores = batched
    assert (text_scores.isfinite().sum(dim=1) == 3).all() and (image_scores.isfinite().sum(dim=0) == 3).all()
    caption_to_image = torch.arange(10) % 4
    ks = (1, 2, 3)
    got = retrieval_recall(text_scores, caption_to_image, ks, image_scores=image_scores)
    want = retrieval_recall(loop[0], caption_to_image, ks, image_scores=loop[1])
    assert all(torch.equal(got[key], want[key]) for key in want)


def test_reranked_scores_are_the_match_logits_of_the_candidates(albef, inputs):
    similarity, pixel_values, tokens = inputs
    text_scores, _ = rerank(albef, similarity, pixel_values, tokens, k_test=2)
    top = candidates(similarity[1][None], 2)[0]
    rows = {key: value[top] for key, value in tokens.items()}
    with torch.no_grad():
        logits = albef.run_capability(Capability.MATCH, pixel_values[1].expand(2, -1, -1, -1), rows)
    assert_close(text_scores[1, top], logits, atol=1e-5, rtol=0)
    assert set(text_scores[1].isfinite().nonzero().flatten().tolist()) == set(top.tolist())


def test_candidates_break_ties_to_the_lower_index():
    similarity = torch.tensor([[0.5, 0.9, 0.5, 0.5], [1.0, 1.0, 1.0, 1.0]])
    assert candidates(similarity, 3).tolist() == [[1, 0, 2], [0, 1, 2]]


@pytest.mark.parametrize("k_test", [1, 3, 7, 12])
def test_candidates_equal_the_head_of_a_stable_sort_with_many_ties(k_test):
    """Similarities drawn from five values (with -inf and +inf), so most rows tie across the k-th place."""
    g = torch.Generator().manual_seed(k_test)
    values = torch.tensor([float("-inf"), -1.0, 0.0, 0.5, float("inf")])
    similarity = values[torch.randint(5, (40, 12), generator=g)]
    expected = torch.sort(similarity, dim=1, descending=True, stable=True).indices[:, :k_test]
    assert torch.equal(candidates(similarity, k_test), expected)
    columns = torch.sort(similarity.T, dim=1, descending=True, stable=True).indices[:, :3]
    assert torch.equal(candidates(similarity.T, 3), columns)  # a transposed (strided) matrix, as rerank passes


def test_a_similarity_with_nan_is_refused_by_position(albef, inputs):
    similarity, pixel_values, tokens = inputs
    similarity = similarity.clone()
    similarity[2, 7] = float("nan")
    with pytest.raises(InputError, match=r"NaN at \(image 2, caption 7\)"):
        rerank(albef, similarity, pixel_values, tokens, 2)


@pytest.mark.parametrize("fusion_layer", [1, 2, 3, 4])
def test_albef_paired_match_logits_equal_run_capability_at_every_fusion_depth(fusion_layer):
    """Three fusion layers, two (the tiny default), one (first = last: CLS only after the per-caption
    self-attention) and none; batches of 3 pairs split the 7 unevenly."""
    model = load("albef", tiny=True, device="cpu", options={"fusion_layer": fusion_layer}).eval()
    _, pixel_values, tokens = prepared(model)
    image_rows, text_rows = torch.tensor([0, 3, 1, 1, 2, 0, 3]), torch.tensor([7, 2, 0, 9, 9, 1, 4])
    with torch.no_grad():
        fast = model.paired_match_logits(pixel_values, tokens, image_rows, text_rows, batch_size=3)
        rows = {key: value[text_rows] for key, value in tokens.items()}
        reference = model.run_capability(Capability.MATCH, pixel_values[image_rows], rows)
    assert_close(fast, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("name", "budget"), [("albef", "key_value_cache_bytes"), ("blip", "image_states_cache_bytes")])
def test_pairs_are_the_same_when_the_image_cache_holds_one_image(name, budget):
    """A cache budget below one image: images one chunk at a time (image 2 in no pair), the same logits."""
    model = load(name, tiny=True, device="cpu").eval()
    _, pixel_values, tokens = prepared(model)
    image_rows, text_rows = torch.tensor([3, 0, 3, 1, 1, 0, 3, 1]), torch.tensor([7, 2, 0, 9, 9, 1, 4, 4])
    with torch.no_grad():
        whole = model.paired_match_logits(pixel_values, tokens, image_rows, text_rows, batch_size=3)
        setattr(model, budget, 1)
        chunked = model.paired_match_logits(pixel_values, tokens, image_rows, text_rows, batch_size=3)
        rows = {key: value[text_rows] for key, value in tokens.items()}
        reference = model.run_capability(Capability.MATCH, pixel_values[image_rows], rows)
    assert_close(chunked, whole, atol=1e-6, rtol=0)
    assert_close(chunked, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("k_test", [5, 0])
def test_k_test_outside_the_gallery_is_refused(albef, inputs, k_test):
    similarity, pixel_values, tokens = inputs  # 4 images: k_test = 5 exceeds the image gallery
    for run in (rerank, rerank_per_query):
        with pytest.raises(ConfigError, match=r"Expected argument `k_test` to be an integer in \[1, 4\]"):
            run(albef, similarity, pixel_values, tokens, k_test)


def test_a_model_without_match_is_refused(inputs):
    clip = load("clip", tiny=True, device="cpu")
    similarity, pixel_values, tokens = inputs
    with pytest.raises(CapabilityError, match="needs capability 'match'"):
        rerank(clip, similarity, pixel_values, tokens, 2)
