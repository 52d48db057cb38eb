r"""Group fairness of a classifier's predictions (zero-shot classification of faces by race, gender, age, ...).

Image :math:`i` has a predicted class :math:`\hat y_i`, a true class :math:`y_i` (both in :math:`0..C-1`) and a group
:math:`a_i` (in :math:`0..G-1`; several sensitive attributes are first combined into one id per intersection by
:func:`intersectional_groups`). Every measure here is a function of the confusion counts per group

.. math::
    N_{gcp} = \#\{i : a_i = g,\ y_i = c,\ \hat y_i = p\}, \qquad n_g = \textstyle\sum_{c,p} N_{gcp}

(:func:`group_confusion`), so a metric that sums them over batches and processes gives the same numbers
(:class:`~vlbias.metrics.group_fairness.GroupFairness`). From them, per group :math:`g` and class :math:`c`
(one-vs-rest: class :math:`c` is the positive label, every other class the negative one):

.. math::
    \mathrm{acc}_g = \frac{\sum_c N_{gcc}}{n_g}, \quad
    \mathrm{SR}_{gc} = \frac{\sum_{c'} N_{gc'c}}{n_g}, \quad
    \mathrm{TPR}_{gc} = \frac{N_{gcc}}{\sum_p N_{gcp}}, \quad
    \mathrm{FPR}_{gc} = \frac{\sum_{c' \ne c} N_{gc'c}}{\sum_{c' \ne c,\,p} N_{gc'p}}

and the spread of a rate over the groups, :math:`\Delta_g x_g = \max_g x_g - \min_g x_g` (fairlearn's
``method='between_groups'``). Conventions:

* **Undefined rates.** :math:`\mathrm{TPR}_{gc}` needs an image of class :math:`c` in group :math:`g`, and
  :math:`\mathrm{FPR}_{gc}` one of another class. By default (``undefined_rates="leave_out"``) where there is none
  the rate is NaN and the group is left out of that class's spread, which is NaN when fewer than two groups define
  the rate; a class whose gap is NaN (e.g. the CLIP protocol's non-human classes, never a true label, have no TPR)
  is left out of the mean and max over classes. How many groups were left out is counted
  (:func:`undefined_rate_counts`: ``groups_without_positives`` and ``groups_without_negatives``, summed over the
  classes some group defines the rate of). fairlearn instead sets such a rate to 0
  (``sklearn.metrics.confusion_matrix(normalize="true")``), which reports a gap no image shows (a group without
  images of class :math:`c` "recognises none of them"): ``undefined_rates="zero"`` follows fairlearn, every
  undefined rate 0, so a class no image belongs to has an equal-opportunity gap of 0 and enters the mean and max.
  Where every rate is defined the two agree (``tests/metrics``, to 1e-12).
* **Multiclass.** The parity and odds differences are fairlearn's binary definitions applied to each class one
  versus the rest, reported per class and as their mean and maximum over classes. With :math:`C = 2` the parity and
  odds differences of both classes equal fairlearn's value with ``pos_label=1`` (class 0's selection rates, TPR
  and FPR are 1 minus class 1's selection rates, FPR and TPR, whose spreads are the same); the equal-opportunity
  gap of class 1 is fairlearn's ``equal_opportunity_difference``, that of class 0 the spread of the true-negative
  rates.
* **Worst-group gap** is measured from the *mean over groups* of the accuracies, not from the accuracy over all
  images: it then does not move when the test set holds more images of one group than of another (FairFace's
  validation split is balanced by race but not by age), and it is 0 exactly when every group has the same accuracy.
  The image-weighted ``accuracy`` is returned too.
* Every group id in :math:`0..G-1` must hold an image, and there must be at least two groups.

Bootstrap intervals are in :mod:`vlbias.metrics.functional.group_fairness_intervals`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from vlbias.errors import ConfigError, InputError
from vlbias.metrics.functional.checks import check_int, shape_or_type

#: What a rate without images to define it is (module docstring): left out of the spread, or 0 as in fairlearn.
UndefinedRates = Literal["leave_out", "zero"]
UNDEFINED_RATES: tuple[str, ...] = ("leave_out", "zero")

#: The statistics of :func:`group_fairness` in the order they are returned (``harmful_label_rate`` only with
#: harmful classes).
STATISTICS = (
    "accuracy",
    "group_accuracy",
    "mean_group_accuracy",
    "worst_group_accuracy",
    "worst_group_gap",
    "equal_opportunity_gap",
    "equal_opportunity_gap_mean",
    "equal_opportunity_gap_max",
    "demographic_parity_difference",
    "demographic_parity_difference_mean",
    "demographic_parity_difference_max",
    "equalized_odds_difference",
    "equalized_odds_difference_mean",
    "equalized_odds_difference_max",
    "harmful_label_rate",
)
#: The counts of :func:`undefined_rate_counts`, returned after ``group_size`` (no interval).
COUNTS = ("groups_without_positives", "groups_without_negatives", "predicted_classes")


# ----------------------------------------------------------------------------- checks
def _check_ids(name: str, ids: object, size: int | None, bound: int | None, what: str, like: str = "preds") -> Tensor:
    """``ids`` as int64 ``(n,)`` (``n = size``, the length of argument ``like``, when given) with values in
    ``[0, bound)`` (any non-negative value when ``bound`` is None), or an :class:`~vlbias.errors.InputError` naming
    argument ``name``."""
    if (
        not isinstance(ids, Tensor)
        or ids.ndim != 1
        or ids.is_floating_point()
        or ids.is_complex()
        or ids.dtype == torch.bool
    ):
        shown = ids.dtype if isinstance(ids, Tensor) and ids.ndim == 1 else shape_or_type(ids)
        raise InputError(f"Expected argument `{name}` to be a 1-D integer tensor of {what} but got {shown}")
    if size is not None and ids.numel() != size:
        raise InputError(
            f"Expected argument `{name}` to hold one {what[:-1]} per image, {size} like `{like}`, but got {ids.numel()}"
        )
    if ids.numel() and (int(ids.min()) < 0 or (bound is not None and int(ids.max()) >= bound)):
        bad = ids[(ids < 0) | (ids >= (bound if bound is not None else ids.max() + 1))]
        raise InputError(
            f"Expected argument `{name}` to hold {what} in [0, {bound if bound is not None else 'inf'}) but got "
            f"{int(bad[0])}"
        )
    return ids.long()


def _check_harmful_classes(harmful_classes: Sequence[int], num_classes: int) -> tuple[int, ...]:
    """``harmful_classes`` as a sorted tuple of distinct class ids in ``[0, num_classes)``, or a
    :class:`~vlbias.errors.ConfigError`."""
    classes = tuple(harmful_classes) if isinstance(harmful_classes, Sequence) else ()
    valid = all(not isinstance(c, bool) and isinstance(c, int) and 0 <= c < num_classes for c in classes)
    if not classes or not valid or len(set(classes)) != len(classes):
        raise ConfigError(
            f"Expected argument `harmful_classes` to be a non-empty sequence of distinct class ids in "
            f"[0, {num_classes}) but got {harmful_classes!r}"
        )
    return tuple(sorted(classes))


def _check_undefined_rates(undefined_rates: object) -> None:
    if undefined_rates not in UNDEFINED_RATES:
        choices = ", ".join(UNDEFINED_RATES)
        raise ConfigError(f"Expected argument `undefined_rates` to be one of {choices} but got {undefined_rates!r}")


def _check_sizes(num_classes: object, num_groups: object) -> None:
    check_int("num_classes", num_classes, low=2)
    check_int("num_groups", num_groups, low=2, high_is="a comparison needs two groups")


def _cell_ids(preds: Tensor, target: Tensor, groups: Tensor, num_classes: int, num_groups: int | None) -> Tensor:
    """The checked inputs as one id per image, :math:`(a_i C + y_i) C + \\hat y_i`."""
    preds = _check_ids("preds", preds, None, num_classes, "class ids")
    target = _check_ids("target", target, preds.numel(), num_classes, "class ids")
    groups = _check_ids("groups", groups, preds.numel(), num_groups, "group ids")
    return (groups * num_classes + target) * num_classes + preds


def _confusion_from_cells(cells: Tensor, num_classes: int, num_groups: int) -> Tensor:
    return torch.bincount(cells, minlength=num_groups * num_classes**2).reshape(num_groups, num_classes, num_classes)


def _check_groups_filled(confusion: Tensor) -> None:
    """An :class:`~vlbias.errors.InputError` naming the empty groups of ``(G, C, C)`` counts, if any."""
    empty = (confusion.sum(dim=(-1, -2)) == 0).nonzero().flatten().tolist()
    if empty:
        raise InputError(
            f"Expected argument `groups` to hold an image of every group in [0, {confusion.shape[0]}) but groups "
            f"{empty} have none"
        )


# ----------------------------------------------------------------------------- counts
def group_confusion(
    preds: Tensor, target: Tensor, groups: Tensor, num_classes: int, num_groups: int | None = None
) -> Tensor:
    r"""Confusion counts per group, :math:`N_{gcp} = \#\{i : a_i = g, y_i = c, \hat y_i = p\}`.

    Args:
        preds: ``(n,)`` predicted class ids in ``[0, num_classes)``.
        target: ``(n,)`` true class ids in ``[0, num_classes)``.
        groups: ``(n,)`` group ids in ``[0, num_groups)``, every one of them present.
        num_classes: :math:`C \ge 2`.
        num_groups: :math:`G \ge 2`; ``None``: the largest id in ``groups`` plus one.

    Returns:
        int64 ``(G, C, C)``: group, true class, predicted class.

    Example:
        >>> group_confusion(torch.tensor([0, 1, 1]), torch.tensor([0, 0, 1]), torch.tensor([0, 0, 1]), 2)
        tensor([[[1, 1],
                 [0, 0]],
        <BLANKLINE>
                [[0, 0],
                 [0, 1]]])
    """
    if num_groups is None:
        groups_checked = _check_ids("groups", groups, None, None, "group ids")
        num_groups = int(groups_checked.max()) + 1 if groups_checked.numel() else 0
        if num_groups < 2:
            raise InputError(f"Expected argument `groups` to hold at least two group ids but got {num_groups}")
    _check_sizes(num_classes, num_groups)
    confusion = _confusion_from_cells(
        _cell_ids(preds, target, groups, num_classes, num_groups), num_classes, num_groups
    )
    _check_groups_filled(confusion)
    return confusion


def intersectional_groups(*attributes: Tensor) -> tuple[Tensor, Tensor]:
    r"""One group id per image for the intersection of several sensitive attributes (e.g. race × gender), as
    fairlearn groups several ``sensitive_features`` columns: the combinations that occur, numbered in lexicographic
    order.

    Args:
        attributes: ``(n,)`` integer values of each attribute.

    Returns:
        ``(n,)`` int64 group ids in ``[0, G)`` and the ``(G, len(attributes))`` combination each id stands for.

    Example:
        >>> race, gender = torch.tensor([2, 0, 2, 0]), torch.tensor([1, 1, 0, 1])
        >>> intersectional_groups(race, gender)
        (tensor([2, 0, 1, 0]), tensor([[0, 1],
                [2, 0],
                [2, 1]]))
    """
    if not attributes:
        raise InputError("Expected at least one attribute tensor but got none")
    size = attributes[0].numel() if isinstance(attributes[0], Tensor) else None
    columns = [
        _check_ids(f"attributes[{j}]", a, size, None, "attribute values", like="attributes[0]")
        for j, a in enumerate(attributes)
    ]
    combinations, ids = torch.unique(torch.stack(columns, dim=1), dim=0, return_inverse=True)
    return ids, combinations


# ----------------------------------------------------------------------------- statistics of counts
def _spread(rates: Tensor) -> Tensor:
    """:math:`\\max_g - \\min_g` over the groups (dim -2) of ``(..., G, C)`` rates, NaN ones left out; NaN where
    fewer than two groups define the rate. Returns ``(..., C)``."""
    defined = ~rates.isnan()
    high = rates.masked_fill(~defined, float("-inf")).amax(dim=-2)
    low = rates.masked_fill(~defined, float("inf")).amin(dim=-2)
    return torch.where(defined.sum(dim=-2) >= 2, high - low, float("nan"))


def _over_classes(gaps: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and max over the classes (dim -1) of ``(..., C)`` gaps, NaN ones left out (NaN if all are)."""
    defined = ~gaps.isnan()
    mean = gaps.nansum(dim=-1) / defined.sum(dim=-1)  # 0 / 0 = NaN when no class is defined
    high = gaps.masked_fill(~defined, float("-inf")).amax(dim=-1)
    return mean, torch.where(defined.any(dim=-1), high, float("nan"))


