"""Region features for the detector-based models (VisualBERT, LXMERT).

These models never see pixels: they read a set of image *regions*, each a feature vector
(2048-d for the public checkpoints) with its box. Two sources:

* :class:`RegionFeatureStore` -- precomputed bottom-up-attention Faster R-CNN features
  (Anderson et al., 2018), the features the models were trained on. Two on-disk layouts:

  - the LXMERT TSV (one image per line, no header, tab-separated fields
    ``img_id, img_h, img_w, objects_id, objects_conf, attrs_id, attrs_conf, num_boxes,
    boxes, features``; every array field is the base64 of its raw bytes: ``objects_id``
    and ``attrs_id`` int64 ``(N,)``, the confidences float32 ``(N,)``, ``boxes`` float32
    ``(N, 4)`` as ``x1, y1, x2, y2`` in pixels, ``features`` float32 ``(N, D)``);
  - a directory of per-image ``<image id>.npz`` files with arrays ``features`` ``(N, D)``,
    ``boxes`` ``(N, 4)`` (pixels, ``x1, y1, x2, y2``), scalars ``image_h``, ``image_w`` and
    optionally ``objects_id`` ``(N,)``. The ``x``/``bbox``/``objects`` key names written by
    ``bottom-up-attention.pytorch`` are accepted too. Nothing is unpickled.

  An image is looked up by the stem of its file name (``COCO_val2014_000000000042.jpg`` ->
  ``COCO_val2014_000000000042``).

* :class:`GridFeatures` -- an *approximation* for images without precomputed features: a
  timm backbone's last feature map, average-pooled onto a ``grid_size x grid_size`` grid,
  each cell becoming one "region" whose box is the cell. The models were trained on detector
  regions, so scores from grid features are not comparable with scores from detector
  features; use them for smoke runs and synthetic data, and say so when reporting. The
  backbone's channel count must equal the model's visual feature dimension (``resnet50``'s
  2048 for the public VisualBERT and LXMERT checkpoints): a random projection between the two
  would carry no meaning, so a mismatch is an error.

Both produce a :class:`RegionFeatures` batch. :class:`~vlbias.models.region_adapter.RegionAdapter`, the base of
the VisualBERT and LXMERT adapters, takes it where the adapter protocol says ``pixel_values``,
and holds the region source (store or grid) with the model.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import timm
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from vlbias.errors import ConfigError, InputError
from vlbias.models.base import ImageInput
from vlbias.models.loading import check_keys
from vlbias.models.preprocess import ImageTransform

TSV_FIELDS = (
    "img_id",
    "img_h",
    "img_w",
    "objects_id",
    "objects_conf",
    "attrs_id",
    "attrs_conf",
    "num_boxes",
    "boxes",
    "features",
)
_NPZ_KEYS = {"features": ("features", "x"), "boxes": ("boxes", "bbox"), "objects_id": ("objects_id", "objects")}
# LXMERT checks normalised boxes against [0, 1] with this tolerance (src/tasks/vqa_data.py).
_BOX_TOLERANCE = 1e-5
NO_OBJECT = -1  # object id of grid cells, blank regions and padding


@dataclass(frozen=True)
class ImageRegions:
    """The regions of one image, as read from disk.

    ``features`` ``(N, D)`` float32, ``boxes`` ``(N, 4)`` ``x1, y1, x2, y2`` in pixels,
    ``object_ids`` ``(N,)`` detector class ids (:data:`NO_OBJECT` where unknown).
    """

    image_id: str
    features: Tensor
    boxes: Tensor
    image_h: int
    image_w: int
    object_ids: Tensor

    def normalised_boxes(self) -> Tensor:
        """Boxes divided by the image size, ``(N, 4)`` in ``[0, 1]`` (LXMERT's ``visual_pos``)."""
        scale = torch.tensor([self.image_w, self.image_h, self.image_w, self.image_h], dtype=torch.float32)
        return self.boxes / scale


@dataclass(frozen=True)
class RegionFeatures:
    """A batch of region sets, padded to the largest set; what region adapters take as
    ``pixel_values``.

    Shapes::

        features    (B, N, D)  region feature vectors (zeros at padding)
        boxes       (B, N, 4)  x1, y1, x2, y2 divided by image width/height, in [0, 1]
        mask        (B, N)     1 for a real region, 0 for padding (long)
        object_ids  (B, N)     detector class id, NO_OBJECT for grid cells and padding

    Example:
        >>> regions = RegionFeatures.blank(batch_size=2, dim=8)
        >>> regions.features.shape, regions.boxes[0].tolist()
        (torch.Size([2, 1, 8]), [[0.0, 0.0, 1.0, 1.0]])
    """

    features: Tensor
    boxes: Tensor
    mask: Tensor
    object_ids: Tensor

    def __len__(self) -> int:
        return self.features.shape[0]

    def __getitem__(self, items: slice) -> RegionFeatures:
        """The images ``items`` of the batch, e.g. ``regions[2:3]``."""
        if not isinstance(items, slice):
            raise InputError(f"Index RegionFeatures with a slice (e.g. regions[2:3]) but got {items!r}.")
        return RegionFeatures(self.features[items], self.boxes[items], self.mask[items], self.object_ids[items])

    @property
    def dim(self) -> int:
        return self.features.shape[-1]

    @classmethod
    def stack(cls, images: Sequence[ImageRegions]) -> RegionFeatures:
        """Pad per-image regions to the largest count and stack them into a batch."""
        count = max(image.features.shape[0] for image in images)
        dim = images[0].features.shape[1]
        features = torch.zeros(len(images), count, dim)
        boxes = torch.zeros(len(images), count, 4)
        mask = torch.zeros(len(images), count, dtype=torch.long)
        object_ids = torch.full((len(images), count), NO_OBJECT, dtype=torch.long)
        for b, image in enumerate(images):
            n = image.features.shape[0]
            features[b, :n], boxes[b, :n], mask[b, :n], object_ids[b, :n] = (
                image.features,
                image.normalised_boxes(),
                1,
                image.object_ids,
            )
        return cls(features, boxes, mask, object_ids)

    @classmethod
    def blank(cls, batch_size: int, dim: int) -> RegionFeatures:
        """One region per image covering the whole image, with an all-zero feature: the
        masked-region input of LXMERT's pre-training (``random_feat`` in its
        ``src/pretrain/lxmert_pretrain.py`` sets a masked feature to zero and keeps the box)."""
        return cls(
            features=torch.zeros(batch_size, 1, dim),
            boxes=torch.tensor([[[0.0, 0.0, 1.0, 1.0]]]).expand(batch_size, 1, 4).clone(),
            mask=torch.ones(batch_size, 1, dtype=torch.long),
            object_ids=torch.full((batch_size, 1), NO_OBJECT, dtype=torch.long),
        )

    def zero_regions(self, where: Tensor) -> RegionFeatures:
        """Set the features of the regions where ``where`` ``(B, N)`` is true to zero, keeping
        their boxes: how LXMERT masks a region, and how Ross et al. (2021, Sec. 4) mask the
        regions that show a person (``where = regions.object_ids == person_id``)."""
        if where.shape != self.mask.shape:
            raise InputError(f"Expected `where` of shape {tuple(self.mask.shape)} but got {tuple(where.shape)}.")
        return replace(self, features=self.features.masked_fill(where.unsqueeze(-1).to(torch.bool), 0.0))

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> RegionFeatures:
        """Move to ``device``; ``dtype`` casts the floating tensors (features and boxes)."""
        return RegionFeatures(
            features=self.features.to(device=device, dtype=dtype),
            boxes=self.boxes.to(device=device, dtype=dtype),
            mask=self.mask.to(device),
            object_ids=self.object_ids.to(device),
        )


class RegionFeatureStore:
    """Precomputed Faster R-CNN region features on disk, looked up by image id.

    ``path`` is an LXMERT ``.tsv`` file or a directory of ``<image id>.npz`` files (layouts in
    the module docstring). Opening a TSV reads it once to index each image's line (the
    feature arrays are decoded only when asked for).

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> np.savez(f"{folder}/COCO_val2014_000000000042.npz", features=np.ones((36, 2048), np.float32),
        ...          boxes=np.zeros((36, 4), np.float32), image_h=480, image_w=640)
        >>> store = RegionFeatureStore(folder)
        >>> store[store.image_id("val2014/COCO_val2014_000000000042.jpg")].features.shape
        torch.Size([36, 2048])
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            self._offsets = None
        elif self.path.is_file() and self.path.suffix == ".tsv":
            self._offsets = self._index_tsv()
        else:
            raise InputError(
                f"Region features {str(self.path)!r} must be an LXMERT .tsv file or a directory of "
                f"<image id>.npz files, but it is {'missing' if not self.path.exists() else 'neither'}."
            )

    def image_id(self, image: ImageInput) -> str:
        """The id an image is stored under: the stem of its file name."""
        name = getattr(image, "filename", "") if not isinstance(image, (str, Path)) else image
        if not name:
            raise InputError(
                f"An in-memory image has no file name to look up in region features {str(self.path)!r}; "
                "pass the image's path (its file stem is the image id)."
            )
        return Path(name).stem

    def __contains__(self, image_id: str) -> bool:
        if self._offsets is not None:
            return image_id in self._offsets
        return (self.path / f"{image_id}.npz").is_file()

    def __getitem__(self, image_id: str) -> ImageRegions:
        if image_id not in self:
            raise InputError(f"Image id {image_id!r} has no region features in {str(self.path)!r}{self._listing()}.")
        regions = self._read_tsv(image_id) if self._offsets is not None else self._read_npz(image_id)
        self._check(regions)
        return regions

    # -- the two layouts ---------------------------------------------------------------
    def _index_tsv(self) -> dict[str, int]:
        offsets, offset = {}, 0
        with self.path.open("rb") as file:
            for line in file:
                image_id = line.split(b"\t", 1)[0].decode()
                if image_id.strip():
                    offsets[image_id] = offset
                offset += len(line)
        return offsets

    def _read_tsv(self, image_id: str) -> ImageRegions:
        with self.path.open("rb") as file:
            file.seek(self._offsets[image_id])
            fields = file.readline().rstrip(b"\r\n").split(b"\t")
        where = f"line of image {image_id!r} in {str(self.path)!r}"
        if len(fields) != len(TSV_FIELDS):
            raise InputError(
                f"Expected {len(TSV_FIELDS)} tab-separated fields {TSV_FIELDS} on the {where} but got {len(fields)}."
            )
        row = dict(zip(TSV_FIELDS, fields))
        try:
            count = int(row["num_boxes"])
            image_h, image_w = int(row["img_h"]), int(row["img_w"])
        except ValueError as err:
            raise InputError(f"Fields img_h, img_w and num_boxes must be integers on the {where}: {err}") from err
        if count < 1:
            raise InputError(f"Expected num_boxes >= 1 on the {where} but got {count}.")

        def decode(field: str, dtype: type, shape: tuple[int, ...]) -> Tensor:
            raw = base64.b64decode(row[field])
            values = np.frombuffer(raw, dtype=dtype)
            if values.size == 0 or values.size % count:
                raise InputError(
                    f"Field {field!r} on the {where} holds {values.size} {np.dtype(dtype).name} values, "
                    f"which is not a multiple of num_boxes={count}."
                )
            return torch.from_numpy(values.reshape(shape).copy())

        return ImageRegions(
            image_id=image_id,
            features=decode("features", np.float32, (count, -1)),
            boxes=decode("boxes", np.float32, (count, 4)),
            image_h=image_h,
            image_w=image_w,
            object_ids=decode("objects_id", np.int64, (count,)),
        )

    def _read_npz(self, image_id: str) -> ImageRegions:
        file = self.path / f"{image_id}.npz"
        with np.load(file, allow_pickle=False) as arrays:
            present = set(arrays.files)

            def get(key: str, required: bool = True) -> np.ndarray | None:
                for alias in _NPZ_KEYS.get(key, (key,)):
                    if alias in present:
                        return arrays[alias]
                if required:
                    raise InputError(
                        f"Region file {str(file)!r} lacks array {key!r} (or {' / '.join(_NPZ_KEYS.get(key, (key,)))}); "
                        f"it has: {', '.join(sorted(present))}."
                    )
                return None

            features, boxes = get("features"), get("boxes")
            image_h, image_w, objects = int(get("image_h")), int(get("image_w")), get("objects_id", required=False)
        count = features.shape[0]
        object_ids = np.full(count, NO_OBJECT) if objects is None else objects
        return ImageRegions(
            image_id=image_id,
            features=torch.from_numpy(np.asarray(features, dtype=np.float32)),
            boxes=torch.from_numpy(np.asarray(boxes, dtype=np.float32)),
            image_h=image_h,
            image_w=image_w,
            object_ids=torch.from_numpy(np.asarray(object_ids, dtype=np.int64)),
        )

    # -- checks --------------------------------------------------------------------------
    def _check(self, regions: ImageRegions) -> None:
        where = f"image {regions.image_id!r} in {str(self.path)!r}"
        count = regions.features.shape[0]
        if regions.features.ndim != 2 or count == 0:
            raise InputError(
                f"Expected features of shape (N >= 1, D) for {where} but got {tuple(regions.features.shape)}."
            )
        if tuple(regions.boxes.shape) != (count, 4) or tuple(regions.object_ids.shape) != (count,):
            raise InputError(
                f"Expected boxes (N, 4) and objects_id (N,) with N={count} for {where} but got "
                f"{tuple(regions.boxes.shape)} and {tuple(regions.object_ids.shape)}."
            )
        if regions.image_h <= 0 or regions.image_w <= 0:
            raise InputError(f"Expected a positive image size for {where} but got {regions.image_h}x{regions.image_w}.")
        boxes = regions.normalised_boxes()
        if boxes.min() < -_BOX_TOLERANCE or boxes.max() > 1 + _BOX_TOLERANCE:
            raise InputError(
                f"Boxes of {where} leave the {regions.image_w}x{regions.image_h} image "
                "(expected x1, y1, x2, y2 in pixels)."
            )

    def _listing(self) -> str:
        ids = sorted(self._offsets) if self._offsets is not None else sorted(p.stem for p in self.path.glob("*.npz"))
        shown = ", ".join(repr(i) for i in ids[:5])
        return f" (it holds {len(ids)} image(s){': ' + shown if ids else ''}{', ...' if len(ids) > 5 else ''})"


class GridFeatures(nn.Module):
    """Grid "regions" from a timm backbone: an approximation of detector regions.

    The image is resized and centre-cropped to ``image_size`` (normalised with the backbone's
    mean/std), the backbone's last feature map ``(B, C, h, w)`` is average-pooled onto a
    ``grid_size x grid_size`` grid, and cell ``(i, j)`` becomes a region with feature
    ``(C,)`` and box ``(j/g, i/g, (j+1)/g, (i+1)/g)``. Average pooling mirrors how
    bottom-up-attention features average the detector's last ResNet stage over each box.
    The backbone is frozen (no parameter gradients), like the detector; gradients still reach
    the pixels, so image attacks can run through it.

    Example:
        >>> grid = GridFeatures.create("resnet10t", pretrained=False, grid_size=2, image_size=64)
        >>> grid(torch.rand(1, 3, 64, 64)).features.shape
        torch.Size([1, 4, 512])
    """

    CONFIG_FILE = "grid_config.json"
    WEIGHTS_FILE = "grid_backbone.safetensors"

    def __init__(
        self, backbone: nn.Module, backbone_name: str, backbone_kwargs: dict, grid_size: int, image_size: int
    ) -> None:
        super().__init__()
        if grid_size < 1:
            raise ConfigError(f"Expected `grid_size` >= 1 but got {grid_size}.")
        self.backbone = backbone.requires_grad_(False)
        self.backbone_name = backbone_name
        self.backbone_kwargs = dict(backbone_kwargs)
        self.grid_size = grid_size
        data = timm.data.resolve_data_config(model=backbone)
        self.transform = ImageTransform(image_size=image_size, mean=tuple(data["mean"]), std=tuple(data["std"]))

    @classmethod
    def create(
        cls,
        backbone_name: str = "resnet50",
        pretrained: bool = True,
        grid_size: int = 6,
        image_size: int = 448,
        **backbone_kwargs,
    ) -> GridFeatures:
        """Build the backbone with ``timm.create_model`` (``pretrained`` downloads its ImageNet
        weights through timm's hub cache); ``backbone_kwargs`` go to timm (e.g. ``channels``)."""
        backbone = timm.create_model(backbone_name, pretrained=pretrained, num_classes=0, **backbone_kwargs)
        return cls(backbone, backbone_name, backbone_kwargs, grid_size, image_size)

    @property
    def dim(self) -> int:
        return self.backbone.num_features

    def forward(self, images: Sequence[ImageInput] | Tensor) -> RegionFeatures:
        """Images (PIL, paths, or ``(B, 3, H, W)`` floats in ``[0, 1]``) -> regions on the backbone's device."""
        weight = next(self.backbone.parameters())
        pixels = self.transform(images).to(device=weight.device, dtype=weight.dtype)
        feature_map = self.backbone.forward_intermediates(pixels, indices=1, intermediates_only=True)[
            -1
        ]  # (B, C, h, w)
        cells = F.adaptive_avg_pool2d(feature_map, self.grid_size)  # (B, C, g, g)
        features = cells.flatten(2).transpose(1, 2)  # (B, g*g, C)
        batch, count = features.shape[:2]
        return RegionFeatures(
            features=features,
            boxes=self._cell_boxes().to(features).expand(batch, count, 4),
            mask=torch.ones(batch, count, dtype=torch.long, device=features.device),
            object_ids=torch.full((batch, count), NO_OBJECT, dtype=torch.long, device=features.device),
        )

    def _cell_boxes(self) -> Tensor:
        edges = torch.arange(self.grid_size + 1, dtype=torch.float32) / self.grid_size
        rows, cols = torch.meshgrid(torch.arange(self.grid_size), torch.arange(self.grid_size), indexing="ij")
        rows, cols = rows.flatten(), cols.flatten()
        return torch.stack([edges[cols], edges[rows], edges[cols + 1], edges[rows + 1]], dim=-1)  # (g*g, 4)

    # -- persistence -------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write ``grid_config.json`` and the backbone weights into ``directory``."""
        config = dict(
            backbone=self.backbone_name,
            backbone_kwargs=self.backbone_kwargs,
            grid_size=self.grid_size,
            image_size=self.transform.image_size,
        )
        (directory / self.CONFIG_FILE).write_text(json.dumps(config, indent=2))
        save_file(
            {k: v.contiguous() for k, v in self.backbone.state_dict().items()}, str(directory / self.WEIGHTS_FILE)
        )

    @classmethod
    def load(cls, directory: Path, model_name: str) -> GridFeatures:
        """Rebuild a saved grid backbone; refuse weights with missing or unexpected keys."""
        config = json.loads((directory / cls.CONFIG_FILE).read_text())
        grid = cls.create(
            config["backbone"],
            pretrained=False,
            grid_size=config["grid_size"],
            image_size=config["image_size"],
            **config["backbone_kwargs"],
        )
        weights_file = directory / cls.WEIGHTS_FILE
        missing, unexpected = grid.backbone.load_state_dict(load_file(str(weights_file)), strict=False)
        check_keys(f"{model_name} grid backbone {config['backbone']}", weights_file, missing, unexpected)
        return grid

    @classmethod
    def is_saved_in(cls, directory: Path) -> bool:
        return (directory / cls.CONFIG_FILE).is_file()
