"""What every training module shares: one model adapter, built through the registry, trained with
AdamW and exported when fitting ends."""

from __future__ import annotations

from pathlib import Path

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.utilities import rank_zero_only

from vlbias.models.base import Capability, ModelAdapter, require_capability
from vlbias.models.registry import load


class AdapterModule(LightningModule):
    """Base of the training modules. A subclass calls ``save_hyperparameters()`` with
    ``learning_rate`` and ``weight_decay`` among its arguments, then :meth:`build_adapter`."""

    adapter: ModelAdapter

    def build_adapter(
        self,
        model: str,
        checkpoint: str | None,
        tiny: bool,
        tiny_sizes: dict[str, int] | None,
        seed: int,
        capability: Capability,
        purpose: str,
    ) -> None:
        """``self.adapter``: ``model`` from ``checkpoint``, or a tiny random one of ``tiny_sizes`` drawn
        with ``seed``, through :func:`~vlbias.models.registry.load` (so a missing checkpoint or a size
        the adapter does not take is refused by name), on the CPU and in training mode; it must have
        ``capability`` (``purpose`` names the training in the error)."""
        options = {**(tiny_sizes or {}), "seed": seed} if tiny else None
        self.adapter = load(model, checkpoint=checkpoint, tiny=tiny, device="cpu", options=options).train()
        require_capability(self.adapter, capability, suite=purpose)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        hparams = self.hparams
        return torch.optim.AdamW(self.parameters(), lr=hparams.learning_rate, weight_decay=hparams.weight_decay)

    @rank_zero_only
    def on_fit_end(self) -> None:
        """Export the adapter with ``save_pretrained`` to ``<log_dir>/model`` (not in ``fast_dev_run``)."""
        if self.trainer.log_dir is not None and not self.trainer.fast_dev_run:
            self.adapter.save_pretrained(Path(self.trainer.log_dir) / "model")