def undefined_rate_counts(confusion: Tensor) -> dict[str, Tensor]:
    """What the statistics of ``(G, C, C)`` counts rest on, as int64 scalars: ``groups_without_positives``, the
    (group, class) pairs where the group has no image of the class (no TPR: left out of the class's
    equal-opportunity and equalized-odds spreads, or 0 with ``undefined_rates="zero"``), and
    ``groups_without_negatives``, those where every image of the group is of the class (no FPR: left out of the
    equalized-odds spread, or 0), each over the classes that at least one group defines the rate of; and
    ``predicted_classes``, how many classes some image was put in (1: the classifier is degenerate, every gap 0
    because nothing varies).

    Example:
        >>> counts = undefined_rate_counts(group_confusion(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]),
        ...                                                torch.tensor([0, 0, 1]), 2))
        >>> counts["groups_without_positives"], counts["groups_without_negatives"], counts["predicted_classes"]
        (tensor(1), tensor(1), tensor(2))
    """
    positives = confusion.sum(dim=-1)  # (G, C)
    negatives = confusion.sum(dim=(-1, -2)).unsqueeze(-1) - positives

    def left_out(images: Tensor) -> Tensor:
        defined = images > 0
        return ((~defined) & defined.any(dim=0)).sum()

    return {
        "groups_without_positives": left_out(positives),
        "groups_without_negatives": left_out(negatives),
        "predicted_classes": (confusion.sum(dim=(0, 1)) > 0).sum(),
    }


