"""Write a synthetic corpus in the Karpathy COCO layout (JPEG images at COCO's sizes, 5 captions each, drawn from
BiasWorld with a planted bias), resumably and in several processes when asked.

    python scripts/make_synthetic_coco.py --out data/coco_synthetic [--n_images 20000] [--processes 8]

Then ``vlbias fit --config configs/experiment/retrieval_coco.yaml --data.init_args.annotations
data/coco_synthetic/dataset_coco.json --data.init_args.image_root data/coco_synthetic/images``.

What it writes: :mod:`vlbias.data.synthetic_coco`, :mod:`vlbias.experiments.make_synthetic_coco`; ``--help`` lists the options.
"""

from vlbias.experiments.command_line import run
from vlbias.experiments.make_synthetic_coco import make_synthetic_coco

if __name__ == "__main__":
    run(make_synthetic_coco)
