"""The data path: caption pairs decoded, resized and collated by vlbias's caption DataLoader with 0, 1, ... workers,
against the raw PIL decode of the same files, resident memory at two corpus sizes, and the workers a GPU step needs.

    python scripts/make_synthetic_coco.py --out data/coco_synthetic --n_images 2000
    python scripts/bench_dataloader.py --annotations data/coco_synthetic/dataset_coco.json [--gpu_samples_per_s 400]

What it computes and prints: :mod:`vlbias.experiments.bench.dataloader`; ``--help`` lists the options.
"""

from vlbias.experiments.bench.dataloader import bench_dataloader
from vlbias.experiments.command_line import run

if __name__ == "__main__":
    run(bench_dataloader)