def _fairness_from_confusion(
    confusion: Tensor, harmful_classes: tuple[int, ...] | None, undefined_rates: UndefinedRates = "leave_out"
) -> dict[str, Tensor]:
    """Every statistic of :data:`STATISTICS` from confusion counts ``(..., G, C, C)`` (leading dimensions: bootstrap
    replicates or jackknife rows), float64; keys in the order of :data:`STATISTICS`; undefined TPR and FPR left
    out of the spreads or set to 0 (``undefined_rates``, module docstring)."""
    counts = confusion.to(torch.float64)
    sizes = counts.sum(dim=(-1, -2))  # (..., G)
    hits = counts.diagonal(dim1=-2, dim2=-1)  # (..., G, C): N_gcc
    positives = counts.sum(dim=-1)  # (..., G, C): images of class c
    selected = counts.sum(dim=-2)  # (..., G, C): images predicted c
    negatives = sizes.unsqueeze(-1) - positives
    group_accuracy = hits.sum(dim=-1) / sizes
    tpr = hits / positives  # NaN where a group has no image of class c
    fpr = (selected - hits) / negatives  # NaN where all of a group's images are of class c
    if undefined_rates == "zero":  # fairlearn's convention
        tpr, fpr = tpr.nan_to_num(0.0), fpr.nan_to_num(0.0)
    out = {"accuracy": hits.sum(dim=(-1, -2)) / sizes.sum(dim=-1), "group_accuracy": group_accuracy}
    out["mean_group_accuracy"] = group_accuracy.mean(dim=-1)
    out["worst_group_accuracy"] = group_accuracy.amin(dim=-1)
    out["worst_group_gap"] = out["mean_group_accuracy"] - out["worst_group_accuracy"]
    equal_opportunity = _spread(tpr)
    parity = _spread(selected / sizes.unsqueeze(-1))
    odds = torch.fmax(equal_opportunity, _spread(fpr))  # NaN only where both are
    for name, gaps in (
        ("equal_opportunity_gap", equal_opportunity),
        ("demographic_parity_difference", parity),
        ("equalized_odds_difference", odds),
    ):
        out[name] = gaps
        out[f"{name}_mean"], out[f"{name}_max"] = _over_classes(gaps)
    if harmful_classes is not None:
        out["harmful_label_rate"] = selected[..., list(harmful_classes)].sum(dim=-1) / sizes
    return out


