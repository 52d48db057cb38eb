r"""SFID, Selective Feature Imputation for Debiasing: the embedding dimensions a random forest finds most telling of
the attribute are replaced by their mean over the samples it is least sure about (Jung, Jang & Wang,
2024, "A Unified Debiasing Approach for Vision-Language Models across Modalities and Tasks", NeurIPS,
arXiv:2410.07593, its method figure).

For each debiased modality, on labelled reference embeddings :math:`\{(z_n, a_n)\}`:

1. *Feature importance.* A random forest (scikit-learn's ``RandomForestClassifier``, ``n_estimators`` trees,
   seeded) is trained to predict the attribute :math:`a` from :math:`z` on the training part; the importance of
   dimension :math:`d` is its mean decrease in Gini impurity over the trees (``feature_importances_``), and
   :math:`\mathcal{I}` is the set of the ``k`` most important dimensions.
2. *Low-confidence imputation.* On the held-out part, the samples whose largest class probability is below the
   threshold :math:`\tau`, :math:`\mathcal{L} = \{z : \max_a p(a \mid z) < \tau\}`, are those that carry least of
   the attribute; their mean :math:`\bar z^{\mathcal{L}} = \frac{1}{|\mathcal{L}|} \sum_{z \in \mathcal{L}} z` gives
   the imputed values.
3. *Transform.* :math:`z'_d = \bar z^{\mathcal{L}}_d` for :math:`d \in \mathcal{I}`, :math:`z'_d = z_d` otherwise;
   then :math:`z' / |z'|` (vlbias's embeddings are unit rows; the released code does not renormalise after
   imputing, which changes no cosine similarity).

These are the steps of the paper's method figure, which the authors' README reproduces
(HoinJung/Unified-Debiaisng-VLM-SFID, ``asset/sfid_github.png``): "(a) Feature Selection & Imputing Value
Extraction", a RandomForest fitted on the training-set embeddings and their attribute labels gives the feature
importance and its top features :math:`j_1, j_2, \dots`, and the low-confidence samples of the validation-set
embeddings give the imputing values :math:`\mu_1, \mu_2, \dots`; "(b) Debiasing Downstream Tasks", feature
:math:`j_i` of a test embedding is replaced by :math:`\mu_i`. The paper's text beyond its abstract (its equations and
section numbers) could not be read through this project's tools; the forest, the ``max`` probability below
:math:`\tau` and the top-``k`` ``argsort`` are the released code's (``src/run_zc_retrieval.py``). The paper trains
the forest on a training split and takes :math:`\mathcal{L}` from a validation split (FairFace train / val for
images). Here the reference set is split in two, per group, seeded: of the :math:`n_g` references of
group :math:`g`, in the order of ``torch.randperm(n_g)`` from a generator seeded with ``seed``, the first
:math:`\max(1, \operatorname{round}(\text{held\_out} \cdot n_g))` are held out. Ties in importance keep the lower
dimension out of :math:`\mathcal{I}` (a stable sort).

Data per modality: images from ``reference_images`` + ``reference_labels``; texts from ``attribute_prompts``, each
value's rows labelled with that value. The paper fits the text side on labelled texts (Bias-in-Bios biographies with
their gender); any labelled text embeddings come in as ``attribute_prompts`` (value -> that value's texts).
``modalities`` chooses the encoders to debias (the paper's ``--target``); an instance's ``NEEDS`` and ``MODIFIES``
are those of its modalities. The transform is affine in the kept dimensions and not of the form :math:`M z`: there
is no :meth:`~vlbias.mitigation.debiaser.Debiaser.linear_map`.

Cost: the forest is nearly all of a fit (100 trees on 8,000 references of dimension 512: about 13 s on one thread;
predicting the held-out part, 0.1 s). Its trees are fitted on torch's threads (``torch.get_num_threads()``), which
fits the same forest on any number. Fewer trees fit in seconds but change what the method removes: on the
embeddings of ``scripts/bench_debias.py``, 20 trees (2.6 s) share 24 of the 50 imputed dimensions with 100 trees and
leave 75 % of the planted gap between the groups' means, against 61 % (``scripts/bench_sfid_trees.py``, the
benchmarks page); ``n_estimators`` stays at 100.

The released code (HoinJung/Unified-Debiaisng-VLM-SFID, ``evaluation.py``) differs in one place we do not follow:
its FACET zero-shot evaluation normalises the class-prompt embeddings before imputing and returns the normalised
copy, so there the text imputation has no effect; the paper imputes both modalities.

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> labels = ["f", "m"] * 50
    >>> images = torch.randn(100, 4, generator=g)
    >>> images[:, 0] += torch.tensor([-1.0, 1.0]).repeat(50)  # dimension 0 carries the attribute
    >>> options = SFIDOptions(k=1, n_estimators=20, threshold=0.9, modalities=("image",))
    >>> debiaser = SFID(options).fit(FitData(reference_images=images, reference_labels=labels))
    >>> debiaser.fitted_state()["image_dims"]
    tensor([0])
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_embeddings
from vlbias.mitigation.debiaser import (
    Debiaser,
    DebiaserOptions,
    FitData,
    Modality,
    attribute_values,
    renormalised,
)

_NEEDS = {"image": ("reference_images", "reference_labels"), "text": ("attribute_prompts",)}


@dataclass(frozen=True)
class SFIDOptions(DebiaserOptions):
    """Args:
    k: how many of the most important dimensions are imputed (the authors' README recommends 50 to 100 of CLIP's
        512; its zero-shot and retrieval commands use 50).
    threshold: :math:`\\tau`, held-out samples whose largest class probability is below it are low-confidence
        (0.7: the README's zero-shot and retrieval commands; 0.9 for captioning, 0.5 for generation there).
    n_estimators: trees in the random forest.
    held_out: the fraction of each group's references held out for the low-confidence mean.
    seed: seeds the split and the forest.
    modalities: the embeddings to debias, ``image`` and/or ``text``.
    """

    k: int = 50
    threshold: float = 0.7
    n_estimators: int = 100
    held_out: float = 0.2
    seed: int = 0
    modalities: tuple[str, ...] = ("image", "text")

    def __post_init__(self) -> None:
        object.__setattr__(self, "modalities", tuple(self.modalities))
        if self.k < 1:
            raise ConfigError(f"Expected `k` >= 1 but got {self.k!r}")
        if not 0 < self.threshold <= 1:
            raise ConfigError(f"Expected `threshold` in (0, 1] but got {self.threshold!r}")
        if self.n_estimators < 1:
            raise ConfigError(f"Expected `n_estimators` >= 1 but got {self.n_estimators!r}")
        if not 0 < self.held_out < 1:
            raise ConfigError(f"Expected `held_out` in (0, 1) but got {self.held_out!r}")
        unknown = [m for m in self.modalities if m not in _NEEDS]
        if unknown or not self.modalities or len(set(self.modalities)) != len(self.modalities):
            raise ConfigError(
                f"Expected `modalities` a non-empty subset of ['image', 'text'] but got {self.modalities}"
            )


#: Per kind of embeddings an SFID forest is fitted on: what to supply when a group has too few of them.
_SUPPLY = {
    "reference images": "give more reference images of that group",
    "attribute prompts": "SFID fits the text embeddings on the attribute prompts, not on the reference images: give "
    "at least two prompts of each value in `attribute_prompts`, or debias the images alone (`modalities: [image]`)",
}


def held_out_split(
    labels: Sequence[Hashable], fraction: float, seed: int, what: str = "reference images"
) -> tuple[Tensor, Tensor]:
    """Indices ``(train, held_out)``: per group, the first ``max(1, round(fraction * n_g))`` of
    ``torch.randperm(n_g)`` (generator seeded with ``seed``, groups in order of first appearance) are held out. A
    group of fewer than two is refused naming ``what`` was counted (the ``labels``' embeddings: ``reference images``
    or ``attribute prompts``) and what to supply."""
    generator = torch.Generator().manual_seed(seed)
    train, held = [], []
    for group in dict.fromkeys(labels):
        members = torch.tensor([i for i, label in enumerate(labels) if label == group])
        n_held = max(1, round(fraction * len(members)))
        if n_held >= len(members):
            raise InputError(
                f"Expected at least two {what} of group {group!r} (one to train the forest on, one held out) but got "
                f"{len(members)} {what}: {_SUPPLY.get(what, 'give more of them')}"
            )
        order = members[torch.randperm(len(members), generator=generator)]
        held.append(order[:n_held])
        train.append(order[n_held:])
    return torch.cat(train).sort().values, torch.cat(held).sort().values


def fit_imputation(
    embeddings: Tensor, labels: Sequence[Hashable], options: SFIDOptions, what: str
) -> tuple[Tensor, Tensor]:
    """The ``k`` most important dimensions (``(k,)`` indices) and the low-confidence mean (``(D,)``)."""
    from sklearn.ensemble import RandomForestClassifier

    n, dim = embeddings.shape
    if options.k > dim:
        raise InputError(f"Expected `k` at most the dimension {dim} of the {what} but got {options.k}")
    train, held = held_out_split(labels, options.held_out, options.seed, what)
    codes = {group: code for code, group in enumerate(dict.fromkeys(labels))}
    x = embeddings.detach().cpu().double().numpy()
    y = np.array([codes[label] for label in labels])
    # the trees on torch's threads: each tree's random state is drawn before, so any thread count fits the same forest
    forest = RandomForestClassifier(
        n_estimators=options.n_estimators, random_state=options.seed, n_jobs=torch.get_num_threads()
    )
    forest.fit(x[train.numpy()], y[train.numpy()])
    dims = np.argsort(forest.feature_importances_, kind="stable")[-options.k :]
    # one thread to predict: threads would add the trees' probabilities in the order they finish
    confidence = forest.set_params(n_jobs=1).predict_proba(x[held.numpy()]).max(axis=1)
    low = held[torch.from_numpy(confidence < options.threshold)]
    if not low.numel():
        raise InputError(
            f"None of the {held.numel()} held-out {what} has its largest class probability below `threshold` "
            f"{options.threshold}: raise the threshold or give more references"
        )
    dims = torch.from_numpy(dims.copy()).to(embeddings.device)
    return dims, embeddings[low].mean(dim=0)


class SFID(Debiaser):
    """Jung et al. (2024): the ``k`` dimensions a random forest finds most telling of the attribute set to their mean
    over low-confidence held-out references, for image and/or text embeddings; affine, no :meth:`linear_map`."""

    name = "sfid"
    NEEDS = ("reference_images", "reference_labels", "attribute_prompts")
    MODIFIES = frozenset({"image", "text"})
    OPTIONS = SFIDOptions

    def __init__(self, options: SFIDOptions | None = None) -> None:
        super().__init__(options)
        self.NEEDS = tuple(field for modality in self.options.modalities for field in _NEEDS[modality])
        self.MODIFIES = frozenset(self.options.modalities)

    def _fit(self, data: FitData) -> None:
        if "image" in self.MODIFIES:
            images, labels = data.labelled_references()
            self._keep_imputation("image", images, labels, "reference images")
        if "text" in self.MODIFIES:
            prompts = {
                value: check_embeddings(f"attribute_prompts[{value!r}]", data.attribute_prompts[value])
                for value in attribute_values(data.attribute_prompts)
            }
            labels = [value for value, t in prompts.items() for _ in range(t.shape[0])]
            self._keep_imputation("text", torch.cat(list(prompts.values())), labels, "attribute prompts")

    def _keep_imputation(self, modality: Modality, embeddings: Tensor, labels: list, what: str) -> None:
        dims, mean = fit_imputation(embeddings, labels, self.options, what)
        self._keep(f"{modality}_dims", dims)
        self._keep(f"{modality}_low_confidence_mean", mean)

    def _transform(self, modality: Modality, embeddings: Tensor, texts: Sequence[str] | None) -> Tensor:
        state = self.fitted_state()
        dims, mean = state[f"{modality}_dims"].to(embeddings.device), state[f"{modality}_low_confidence_mean"]
        if embeddings.shape[1] != mean.shape[0]:
            raise InputError(
                f"Expected {modality} embeddings of the fitted dimension {mean.shape[0]} but got {embeddings.shape[1]}"
            )
        imputed = embeddings.clone()
        imputed[:, dims] = mean.to(embeddings)[dims]
        return renormalised(f"{modality} embeddings", embeddings, imputed)
