"""open_clip models (Ilharco et al., 2021; Cherti et al., 2023): the CLIPs of LAION, DataComp, MetaCLIP, CommonPool,
EVA and others, through the ``open_clip_torch`` package: a dual encoder (EMBED) that also scores a pair (MATCH)."""

from __future__ import annotations

import copy
import difflib
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from pickle import UnpicklingError

import open_clip
import torch
import torch.nn.functional as F
from open_clip.constants import HF_CONFIG_NAME, HF_SAFE_WEIGHTS_NAME
from open_clip.push_to_hf_hub import save_config_for_hf
from open_clip.transform import PreprocessCfg, image_transform_v2
from safetensors import SafetensorError
from safetensors.torch import save_file
from torch import Tensor, nn

from vlbias.data.images import load_image
from vlbias.errors import ConfigError, InputError
from vlbias.models.base import Capability, ImageInput, ModelAdapter, registered_capabilities
from vlbias.models.families.open_clip_tokens import OpenCLIPTokenizer
from vlbias.models.linear_export import checked_linear_maps, folded_columns, folded_linear
from vlbias.models.loading import check_checkpoint
from vlbias.models.preprocess import checked_image_batch
from vlbias.models.tiny_sizes import TinyEmbeddingSizes
from vlbias.runtime.log_levels import quieted

HF_HUB = "hf-hub:"
LOCAL_DIR = "local-dir:"
#: What open_clip raises on a checkpoint it cannot read or download: a failed download (``OSError``, ``RuntimeError``),
#: weights of another shape (``RuntimeError``, and ``AssertionError`` where it resizes position embeddings), a file that
#: is no checkpoint (``UnpicklingError``, ``SafetensorError``, ``KeyError``, ``ValueError``).
LOAD_ERRORS = (AssertionError, KeyError, OSError, RuntimeError, ValueError, UnpicklingError, SafetensorError)
#: The context length of the tiny model's text tower (open_clip's models read 77 tokens).
TINY_CONTEXT_LENGTH = 32


