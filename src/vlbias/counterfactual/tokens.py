"""Token-aligned text counterfactuals for training (FairVLP, Zhang et al., 2022, Sec. 5.1).

FairVLP compares the masked-word predictions of L_f and L_cf position by position, so L_cf is made on
the token ids: every bias word that the tokenizer reads as *one known piece*, and whose lexicon
counterpart is also one known piece, is replaced by the counterpart's id. Lengths, padding and masked
positions are then identical in both texts by construction.

A swap that would change the number of word pieces (``gentleman`` -> ``la ##dy``), or a bias word the
tokenizer does not know, cannot keep the alignment. Such a text gets *no* text counterfactual (rather
than a half-swapped one): :meth:`TokenSwap.aligned` is false when the text holds more lexicon words
than swappable tokens, and the caller counts it.

Example:
    >>> from vlbias.counterfactual.text import SwapLexicon
    >>> from vlbias.models.vocab import word_tokenizer
    >>> tokenizer = word_tokenizer(["the", "man", "woman", "is", "cooking"])
    >>> swap = TokenSwap(SwapLexicon([("man", "woman")]), tokenizer)
    >>> ids = tokenizer(["the man is cooking"], return_tensors="pt")["input_ids"]
    >>> tokenizer.decode(swap.swap(ids)[0], skip_special_tokens=True)
    'the woman is cooking'
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from vlbias.counterfactual.text import SwapLexicon


def _single_piece(tokenizer, word: str) -> int | None:
    """The id of ``word`` if the tokenizer reads it as one known piece, else ``None``."""
    pieces = tokenizer(word, add_special_tokens=False)["input_ids"]
    return pieces[0] if len(pieces) == 1 and pieces[0] != tokenizer.unk_token_id else None


class TokenSwap:
    """Id-level bias-word swaps of ``lexicon`` for ``tokenizer`` (module docstring).

    Attributes:
        unswappable: lexicon words (lower case) that cannot be swapped in place with this tokenizer.
    """

    def __init__(self, lexicon: SwapLexicon, tokenizer) -> None:
        self.lexicon = lexicon
        self.table = torch.arange(len(tokenizer))  # id -> swapped id
        self.unswappable: set[str] = set()
        for word, other in lexicon.mapping.items():
            for form, other_form in ((word, other), (word.title(), other.title()), (word.upper(), other.upper())):
                source, target = _single_piece(tokenizer, form), _single_piece(tokenizer, other_form)
                if source is not None and target is not None:
                    self.table[source] = target
                elif form == word:
                    self.unswappable.add(word)

    def swap(self, input_ids: Tensor) -> Tensor:
        """``input_ids`` ``(B, T)`` with every swappable bias-word id replaced by its counterpart's."""
        return self.table.to(input_ids.device)[input_ids]

    def is_bias(self, input_ids: Tensor) -> Tensor:
        """``(B, T)`` bool: the ids that :meth:`swap` changes."""
        return self.swap(input_ids) != input_ids

    def aligned(self, texts: Sequence[str], input_ids: Tensor) -> Tensor:
        """``(B,)`` bool: text ``b`` has at least one bias word and :meth:`swap` replaces all of them in place."""
        words = torch.tensor([self.lexicon.n_swaps(text) for text in texts])
        tokens = self.is_bias(input_ids).sum(dim=1).cpu()
        return (words > 0) & (tokens == words)
