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

_PIECE = re.compile(
    r"[A-Za-z]+|[0-9]+|\n[ \t]*|[ \t]+|[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+|[^\x00-\x7f]|[\x00-\x1f\x7f]"
)


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (0 only for the empty string)."""
    n = 0
    for m in _PIECE.finditer(text):
        piece = m.group(0)
        c = piece[0]
        if c.isascii() and c.isalpha():
            # Lower-case and Capitalised words are cheap; ALL-CAPS and mixed-case runs (ids, hashes,
            # base32) split into pieces of about two letters.
            if sum(1 for ch in piece if ch.isupper()) >= 2:
                n += (len(piece) + 1) // 2
            else:
                n += (len(piece) + 5) // 6
        elif c.isascii() and c.isdigit():
            n += (len(piece) + 2) // 3
        elif c == "\n":
            n += 1
        elif c == " " or c == "\t":
            n += 0 if piece == " " else (len(piece) + 3) // 4
        elif c.isascii() and c.isprintable():
            n += (len(piece) + 1) // 2
        elif c.isascii():
            n += 1
        else:
            o = ord(c)
            n += 1 if o < 0x800 else 2 if o < 0x10000 else 3
    return n
