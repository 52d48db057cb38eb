"""open_clip's own tokenizer, behind the part of the ``transformers`` tokenizer interface that vlbias reads.

An open_clip model reads what its tokenizer returns (``open_clip.get_tokenizer(name)(texts)``): ``(B, L)`` token ids
with the start and end tokens, padded, and cut, to the text tower's context length ``L``. That is what
:meth:`OpenCLIPTokenizer.encode` returns, and all that the model sees. Suites also ask a model's tokenizer how it
reads each text (:mod:`vlbias.models.unseen_text`: no token, only unknown tokens, longer than the model's maximum),
through the ``transformers`` interface; :class:`OpenCLIPTokenizer` answers those questions for open_clip's two
kinds of tokenizer:

* CLIP's byte-level BPE (``open_clip.SimpleTokenizer``: OpenAI, LAION, DataComp, MetaCLIP, EVA ...): the pieces of
  a text are ``SimpleTokenizer.encode(text)`` (after its own cleaning), two special tokens are added, and no token
  is unknown (every byte has one);
* a ``transformers`` tokenizer inside open_clip's wrapper (``HFTokenizer``, ``SigLipTokenizer``: the models whose
  text tower is a Hugging Face model, and open_clip's SigLIPs): the pieces, special tokens and unknown token are
  that tokenizer's. open_clip cleans the text before this tokenizer (whitespace; SigLIP also drops punctuation), so
  these counts are of the text as written and can differ from the model's by the cleaned-away characters.

Neither kind has a mask token (``mask_token`` is ``None``): open_clip models have no masked-LM head.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor


class OpenCLIPTokenizer:
    """``tokenize`` (an open_clip tokenizer) with the questions vlbias asks of a tokenizer.

    Example:
        >>> from open_clip import SimpleTokenizer
        >>> tokenizer = OpenCLIPTokenizer(SimpleTokenizer(context_length=8))
        >>> tokenizer.encode(["a man is cooking"]).shape, tokenizer.max_length
        (torch.Size([1, 8]), 8)
        >>> [len(ids) for ids in tokenizer(["a man is cooking", " "], add_special_tokens=False)["input_ids"]]
        [4, 0]
    """

    mask_token = None
    mask_token_id = None

    def __init__(self, tokenize) -> None:
        self.tokenize = tokenize
        self.max_length: int = tokenize.context_length
        self._hf = getattr(tokenize, "tokenizer", None)  # HFTokenizer, SigLipTokenizer: the transformers tokenizer
        self.unk_token = None if self._hf is None else self._hf.unk_token
        self.unk_token_id = None if self._hf is None else self._hf.unk_token_id

    def encode(self, texts: Sequence[str]) -> Tensor:
        """What the model reads: open_clip's ``tokenize(texts)``, ``(B, max_length)`` token ids."""
        return self.tokenize(list(texts))

    def __call__(self, texts: Sequence[str], add_special_tokens: bool = True, verbose: bool = False) -> dict:
        """``{"input_ids": [ids of each text]}``, not padded and not cut, with the special tokens open_clip adds when
        ``add_special_tokens`` (``verbose`` is the ``transformers`` flag and changes nothing)."""
        if self._hf is not None:
            return {"input_ids": self._hf(list(texts), add_special_tokens=add_special_tokens)["input_ids"]}
        pieces = [self.tokenize.encode(text) for text in texts]
        if add_special_tokens:
            pieces = [[self.tokenize.sot_token_id, *ids, self.tokenize.eot_token_id] for ids in pieces]
        return {"input_ids": pieces}

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        """The special tokens added to one text: start and end of text for CLIP's BPE."""
        return 2 if self._hf is None else self._hf.num_special_tokens_to_add(pair=pair)

    def __len__(self) -> int:
        """The vocabulary size."""
        return self.tokenize.vocab_size if self._hf is None else len(self._hf)

    def save_pretrained(self, directory) -> None:
        """Write the ``transformers`` tokenizer's files (open_clip's ``local-dir:`` reads them); CLIP's BPE ships
        with open_clip and writes nothing."""
        if self._hf is not None:
            self.tokenize.save_pretrained(directory)
