"""Redact well-known credential shapes before a record's bytes are written anywhere.

A memory is replayed into every later session, so a secret stored once leaks forever. The patterns
are deliberately specific (prefixes and assignments), so ordinary prose and code survive intact.
Opt out per store with RETAINED_REDACT=off (documented in README.md).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_ASSIGN_KEY = r"[\w.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)[\w.-]*"

#: (kind, pattern, group holding the secret or 0 for the whole match). Order matters: specific first.
PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    (
        "private_key_block",
        re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*\Z)", re.S),
        0,
    ),
    # The secret access key that follows its key id (in a pasted credentials pair, a CLI line, a table):
    # 40 characters of base64 with both cases, so that a git SHA (hex) never matches.
    (
        "aws_secret_access_key",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b[^\n]{0,80}?(?<![A-Za-z0-9/+=])"
                   r"((?=[A-Za-z0-9/+=]*[a-z])(?=[A-Za-z0-9/+=]*[A-Z])[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        1,
    ),
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"), 0),
    (
        "aws_secret_access_key",
        re.compile(r"(?i)(aws[\w-]{0,20}?(?:secret|sk)[\w-]{0,20}[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        2,
    ),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"), 0),
    ("gitlab_token", re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,}"), 0),
    ("slack_token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), 0),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"), 0),
    ("anthropic_api_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), 0),
    ("openai_api_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), 0),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"), 0),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    ("pypi_token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}"), 0),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), 0),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), 0),
    # A bearer or basic credential in a header, e.g. a curl line: the header name gives it away.
    ("authorization_header", re.compile(r"(?i)(\bauthorization\s*:\s*(?:bearer|basic|token)\s+)"
                                        r"(?![$<{%]|\[REDACTED)([A-Za-z0-9._~+/=-]{8,})"), 2),
    ("bearer_token", re.compile(r"(?i)(\bbearer\s+)(?![$<{%]|\[REDACTED)"
                                r"((?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"), 2),
    # curl -u user:password, --user user:password
    ("cli_password", re.compile(r"((?:^|\s)(?:-u|--user)\s+['\"]?[^\s:'\"$]+:)(?![$<{%])([^\s'\"]{3,})"), 2),
    # Keys inside connection strings (Azure storage and service bus, ODBC): Name=value;...
    ("connection_string_key", re.compile(r"(?i)((?:^|[;\s\"'])(?:AccountKey|SharedAccessKey|SharedAccessSignature"
                                         r"|Pwd)=)(?![$<{%]|\[REDACTED)([^;\s\"']{6,})"), 2),
    ("url_password", re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/?#@\"']+:)([^\s@/\"']+)(@)"), 2),
    (
        "password_assignment",
        re.compile(
            r"(?i)(\b" + _ASSIGN_KEY + r"[\"']?\s*(?:=|:(?=\s*[\"']))\s*[\"']?)"
            r"(?![\"'$<\[{]|\s|REDACTED)([^\s\"',;&)}\]]{3,})"
        ),
        2,
    ),
]


def redact_text(text: str) -> tuple[str, Counter[str]]:
    """Return the text with secrets replaced by `[REDACTED:kind]` and a count per kind."""
    found: Counter[str] = Counter()
    for kind, pattern, group in PATTERNS:

        def _sub(m: re.Match[str], kind: str = kind, group: int = group) -> str:
            if kind == "password_assignment" and _looks_like_code(m):
                return m.group(0)
            found[kind] += 1
            if group == 0:
                return f"[REDACTED:{kind}]"
            whole = m.group(0)
            start, end = m.start(group) - m.start(0), m.end(group) - m.start(0)
            return whole[:start] + f"[REDACTED:{kind}]" + whole[end:]

        text = pattern.sub(_sub, text)
    return text, found


_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z")


def _looks_like_code(m: re.Match[str]) -> bool:
    """`password=password` or `token=self.token` pass a variable along; they hold no secret."""
    key = re.match(r"[\w.-]+", m.group(1))
    value = m.group(2)
    return bool(_DOTTED.match(value)) or (key is not None and value.lower() == key.group(0).lower())


def redact_value(value: Any, found: Counter[str]) -> Any:
    """Redact every string inside a JSON value (keys are left alone)."""
    if isinstance(value, str):
        clean, n = redact_text(value)
        found.update(n)
        return clean
    if isinstance(value, list):
        return [redact_value(v, found) for v in value]
    if isinstance(value, dict):
        return {k: redact_value(v, found) for k, v in value.items()}
    return value


def describe(found: Counter[str]) -> str:
    """'redacted 2 secrets before writing: 1 github_token, 1 password_assignment' (kinds, never values)."""
    total = sum(found.values())
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(found.items()))
    return f"redacted {total} secret{'s' if total != 1 else ''} before writing: {kinds}"
