"""What the one-process commands take — ``vlbias measure``, ``vlbias audit``, ``vlbias prune`` and ``vlbias debias`` — each option
declared once, here, with its type, default and help (the ``Args:`` lines below are the ``--help`` text).

The commands' parsers are built from these dataclasses (:mod:`vlbias.commands.parsing`), the Python API takes them
(:func:`vlbias.workflows.measure.measure`, :func:`vlbias.workflows.audit.audit`, :func:`vlbias.workflows.prune.prune`,
:func:`vlbias.workflows.debias.debias`), and ``vlbias slurm``
resolves them the same way. Options shared by several commands live in one base class (:class:`ModelChoice`,
:class:`DeviceChoice`). Type and range checks are the types' own (``jsonargparse.typing``); rules across fields run
in ``__post_init__``, so every check happens before any data or model is loaded. This module imports no torch.

Example:
    >>> PruneOptions(model="clip", out="runs/pruned").fraction  # neither N nor a fraction given: 10 % of D
    0.1
    >>> PruneOptions(model="clip", out="runs/pruned", n_dims=8, fraction=0.2)
    Traceback (most recent call last):
    vlbias.errors.ConfigError: Give one of `n_dims` (N) and `fraction` (N as a share of D), not both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jsonargparse.typing import PositiveInt

from vlbias.data.biasworld_options import BiasWorldOptions
from vlbias.errors import ConfigError
from vlbias.lazy_table import refuse_unknown
from vlbias.mitigation.removal_count import PruningChoice
from vlbias.options import Seed

Split = Literal["train", "val", "test"]


def refuse_unknown_suites(suites: list[str]) -> None:
    """Each of ``suites`` checked against the suite registry (torch-free: it imports no suite)."""
    from vlbias.suites.registry import list_suites

    for suite in suites:
        refuse_unknown("suite", suite, list_suites())


@dataclass(frozen=True, kw_only=True)
class ModelChoice:
    """The model a command loads, and the run's seed.

    Args:
        model: Model adapter name (`vlbias models` lists them).
        checkpoint: Hub id or local path of the weights (default: the adapter's own, or none with --tiny).
        model_options: The adapter's own loading options, e.g. '{region_features: feats.tsv}'; checked against its
            from_pretrained (or tiny) keyword arguments.
        tiny: Use a tiny random model instead of weights (and tiny models for every model a suite loads).
        seed: Seed of everything random: a tiny model's weights, BiasWorld's draw, attacks, permutations and
            bootstrap resamples (each derived from it); recorded in the results.
        biasworld: BiasWorld, the synthetic world read when the data is 'biasworld'.
    """

    model: str
    checkpoint: str | None = None
    model_options: dict = field(default_factory=dict)
    tiny: bool = False
    seed: Seed = 0
    biasworld: BiasWorldOptions = field(default_factory=BiasWorldOptions)

    def __post_init__(self) -> None:
        from vlbias.models.catalog import list_models  # torch-free: the catalog imports no adapter

        refuse_unknown("model", self.model, list_models())


@dataclass(frozen=True, kw_only=True)
class DeviceChoice:
    """Where a one-process measurement runs.

    Args:
        device: Torch device (cpu, cuda:<i>, mps; checked before loading); default CUDA if present, else CPU.
        threads: Torch threads; default OMP_NUM_THREADS if set, else the usable CPUs over the processes on the node.
    """

    device: str | None = None
    threads: PositiveInt | None = None


@dataclass(frozen=True, kw_only=True)
class MeasureOptions(DeviceChoice, ModelChoice):
    """Run one bias suite on one model; write <out>/<suite>.json and <out>/<suite>.items.parquet.

    Args:
        suite: Suite name (listed below with its options).
        data: Data directory or file in the suite's public format, or 'biasworld' for the synthetic world.
        out: Output directory.
        suite_options: The suite's options (listed below per suite), e.g. '{statistics: {n_permutations: 2000}}'.
    """

    suite: str
    data: str = "biasworld"
    out: str
    suite_options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        refuse_unknown_suites([self.suite])


@dataclass(frozen=True, kw_only=True)
class AuditOptions(DeviceChoice, ModelChoice):
    """Run every suite the model's capabilities allow on every data set under --data_root and on BiasWorld; write
    <out>/results/<suite>-<dataset>/, <out>/audit.json (what ran, what did not and why) and <out>/report. Quick
    settings (1,000 permutations, 200 bootstrap resamples) unless --full.

    Args:
        out: Output directory.
        data_root: Folder of public data sets to look in.
        suites: Only these suites (default all).
        full: The suites' own (the papers') statistics settings instead of the quick ones.
        suite_options: Per-suite options, e.g. '{mmbias: {statistics: {n_permutations: 500}}}'.
    """

    out: str
    data_root: str | None = None
    suites: list[str] | None = None
    full: bool = False
    suite_options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        refuse_unknown_suites(self.suites or [])


@dataclass(frozen=True, kw_only=True)
class PruneOptions(PruningChoice, ModelChoice):
    """MI-guided embedding-dimension pruning (MMBias Sec. 6, Algorithm 1) of one EMBED model; writes <out>/model (a
    'pruned' checkpoint), <out>/clip (CLIP only), prune.json, tradeoff.csv and tradeoff.png.

    Args:
        data: MMBias data directory, or 'biasworld'.
        out: Output directory.
        split: BiasWorld split the dimensions are chosen on (default val); measure the pruned model on another one
            (test). MMBias data has no splits.
        batch_size: Images per predict batch.
        accelerator: Lightning accelerator (cpu, gpu, auto).
        devices: Lightning devices.
    """

    data: str = "biasworld"
    out: str
    split: Split | None = None
    batch_size: PositiveInt = 64
    accelerator: str = "cpu"
    devices: PositiveInt = 1

    def __post_init__(self) -> None:
        super().__post_init__()  # the pruning choice's checks
        ModelChoice.__post_init__(self)
        if self.split is not None and self.data != "biasworld":
            raise ConfigError(f"`split` ({self.split!r}) is BiasWorld's; MMBias data {self.data!r} has no splits.")


@dataclass(frozen=True, kw_only=True)
class DebiasOptions(DeviceChoice, ModelChoice):
    """Fit post-hoc debiasers on one EMBED model; measure bias, zero-shot accuracy and retrieval R@K before and after.
    On a chat VLM, its training-free debiasers (instruction_prefix, activation_steering, contextual_calibration):
    --data a counterfactual question file (what steering is fitted on), --suites bias_qa and/or
    counterfactual_answers on --suite_data (a question file or a folder of them).

    One method writes <out>/debias.json, <out>/debiaser (the fitted state) and each suite's results before
    (<out>/before) and after (<out>/after). Several methods (a list, or 'all') is the compare mode: every method
    fitted on the same data, the same suites measured after each, <out>/compare.csv, <out>/compare.png (bias against
    zero-shot accuracy) and <out>/methods/<method>/<suite>.json.

    Args:
        method: Debiaser name, a list of names, or 'all' (every registered one; a chat model's: every chat debiaser)
            for the compare mode.
        trained_models: Compare mode: models debiased by training, each a row beside the methods, measured on the
            same folds the same way, e.g. '{prompt_array: {model: prompt_array, checkpoint: runs/x/model}}'.
        method_options: The method's options, e.g. '{rtol: 1e-6}'; in the compare mode per method,
            '{orth_proj: {rtol: 1e-6}}'.
        out: Output directory.
        data: What the method is fitted on: 'biasworld' (its --split), or a prompt file (YAML/JSON: attribute
            prompts, prompt pairs, concepts, reference images).
        split: BiasWorld split the method is fitted on (the suites measure on their own split, 'test' by default).
        suites: Suites measured before and after (EMBED suites; on --suite_data).
        suite_data: The suites' data: 'biasworld', or a directory in each suite's public format.
        suite_options: Per-suite options, e.g. '{mmbias: {statistics: {n_permutations: 2000}}}'.
        captions: Caption corpus on which retrieval R@K (text and image retrieval, K = 1, 5, 10) is measured before
            and after: 'biasworld' (each world's test split, an image's own caption its answer), or a Karpathy or
            ALBEF annotation file (its test split); default none, no R@K.
        caption_images: Folder the caption file's image paths are relative to (default: the file's folder).
        batch_size: Images per embedding batch.
        folds: Compare mode on BiasWorld: this many worlds (seeds biasworld.seed, +1, ...), each fitted on and
            measured; compare.csv gives each number's mean over them with a bootstrap interval.
    """

    method: str | list[str]
    method_options: dict = field(default_factory=dict)
    trained_models: dict = field(default_factory=dict)
    out: str
    data: str = "biasworld"
    split: Split = "val"
    suites: list[str] = field(default_factory=lambda: ["mmbias"])
    suite_data: str = "biasworld"
    suite_options: dict = field(default_factory=dict)
    captions: str | None = None
    caption_images: str | None = None
    batch_size: PositiveInt = 64
    folds: PositiveInt = 1

    @property
    def chat(self) -> bool:
        """Whether the model is a chat VLM (capability ANSWER), whose debiasers are the chat ones."""
        from vlbias.models.catalog import model_capabilities  # torch-free

        return "answer" in model_capabilities(self.model)

    @property
    def registered_methods(self) -> list[str]:
        """The methods this model can be debiased by: the chat debiasers for a chat VLM, else the embedding ones."""
        from vlbias.mitigation.chat_registry import list_chat_debiasers  # both registries import no method
        from vlbias.mitigation.registry import list_debiasers

        return list_chat_debiasers() if self.chat else list_debiasers()

    @property
    def methods(self) -> list[str]:
        """The methods asked for: ``[method]``, the list, or every registered one for ``'all'``."""
        if self.method == "all":
            return self.registered_methods
        return [self.method] if isinstance(self.method, str) else list(self.method)

    @property
    def compare(self) -> bool:
        """Whether this is the compare mode (``'all'`` or a list of methods)."""
        return not isinstance(self.method, str) or self.method == "all"

    def __post_init__(self) -> None:
        super().__post_init__()
        for method in self.methods:
            refuse_unknown("chat debiaser" if self.chat else "debiaser", method, self.registered_methods)
        refuse_unknown_suites(self.suites)
        if not self.methods:
            raise ConfigError("Expected at least one method in `method` but got an empty list.")
        if len(set(self.methods)) != len(self.methods):
            raise ConfigError(f"Expected distinct methods in `method` but got {self.methods}.")
        if not self.suites:
            raise ConfigError("Expected at least one suite in `suites` but got an empty list.")
        if self.chat:
            self._check_chat_choices()
        if self.folds > 1 and not (self.compare and self.data == "biasworld" and self.suite_data == "biasworld"):
            raise ConfigError(
                f"`folds` ({self.folds}) are BiasWorld worlds of the compare mode: give a list of methods or 'all', "
                "and 'biasworld' as `data` and `suite_data`."
            )
        if self.trained_models and not self.compare:
            raise ConfigError(
                f"`trained_models` ({sorted(self.trained_models)}) are rows of the compare mode: give a list of methods "
                "or 'all' as `method`."
            )
        if self.caption_images is not None and self.captions in (None, "biasworld"):
            raise ConfigError("`caption_images` is the folder of a caption file's images: give the file as `captions`.")

    def _check_chat_choices(self) -> None:
        """A chat model's run: fitted on a counterfactual question file, measured on question files, one world."""
        given = {"trained_models": self.trained_models, "captions": self.captions, "folds": self.folds > 1}
        for name, value in given.items():
            if value:
                raise ConfigError(f"`{name}` is not for a chat model's debiasers ({self.model!r}): leave it out.")
        for name in ("data", "suite_data"):
            if getattr(self, name) == "biasworld":
                raise ConfigError(
                    f"A chat model's debiasers need question files: give `{name}` (a counterfactual question file for "
                    "`data`, a question file or a folder of them for `suite_data`)."
                )
