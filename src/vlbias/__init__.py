"""vlbias: measure and mitigate social bias in pretrained vision-language models."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vlbias")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"
