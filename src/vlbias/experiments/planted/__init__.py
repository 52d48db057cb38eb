"""Planted bias is recovered: each module trains a tiny model on BiasWorld at several bias strengths and seeds and
prints what one suite measures on BiasWorld's balanced test split (``scripts/biasworld_*sanity.py``): a measure
that works grows with the strength planted."""
