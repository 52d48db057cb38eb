"""Data files shipped with vlbias (read with ``importlib.resources``)."""