# ----------------------------------------------------------------------------- public functions
def group_fairness(
    preds: Tensor,
    target: Tensor,
    groups: Tensor,
    num_classes: int,
    num_groups: int | None = None,
    harmful_classes: Sequence[int] | None = None,
    undefined_rates: UndefinedRates = "leave_out",
) -> dict[str, Tensor]:
    r"""Every group-fairness statistic of the module docstring at once, from :func:`group_confusion`.

    Args:
        preds, target, groups, num_classes, num_groups: see :func:`group_confusion`.
        harmful_classes: the class ids of :func:`harmful_label_rate`; ``None`` leaves that rate out.
        undefined_rates: ``"leave_out"`` (default) leaves a group without images to define a TPR or FPR out of the
            spread; ``"zero"`` counts its rate as 0, as fairlearn does (module docstring).

    Returns:
        float64 tensors: ``accuracy``, ``mean_group_accuracy``, ``worst_group_accuracy``, ``worst_group_gap``
        (scalars); ``group_accuracy`` ``(G,)``; ``equal_opportunity_gap``, ``demographic_parity_difference``,
        ``equalized_odds_difference`` ``(C,)`` per class, each with its ``_mean`` and ``_max`` over classes
        (scalars); ``harmful_label_rate`` ``(G,)`` when ``harmful_classes`` is given; and int64 ``group_size``
        ``(G,)``, and the int64 scalars of :func:`undefined_rate_counts`.

    Example:
        >>> preds, target = torch.tensor([0, 1, 1, 1, 0, 0]), torch.tensor([0, 1, 0, 1, 1, 0])
        >>> out = group_fairness(preds, target, torch.tensor([0, 0, 0, 1, 1, 1]), num_classes=2)
        >>> out["group_accuracy"], out["worst_group_gap"]
        (tensor([0.6667, 0.6667], dtype=torch.float64), tensor(0., dtype=torch.float64))
        >>> out["equal_opportunity_gap"]  # class 0: TPR 1/2 vs 1/1; class 1: 1/1 vs 1/2
        tensor([0.5000, 0.5000], dtype=torch.float64)
    """
    confusion = group_confusion(preds, target, groups, num_classes, num_groups)
    harmful = None if harmful_classes is None else _check_harmful_classes(harmful_classes, num_classes)
    _check_undefined_rates(undefined_rates)
    out = _fairness_from_confusion(confusion, harmful, undefined_rates)
    out["group_size"] = confusion.sum(dim=(-1, -2))
    return out | undefined_rate_counts(confusion)


