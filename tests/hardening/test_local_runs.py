"""The paper-scale experiment configs run where the user is: on a CPU, with local data and a local checkpoint, given
``--config configs/trainer/cpu.yaml`` and only the data paths and the checkpoint on the command line; and a
retrieval setting that does not fit the data is refused in one line before the run starts, leaving no run folder."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.behaviour.snapshot import _tiny_words
from tests.data.corpus import write_karpathy_corpus
from vlbias.models.families.albef import ALBEFAdapter
from vlbias.models.vocab import word_tokenizer

ROOT = Path(__file__).resolve().parents[2]
CPU = ROOT / "configs" / "trainer" / "cpu.yaml"


def local_inputs(root: Path) -> list[str]:
    """The tiny Karpathy corpus and a tiny ALBEF saved as a local checkpoint (its words: the tiny models' and the
    swap lexicon's, which FairVLP's counterfactuals use), as the command-line options that point to them."""
    corpus = write_karpathy_corpus(root / "data")
    ALBEFAdapter.tiny(tokenizer=word_tokenizer(_tiny_words())).save_pretrained(root / "albef")
    return [
        "--data.init_args.annotations", str(corpus),
        "--data.init_args.image_root", str(root / "data" / "images"),
        "--model.init_args.model.checkpoint", str(root / "albef"),
    ]  # fmt: skip


@pytest.mark.slow  # 5 epochs of tiny FairVLP in a new Python: ~20 s on 2 cores
def test_the_fairvlp_coco_config_runs_on_a_cpu_with_local_data_and_checkpoint(tmp_path):
    """The COCO FairVLP config (8 GPUs, bf16, DDP, the official ALBEF URL) trains its 5 epochs on this CPU and
    exports the model, given only the CPU delta, the data paths and the checkpoint."""
    config = ROOT / "configs" / "experiment" / "fairvlp_coco.yaml"
    argv = ["fit", "--config", str(config), "--config", str(CPU), *local_inputs(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "vlbias.cli", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "fairvlp_coco" / "version_0"
    assert f"vlbias: wrote {run.relative_to(tmp_path)}" in done.stderr
    assert (run / "model" / "model.pth").is_file() and len((run / "metrics.csv").read_text().splitlines()) > 1


def test_the_retrieval_config_refuses_k_above_the_validation_gallery_before_the_run(tmp_path, run_cli, monkeypatch):
    """Flickr30K's k_test 128 and R@5, R@10 against the tiny corpus's 2 val images: one line naming both sizes,
    exit status 2, before anything trains or evaluates, and the run folder the logger had made is gone."""
    config = ROOT / "configs" / "experiment" / "retrieval_flickr30k.yaml"
    argv = ["fit", "--config", str(config), "--config", str(CPU), *local_inputs(tmp_path)]
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(argv)
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        "vlbias: error: Retrieval option(s) ks [5, 10] and k_test 128 exceed the val split's smaller gallery: "
        "2 images, 3 captions; set `model.init_args.ks` and `model.init_args.k_test` to at most 2."
    )
    assert not (tmp_path / "runs" / "retrieval_flickr30k").exists()
