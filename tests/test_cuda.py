"""The GPU paths, where CUDA is present (a lent GPU machine; CI has none, so here every test skips):
every suite measured on the GPU, every BiasWorld experiment fitted for two steps in bf16 mixed precision, and every
FairVLP method's training step under bf16 autocast with its image counterfactuals made on the GPU.

    python -m pytest tests/test_cuda.py      # on a machine with a GPU
"""

from pathlib import Path

import pytest
import torch

from tests.modules.test_fairvlp import _batch as fairvlp_batch
from tests.modules.test_fairvlp import _module as fairvlp_module
from tests.test_configs import small_args
from vlbias.cli import main
from vlbias.modules.fairvlp import METHODS, uses_images
from vlbias.results import read_results

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.filterwarnings("ignore"),
]

ROOT = Path(__file__).resolve().parents[1]
GPU_BF16 = ROOT / "configs" / "trainer" / "gpu_bf16.yaml"
#: suite -> the models it is measured with (one per model family the suite reads)
MEASURED = {
    "counterbias": ["albef", "vilt", "flava"],
    "mmbias": ["clip", "albef", "blip", "flava", "open_clip", "siglip", "siglip2"],
    "vlstereoset": ["clip", "albef", "blip", "flava", "open_clip", "siglip", "siglip2"],
    "entity_association": ["albef", "vilt", "flava", "visualbert", "lxmert"],
    "retrieval_bias": ["clip"],
}
#: quick settings of each suite's own options
OPTIONS = {
    "counterbias": "{statistics: {n_permutations: 200, n_bootstrap: 50}, attack: {steps: 1}}",
    "mmbias": "{statistics: {n_permutations: 200, n_bootstrap: 50}}",
}
PAIRS = [(suite, model) for suite, models in MEASURED.items() for model in models]


@pytest.mark.parametrize("suite, model", PAIRS, ids=[f"{suite}-{model}" for suite, model in PAIRS])
def test_every_suite_measures_on_the_gpu(suite, model, tmp_path, run_cli):
    options = OPTIONS.get(suite, "{statistics: {n_bootstrap: 50}}")
    code, _, err = run_cli(
        ["measure", "--suite", suite, "--model", model, "--tiny", "--device", "cuda", "--out", str(tmp_path),
         "--biasworld.eval_per_combination", "2", "--suite_options", options]
    )  # fmt: skip
    assert code == 0, err
    results = read_results(tmp_path / f"{suite}.json")
    assert results.n_items > 0 and results.metrics


#: the experiments on BiasWorld (the COCO and Flickr30K ones need their data and pretrained vocabularies)
BIASWORLD_EXPERIMENTS = sorted(
    path for path in (ROOT / "configs" / "experiment").glob("*.yaml") if "BiasWorldDataModule" in path.read_text()
)


def _experiment_args(experiment: Path, tmp_path: Path) -> list[str]:
    """``vlbias fit`` (``predict`` for pruning) of ``experiment`` for two training steps and one validation step, on
    the small BiasWorld of :func:`tests.test_configs.small_args`."""
    subcommand = "predict" if experiment.stem.startswith("prune") else "fit"
    limits = ["--trainer.limit_predict_batches", "2"] if subcommand == "predict" else [
        "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "1"
    ]  # fmt: skip
    return [subcommand, "--config", str(experiment), *small_args((experiment,), tmp_path), *limits,
            "--trainer.default_root_dir", str(tmp_path), "--trainer.enable_progress_bar", "false"]  # fmt: skip


@pytest.mark.parametrize("experiment", BIASWORLD_EXPERIMENTS, ids=lambda p: p.stem)
def test_every_biasworld_experiment_fits_on_the_gpu_in_bf16(experiment, tmp_path):
    main([*_experiment_args(experiment, tmp_path), "--config", str(GPU_BF16)])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_fairvlp_method_steps_on_the_gpu_under_bf16_autocast(method):
    policy = {"image_counterfactuals": "every_step"} if uses_images(method) else {}
    module = fairvlp_module(method, itc_weight=1.0, **policy).cuda()
    logged: dict[str, float] = {}
    module.log = lambda name, value, **_: logged.__setitem__(name, float(value))
    batch = {key: value.cuda() if isinstance(value, torch.Tensor) else value for key, value in fairvlp_batch(8).items()}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = module.training_step(batch, 0)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in module.parameters())
    assert logged.get("train/cf_image_attacked", 0.0) == (1.0 if uses_images(method) else 0.0)
