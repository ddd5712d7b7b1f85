"""A dependency-free token estimator that errs on the high side of cl100k.

Budgets (the brief, search's max_tokens) are promises about what lands in a model's context, so the
estimate must not come in low. It counts pieces the way BPE vocabularies tend to cut text: a run of
letters costs one token per six letters (common words are one token; runs with two or more capitals,
like ids, one per two), digits one per three, a run of
punctuation one per two marks, a line break with its indentation one, other white space one per four
characters beyond a single space, and any other character one token (two above U+07FF, three outside the BMP).

tests/test_tokens.py holds it against cl100k (tiktoken) on fixed samples of English prose, code and
JSON: never more than 10% below, and measured at 1.0 to 1.2 times the real count.
"""

from __future__ import annotations

import re

# The same pieces, one class at a time, counted in C: a run of letters costs one token per six, so
# it is as many tokens as there are chunks of up to six letters in it (likewise for digits and marks).
_LETTERS6 = re.compile(r"[A-Za-z]{1,6}")
_CAPS_RUN = re.compile(r"(?<![A-Za-z])[a-z]*[A-Z][a-z]*[A-Z][A-Za-z]*")  # a whole letter run with 2+ capitals
_DIGITS3 = re.compile(r"[0-9]{1,3}")
# A line break with its indentation, or a run of white space that costs (two or more, or a tab).
_BREAK_OR_SPACES = re.compile(r"\n[ \t]*|[ \t]{2,}|\t")
_PUNCT2 = re.compile(r"[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]{1,2}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")  # (a class of the ranges above U+07FF takes ~9 ms to compile)


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (0 only for the empty string)."""
    # Lower-case and Capitalised words are cheap (one token per six letters); ALL-CAPS and mixed-case
    # runs (ids, hashes, base32) split into pieces of about two letters.
    n = len(_LETTERS6.findall(text))
    n += sum((len(w) + 1) // 2 - (len(w) + 5) // 6 for w in _CAPS_RUN.findall(text))
    n += len(_DIGITS3.findall(text))
    n += text.count("\n")  # a line break with its indentation
    n += sum((len(w) + 3) // 4 for w in _BREAK_OR_SPACES.findall(text) if w[0] != "\n")
    n += len(_PUNCT2.findall(text))
    n += len(_CONTROL.findall(text))
    if not text.isascii():
        for c in _NON_ASCII.findall(text):
            o = ord(c)
            n += 1 if o < 0x800 else 2 if o < 0x10000 else 3
    return n
