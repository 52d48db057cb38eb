"""The rules for items repeated in the stimulus sets of an association test (SEAT and Grounded-WEAT specs,
:mod:`vlbias.data.seat`; MMBias phrases, :mod:`vlbias.data.mmbias`): an item listed twice in a set is kept
once, and an item in both sets of a pair (both targets, or both attributes) can stand for neither, so it is
dropped from both. Each is recorded, ``{"item": ..., "reason": ...}``, in the reader's ``duplicates``.
"""

from __future__ import annotations


def repeated(values: list) -> list:
    """The values that occur more than once in ``values``, each once, in order of their second occurrence.

    Example:
        >>> repeated(["a", "b", "a", "c", "b", "a"])
        ['a', 'b']
    """
    seen, found = set(), []
    for value in values:
        if value in seen and value not in found:
            found.append(value)
        seen.add(value)
    return found


def kept_once(values: list, where: str, duplicates: list[dict[str, str]]) -> list:
    """``values`` with each repeat kept once, in order; each repeat recorded in ``duplicates`` as
    ``"<where>: <value>"`` (``where`` names the set, e.g. ``"weat1/targ1"``).

    Example:
        >>> found = []
        >>> kept_once(["he", "him", "he"], "t/targ1", found), found
        (['he', 'him'], [{'item': "t/targ1: 'he'", 'reason': 'listed more than once in the set; kept once'}])
    """
    duplicates += [
        {"item": f"{where}: {value!r}", "reason": "listed more than once in the set; kept once"}
        for value in repeated(values)
    ]
    return list(dict.fromkeys(values))


def dropped_from_both(first: list, second: list) -> tuple[list, list, list]:
    """``first`` and ``second`` without the items they share, and the shared items, sorted.

    Example:
        >>> dropped_from_both(["he", "man", "boy"], ["she", "man"])
        (['he', 'boy'], ['she'], ['man'])
    """
    shared = set(first) & set(second)
    return [v for v in first if v not in shared], [v for v in second if v not in shared], sorted(shared)


def drop_shared(
    first: list, second: list, names: tuple[str, str], where: str, duplicates: list[dict[str, str]]
) -> tuple[list, list]:
    """:func:`dropped_from_both` of the pair of sets named ``names``, each shared item recorded in ``duplicates``
    as ``"<where>: <item>"`` (``where`` names the pair, e.g. ``"weat1/targ1+targ2"``)."""
    kept_first, kept_second, shared = dropped_from_both(first, second)
    duplicates += [
        {"item": f"{where}: {value!r}", "reason": f"in both {names[0]} and {names[1]}; dropped from both"}
        for value in shared
    ]
    return kept_first, kept_second