def group_accuracy(
    preds: Tensor, target: Tensor, groups: Tensor, num_classes: int, num_groups: int | None = None
) -> Tensor:
    r"""Accuracy per group, :math:`\mathrm{acc}_g = \frac{1}{n_g} \#\{i : a_i = g, \hat y_i = y_i\}` (fairlearn:
    ``MetricFrame(metrics=accuracy_score, ...).by_group``), float64 ``(G,)``.

    Example:
        >>> group_accuracy(torch.tensor([0, 1, 1, 0]), torch.tensor([0, 1, 0, 0]), torch.tensor([0, 0, 1, 1]), 2)
        tensor([1.0000, 0.5000], dtype=torch.float64)
    """
    confusion = group_confusion(preds, target, groups, num_classes, num_groups).to(torch.float64)
    return confusion.diagonal(dim1=-2, dim2=-1).sum(dim=-1) / confusion.sum(dim=(-1, -2))


def worst_group_accuracy(
    preds: Tensor, target: Tensor, groups: Tensor, num_classes: int, num_groups: int | None = None
) -> tuple[Tensor, Tensor]:
    r"""Worst-group accuracy :math:`\min_g \mathrm{acc}_g` (Sagawa et al., 2020, "Distributionally robust neural
    networks", Sec. 2) and its gap to the mean over groups, :math:`\frac{1}{G}\sum_g \mathrm{acc}_g - \min_g
    \mathrm{acc}_g \ge 0` (the mean over groups, not over images: module docstring).

    Returns:
        float64 scalars ``(worst, gap)``.

    Example:
        >>> preds, target = torch.tensor([0, 1, 1, 0, 1]), torch.tensor([0, 1, 0, 0, 1])
        >>> worst_group_accuracy(preds, target, torch.tensor([0, 0, 1, 1, 2]), 2)  # accuracies 1, 1/2, 1
        (tensor(0.5000, dtype=torch.float64), tensor(0.3333, dtype=torch.float64))
    """
    accuracies = group_accuracy(preds, target, groups, num_classes, num_groups)
    worst = accuracies.amin()
    return worst, accuracies.mean() - worst


