"""BERT-uncased WordPiece in the standard library: the tokenizer of the embedded model.

Does what the model's tokenizer.json asks for (BertNormalizer with lower-casing, accent stripping
and CJK spacing; BertPreTokenizer; WordPiece with '##' continuations, [UNK] for words over 100
characters or with no piece in the vocabulary), so no tokenizer package is needed. The vocabulary is
vendored as retained/data/vocab.txt (one token a line, line number = id; Apache-2.0, see
retained/data/VOCAB-NOTICE.txt).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

VOCAB_PATH = Path(__file__).parent / "data" / "vocab.txt"
MAX_TOKENS = 256  # the model's maximum sequence length
_MAX_WORD = 100
# A record is cut before tokenising: MAX_TOKENS word pieces never need more characters than this.
MAX_CHARS = 4 * MAX_TOKENS * 4

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _punct(ch: str) -> bool:
    cp = ord(ch)
    # Every non-alphanumeric printable ASCII character counts, as in BERT, plus Unicode punctuation.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


class WordPiece:
    def __init__(self, vocab: dict[str, int], max_tokens: int = MAX_TOKENS) -> None:
        self.vocab = vocab
        self.max_tokens = max_tokens
        self.unk = vocab["[UNK]"]
        self.cls = vocab["[CLS]"]
        self.sep = vocab["[SEP]"]
        self.pad = vocab["[PAD]"]
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def load(cls, path: Path = VOCAB_PATH) -> WordPiece:
        tokens = path.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls(dict(zip(tokens, range(len(tokens)), strict=False)))

    @staticmethod
    def normalize(text: str) -> str:
        out: list[str] = []
        for ch in text:
            cp = ord(ch)
            if ch in "\t\n\r":
                out.append(" ")
                continue
            cat = unicodedata.category(ch)
            if cp == 0 or cp == 0xFFFD or cat in ("Cc", "Cf"):
                continue
            if cat == "Zs":
                out.append(" ")
            elif _cjk(cp):
                out.append(" " + ch + " ")
            else:
                out.append(ch)
        decomposed = unicodedata.normalize("NFD", "".join(out).lower())
        return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")

    @staticmethod
    def pre_tokenize(text: str) -> list[str]:
        words: list[str] = []
        for chunk in text.split():
            start = 0
            for i, ch in enumerate(chunk):
                if _punct(ch):
                    if i > start:
                        words.append(chunk[start:i])
                    words.append(ch)
                    start = i + 1
            if start < len(chunk):
                words.append(chunk[start:])
        return words

    def pieces(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids: list[int] = []
        if len(word) > _MAX_WORD:
            ids = [self.unk]
        else:
            start = 0
            while start < len(word):
                end = len(word)
                found = None
                while end > start:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    found = self.vocab.get(piece)
                    if found is not None:
                        break
                    end -= 1
                if found is None:
                    ids = [self.unk]
                    break
                ids.append(found)
                start = end
        if len(self._cache) < 50_000:
            self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """[CLS] pieces… [SEP], cut to the model's maximum length."""
        room = self.max_tokens - 2
        ids: list[int] = []
        for word in self.pre_tokenize(self.normalize(text[:MAX_CHARS])):
            ids.extend(self.pieces(word))
            if len(ids) >= room:
                break
        return [self.cls, *ids[:room], self.sep]