class OpenCLIPAdapter(ModelAdapter):
    """Normalised image and text embeddings (EMBED) and pair scores (MATCH) of an open_clip model.

    **Loading** (``vlbias measure --model open_clip --checkpoint C --model_options '{architecture: A}'``): the
    checkpoint ``C`` is one of

    * a pretrained tag of architecture ``A``, as ``open_clip.list_pretrained()`` lists them: ``--checkpoint
      laion2b_s34b_b79k --model_options '{architecture: ViT-B-32}'`` (``open_clip.create_model(A, pretrained=C)``);
    * a local state-dict file (``.pt``, ``.pth``, ``.bin``, ``.safetensors``, e.g. ``torch.save(model.state_dict())``)
      of architecture ``A``: ``--checkpoint ViT-B-32.safetensors --model_options '{architecture: ViT-B-32}'``;
    * a hub id, ``hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K`` (the prefix may be left out), or a local directory
      holding ``open_clip_config.json`` and weights (what :meth:`save_pretrained` writes, and open_clip's own
      ``local-dir:`` format; a downloaded copy of such a hub repository is one), given as its path or in open_clip's
      own spelling ``local-dir:PATH``: these name their architecture and
      preprocessing in ``open_clip_config.json``, and take no ``architecture``.

    ``A`` is a name ``open_clip.list_models()`` lists, or the path of a JSON model config in open_clip's format
    (``embed_dim``, ``vision_cfg``, ``text_cfg``; registered with ``open_clip.add_model_config`` under the file's
    name): a custom or tiny architecture. An unknown architecture or tag is refused naming the closest known ones; a
    state dict of another architecture is refused by name; a tag or hub id that is neither in the local cache nor
    reachable (offline) is refused saying so and how to give a local file.

    **Text** is read by open_clip's own tokenizer (:class:`~vlbias.models.families.open_clip_tokens.OpenCLIPTokenizer`),
    padded and cut to the text tower's context length as open_clip does. **Images** go through open_clip's own
    preprocessing (its mean and std, interpolation, resize mode and crop: the model's ``visual.preprocess_cfg``, from
    the pretrained tag or ``open_clip_config.json``), PIL images as open_clip transforms them and a ``(B, 3, H, W)``
    tensor in ``[0, 1]`` through the same transforms as torch ops.

    **Scores.** EMBED: ``encode_image`` and ``encode_text``, L2-normalised. MATCH: the pair score of open_clip's
    ``get_logits``, :math:`s(v, t) = e^{\\tau}\\,\\cos(v, t) + b` with the model's ``logit_scale`` :math:`\\tau` and
    ``logit_bias`` :math:`b` (0 for a model without one). For a model trained with the sigmoid loss (open_clip's
    SigLIPs, which have a bias) :math:`s` is the log-odds that the pair matches; for a CLIP trained with the softmax
    loss it is the logit of the softmax over a batch, a score for ranking whose sigmoid is no probability.

    **Tiny** (:meth:`tiny`): a ViT ``CLIP`` built in code from :attr:`tiny_sizes` (4 heads, MLPs 2 x wide, a text
    context of 32 tokens) over open_clip's BPE tokenizer (49,408 tokens), with open_clip's default preprocessing.

    Example:
        >>> model = OpenCLIPAdapter.tiny()
        >>> pixels = model.prepare_images(torch.rand(2, 3, 64, 64))
        >>> tokens = model.prepare_texts(["a man is cooking.", "a woman is driving."])
        >>> model.embed_texts(tokens).shape, model.match_logits(pixels, tokens).shape
        (torch.Size([2, 32]), torch.Size([2]))
    """

    match_follows_embeddings = True  # e^tau cos (+ b)
    no_linear_export = None  # for the towers that end in a linear projection (check_linear_export)

    name = "open_clip"
    capabilities = registered_capabilities(name)
    tiny_sizes = TinyEmbeddingSizes()

    def __init__(self, model: nn.Module, model_config: dict, tokenizer: OpenCLIPTokenizer) -> None:
        super().__init__()
        self.model = model
        self.model_config = model_config  # open_clip's model config: embed_dim, vision_cfg, text_cfg, ...
        self.tokenizer = tokenizer
        self.max_text_length = tokenizer.max_length
        self.transform = image_transform_v2(PreprocessCfg(**model.visual.preprocess_cfg), is_train=False)

    # -- preprocessing ---------------------------------------------------------------
    def prepare_images(self, images: Sequence[ImageInput] | Tensor) -> Tensor:
        """open_clip's transforms of PIL images or paths, or of a ``(B, 3, H, W)`` tensor in ``[0, 1]``."""
        if isinstance(images, Tensor):
            pixels = self.transform(checked_image_batch(images))
        else:
            pixels = torch.stack([self.transform(load_image(image)) for image in images])
        return pixels.to(self.device)

    def prepare_texts(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """``{"input_ids": (B, context length)}`` from open_clip's tokenizer; texts longer than the context are cut
        as open_clip cuts them (the end token kept), with a warning that says by how many tokens."""
        lengths = torch.tensor([len(ids) for ids in self.tokenizer(texts)["input_ids"]])
        self._warn_truncated(texts, lengths)
        return {"input_ids": self.tokenizer.encode(texts).to(self.device)}

    # -- capabilities ----------------------------------------------------------------
    def embed_images(self, pixel_values: Tensor) -> Tensor:
        return F.normalize(self.model.encode_image(pixel_values), dim=-1)  # (B, D)

    def embed_texts(self, tokens: dict[str, Tensor]) -> Tensor:
        return F.normalize(self.model.encode_text(tokens["input_ids"]), dim=-1)  # (B, D)

    def match_logits(self, pixel_values: Tensor, tokens: dict[str, Tensor]) -> Tensor:
        """:math:`e^{\\tau}\\cos(v_b, t_b) + b` of each pair ``(B,)`` (class docstring)."""
        cosines = (self.embed_images(pixel_values) * self.embed_texts(tokens)).sum(dim=-1)  # (B,)
        scores = self.model.logit_scale.exp() * cosines
        return scores if self.model.logit_bias is None else scores + self.model.logit_bias

    def direct_call(
        self, capability: Capability, pixel_values: Tensor, tokens: dict[str, Tensor]
    ) -> Tensor | tuple[Tensor, Tensor]:
        """``encode_image``/``encode_text`` with ``normalize=True`` for EMBED; the diagonal of ``get_logits``'s
        image-by-text matrix for MATCH."""
        if capability not in self.capabilities:
            raise self._lacks(capability)
        if capability is Capability.MATCH:
            return self.model.get_logits(pixel_values, tokens["input_ids"])[0].diagonal()
        return (
            self.model.encode_image(pixel_values, normalize=True),
            self.model.encode_text(tokens["input_ids"], normalize=True),
        )

    @property
    def logit_scale(self) -> Tensor:
        return self.model.logit_scale

    @property
    def logit_bias(self) -> Tensor | None:
        """The pair logit's bias :math:`b` of a model trained with the sigmoid loss; ``None`` for a CLIP."""
        return self.model.logit_bias

    @property
    def match_score(self) -> str:
        """``"sigmoid"`` for a model with a logit bias (open_clip's SigLIPs, trained with the sigmoid loss), else
        ``"softmax"`` (a CLIP trained with the contrastive softmax); see :attr:`ModelAdapter.match_score`."""
        return "softmax" if self.model.logit_bias is None else "sigmoid"

    # -- persistence -----------------------------------------------------------------
    def export_linear(self, image_map: Tensor | None, text_map: Tensor | None, out_dir: str | Path) -> Path:
        """This model with the linear change :math:`M` of each modality folded into its tower's projection, in
        open_clip's ``local-dir:`` format (:meth:`save_pretrained`), so ``open_clip.create_model_from_pretrained(
        "local-dir:" + out_dir)`` gives :math:`M z / |M z|` with no vlbias code.

        Each tower ends in a linear map to the :math:`D`-dimensional embedding (:data:`EMBEDDING_PROJECTIONS`): a
        ``(width, D)`` projection :math:`P` applied as ``x @ P`` becomes :math:`P M^\\top`, an ``nn.Linear`` becomes
        :math:`M W` and :math:`M b` (:mod:`vlbias.models.linear_export`); the model config's ``embed_dim`` becomes the
        maps' output dimension, and ``encode_*(normalize=True)`` normalises. The logit scale and bias are copied
        unchanged, so the pair score is :math:`e^{\\tau}\\cos + b` of the changed embeddings. A tower whose embedding
        comes from another module (a timm or Hugging Face tower, an MLP head) is refused by name
        (:meth:`check_linear_export`). This adapter's model is left as it is."""
        projections = embedding_projections(self.model)
        model = copy.deepcopy(self.model)
        maps = dict(zip(("image", "text"), checked_linear_maps(image_map, text_map, self.model_config["embed_dim"])))
        for tower, path in projections.items():
            owner_path, _, name = path.rpartition(".")
            full = _attribute(model, path)
            if isinstance(full, nn.Linear):
                folded = folded_linear(full, maps[tower])
            else:
                folded = folded_columns(full, maps[tower])
            setattr(_attribute(model, owner_path), name, folded)
        config = {**self.model_config, "embed_dim": maps["image"].shape[0]}
        out_dir = Path(out_dir)
        OpenCLIPAdapter(model, config, self.tokenizer).save_pretrained(out_dir)
        return out_dir

    def check_linear_export(self, modalities: Iterable[str] = ("image", "text")) -> None:
        """Refuse a model a tower of which does not end in a linear projection (:func:`embedding_projections`)."""
        super().check_linear_export(modalities)
        embedding_projections(self.model)

    def enable_gradient_checkpointing(self) -> None:
        """open_clip's own: ``set_grad_checkpointing(True)``, which checkpoints each residual block of the text
        transformer and of the image tower non-reentrantly wherever gradients are computed."""
        self.model.set_grad_checkpointing(True)

    def save_pretrained(self, directory: str | Path) -> None:
        """Write open_clip's ``local-dir:`` format to ``directory``: ``open_clip_config.json`` (the model config and
        the preprocessing, as ``open_clip.push_to_hf_hub`` writes it), the weights as ``open_clip_model.safetensors``
        and, for a ``transformers`` tokenizer, its files. open_clip alone loads it:
        ``open_clip.create_model_from_pretrained("local-dir:" + directory)``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {key: value.contiguous() for key, value in self.model.state_dict().items()}
        save_file(state, str(directory / HF_SAFE_WEIGHTS_NAME))
        save_config_for_hf(self.model, directory / HF_CONFIG_NAME, self.model_config)
        self.tokenizer.save_pretrained(directory)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, architecture: str | None = None) -> OpenCLIPAdapter:
        """Load a pretrained tag or a state-dict file of ``architecture``, or a hub id or local directory (which name
        their own); the forms are in the class docstring."""
        source = str(name_or_path)
        if source.startswith(LOCAL_DIR):  # open_clip's own spelling of a local directory
            source = source.removeprefix(LOCAL_DIR)
            if not Path(source).expanduser().is_dir():
                raise InputError(
                    f"Checkpoint {str(name_or_path)!r} for model 'open_clip' names no directory (resolved: "
                    f"{str(Path(source).expanduser().absolute())!r}); open_clip's {LOCAL_DIR!r} takes a local "
                    f"directory holding {HF_CONFIG_NAME} and the weights."
                )
        check_checkpoint(source, cls.name)
        path = Path(source).expanduser()
        if source.startswith(HF_HUB) or path.is_dir() or (source.count("/") == 1 and not path.exists()):
            if architecture is not None:
                raise ConfigError(
                    f"Checkpoint {source!r} for model 'open_clip' names its architecture in its {HF_CONFIG_NAME}; "
                    "drop the model option `architecture`."
                )
            if path.is_dir():
                if not (path / HF_CONFIG_NAME).is_file():
                    raise InputError(
                        f"Checkpoint {source!r} for model 'open_clip' holds no {HF_CONFIG_NAME}; expected a directory "
                        "written by save_pretrained (or a downloaded open_clip hub repository), or give a state-dict "
                        "file with --model_options '{architecture: NAME}'."
                    )
                return cls._create(f"{LOCAL_DIR}{path}", None, source, local=True)
            return cls._create(source if source.startswith(HF_HUB) else HF_HUB + source, None, source, local=False)
        name = _architecture(architecture, source)
        if path.is_file():
            return cls._create(name, str(path), source, local=True)
        _check_tag(name, source)
        return cls._create(name, source, source, local=False)

    @classmethod
    def _create(cls, name: str, pretrained: str | None, source: str, local: bool) -> OpenCLIPAdapter:
        """``open_clip.create_model(name, pretrained=pretrained)``, its model config and tokenizer; what open_clip
        raises becomes one line naming ``source`` (:func:`_load_error`): for a ``local`` checkpoint, weights that are
        not of architecture ``name``; otherwise a download that failed."""
        with _quiet_open_clip():
            try:
                model = open_clip.create_model(name, pretrained=pretrained)
                config, tokenize = open_clip.get_model_config(name), open_clip.get_tokenizer(name)
            except LOAD_ERRORS as err:
                raise _load_error(err, name, source, local) from err
        return cls(model, config, OpenCLIPTokenizer(tokenize))

    @classmethod
    def tiny(cls, seed: int = 0, tokenizer: object | None = None, sizes: TinyEmbeddingSizes | None = None):
        """A small random open_clip ``CLIP`` of ``sizes`` (class docstring), its weights drawn from torch's global
        generator seeded with ``seed``. It reads open_clip's BPE tokenizer, in which every word has tokens, and
        takes no ``tokenizer``."""
        if tokenizer is not None:
            raise ConfigError(
                "Model 'open_clip' reads open_clip's own BPE tokenizer, in which every word has tokens; its tiny model "
                "takes no `tokenizer` (nor `tiny_vocabulary`)."
            )
        torch.manual_seed(seed)
        return cls._tiny(None, cls.tiny_sizes if sizes is None else sizes)

    @classmethod
    def _tiny(cls, tokenizer, sizes: TinyEmbeddingSizes) -> OpenCLIPAdapter:
        """``open_clip.CLIP`` of :func:`tiny_model_config`, with open_clip's default preprocessing at its size."""
        tokenize = open_clip.SimpleTokenizer(context_length=TINY_CONTEXT_LENGTH)
        config = tiny_model_config(sizes, tokenize.vocab_size)
        model = open_clip.CLIP(**config)
        open_clip.model.set_model_preprocess_cfg(model, asdict(PreprocessCfg(size=sizes.image_size)))
        return cls(model, config, OpenCLIPTokenizer(tokenize))


#: Where an open_clip model's towers end in the linear map to the embedding (attribute paths from the model): a
#: ``(width, D)`` parameter applied as ``x @ proj`` (ViT ``visual.proj``, the text tower's ``text_projection``) or an
#: ``nn.Linear`` with ``D`` outputs (ResNet's ``attnpool.c_proj``; a text projection with a bias).
EMBEDDING_PROJECTIONS = {
    "image": ("visual.proj", "visual.attnpool.c_proj"),
    "text": ("text_projection", "text.text_projection"),
}


def embedding_projections(model: nn.Module) -> dict[str, str]:
    """The path of each tower's linear map to the embedding (:data:`EMBEDDING_PROJECTIONS`), ``{"image": ...,
    "text": ...}``; a tower without one is refused by name."""
    found = {}
    for tower, paths in EMBEDDING_PROJECTIONS.items():
        present = [path for path in paths if _attribute(model, path) is not None]
        if not present:
            raise InputError(
                f"Cannot export a linear change of the embeddings of open_clip {type(model).__name__}: its {tower} "
                f"tower has none of the linear embedding projections {', '.join(paths)} that the change folds into"
            )
        found[tower] = present[0]
    return found


def _attribute(model: nn.Module, path: str) -> object | None:
    """``model``'s attribute at the dotted ``path`` (``""``: ``model``), ``None`` where a part is missing."""
    for part in filter(None, path.split(".")):
        model = getattr(model, part, None)
    return model


def tiny_model_config(sizes: TinyEmbeddingSizes, vocab_size: int) -> dict:
    """open_clip's model config of a tiny ViT CLIP: both towers ``hidden_size`` wide with 4 heads and MLPs twice as
    wide, ``num_layers`` deep; ``projection_dim``-d embeddings; the text tower reads :data:`TINY_CONTEXT_LENGTH`
    tokens of a ``vocab_size``-token vocabulary (open_clip's BPE: 49,408).

    Example:
        >>> tiny_model_config(TinyEmbeddingSizes(hidden_size=16), vocab_size=49408)["vision_cfg"]
        {'image_size': 32, 'patch_size': 8, 'width': 16, 'head_width': 4, 'layers': 2, 'mlp_ratio': 2.0}
    """
    return {
        "embed_dim": sizes.projection_dim,
        "vision_cfg": {
            "image_size": sizes.image_size,
            "patch_size": sizes.patch_size,
            "width": sizes.hidden_size,
            "head_width": sizes.hidden_size // 4,
            "layers": sizes.num_layers,
            "mlp_ratio": 2.0,
        },
        "text_cfg": {
            "context_length": TINY_CONTEXT_LENGTH,
            "vocab_size": vocab_size,
            "width": sizes.hidden_size,
            "heads": 4,
            "layers": sizes.num_layers,
            "mlp_ratio": 2.0,
        },
    }


def _architecture(architecture: str | None, source: str) -> str:
    """The open_clip name of ``architecture``: a known name, or a JSON model config registered under its file name;
    missing or unknown, refused naming the closest known ones."""
    if architecture is None:
        raise ConfigError(
            f"Checkpoint {source!r} for model 'open_clip' is a pretrained tag or a state-dict file, which needs its "
            "architecture: add --model_options '{architecture: NAME}' (e.g. ViT-B-32; open_clip.list_models() lists "
            "them) or the path of a JSON model config."
        )
    if architecture.endswith(".json"):
        return _register(Path(architecture).expanduser())
    known = open_clip.list_models()
    if architecture not in known:
        close = difflib.get_close_matches(architecture, known, n=4, cutoff=0.5)
        raise ConfigError(
            f"Unknown open_clip architecture {architecture!r}; closest: {', '.join(close) or 'none'} "
            f"(open_clip.list_models() lists all {len(known)}, or give the path of a JSON model config)."
        )
    return architecture


def _register(path: Path) -> str:
    """Register the JSON model config at ``path`` with open_clip (``add_model_config``) and return its name (the
    file's stem). A file that is missing, not a model config, or named like a built-in architecture is refused."""
    if not path.is_file():
        raise InputError(f"Architecture file {str(path)!r} does not exist; expected an open_clip model config (JSON).")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"Architecture file {str(path)!r} is not valid JSON ({err}).") from err
    missing = [
        key for key in ("embed_dim", "vision_cfg", "text_cfg") if not isinstance(config, dict) or key not in config
    ]
    if missing:
        raise InputError(
            f"Architecture file {str(path)!r} lacks {', '.join(missing)}; expected an open_clip model config "
            "(embed_dim, vision_cfg, text_cfg)."
        )
    if (Path(open_clip.__file__).parent / "model_configs" / path.name).is_file():
        raise ConfigError(
            f"Architecture file {str(path)!r} is named like open_clip's built-in architecture {path.stem!r}; rename it."
        )
    open_clip.add_model_config(path)
    return path.stem