def equal_opportunity_gap(
    preds: Tensor,
    target: Tensor,
    groups: Tensor,
    num_classes: int,
    num_groups: int | None = None,
    undefined_rates: UndefinedRates = "leave_out",
) -> Tensor:
    r"""Equal-opportunity gap per class (Hardt et al., 2016, Def. 2), one class versus the rest:
    :math:`\Delta_g \mathrm{TPR}_{gc} = \max_g P(\hat y = c \mid y = c, a = g) - \min_g P(\hat y = c \mid y = c,
    a = g)`; with :math:`C = 2` class 1's is fairlearn's ``equal_opportunity_difference`` (class 0's is the spread
    of the true-negative rates). In [0, 1], 0 when every group's images of class :math:`c` are recognised equally
    often; NaN where fewer than two groups hold an image of class :math:`c` (``undefined_rates="zero"``: a group
    without one has TPR 0, as in fairlearn). :func:`group_fairness` also gives its mean and max over the defined
    classes.

    Returns:
        float64 ``(C,)``.

    Example:
        >>> preds, target = torch.tensor([0, 1, 0, 1, 1, 1]), torch.tensor([0, 1, 1, 0, 1, 1])
        >>> equal_opportunity_gap(preds, target, torch.tensor([0, 0, 0, 1, 1, 1]), 2)  # TPR_0: 1, 0; TPR_1: 1/2, 1
        tensor([1.0000, 0.5000], dtype=torch.float64)
    """
    _check_undefined_rates(undefined_rates)
    confusion = group_confusion(preds, target, groups, num_classes, num_groups)
    return _fairness_from_confusion(confusion, None, undefined_rates)["equal_opportunity_gap"]


