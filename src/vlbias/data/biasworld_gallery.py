"""BiasWorld's attribute gallery with planted skew: images drawn with BiasWorld's drawing code, each showing an
activity (the concept a query names) and carrying two visible attributes, ``gender`` (the figure's shape: ``man``
or ``woman``, :data:`~vlbias.data.biasworld.GROUPS`) and ``tone`` (the figure's skin colour, :data:`TONES`, drawn
as the flat colours of :data:`SKIN_TONES`), so ``tone × gender`` groups exist as race × gender groups do in a face
gallery.

**Planted skew.** Each activity has ``per_activity`` images; ``round(share × per_activity)`` of them show the
activity's stereotyped gender (:data:`~vlbias.data.biasworld.STEREOTYPES`: women for cooking, cleaning, sewing; men
for repairing, driving, coding) and the others the other gender. Within each gender of an activity the tones are
dealt in turn (light, medium, dark, light, ...), so with counts divisible by 3 every tone holds exactly a third of
each gender. The shares are exact, not drawn: at ``share = p`` the share of the stereotyped gender among an
activity's images is exactly ``round(p n) / n``. So a ranking that puts an activity's images first, in any order
among them, has at K = ``per_activity`` the gender skew :math:`\\ln(p / \\tfrac{1}{2})` for that activity under
uniform desired shares, a tone skew of 0 and a tone × gender MaxSkew of :math:`\\ln(p/3 / \\tfrac{1}{6}) = \\ln 2p`.

Everything is a pure function of ``seed``: the gallery's order is a seeded permutation of the (activity, gender,
tone) cells, and image ``i`` is drawn from its own stream ``(seed, 3, i)`` (BiasWorld's splits use streams
``(seed, 0..2, i)``). The ground truth is each image's labels (:class:`~vlbias.data.face_gallery.FaceGallery` with
its pixels in memory).

Example:
    >>> gallery = PlantedGallery(share=0.7, per_activity=10).gallery()
    >>> len(gallery), gallery.pixels.shape, gallery.attributes
    (60, torch.Size([60, 3, 64, 64]), ('gender', 'tone', 'activity'))
    >>> cooking = [i for i, a in enumerate(gallery.labels["activity"]) if a == "cooking"]
    >>> sum(gallery.labels["gender"][i] == "woman" for i in cooking)
    7
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from vlbias.data.biasworld import ACTIVITIES, GROUPS, STEREOTYPES, _draw
from vlbias.data.face_gallery import FaceGallery
from vlbias.errors import ConfigError

TONES: tuple[str, ...] = ("light", "medium", "dark")
#: tone -> the skin colour drawn (BiasWorld's own figures draw a random skin colour in [120, 230) per channel).
SKIN_TONES: dict[str, tuple[int, int, int]] = {"light": (240, 205, 175), "medium": (185, 135, 95), "dark": (95, 60, 40)}
VALUES: dict[str, tuple[str, ...]] = {"gender": GROUPS, "tone": TONES, "activity": ACTIVITIES}
#: activity -> the gender whose share is planted.
STEREOTYPED: dict[str, str] = {activity: group for group, acts in STEREOTYPES.items() for activity in acts}
_STREAM = 3  # image i is drawn from np.random.default_rng([seed, _STREAM, i])


@dataclass(frozen=True)
class PlantedGallery:
    """How the planted gallery is made (module docstring).

    Args:
        share: the share ``p`` of each activity's stereotyped gender among its images, in [0, 1].
        per_activity: images per activity (a multiple of 6 keeps the tones exactly balanced at every share whose
            count is a multiple of 3).
        image_size: side of the square images, at least 32.
        seed: seed of the gallery's order and pictures.
    """

    share: float = 0.7
    per_activity: int = 30
    image_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.share, int | float) or not 0 <= self.share <= 1:
            raise ConfigError(f"Expected `share` in [0, 1] but got {self.share!r}")
        for name, value, low in (("per_activity", self.per_activity, 1), ("image_size", self.image_size, 32)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"Expected `{name}` to be an integer >= {low} but got {value!r}")

    @property
    def config(self) -> dict[str, object]:
        """The settings, recorded in results."""
        return asdict(self)

    def planted_count(self) -> int:
        """Images of each activity that show its stereotyped gender: ``round(share × per_activity)``."""
        return round(self.share * self.per_activity)

    def cells(self) -> list[tuple[str, str, str]]:
        """``(activity, gender, tone)`` of every image, in the gallery's (seeded) order."""
        cells = []
        for activity in ACTIVITIES:
            stereotyped = STEREOTYPED[activity]
            other = next(group for group in GROUPS if group != stereotyped)
            planted = self.planted_count()
            for gender, count in ((stereotyped, planted), (other, self.per_activity - planted)):
                cells += [(activity, gender, TONES[j % len(TONES)]) for j in range(count)]
        order = np.random.default_rng([self.seed, _STREAM]).permutation(len(cells))
        return [cells[i] for i in order]

    def gallery(self) -> FaceGallery:
        """The gallery: names ``planted/<i>``, labels ``gender``, ``tone``, ``activity``, pixels in memory."""
        cells = self.cells()
        pictures = [
            _draw(
                gender,
                activity,
                self.image_size,
                np.random.default_rng([self.seed, _STREAM, i]),
                True,
                skin=SKIN_TONES[tone],
            )  # fmt: skip
            for i, (activity, gender, tone) in enumerate(cells)
        ]
        pixels = torch.from_numpy(np.stack(pictures)).permute(0, 3, 1, 2).contiguous()  # (N, 3, S, S) uint8
        columns = dict(zip(("activity", "gender", "tone"), zip(*cells, strict=True), strict=True))
        return FaceGallery(
            dataset="BiasWorld",
            split="planted",
            image_root=Path("."),
            images=tuple(f"planted/{i}" for i in range(len(cells))),
            labels={attribute: tuple(columns[attribute]) for attribute in VALUES},
            values=VALUES,
            variant=f"share {self.share}",
            pixels=pixels,
        )
