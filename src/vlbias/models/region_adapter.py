"""The base of the region-based adapters (VisualBERT, LXMERT): a ``transformers`` model that reads image regions
(:class:`~vlbias.models.regions.RegionFeatures`) where the adapter protocol says ``pixel_values``, with the
source of its regions (:mod:`vlbias.models.regions`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from jsonargparse.typing import PositiveInt
from torch import Tensor
from transformers import AutoTokenizer, PretrainedConfig, PreTrainedModel

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import ImageInput
from vlbias.models.pretrained import PretrainedAdapter
from vlbias.models.regions import GridFeatures, RegionFeatures, RegionFeatureStore
from vlbias.models.tiny_sizes import TinySizes


@dataclass(frozen=True)
class TinyRegionSizes(TinySizes):
    """The sizes of a tiny region-based model (VisualBERT, LXMERT).

    Args:
        visual_dim: width of a region's feature vector (the tiny grid backbone's output channels).
    """

    visual_dim: PositiveInt = 16


class RegionAdapter(PretrainedAdapter):
    """What the region-based adapters share: where regions come from, the text inputs, persistence and the
    tiny instances.

    For these adapters the protocol's ``pixel_values`` is a :class:`RegionFeatures` batch.
    :meth:`prepare_images` makes one from images (paths or PIL images looked up by file stem
    in ``store`` when one is given, otherwise run through ``grid``) or passes a ready
    :class:`RegionFeatures` through. Subclasses set ``model_class``, ``visual_dim_field``
    (the config field holding the region feature size) and :meth:`_tiny_config`.
    """

    visual_dim_field: ClassVar[str]
    tiny_sizes = TinyRegionSizes()
    base_tokenizer = "google-bert/bert-base-uncased"  # the vocabulary both families were trained with

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer,
        store: RegionFeatureStore | None = None,
        grid: GridFeatures | None = None,
    ) -> None:
        super().__init__(model, tokenizer)
        if (store is None) == (grid is None):
            raise ConfigError(
                f"Model {self.name!r} needs exactly one region source: a feature store or a grid backbone."
            )
        self.store = store
        self.grid = grid
        if grid is not None and grid.dim != self.visual_dim:
            raise ConfigError(
                f"Grid backbone {grid.backbone_name!r} gives {grid.dim}-d features but model {self.name!r} expects "
                f"{self.visual_dim}-d regions ({self.visual_dim_field}); choose a backbone with {self.visual_dim} "
                "output channels (resnet50 has 2048) or use precomputed region features."
            )

    @property
    def visual_dim(self) -> int:
        return getattr(self.model.config, self.visual_dim_field)

    @staticmethod
    def _one_image_per_text(regions: RegionFeatures | None, tokens: dict[str, Tensor]) -> None:
        """Refuse region sets and texts of different batch sizes, which the models would reject deep inside transformers."""
        texts = tokens["input_ids"].shape[0]
        if regions is not None and len(regions) != texts:
            raise InputError(f"Expected one image per text, but got {len(regions)} images and {texts} texts.")

    @staticmethod
    def _text_inputs(tokens: dict[str, Tensor]) -> dict[str, Tensor]:
        """The tokens the models read: ``input_ids``, and ``attention_mask`` and ``token_type_ids`` when given."""
        return {key: tokens[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in tokens}

    def train(self, mode: bool = True) -> RegionAdapter:
        """Train mode for the model; the grid backbone stays a frozen extractor in eval mode,
        as the detector is."""
        super().train(mode)
        if self.grid is not None:
            self.grid.eval()
        return self

    def prepare_images(self, images: RegionFeatures | Sequence[ImageInput] | Tensor) -> RegionFeatures:
        """Images -> :class:`RegionFeatures` on this adapter's device and dtype."""
        if isinstance(images, RegionFeatures):
            regions, source = images, "the given RegionFeatures"
        elif self.store is not None:
            if isinstance(images, Tensor):
                raise InputError(
                    f"Model {self.name!r} reads precomputed regions from {str(self.store.path)!r}; "
                    "pass image paths (looked up by file stem), not a pixel tensor."
                )
            regions = RegionFeatures.stack([self.store[self.store.image_id(image)] for image in images])
            source = f"region features {str(self.store.path)!r}"
        else:
            regions = self.grid(images)
            source = f"grid backbone {self.grid.backbone_name!r}"
        if regions.dim != self.visual_dim:
            raise InputError(
                f"{source[0].upper() + source[1:]} hold {regions.dim}-d region features but model {self.name!r} "
                f"expects {self.visual_dim}-d ({self.visual_dim_field})."
            )
        return regions.to(self.device, self.model.dtype)

    # -- persistence -------------------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> None:
        """Weights, config, tokenizer and, in grid mode, the grid backbone. A feature store's
        path is data, not model: it is not saved; pass ``region_features`` when loading."""
        directory = Path(directory)
        super().save_pretrained(directory)
        if self.grid is not None:
            self.grid.save(directory)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        region_features: str | Path | None = None,
        grid_backbone: str = "resnet50",
        grid_size: int = 6,
        image_size: int = 448,
    ) -> RegionAdapter:
        """Load a hub id or a local ``save_pretrained`` directory, refusing missing or
        unexpected keys. Regions come from ``region_features`` (see :class:`RegionFeatureStore`)
        when given; otherwise from the grid backbone saved in the directory, or else a new
        ImageNet-pretrained timm ``grid_backbone`` (an approximation; see :class:`GridFeatures`).
        The tokenizer is the checkpoint's own, or ``bert-base-uncased``'s where it has none."""
        model = cls._load_model(name_or_path)
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(name_or_path))
        except (OSError, ValueError):
            warnings.warn(
                f"Checkpoint {str(name_or_path)!r} has no tokenizer; using {cls.base_tokenizer!r}.", stacklevel=2
            )
            tokenizer = AutoTokenizer.from_pretrained(cls.base_tokenizer)
        if region_features is not None:
            return cls(model, tokenizer, store=RegionFeatureStore(region_features))
        if GridFeatures.is_saved_in(Path(name_or_path)):
            return cls(model, tokenizer, grid=GridFeatures.load(Path(name_or_path), cls.name))
        grid = GridFeatures.create(grid_backbone, pretrained=True, grid_size=grid_size, image_size=image_size)
        return cls(model, tokenizer, grid=grid)

    @classmethod
    def tiny(
        cls,
        seed: int = 0,
        tokenizer: object | None = None,
        sizes: TinyRegionSizes | None = None,
        region_features: str | None = None,
    ) -> RegionAdapter:
        """A small random instance (:meth:`ModelAdapter.tiny <vlbias.models.base.ModelAdapter.tiny>`) reading
        ``visual_dim``-d regions from ``region_features``, or else from a tiny random grid (:meth:`tiny_regions`)."""
        return cls._seeded_tiny(seed, tokenizer, sizes, region_features=region_features)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyRegionSizes, region_features: str | None = None) -> RegionAdapter:
        """The family's :meth:`_tiny_config` model, then its region source (the grid's weights drawn after the
        model's)."""
        model = cls.model_class(cls._tiny_config(tokenizer, sizes))
        return cls(model, tokenizer, **cls.tiny_regions(sizes.visual_dim, region_features))

    @classmethod
    def _tiny_config(cls, tokenizer, sizes: TinyRegionSizes) -> PretrainedConfig:
        """The family's config of a tiny random model over ``tokenizer``'s vocabulary."""
        raise NotImplementedError

    @classmethod
    def tiny_regions(cls, dim: int, region_features: str | Path | None) -> dict[str, object]:
        """Region source of a tiny instance: the store at ``region_features``, or a random
        narrow ``resnet10t`` with ``dim`` output channels on 64-pixel images (a 2 x 2 grid)."""
        if region_features is not None:
            return {"store": RegionFeatureStore(region_features)}
        channels = (max(dim // 4, 1), max(dim // 2, 1), max(dim // 2, 1), dim)
        grid = GridFeatures.create(
            "resnet10t", pretrained=False, grid_size=2, image_size=64, channels=channels, stem_width=channels[0]
        )
        return {"grid": grid}
