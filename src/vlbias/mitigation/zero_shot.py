r"""Zero-shot classification accuracy of image embeddings against class prompts, with dimensions removed.

CLIP's zero-shot classifier (Radford et al., 2021, Sec. 3.1.4) with prompt ensembling: the class vector
:math:`c_k` is the normalised mean of the normalised embeddings of class :math:`k`'s prompts, and an image
:math:`v` is put in :math:`\arg\max_k \cos(v, c_k)`. With a set :math:`R` of dimensions removed (MMBias,
Sec. 6, Table 3's "zero-shot accuracy after pruning") every prompt embedding keeps the other coordinates
and is re-normalised *before* the mean, as a pruned model (:class:`~vlbias.models.families.pruned.PrunedEmbeddings`)
embeds each prompt; the image's norm does not change its argmax. Accuracy is torchmetrics'
``multiclass_accuracy`` (micro average: the share of images classified correctly).

Example:
    >>> images = torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]])
    >>> prompts = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> zero_shot_accuracy(images, prompts, torch.tensor([0, 1]), torch.tensor([0, 1]))
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics.functional.classification import multiclass_accuracy

from vlbias.errors import InputError
from vlbias.metrics.functional.checks import check_embeddings
from vlbias.mitigation.leave_one_out import kept_dimensions


def class_vectors(prompts: Tensor, prompt_classes: Tensor, kept: Tensor) -> Tensor:
    """``(K, |kept|)`` unit class vectors: per class the normalised mean of its normalised, pruned prompts."""
    n_classes = int(prompt_classes.max()) + 1
    counts = torch.bincount(prompt_classes, minlength=n_classes)
    if (counts == 0).any():
        raise InputError(
            f"Expected at least one prompt per class but classes {(counts == 0).nonzero().flatten().tolist()} have none"
        )
    pruned = F.normalize(prompts[:, kept], dim=1)  # (P, |kept|)
    sums = torch.zeros(n_classes, pruned.shape[1], dtype=pruned.dtype).index_add_(0, prompt_classes, pruned)
    return F.normalize(sums, dim=1)


def zero_shot_predictions(
    images: Tensor, prompts: Tensor, prompt_classes: Tensor, removed: Sequence[int] | Tensor = ()
) -> Tensor:
    """``(n,)`` class of each image ``(n, D)``: argmax cosine with :func:`class_vectors` of ``prompts``
    ``(P, D)`` (class ``prompt_classes[p]`` each), the ``removed`` dimensions left out of both."""
    images = check_embeddings("images", images).double()
    prompts = check_embeddings("prompts", prompts).double()
    if images.shape[1] != prompts.shape[1]:
        raise InputError(
            f"Expected images and prompts of one dimension but got {images.shape[1]} and {prompts.shape[1]}"
        )
    prompt_classes = torch.as_tensor(prompt_classes, dtype=torch.long)
    if prompt_classes.shape != (prompts.shape[0],) or int(prompt_classes.min()) < 0:
        raise InputError(
            f"Expected one class index >= 0 per prompt, shape ({prompts.shape[0]},), but got {prompt_classes.tolist()}"
        )
    kept = kept_dimensions(torch.as_tensor(removed, dtype=torch.long), images.shape[1])
    return (images[:, kept] @ class_vectors(prompts, prompt_classes, kept).T).argmax(1)


def zero_shot_accuracy(
    images: Tensor, prompts: Tensor, prompt_classes: Tensor, labels: Tensor, removed: Sequence[int] | Tensor = ()
) -> float:
    """Share of ``images`` whose :func:`zero_shot_predictions` equal ``labels`` ``(n,)``."""
    predictions = zero_shot_predictions(images, prompts, prompt_classes, removed)
    labels = torch.as_tensor(labels, dtype=torch.long)
    if labels.shape != predictions.shape:
        raise InputError(
            f"Expected one label per image, shape {tuple(predictions.shape)}, but got {tuple(labels.shape)}"
        )
    n_classes = int(prompt_classes.max()) + 1
    if int(labels.max()) >= n_classes or int(labels.min()) < 0:
        raise InputError(
            f"Expected labels in [0, {n_classes}) (one per class with prompts) but got {labels.unique().tolist()}"
        )
    return float(multiclass_accuracy(predictions, labels, num_classes=n_classes, average="micro"))
