"""BendVLM (Gerych et al., 2024) against a transcription of its two steps, the exact optimum of step 2's constrained
problem (checked with a numerical solver for three groups), the refusals, and a planted stereotype it removes."""

import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize

from vlbias.errors import ConfigError, InputError
from vlbias.mitigation.bend_vlm import BendVLM, BendVLMOptions, augmented_query, complement_projection
from vlbias.mitigation.debiaser import FitData, load_debiaser
from vlbias.mitigation.knee import knee_index
from vlbias.mitigation.registry import debiaser_class

DIM = 24
WORDS = {"female": ["female"], "male": ["male"]}


class ToyEncoder:
    """A text encoder with a planted stereotype: the words are random vectors, "female"/"male" add -/+ ``attribute``,
    and "nurse" also leans to the female side; a text is the normalised sum of its words."""

    def __init__(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.attribute = F.normalize(torch.randn(DIM, dtype=torch.float64, generator=g), dim=0)
        self.vectors = {}
        self.generator = g
        self.vectors["female"] = 0.3 * self._random() - self.attribute
        self.vectors["male"] = 0.3 * self._random() + self.attribute
        self.vectors["nurse"] = self._random() - 1.5 * self.attribute

    def _random(self):
        return F.normalize(torch.randn(DIM, dtype=torch.float64, generator=self.generator), dim=0)

    def __call__(self, texts):
        rows = []
        for text in texts:
            words = text.lower().split()
            for word in words:
                if word not in self.vectors:
                    self.vectors[word] = self._random()
            rows.append(sum(self.vectors[word] for word in words))
        return F.normalize(torch.stack(rows), dim=-1)


def _references(encoder, n_per_group, seed):
    """Reference images: noise plus -/+ the attribute (female/male), half of them also showing a nurse."""
    g = torch.Generator().manual_seed(seed)
    rows, labels = [], []
    for label, sign in (("female", -1.0), ("male", 1.0)):
        noise = torch.randn(n_per_group, DIM, dtype=torch.float64, generator=g)
        nurse = (torch.arange(n_per_group) % 2).double()[:, None] * encoder.vectors["nurse"]
        rows.append(F.normalize(0.5 * noise + sign * encoder.attribute + nurse, dim=-1))
        labels += [label] * n_per_group
    return torch.cat(rows), labels


def _bend_by_hand(encoder, images, labels, queries, n_neighbors):
    """The two steps, two groups: step 1 projects off the rewrites' difference, step 2 off the neighbour means' difference
    (``n_neighbors``: a count, or a function of a group's similarities to the query that gives one)."""
    out = []
    e = encoder(queries)
    for query, row in zip(queries, e, strict=True):
        words = query.split()
        male = encoder([" ".join([*words[:-1], "male", words[-1]])])[0]
        female = encoder([" ".join([*words[:-1], "female", words[-1]])])[0]
        v = male - female  # groups sorted: "female" is the anchor
        e1 = row - (row @ v) / (v @ v) * v
        e1 = e1 / e1.norm()
        means = []
        for group in ("female", "male"):
            members = images[[i for i, label in enumerate(labels) if label == group]]
            similarities = members @ e1
            count = n_neighbors(similarities) if callable(n_neighbors) else min(n_neighbors, members.shape[0])
            nearest = similarities.topk(count).indices
            means.append(members[nearest].mean(dim=0))
        d = means[1] - means[0]
        star = e1 - (e1 @ d) / (d @ d) * d
        out.append(star / star.norm())
    return torch.stack(out)


def _fit(encoder, images, labels, **options):
    data = FitData(reference_images=images, reference_labels=labels, encode_text=encoder, attribute_words=WORDS)
    return BendVLM(BendVLMOptions(**options)).fit(data)


def test_bend_vlm_equals_its_two_steps():
    encoder = ToyEncoder()
    images, labels = _references(encoder, 30, 1)
    queries = ["a photo of a nurse", "a picture of a doctor", "a photo of a person"]
    debiaser = _fit(encoder, images, labels, n_neighbors=7)
    out = debiaser.transform_texts(encoder(queries), queries)
    torch.testing.assert_close(out, _bend_by_hand(encoder, images, labels, queries, 7), rtol=0, atol=1e-10)
    assert debiaser.linear_map("text") is None and debiaser.linear_map("image") is None
    assert torch.equal(debiaser.transform_images(images[:2]), images[:2])


def _before_the_knee(similarities):
    """The released code's count without ``num_neighbors``: the sorted similarities up to their knee (``[:knee]``),
    all without a knee; one where the knee is the first point (the code averages nothing there)."""
    knee = knee_index(similarities.sort(descending=True).values)
    return similarities.shape[0] if knee is None else max(knee, 1)


def test_without_n_neighbors_each_group_is_cut_at_the_knee_of_its_similarities():
    encoder = ToyEncoder()
    images, labels = _references(encoder, 30, 1)
    queries = ["a photo of a nurse", "a picture of a doctor", "a photo of a person"]
    out = _fit(encoder, images, labels, n_neighbors=None).transform_texts(encoder(queries), queries)
    torch.testing.assert_close(
        out, _bend_by_hand(encoder, images, labels, queries, _before_the_knee), rtol=0, atol=1e-10
    )
    counts = {_before_the_knee(images[:30] @ query) for query in encoder(queries)}
    assert all(1 <= count < 30 for count in counts)  # the knee chooses, not the group's size


def test_step_2_is_the_exact_optimum_of_the_constrained_problem_for_three_groups():
    g = torch.Generator().manual_seed(2)
    query = F.normalize(torch.randn(DIM, dtype=torch.float64, generator=g), dim=0)
    means = torch.randn(3, DIM, dtype=torch.float64, generator=g)
    star = complement_projection(means) @ query
    star = star / star.norm()
    assert torch.all(((means[1:] - means[0]) @ star).abs() < 1e-12)  # equally similar to every group mean
    constraints = [{"type": "eq", "fun": lambda r: r @ r - 1}] + [
        {"type": "eq", "fun": lambda r, m=m: r @ (m - means[0].numpy())} for m in means[1:].numpy()
    ]
    solved = minimize(lambda r: -(r @ query.numpy()), query.numpy(), method="SLSQP", constraints=constraints)
    assert solved.success
    torch.testing.assert_close(star, torch.from_numpy(solved.x), rtol=0, atol=1e-6)
    feasible = F.normalize(
        torch.randn(1000, DIM, dtype=torch.float64, generator=g) @ complement_projection(means), dim=-1
    )
    assert float((feasible @ query).max()) < float(star @ query)  # no feasible unit vector is more similar


def test_equal_means_and_rewrites_give_no_direction():
    means = torch.ones(2, 4, dtype=torch.float64)
    assert torch.equal(complement_projection(means), torch.eye(4, dtype=torch.float64))
    encoder = ToyEncoder()
    encoder.vectors["female"] = encoder.vectors["male"]  # the encoder does not see the attribute word
    images, labels = _references(encoder, 10, 3)
    debiaser = _fit(encoder, images, labels, n_neighbors=100)  # more than a group holds: all of its references
    queries = ["a photo of a nurse"]
    out = debiaser.transform_texts(encoder(queries), queries)
    means = torch.stack([images[:10].mean(0), images[10:].mean(0)])
    e = encoder(queries)[0]
    d = means[1] - means[0]
    torch.testing.assert_close(out[0], F.normalize(e - (e @ d) / (d @ d) * d, dim=0), rtol=0, atol=1e-10)


def test_rewrites_put_the_word_before_the_last_with_the_article_agreed():
    assert augmented_query("a photo of a nurse", "female") == "a photo of a female nurse"
    assert augmented_query("A photo of an engineer", "male") == "A photo of a male engineer"
    assert augmented_query("a photo of a carpenter", "Asian") == "a photo of an Asian carpenter"
    assert augmented_query("nurse", "male") == "male nurse"
    assert augmented_query("a nurse", "male", "{query}, {attribute}") == "a nurse, male"
    with pytest.raises(ConfigError, match="fields {query} and {attribute}"):
        BendVLMOptions(template="a {attribute} person")
    with pytest.raises(ConfigError, match="n_neighbors"):
        BendVLMOptions(n_neighbors=0)


def test_missing_data_and_texts_are_refused_by_name():
    encoder = ToyEncoder()
    images, labels = _references(encoder, 5, 4)
    with pytest.raises(InputError, match="got no encode_text, attribute_words"):
        BendVLM().fit(FitData(reference_images=images, reference_labels=labels))
    with pytest.raises(InputError, match=r"attribute_words for exactly the reference groups \['female', 'male'\]"):
        BendVLM().fit(
            FitData(reference_images=images, reference_labels=labels, encode_text=encoder, attribute_words={"m": ["x"]})
        )
    with pytest.raises(InputError, match="at least two groups"):
        BendVLM().fit(
            FitData(reference_images=images, reference_labels=["male"] * 10, encode_text=encoder, attribute_words=WORDS)
        )
    debiaser = _fit(encoder, images, labels)
    with pytest.raises(InputError, match="needs the query texts"):
        debiaser.transform_texts(encoder(["a nurse"]))
    with pytest.raises(InputError, match="encode_text to give"):
        debiaser.bind(lambda texts: encoder(texts)[:, :5], WORDS).transform_texts(encoder(["a nurse"]), ["a nurse"])


def test_a_planted_stereotype_is_removed_from_the_query():
    encoder = ToyEncoder(seed=5)
    images, labels = _references(encoder, 100, 6)
    female = torch.tensor([label == "female" for label in labels])
    queries = ["a photo of a nurse"]
    before = encoder(queries)
    after = _fit(encoder, images, labels, n_neighbors=20).transform_texts(before, queries)

    def gap_and_top_share(q):
        similarity = images @ q[0]
        gap = float(similarity[female].mean() - similarity[~female].mean())
        return gap, float(female[similarity.topk(40).indices].double().mean())

    gap_before, share_before = gap_and_top_share(before)
    gap_after, share_after = gap_and_top_share(after)
    assert gap_before > 0.25 and share_before > 0.75
    assert abs(gap_after) < 0.3 * gap_before and 0.4 <= share_after <= 0.6
    assert float(after[0] @ encoder.vectors["nurse"]) > 0.5 * float(before[0] @ encoder.vectors["nurse"])


def test_save_load_and_bind(tmp_path):
    encoder = ToyEncoder()
    images, labels = _references(encoder, 8, 7)
    debiaser = _fit(encoder, images, labels, n_neighbors=3, template="{query} who is {attribute}")
    loaded = load_debiaser(debiaser.save(tmp_path / "bend"))
    assert isinstance(loaded, BendVLM) and loaded.options == debiaser.options and loaded.groups() == ["female", "male"]
    queries = ["a photo of a nurse"]
    with pytest.raises(ConfigError, match=r"call attach_text_encoder\(encode_text\) after loading"):
        loaded.transform_texts(encoder(queries), queries)
    loaded.attach_text_encoder(encoder)  # the attribute words were saved with it
    torch.testing.assert_close(
        loaded.transform_texts(encoder(queries), queries),
        debiaser.transform_texts(encoder(queries), queries),
        rtol=0,
        atol=0,
    )
    assert debiaser_class("bend_vlm") is BendVLM
