"""Surface-form token categories (the paper's Table 6): :func:`token_category`, :func:`token_categories`."""
from __future__ import annotations

import unicodedata
from collections.abc import Sequence

CATEGORIES: tuple[str, ...] = (
    "lower_alpha",
    "function_word",
    "punctuation",
    "capitalized",
    "subword_alpha",
    "numeric",
    "newline_or_space",
    "eos",
    "all_caps",
    "other",
)
"""The paper's ten surface-form token categories, in the order of its Table 6."""

EOS_STRINGS: frozenset[str] = frozenset({"<|endoftext|>", "<eos>", "</s>"})
"""Token strings that count as an end-of-sequence marker."""

_FUNCTION_WORD_LIST = """
a an the this that these those
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
who whom whose which what where when why how there here
and or but nor so yet if then than because as while although though whether
of in on at to for from by with without within into onto upon about above below under over between among
through during before after against toward towards across along around behind beyond near off out up down
via per since until till like
is am are was were be been being do does did done have has had having
will would shall should can could may might must
not no also only just very too all any each some such both either neither every other another more most
one
"""
FUNCTION_WORDS: frozenset[str] = frozenset(_FUNCTION_WORD_LIST.split())
"""Lower-case English function words (determiners, pronouns, conjunctions, prepositions, auxiliaries,
negation and quantifiers), matched case-insensitively against a word-start token."""

CLITICS: frozenset[str] = frozenset({"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't"})
"""GPT-2 splits contractions and the possessive into these pieces (``"it's"`` -> ``"it" "'s"``); they are
function words, though they never carry a leading space."""

_WORD_START_MARKERS = ("Ġ", " ")  # GPT-2 byte-level BPE shows a leading space as "Ġ" (or as a real space)
_WHITESPACE_MARKERS = {"Ġ": " ", "Ċ": "\n", "ĉ": "\t", "č": "\r"}


def _is_punctuation_or_symbol(character: str) -> bool:
    return unicodedata.category(character)[0] in "PS"


def token_category(token: str) -> str:
    """The surface-form category of one BPE token string; see :func:`token_categories` for the rules."""
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, got {type(token).__name__}")
    if token in EOS_STRINGS:
        return "eos"
    surface = "".join(_WHITESPACE_MARKERS.get(character, character) for character in token)
    if surface.strip() == "":
        return "newline_or_space"
    word_start = token.startswith(_WORD_START_MARKERS)
    word = surface.strip()
    if any(character.isdigit() for character in word) and all(
        character.isdigit() or character in ".," for character in word
    ):
        return "numeric"
    if "\ufffd" in word:
        return "other"
    if all(_is_punctuation_or_symbol(character) for character in word):
        return "punctuation"
    lowered = word.lower()
    if lowered in CLITICS or (word_start and word.isalpha() and lowered in FUNCTION_WORDS):
        return "function_word"
    if not word.isalpha():
        return "other"
    if not word_start:
        return "subword_alpha"
    if len(word) >= 2 and word.isupper():
        return "all_caps"
    if word[0].isupper():
        return "capitalized"
    if word[0].islower():
        return "lower_alpha"
    return "other"


def token_categories(tokens: Sequence[str]) -> list[str]:
    """The surface-form category of each GPT-2 BPE token string, one of ``CATEGORIES``.

    A token is given as its BPE surface string, either byte-level (``"Ġthe"``, ``"Ċ"``) or decoded (``" the"``,
    ``"\\n"``). A leading ``"Ġ"`` or space marks the start of a word; the *word* is the token with its whitespace
    stripped. The first rule that matches wins:

    1. ``eos``: the token is an end-of-sequence marker (``EOS_STRINGS``, e.g. ``"<|endoftext|>"``);
    2. ``newline_or_space``: the token is only whitespace (spaces, newlines, tabs);
    3. ``numeric``: the word has a digit and only digits, ``.`` and ``,`` (``" 1997"``, ``"000"``, ``"3.5"``);
    4. ``other``: the token holds U+FFFD, i.e. it is a fragment of a multi-byte UTF-8 character that decodes to
       the replacement character;
    5. ``punctuation``: every character of the word is Unicode punctuation or a symbol (``","``, ``" @-@"``,
       ``" ="``, ``"("``);
    6. ``function_word``: a clitic (``CLITICS``, ``"'s"``) or a word-start alphabetic token whose lower-cased
       word is in ``FUNCTION_WORDS`` (``" the"``, ``" The"``, ``" I"``);
    7. ``other``: the word mixes letters with digits or punctuation (``"1st"``, ``" U.S"``);
    8. ``subword_alpha``: an alphabetic token without a leading space, i.e. the continuation of a word
       (``"ing"``, ``"Sh"`` in the middle of a word);
    9. ``all_caps``: a word-start alphabetic word of two or more letters, all upper-case (``" NASA"``);
    10. ``capitalized``: a word-start alphabetic word with an upper-case first letter (``" Paris"``, ``" M"``);
    11. ``lower_alpha``: a word-start alphabetic word with a lower-case first letter (``" city"``, ``" iPhone"``);
    12. ``other``: anything left (letters without case, e.g. CJK).

    Args:
        tokens: a sequence of ``T`` token strings.

    Returns:
        A list of ``T`` category names.
    """
    if isinstance(tokens, str):
        raise TypeError("tokens must be a sequence of token strings, got a single str")
    return [token_category(token) for token in tokens]
