"""Image-text retrieval evaluation as ALBEF/BLIP run it: ITC similarities, then the top-k candidates of
every query re-scored by the model's image-text matching head (:mod:`vlbias.retrieval.rerank`)."""

from vlbias.retrieval.rerank import candidates, rerank, rerank_per_query

__all__ = ["candidates", "rerank", "rerank_per_query"]
