"""Bias-aware checkpoint selection: the most accurate model that is fair enough, or the Pareto-optimal ones."""

from __future__ import annotations

import math
from typing import Any

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from typing_extensions import override

from vlbias.callbacks.tradeoff import measured_bias
from vlbias.errors import ConfigError
from vlbias.report.pareto import pareto_front


class BiasAwareCheckpoint(ModelCheckpoint):
    """A :class:`~lightning.pytorch.callbacks.ModelCheckpoint` that only considers epochs in which a
    :class:`~vlbias.callbacks.BiasSuiteCallback` measured the bias metric ``bias`` (a logged key such as
    ``bias/mmbias/man_vs_woman/stereotyped_activities/effect_size``), and then either

    * ``bound=B``: keeps the checkpoint of highest ``accuracy`` among the epochs with ``|bias| <= B``
      (``best_model_path``; ``save_top_k`` as usual), or
    * ``pareto=True``: keeps the checkpoint of every epoch on the Pareto front of (lower ``|bias|``, higher
      ``accuracy``), deleting those a later epoch dominates; ``best_model_path`` is the most accurate of them,
      ``pareto_points`` maps each kept file to its ``(bias, accuracy)``.

    Epochs without a bias measurement are never saved (by this callback: add ``save_last`` for resuming).
    Other keyword arguments go to ``ModelCheckpoint`` (``dirpath``, ``filename``, ``save_last``, ...).

    Args:
        accuracy: the accuracy key to maximise (e.g. ``val/activity_accuracy``).
        bias: the bias metric key.
        bound: the largest ``|bias|`` accepted.
        pareto: keep the Pareto-optimal epochs instead (give ``bound`` or ``pareto``, not both).
    """

    def __init__(
        self, accuracy: str, bias: str, bound: float | None = None, pareto: bool = False, **kwargs: Any
    ) -> None:
        if (bound is None) == (not pareto):
            raise ConfigError(f"Expected one of `bound` and `pareto=True` but got bound={bound!r}, pareto={pareto!r}")
        if bound is not None and not (isinstance(bound, int | float) and bound >= 0 and math.isfinite(bound)):
            raise ConfigError(f"Expected `bound` to be a non-negative number but got {bound!r}")
        kwargs.setdefault("save_top_k", -1 if pareto else 1)
        super().__init__(monitor=accuracy, mode="max", **kwargs)
        self.bias, self.bound, self.pareto = bias, bound, pareto
        self.pareto_points: dict[str, tuple[float, float]] = {}

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor, bias=self.bias, bound=self.bound, pareto=self.pareto)

    @override
    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"pareto_points": self.pareto_points}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.pareto_points = {path: tuple(point) for path, point in state_dict.get("pareto_points", {}).items()}
        super().load_state_dict(state_dict)

    @override
    def _save_topk_checkpoint(self, trainer: Trainer, monitor_candidates: dict[str, Tensor]) -> None:
        measured = measured_bias(trainer)
        if not measured:
            return
        if self.bias not in measured:
            raise ConfigError(
                f"BiasAwareCheckpoint: bias metric {self.bias!r} was not measured; measured are {sorted(measured)}"
            )
        bias = float(measured[self.bias])
        if self.pareto:
            self._save_pareto(trainer, monitor_candidates, bias)
        elif abs(bias) <= self.bound:
            super()._save_topk_checkpoint(trainer, monitor_candidates)
        elif self.verbose:
            rank_zero_info(
                f"Epoch {trainer.current_epoch}: |{self.bias}| = {abs(bias):.3f} > {self.bound}; not a candidate"
            )

    def _save_pareto(self, trainer: Trainer, monitor_candidates: dict[str, Tensor], bias: float) -> None:
        if self.monitor not in monitor_candidates:
            raise ConfigError(
                f"BiasAwareCheckpoint: accuracy metric {self.monitor!r} was not logged; logged are {sorted(monitor_candidates)}"
            )
        accuracy = float(monitor_candidates[self.monitor])
        filepath = self._get_metric_interpolated_filepath_name(monitor_candidates, trainer)
        points = self.pareto_points | {filepath: (bias, accuracy)}
        paths = list(points)
        front = pareto_front([points[p][0] for p in paths], [points[p][1] for p in paths])
        self.pareto_points = {p: points[p] for p, keep in zip(paths, front, strict=True) if keep}
        if filepath not in self.pareto_points:
            return
        self.best_model_path = max(self.pareto_points, key=lambda p: self.pareto_points[p][1])
        self.best_model_score = monitor_candidates[self.monitor].new_tensor(self.pareto_points[self.best_model_path][1])
        self.best_k_models = {
            p: monitor_candidates[self.monitor].new_tensor(a) for p, (_, a) in self.pareto_points.items()
        }
        self._save_checkpoint(trainer, filepath)
        for path in paths:
            if path not in self.pareto_points and path != filepath:
                self._remove_checkpoint(trainer, path)
