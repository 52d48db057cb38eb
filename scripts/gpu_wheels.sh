#!/usr/bin/env bash
# Download, into .whl/, the wheels of vlbias's dependencies that the GPU machine's image lacks (its Python is 3.12
# and it has torch, lightning, torchmetrics, peft, accelerate, pandas, pyarrow, scikit-learn, matplotlib, scipy;
gpu_check.sh installs them./gpu_check.sh installs them. Run from the repository root, on a machine with PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
mkdir -p .whl
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" \
  -d .whl \
  transformers==5.25.0 huggingface_hub==2.4.0 tokenizers==0.23.3 \
  open_clip_torch==3.3.0 ftfy==6.3.1 wcwidth==0.7.0 torchattacks==3.5.1 \
  jsonargparse==4.53.0 docstring_parser==0.18.0 typeshed_client==2.15.0 \
  datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
  fairlearn==0.15.0 num2words==0.5.14 vaderSentiment==3.3.2
du -sh .whl