def _check_tag(architecture: str, tag: str) -> None:
    """Refuse a pretrained ``tag`` that open_clip does not list for ``architecture``, naming the closest ones."""
    if open_clip.get_pretrained_cfg(architecture, tag):
        return
    tags = open_clip.list_pretrained_tags_by_model(architecture)
    close = difflib.get_close_matches(tag, tags, n=4, cutoff=0.3)
    raise ConfigError(
        f"Checkpoint {tag!r} is neither a local file nor a pretrained tag of open_clip architecture {architecture!r}; "
        f"closest tags: {', '.join(close) or 'none'} (its tags: {', '.join(tags) or 'none'})."
    )


def _load_error(err: Exception, name: str, source: str, local: bool) -> InputError:
    """One line for what ``open_clip`` raised while loading ``source`` as ``name``: a ``local`` checkpoint whose weights
    are not of that architecture (the first missing, unexpected or mismatched key), or a tag or hub id that could not
    be downloaded."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if local:
        state_dict_error = len(lines) > 1 and "Error(s) in loading state_dict" in lines[0]
        problem = (lines[1] if state_dict_error else lines[0] if lines else type(err).__name__)[:300]
        return InputError(
            f"Checkpoint {source!r} does not load as open_clip architecture {name!r} ({problem}); "
            "expected the weights of that architecture (give the architecture they were saved from)."
        )
    reason = lines[-1].split(" Last error:")[0][:300] if lines else type(err).__name__
    return InputError(
        f"Checkpoint {source!r} for model 'open_clip' is not in the local cache and could not be downloaded (offline, "
        f"or no such tag or repository: {reason}); give a local file instead: --checkpoint PATH.safetensors "
        "--model_options '{architecture: NAME}', or a directory holding open_clip_config.json and the weights."
    )


@contextmanager
def _quiet_open_clip() -> Iterator[None]:
    """Silence what open_clip and the hub client log while loading (open_clip logs to the root logger, e.g. "Failed
    to download weights"): the error raised says it in one line."""
    with quieted(logging.CRITICAL, "", "huggingface_hub"):
        yield
