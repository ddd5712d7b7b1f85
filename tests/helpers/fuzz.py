"""A seeded generator of hostile JSON (and JSON-shaped bytes) for the fuzz tests of every reader.

hypothesis is not among the test dependencies, so this is a small generator of its own: each family
of mutation (depth, size, encoding, type, structure) turns a valid document into many invalid or
unusual ones, the same ones on every run for a given seed, so a failure can be replayed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

FAMILIES = ("depth", "size", "encoding", "type", "structure")

#: Values every typed slot is tried with: wrong JSON types, edge numbers, numbers JSON cannot spell.
ODD_VALUES: list[bytes] = [b"null", b"true", b"false", b"0", b"-1", b"1.5", b"-0.0", b"1e999", b"-1e999", b"NaN",
                           b"Infinity", b'""', b'"x"', b"[]", b"{}", b"[1]", b'{"a":1}', b"9" * 5000,
                           b'"\\ud800"', b'"\\u0000"', b'"' + "\u2028".encode() + b'"']


def deep(depth: int, kind: str = "array", closed: bool = True) -> bytes:
    """A value nested `depth` levels: arrays, objects or both in turn."""
    if kind == "array":
        return b"[" * depth + (b"]" * depth if closed else b"")
    if kind == "object":
        return b'{"a":' * depth + b"1" + (b"}" * depth if closed else b"")
    opens, closes = [], []
    for i in range(depth):
        opens.append(b"[" if i % 2 else b'{"a":')
        closes.append(b"]" if i % 2 else b"}")
    return b"".join(opens) + b"0" + (b"".join(reversed(closes)) if closed else b"")


class Mutator:
    """Mutations of one JSON document, given as text with a slot marker `@` where values go."""

    def __init__(self, template: bytes, seed: int = 17) -> None:
        assert template.count(b"@") == 1, "the template marks one slot with @"
        self.template = template
        self.rng = random.Random(seed)

    def at(self, value: bytes) -> bytes:
        return self.template.replace(b"@", value)

    def family(self, name: str, size_cap: int = 2 * 1024 * 1024) -> Iterator[tuple[str, bytes]]:
        """(label, document) for each mutation of the family."""
        yield from getattr(self, f"_{name}")(size_cap)

    def _depth(self, _cap: int) -> Iterator[tuple[str, bytes]]:
        for depth in (300, 1000, 5000, 50_000):
            for kind in ("array", "object", "mixed"):
                yield f"{kind} {depth} deep", self.at(deep(depth, kind))
        yield "arrays 20,000 deep, unclosed", self.at(deep(20_000, "array", closed=False))

    def _size(self, cap: int) -> Iterator[tuple[str, bytes]]:
        yield "a string of the size cap", self.at(b'"' + b"x" * cap + b'"')
        yield "an array of 200,000 numbers", self.at(b"[" + b"1," * 200_000 + b"1]")
        yield "an object of 50,000 keys", self.at(b"{" + b",".join(b'"k%d":1' % i for i in range(50_000)) + b"}")
        yield "a key of 100,000 characters", self.at(b'{"' + b"k" * 100_000 + b'":1}')
        yield "a number of 5,000 digits", self.at(b"9" * 5000)
        yield "10,000 escapes", self.at(b'"' + b"\\u00e9" * 10_000 + b'"')

    def _encoding(self, _cap: int) -> Iterator[tuple[str, bytes]]:
        for label, raw in (("a 0xff byte", b"\xff"), ("an overlong NUL", b"\xc0\x80"), ("a UTF-8 surrogate", b"\xed\xa0\x80"),
                           ("a raw NUL", b"\x00"), ("a cut multibyte character", b"\xe2\x82"), ("a raw CR", b"\r"),
                           ("a raw U+2028", "\u2028".encode())):
            yield f"{label} inside a string", self.at(b'"a' + raw + b'b"')
        doc = self.at(b'"plain"')
        yield "a UTF-8 BOM first", b"\xef\xbb\xbf" + doc
        yield "UTF-16", doc.decode("utf-8").encode("utf-16")
        yield "Latin-1 text", self.at('"caf\u00e9"'.encode("latin-1"))

    def _type(self, _cap: int) -> Iterator[tuple[str, bytes]]:
        for value in ODD_VALUES:
            yield f"the value {value[:20].decode('utf-8', 'replace')}", self.at(value)

    def _structure(self, _cap: int) -> Iterator[tuple[str, bytes]]:
        doc = self.at(b'"plain"')
        for n in sorted({self.rng.randrange(1, len(doc)) for _ in range(6)}):
            yield f"cut at byte {n}", doc[:n]
        yield "trailing garbage", doc + b" }{"
        yield "two documents on one line", doc + doc
        yield "a duplicate key", doc[:-1] + b',"dup":1,"dup":2}' if doc.endswith(b"}") else doc + b"x"
        yield "a top-level array", b"[" + doc + b"]"
        yield "a top-level string", json.dumps(doc.decode("utf-8", "replace")).encode()
        yield "a top-level number", b"42"
        yield "only white space", b"   \t "
        yield "a comment", b"// a comment\n" + doc if b"\n" not in doc else doc


def sample(mutator: Mutator, families: tuple[str, ...] = FAMILIES, per_family: int | None = None,
           size_cap: int = 2 * 1024 * 1024) -> list[tuple[str, str, bytes]]:
    """(family, label, document) for the families asked, at most `per_family` of each (seeded)."""
    out = []
    for name in families:
        items = list(mutator.family(name, size_cap))
        if per_family is not None and len(items) > per_family:
            items = mutator.rng.sample(items, per_family)
        out += [(name, label, doc) for label, doc in items]
    return out


def one_line(docs: list[tuple[str, str, bytes]]) -> list[tuple[str, str, bytes]]:
    """Only the documents that stay one line (what a JSONL reader is handed: it splits on 0x0A)."""
    return [(f, label, d) for f, label, d in docs if b"\n" not in d]


def as_value(doc: bytes) -> Any:
    """The document parsed, when Python can (for readers handed a value, not bytes); else None."""
    try:
        return json.loads(doc)
    except (ValueError, RecursionError):
        return None
