r"""BendVLM: test-time debiasing of each text query, first against its own attribute subspace, then to equal
similarity to the attribute groups' nearby reference images (Gerych, Zhang, Hamidieh, Pan, Sharma, Hartvigsen &
Ghassemi, 2024, "BendVLM: Test-Time Debiasing of Vision-Language Embeddings", NeurIPS, arXiv:2411.04420, its two
steps).

For a query text :math:`q` with unit embedding :math:`e`:

**Step 1, orthogonalising against the query's local attribute subspace.** The query is rewritten once per word of
each attribute value :math:`a` ("a photo of a nurse" -> "a photo of a male nurse"); :math:`\mu_a` is the mean
embedding of value :math:`a`'s rewrites, and the columns of :math:`V_q` are :math:`\mu_a - \mu_{a_0}` for the other
values (the directions in which this query's embedding moves with the attribute). Then, as Chuang et al.'s
projection but local to the query,

.. math::
    e_1 = \frac{P_q e}{|P_q e|}, \qquad P_q = I - V_q V_q^{+}.

The paper has an LLM write the rewrites; here a template does: by default the attribute word is put before the
query's last word, with "a"/"an" before it agreed (the rewrite the released code's LLM prompt asks for, "A photo of
a carpenter" -> "A photo of a __ATTRIBUTE__ carpenter"); ``template`` (with ``{query}`` and ``{attribute}``) replaces
that rule. The words come from ``attribute_words``, the embeddings from ``encode_text``.

**Step 2, equal similarity to the attribute groups.** For each group :math:`g` of the labelled reference images,
:math:`\bar r_g` is the mean of the ``n_neighbors`` references of group :math:`g` most similar to :math:`e_1` (all
of them where the group has fewer; the paper's experiments take 100, the default). With ``n_neighbors=None`` the count
is chosen per query and group as the released code does when given none (``bend_utils.legrange_text``,
``num_neighbors=None``): the group's similarities to :math:`e_1`, sorted in decreasing order, are cut before their
knee (:func:`vlbias.mitigation.knee.knee_index`; the code's ``[:knee]``), all of them where the curve has no knee, and
the nearest one where the knee is the first point (the code's mean of no reference is NaN there). The debiased query
is the unit vector most similar to :math:`e_1` that is equally similar to every group's mean:

.. math::
    e^* = \arg\max_{|r| = 1} \langle r, e_1 \rangle
    \quad \text{s.t.} \quad \langle r, \bar r_g \rangle = \langle r, \bar r_{g_0} \rangle \ \forall g.

The constraints are linear and homogeneous, so the feasible set is the unit sphere of
:math:`C = \{\bar r_g - \bar r_{g_0}\}^{\perp}`, and by Cauchy-Schwarz the maximum is the normalised projection,
exactly, for any number of groups: :math:`e^* = P_C e_1 / |P_C e_1|` (for two groups,
:math:`e^* \propto e_1 - \frac{\langle e_1, d\rangle}{|d|^2} d` with :math:`d = \bar r_1 - \bar r_0`). The released code
(``bend_utils.legrange_text``) solves the same problem numerically with SLSQP; the closed form is its exact optimum.
The similarity is the inner product with the unnormalised group means, as in that code's constraint; equal cosine
distances to the means are the same constraints when the means have equal norms. A query whose :math:`e_1` lies in the constrained-out span has no solution and is refused by index.

Differences from the released code (waltergerych/bend_vlm, ``demo_debias.ipynb``), where we keep to the query's
local attribute subspace as the method describes it: the code's step 1 also projects out the embeddings of the generic prompts "a photo of a {value}
person", and takes the differences of all pairs of rewrites (halved) instead of the values' means against the first;
for one word per value the pairwise differences and ours span the same subspace. The code's demonstration passes 100
neighbours for gender and 10 for race; the paper states 100 (its experimental setup), our default.

BendVLM changes text embeddings only and needs the query texts (``transform_texts(embeddings, texts)``); it is not
linear (the subspace and the neighbours depend on the query). Its fitted state is the reference set, by group; the
text encoder and the attribute words are not tensors and are not saved: a loaded BendVLM is given them back with
:meth:`BendVLM.bind`.

Example:
    >>> augmented_query("a photo of an engineer", "female")
    'a photo of a female engineer'
    >>> augmented_query("a photo of a carpenter", "Asian")
    'a photo of an Asian carpenter'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_embeddings
from vlbias.mitigation.debiaser import Debiaser, DebiaserOptions, FitData, Modality, renormalised
from vlbias.mitigation.knee import knee_index
from vlbias.mitigation.projection import orthogonal_projection

_GROUP_PREFIX = "references."


@dataclass(frozen=True)
class BendVLMOptions(DebiaserOptions):
    """Args:
    n_neighbors: references of each group, the most similar to the step-1 query, whose mean the query is made
        equally similar to (the paper's 100); None: chosen per query and group at the knee of the similarities, as
        the released code does when given none (module docstring).
    template: how a query is rewritten for an attribute word, with fields ``{query}`` and ``{attribute}`` (default:
        the word before the query's last word, "a"/"an" agreed).
    """

    n_neighbors: int | None = 100
    template: str | None = None

    def __post_init__(self) -> None:
        if self.n_neighbors is not None and self.n_neighbors < 1:
            raise ConfigError(f"Expected `n_neighbors` >= 1 but got {self.n_neighbors!r}")
        if self.template is not None:
            fields = set(re.findall(r"{(\w*)}", self.template))
            if fields != {"query", "attribute"}:
                raise ConfigError(
                    f"Expected `template` with the fields {{query}} and {{attribute}} but got {self.template!r}"
                )


def augmented_query(query: str, word: str, template: str | None = None) -> str:
    """``query`` rewritten to name the attribute ``word``: ``template`` filled in, or by default ``word`` put before
    the query's last word, with an "a"/"an" in front of it agreed ("a photo of an engineer", "male" ->
    "a photo of a male engineer")."""
    if template is not None:
        return template.format(query=query, attribute=word)
    words = query.split()
    if not words:
        raise InputError("Expected a non-empty query text to rewrite with the attribute words but got ''")
    words.insert(len(words) - 1, word)
    if len(words) >= 3 and words[-3].lower() in ("a", "an"):
        article = "an" if word[:1].lower() in "aeiou" else "a"
        words[-3] = article.capitalize() if words[-3][0].isupper() else article
    return " ".join(words)


def knee_count(similarities: Tensor) -> int:
    """How many of a group's references, whose similarities to the query are ``similarities`` ``(n_g,)`` in decreasing
    order, BendVLM averages when no ``n_neighbors`` is given: those before the knee
    (:func:`~vlbias.mitigation.knee.knee_index`), all without a knee, at least one.

    Example:
        >>> knee_count(torch.tensor([0.9, 0.5, 0.3, 0.26, 0.23, 0.21, 0.2, 0.19])), knee_count(torch.ones(4))
        (2, 4)
    """
    knee = knee_index(similarities)
    return similarities.shape[0] if knee is None else max(knee, 1)


def complement_projection(means: Tensor) -> Tensor:
    r""":math:`I - V V^{+}` for the columns :math:`V` = ``means[1:] - means[:1]`` (``means`` ``(G, D)``): the
    projection onto the directions in which every row of ``means`` is equally similar. Equal means give no direction
    (a zero column is dropped; none left gives :math:`I`)."""
    differences = means[1:] - means[:1]
    differences = differences[differences.norm(dim=1) > 0]
    if not differences.shape[0]:
        return torch.eye(means.shape[1], dtype=means.dtype, device=means.device)
    return orthogonal_projection(differences)


def projected_off(means: Tensor, embeddings: Tensor) -> Tensor:
    """Each row of ``embeddings`` (``(n, D)``) times the :func:`complement_projection` of its own ``means[i]``
    (``(n, G, D)``)."""
    return torch.stack([complement_projection(m) @ e for m, e in zip(means, embeddings, strict=True)])


class BendVLM(Debiaser):
    """Gerych et al. (2024): each query projected off its own attribute subspace (from rewrites of it naming each
    attribute value), then moved to equal similarity to the groups' nearest reference images; text only, per query,
    not linear."""

    name = "bend_vlm"
    NEEDS = ("reference_images", "reference_labels", "encode_text", "attribute_words")
    MODIFIES = frozenset({"text"})
    READS_TEXTS = True
    OPTIONS = BendVLMOptions

    def __init__(self, options: BendVLMOptions | None = None) -> None:
        super().__init__(options)
        self._encode_text: Callable[[Sequence[str]], Tensor] | None = None
        self._attribute_words: dict[str, tuple[str, ...]] | None = None

    def _fit(self, data: FitData) -> None:
        images, labels = data.labelled_references()
        groups = sorted(dict.fromkeys(map(str, labels)))
        if len(groups) != len(set(labels)):
            raise InputError(f"Expected reference labels that stay distinct as text but got {sorted(set(labels))}")
        for group in groups:
            self._keep(_GROUP_PREFIX + group, images[[i for i, label in enumerate(labels) if str(label) == group]])
        self.bind(data.encode_text, data.attribute_words)

    def groups(self) -> list[str]:
        """The reference groups (the attribute values), sorted."""
        return sorted(name[len(_GROUP_PREFIX) :] for name in self.fitted_state())

    def bind(
        self, encode_text: Callable[[Sequence[str]], Tensor], attribute_words: Mapping[Hashable, Sequence[str]]
    ) -> BendVLM:
        """Give the text encoder and the words of each attribute value (one entry per reference group) that step 1
        rewrites queries with; :meth:`fit` binds those of its data, a loaded BendVLM needs them given back."""
        words = {str(value): tuple(w) for value, w in attribute_words.items()}
        groups = self.groups()
        if sorted(words) != groups:
            raise InputError(
                f"Expected attribute_words for exactly the reference groups {groups} but got {sorted(words)}"
            )
        empty = [value for value, w in words.items() if not w]
        if empty:
            raise InputError(f"Expected at least one attribute word per value but got none for {empty}")
        self._encode_text, self._attribute_words = encode_text, words
        self._keep_info("attribute_words", {value: list(w) for value, w in words.items()})
        return self

    def attach_text_encoder(self, encode_text: Callable[[Sequence[str]], Tensor]) -> None:
        """Bind ``encode_text`` with the attribute words this BendVLM was fitted with (saved with it)."""
        self.bind(encode_text, self._info["attribute_words"])

    def _transform(self, modality: Modality, embeddings: Tensor, texts: Sequence[str] | None) -> Tensor:
        if texts is None:
            raise InputError("BendVLM rewrites each query: transform_texts needs the query texts with the embeddings")
        if self._encode_text is None:
            raise ConfigError(
                "BendVLM has no text encoder: call attach_text_encoder(encode_text) after loading (the debiased "
                "model does)"
            )
        groups = self.groups()
        state = self.fitted_state()
        references = [state[_GROUP_PREFIX + group].to(embeddings) for group in groups]
        rewrite_means = self._rewrite_means(texts, embeddings, groups)  # (n, G, D)
        step1 = renormalised("text embeddings (step 1)", embeddings, projected_off(rewrite_means, embeddings))
        debiased = projected_off(self._neighbour_means(step1, references), step1)
        return renormalised("text embeddings (step 2)", step1, debiased)

    def _rewrite_means(self, texts: Sequence[str], embeddings: Tensor, groups: list[str]) -> Tensor:
        r""":math:`\mu_a` of step 1 for every query and value, ``(n, G, D)``; all rewrites embedded in one call."""
        words = [(g, word) for g, value in enumerate(groups) for word in self._attribute_words[value]]
        rewrites = [augmented_query(text, word, self.options.template) for text in texts for _, word in words]
        encoded = check_embeddings("encode_text(rewritten queries)", self._encode_text(rewrites)).to(embeddings)
        if encoded.shape != (len(rewrites), embeddings.shape[1]):
            raise InputError(
                f"Expected encode_text to give ({len(rewrites)}, {embeddings.shape[1]}) embeddings of the rewritten "
                f"queries but got {tuple(encoded.shape)}"
            )
        value_index = torch.tensor([g for g, _ in words], device=embeddings.device)
        per_query = encoded.view(len(texts), len(words), -1)
        return torch.stack([per_query[:, value_index == g].mean(dim=1) for g in range(len(groups))], dim=1)

    def _neighbour_means(self, queries: Tensor, references: list[Tensor]) -> Tensor:
        """Each group's mean over its ``n_neighbors`` references most similar to each query (or as many as
        :func:`knee_count` chooses), ``(n, G, D)``."""
        means = []
        for group in references:
            similarity = queries @ F.normalize(group, dim=-1).T  # (n, n_g)
            if self.options.n_neighbors is not None:
                nearest = similarity.topk(min(self.options.n_neighbors, group.shape[0]), dim=1).indices  # (n, k)
                means.append(group[nearest].mean(dim=1))
                continue
            values, order = similarity.sort(dim=1, descending=True)  # (n, n_g) each
            means.append(torch.stack([group[o[: knee_count(v)]].mean(dim=0) for v, o in zip(values, order)]))
        return torch.stack(means, dim=1)