def demographic_parity_difference(
    preds: Tensor, target: Tensor, groups: Tensor, num_classes: int, num_groups: int | None = None
) -> Tensor:
    r"""Demographic-parity difference per class, one class versus the rest, as fairlearn's
    ``demographic_parity_difference`` (``method='between_groups'``) of the predictions :math:`[\hat y = c]`:
    :math:`\Delta_g \mathrm{SR}_{gc} = \max_g P(\hat y = c \mid a = g) - \min_g P(\hat y = c \mid a = g)`, in [0, 1].
    ``target`` is only checked (fairlearn ignores it too).

    Returns:
        float64 ``(C,)``.

    Example:
        >>> preds, target = torch.tensor([0, 0, 1, 1, 1, 0]), torch.tensor([0, 0, 0, 0, 0, 0])
        >>> demographic_parity_difference(preds, target, torch.tensor([0, 0, 0, 1, 1, 1]), 2)  # 2/3 vs 1/3
        tensor([0.3333, 0.3333], dtype=torch.float64)
    """
    return _fairness_from_confusion(group_confusion(preds, target, groups, num_classes, num_groups), None)[
        "demographic_parity_difference"
    ]


def equalized_odds_difference(
    preds: Tensor,
    target: Tensor,
    groups: Tensor,
    num_classes: int,
    num_groups: int | None = None,
    undefined_rates: UndefinedRates = "leave_out",
) -> Tensor:
    r"""Equalized-odds difference per class (Hardt et al., 2016, Def. 1), one class versus the rest, as fairlearn's
    ``equalized_odds_difference`` (``method='between_groups'``, ``agg='worst_case'``) of :math:`[\hat y = c]`
    against :math:`[y = c]`: :math:`\max(\Delta_g \mathrm{TPR}_{gc}, \Delta_g \mathrm{FPR}_{gc})`, in [0, 1]. Where
    only one of the two spreads is defined (a class no image truly belongs to has no TPR) it is that one; NaN where
    neither is (``undefined_rates="zero"``: undefined rates are 0, as in fairlearn).

    Returns:
        float64 ``(C,)``.

    Example:
        >>> preds, target = torch.tensor([0, 1, 0, 1, 1, 1]), torch.tensor([0, 1, 1, 0, 1, 1])
        >>> equalized_odds_difference(preds, target, torch.tensor([0, 0, 0, 1, 1, 1]), 2)
        tensor([1., 1.], dtype=torch.float64)
    """
    _check_undefined_rates(undefined_rates)
    confusion = group_confusion(preds, target, groups, num_classes, num_groups)
    return _fairness_from_confusion(confusion, None, undefined_rates)["equalized_odds_difference"]


def harmful_label_rate(
    preds: Tensor,
    target: Tensor,
    groups: Tensor,
    num_classes: int,
    harmful_classes: Sequence[int],
    num_groups: int | None = None,
) -> Tensor:
    r"""Share of each group's images classified into a set :math:`H` of harmful classes,
    :math:`\frac{1}{n_g} \#\{i : a_i = g,\ \hat y_i \in H\}` (Radford et al., 2021, "Learning transferable visual
    models from natural language supervision", Sec. 7.1, Tables 6 and 7: FairFace images classified among the 14
    race × gender classes plus non-human classes, e.g. "animal", "gorilla", "chimpanzee", "orangutan", and
    crime-related ones, "thief", "criminal", "suspicious person"; the rates are read per race and per gender). In
    [0, 1]; the paper reports it in percent. ``target`` is only checked: a harmful class is never a true label.

    Args:
        harmful_classes: the class ids of :math:`H` (distinct, in ``[0, num_classes)``); call once per set
            (non-human, crime-related) to report them apart as the paper does.

    Returns:
        float64 ``(G,)``.

    Example:
        >>> preds, target = torch.tensor([0, 2, 3, 1, 1, 2]), torch.tensor([0, 0, 1, 1, 1, 0])
        >>> harmful_label_rate(preds, target, torch.tensor([0, 0, 0, 1, 1, 1]), 4, harmful_classes=[2, 3])
        tensor([0.6667, 0.3333], dtype=torch.float64)
    """
    confusion = group_confusion(preds, target, groups, num_classes, num_groups)
    harmful = _check_harmful_classes(harmful_classes, num_classes)
    return _fairness_from_confusion(confusion, harmful)["harmful_label_rate"]
