"""Download VLStereoSet's images (URLs only in the CSV) into a local folder, for machines with internet.

    python scripts/fetch_vlstereoset_images.py --csv ../shared/data/vlstereoset/VLStereoSet.csv --out data/vlstereoset/images

Exit status: 0 when every image is present, 1 when some failed.

What it computes and prints: :mod:`vlbias.experiments.fetch_vlstereoset_images`; ``--help`` lists the options.
"""

import sys

from vlbias.experiments.command_line import run
from vlbias.experiments.fetch_vlstereoset_images import fetch_vlstereoset_images

if __name__ == "__main__":
    sys.exit(run(fetch_vlstereoset_images))
