"""Redact well-known credential shapes before a record's bytes are written anywhere.

A memory is replayed into every later session, so a secret stored once leaks forever. The patterns
are deliberately specific (prefixes and assignments), so ordinary prose and code survive intact.
Opt out per store with RETAINED_REDACT=off (documented in README.md).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

# A key that may name a secret: one of these words somewhere in it. Whether it does is decided by
# `_names_a_secret` from the key's segments (`token_expiry` holds a duration, `GITHUB_TOKEN` a token).
_ASSIGN_KEY = (r"[\w.-]*(?:password|passwd|passphrase|pwd|pass|secret|token|api[_-]?key|access[_-]?key"
               r"|private[_-]?key|secret[_-]?key|client[_-]?key|credentials?)[\w.-]*")
# A secret value's characters: anything up to white space, a quote or a delimiter of the text around it.
_VALUE = r"[^\s\"',;&)}\]]{3,}"
# ... or, after an opening quote, everything up to the closing one (`"Tr0ub4dor&3"`, `'two words'`).
_QUOTED_OR_BARE = r"""(?:(?<=")[^"\n]{3,256}?(?=")|(?<=')[^'\n]{3,256}?(?=')|""" + _VALUE + ")"
# AWS's secret access key: 40 characters of base64 with both cases, so a git SHA (hex) never matches.
_AWS_SECRET = r"(?=[A-Za-z0-9/+=]{0,39}[a-z])(?=[A-Za-z0-9/+=]{0,39}[A-Z])[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"

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
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b[^\n]{0,80}?(?<![A-Za-z0-9/+=])(" + _AWS_SECRET + ")"),
        1,
    ),
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"), 0),
    (
        "aws_secret_access_key",
        re.compile(r"(?i)(aws[\w-]{0,20}?(?:secret|sk)[\w-]{0,20}[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        2,
    ),
    # ... and with no `=` or `:` before it: `aws configure set aws_secret_access_key KEY`, "the AWS
    # secret key is KEY". Here only a mixed-case 40-character value counts.
    (
        "aws_secret_access_key",
        re.compile(r"((?i:\baws[\w .-]{0,30}?(?<![a-z])(?:secret|sk))[\w .\"'-]{0,30}?\s[\"']?)(" + _AWS_SECRET + ")"),
        2,
    ),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"), 0),
    ("gitlab_token", re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,}"), 0),
    ("slack_token", re.compile(r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,}"), 0),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}"), 0),
    # Other chat services' incoming webhooks: the URL is the credential (anyone holding it posts).
    ("chat_webhook", re.compile(
        r"https://(?:(?:canary\.|ptb\.)?discord(?:app)?\.com/api/webhooks/\d{5,}/[A-Za-z0-9_-]{20,}"
        r"|[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[^\s\"'<>]{20,}"
        r"|outlook\.office(?:365)?\.com/webhook/[^\s\"'<>]{20,}"
        r"|[A-Za-z0-9.-]+\.logic\.azure\.com(?::\d+)?/workflows/[^\s\"'<>]{0,400}?[?&]sig=[^\s\"'<>&]{10,}[^\s\"'<>]*"
        r"|chat\.googleapis\.com/v1/spaces/[^\s\"'<>]{0,400}?[?&]token=[^\s\"'<>&]{10,}[^\s\"'<>]*)"), 0),
    ("anthropic_api_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), 0),
    ("openai_api_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), 0),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"), 0),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    ("pypi_token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}"), 0),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), 0),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), 0),
    # Prefixed tokens of other services, in the shapes gitleaks' rules give them.
    ("service_token", re.compile(
        r"\b(?:shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|do[opr]_v1_[a-f0-9]{64}|dapi[a-f0-9]{32}|glsa_[A-Za-z0-9_]{32,}"
        r"|gsk_[A-Za-z0-9]{48,}|r8_[A-Za-z0-9]{36,}|lin_api_[A-Za-z0-9]{40}|hvs\.[A-Za-z0-9_-]{24,}"
        r"|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|NRAK-[A-Z0-9]{27}|sntrys_[A-Za-z0-9+/=_-]{40,}|sbp_[a-f0-9]{40}"
        r"|AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}|pul-[a-f0-9]{40}|key-[0-9a-zA-Z]{32}(?![0-9a-zA-Z])"
        r"|\d{8,10}:AA[A-Za-z0-9_-]{33}|ya29\.[0-9A-Za-z_-]{20,})"), 0),
    # A bearer or basic credential in a header, e.g. a curl line: the header name gives it away.
    ("authorization_header", re.compile(r"(?i)(\bauthorization\s*:\s*(?:bearer|basic|token)\s+)"
                                        r"(?![$<{%]|\[REDACTED)([A-Za-z0-9._~+/=-]{8,})"), 2),
    ("bearer_token", re.compile(r"(?i)(\bbearer\s+)(?![$<{%]|\[REDACTED)"
                                r"((?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"), 2),
    # curl -u user:password, --user user:password
    ("cli_password", re.compile(r"((?:^|\s)(?:-u|--user)\s+['\"]?[^\s:'\"$]+:)(?![$<{%])([^\s'\"]{3,})"), 2),
    # --password VALUE, --token VALUE (with `=`, the assignment rule below takes it)
    ("cli_password", re.compile(r"((?:^|\s)--(?:password|passwd|pass|token|api-key|secret|client-secret)\s+['\"]?)"
                                r"(?![$<{%-]|\[REDACTED)([^\s'\"]{3,})"), 2),
    # mysql -pPASSWORD (the password glued to -p; `-p` alone prompts), sshpass -p PASSWORD
    ("cli_password", re.compile(r"((?:^|[\s;&|(])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mariadb)\b"
                                r"[^\n;&|]*?\s-p)(?![$<{%]|\[REDACTED)([^\s'\"]{3,})"), 2),
    ("cli_password", re.compile(r"(\bsshpass\s+-p\s*['\"]?)(?![$<{%-]|\[REDACTED)([^\s'\"]{3,})"), 2),
    # A registry login's -p PASSWORD (docker, podman, helm registry, oras...; `--password-stdin` is not
    # one), and the password flags of other database clients: redis-cli -a, sqlcmd/bcp -P, mongo -p.
    # (Every run of the command line here is bounded: an unbounded one is tried from each occurrence of
    # the command's name to the line's end, quadratic in a line that repeats it.)
    ("cli_password", re.compile(r"((?:^|[\s;&|(])(?:(?:docker|podman|nerdctl|buildah|skopeo|oras|crane|regctl|helm"
                                r"(?:[ \t]+registry)?|finch)[ \t]+(?:[\w.=/:@-]{1,100}[ \t]+){0,4}login[ \t]"
                                r"(?:[^\n;&|]{0,160}?[ \t])?-p"
                                r"|(?:redis-cli|keydb-cli)\b[^\n;&|]{0,160}?[ \t]-a|(?:sqlcmd|bcp|osql)\b[^\n;&|]{0,160}?[ \t]-P"
                                r"|(?:mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport)\b[^\n;&|]{0,160}?[ \t]"
                                r"(?:-p|--password))[ \t]*['\"]?)(?![$<{%-]|\[REDACTED)([^\s'\"]{3,})"), 2),
    # A .netrc line: machine HOST login USER password VALUE
    ("cli_password", re.compile(r"(\b(?:machine\s+\S+|default)\s+login\s+\S+\s+password\s+)(?![$<{%])(\S{3,})"), 2),
    # ... a password line of its own (.netrc spreads an entry over lines): a value with letters and a
    # digit or sign, so that "password reset" or "password required" is prose.
    ("cli_password", re.compile(r"(?m)(^[ \t]*(?:login\s+\S+\s+)?password[ \t]+)(?![$<{%]|\[REDACTED)"
                                r"((?=\S*[A-Za-z])(?=\S*[0-9!@#%^&*_+=~?])\S{3,})[ \t]*$"), 2),
    # A .pgpass line, hostname:port:database:username:password (port a number or *).
    ("password_file_line", re.compile(r"(?m)(^[ \t]*[A-Za-z0-9*._\[\]-]+:(?:\d{1,5}|\*):[^\s:]+:[^\s:]+:)"
                                      r"(?![$<{%]|\[REDACTED)((?=\S*[^\d\s])(?:\\:|[^\s:]){3,})[ \t]*$"), 2),
    # An htpasswd (or shadow) line: user:hash, the hash of a known crypt scheme.
    ("password_file_line", re.compile(r"((?:^|\s)[\w.@-]+:)(\$(?:apr1|2[abxy]?|1|5|6|y|7|gy|sha1)\$[./A-Za-z0-9$]{8,}"
                                      r"|\{SHA\}[A-Za-z0-9+/]{27}=|\{SSHA\}[A-Za-z0-9+/]{20,}={0,2})"), 2),
    # Keys inside connection strings (Azure storage and service bus, ODBC): Name=value;...
    # (Pwd= only after a `;`: a bare PWD= is a shell's working directory, not a password.)
    ("connection_string_key", re.compile(r"(?i)((?:(?:^|[;\s\"'])(?:AccountKey|SharedAccessKey|SharedAccessSignature)"
                                         r"|;\s*Pwd)=)(?![$<{%]|\[REDACTED)([^;\s\"']{6,})"), 2),
    # (the user may be empty: redis://:password@host)
    ("url_password", re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/?#@\"']*:)(?![$<{%]|\[REDACTED)([^\s@/\"']+)(@)"), 2),
    # Prose: "the admin password is hunter2", "pw is X", "root password for staging was 'two words'".
    # Bare, the value needs letters and a digit or sign ("the password is wrong" is prose); quoted, anything.
    ("password_prose", re.compile(
        r"(?i)(\b(?:password|passwd|passphrase|passcode|pw|pwd)(?:\s+(?:for|of|on|to)\s+(?:the\s+)?[\w.@/-]+)?"
        r"\s*(?:\s(?:is|was)(?:\s+(?:now|still|set\s+to|changed\s+to))?|:)\s+)(?![$<{%]|\[REDACTED)"
        r"(?:[\"'`](?![$<{%]|\[REDACTED)([^\"'`\n]{3,128}?)[\"'`]"
        r"|((?=[^\s\"'`]*[A-Za-z])(?=[^\s\"'`]*[0-9!@#%^&*_+=~?])[^\s\"'`]{3,128}?)(?=[.,;:!?)]*(?:[\s\"'`]|\Z)))"), -1),
    (
        "password_assignment",
        # `=`, or `:` before a quoted value or one with both letters and digits (YAML, headers); not a
        # `:` before prose ("password: reset it by mail").
        re.compile(
            r"(?i)(\b" + _ASSIGN_KEY
            + r"[\"']?\s*(?:=|:(?=\s*[\"'])|:(?=\s*(?=[^\s\"']*[a-z])(?=[^\s\"']*\d)[^\s\"']{6}))\s*[\"']?)"
            r"(?![\"'$<\[{]|\s|REDACTED)(" + _QUOTED_OR_BARE + ")"
        ),
        2,
    ),
]


#: Per pattern of PATTERNS (same order): strings one of which every match holds, and whether they are
#: looked for in the case-folded text (the pattern ignores case). A text holding none of them cannot
#: match, so the pattern is not run: most text holds no secret, and the patterns are most of a
#: write's cost. `tests/test_secrets.py` checks that every match of the corpora passes its gate.
GATES: list[tuple[tuple[str, ...], bool]] = [
    (("-----BEGIN",), False),
    (("AKIA", "ASIA", "ABIA", "ACCA"), False),
    (("AKIA", "ASIA", "ABIA", "ACCA"), False),
    (("aws",), True),
    (("aws",), True),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), False),
    (("gl",), False),
    (("xox", "xapp"), False),
    (("hooks.slack.com",), False),
    (("discord", "webhook", "logic.azure", "chat.googleapis"), False),
    (("sk-ant-",), False),
    (("sk-",), False),
    (("eyJ",), False),
    (("AIza",), False),
    (("_live_", "_test_"), False),
    (("npm_",), False),
    (("pypi-AgE",), False),
    (("hf_",), False),
    (("SG.",), False),
    (("shp", "_v1_", "dapi", "glsa_", "gsk_", "r8_", "lin_api_", "hvs.", "PMAK-", "NRAK-", "sntrys_", "sbp_",
      "AGE-SECRET-KEY-1", "pul-", "key-", ":AA", "ya29."), False),
    (("authorization",), True),
    (("bearer",), True),
    (("-u",), False),
    (("--",), False),
    (("-p",), False),
    (("sshpass",), False),
    (("login", "redis-cli", "keydb-cli", "sqlcmd", "bcp", "osql", "mongo"), False),
    (("machine", "default"), False),
    (("password",), False),
    ((":",), False),
    (("$apr1$", "$2", "$1$", "$5$", "$6$", "$y$", "$7$", "$gy$", "$sha1$", "{SHA}", "{SSHA}"), False),
    (("accountkey", "sharedaccess", "pwd"), True),
    (("://",), False),
    (("pass", "pw"), True),
    (("pass", "pwd", "secret", "token", "key", "credential"), True),
]
# What `(?i)` lets match an ASCII letter besides its two cases (dotted and dotless I, long s, the
# Kelvin sign), mapped to it, so that a folded gate is looked for in text the pattern would match.
_FOLD_EXTRA = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def _folded(text: str) -> str:
    return text.lower().translate(_FOLD_EXTRA)


def redact_text(text: str, gated: bool = True) -> tuple[str, Counter[str]]:
    """Return the text with secrets replaced by `[REDACTED:kind]` and a count per kind.
    (`gated=False` runs every pattern, for the test that the gates skip none that would match.)"""
    found: Counter[str] = Counter()
    folded: str | None = None
    for (kind, pattern, group), (needles, fold) in zip(PATTERNS, GATES, strict=True):
        if gated:
            if fold:
                if folded is None:
                    folded = _folded(text)
                hay = folded
            else:
                hay = text
            for needle in needles:
                if needle in hay:
                    break
            else:
                continue

        def _sub(m: re.Match[str], kind: str = kind, group: int = group) -> str:
            if kind == "password_assignment" and not _assigns_a_secret(m):
                return m.group(0)
            if kind == "password_prose" and not _may_be_secret(m.group(2) or m.group(3)):
                return m.group(0)
            if group < 0:  # the secret is in whichever of the alternative groups matched
                group = 2 if m.group(2) is not None else 3
            found[kind] += 1
            if group == 0:
                return f"[REDACTED:{kind}]"
            whole = m.group(0)
            start, end = m.start(group) - m.start(0), m.end(group) - m.start(0)
            return whole[:start] + f"[REDACTED:{kind}]" + whole[end:]

        text, n = pattern.subn(_sub, text)
        if n:
            folded = None  # the text changed: fold it again for the next gate
    return text, found


_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z")
_CALL = re.compile(r"[A-Za-z_][\w.]*[(\[]")  # getpass(), os.environ[...]: code that fetches the secret
_SEGMENTS = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])")
#: Key segments that hold a secret on their own ...
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "apikey",
                           "accesskey", "privatekey", "secretkey", "credential", "credentials"})
#: ... and the words before `key` that make it one (api_key, ACCESS_KEY, signingKey).
_KEY_WORDS = frozenset({"api", "access", "private", "secret", "signing", "encryption", "master", "client"})
#: A word after the secret word says the value is about the secret, not the secret: `token_expiry=3600`,
#: `password_file=/run/x`, `secret_name=prod/db`. Words before it likewise: `max_token=…`.
_ABOUT_WORDS = frozenset({
    "expiry", "expires", "expire", "expiration", "exp", "ttl", "lifetime", "timeout", "age", "length", "len", "size",
    "count", "limit", "max", "min", "budget", "type", "kind", "name", "file", "path", "dir", "url", "uri", "endpoint",
    "env", "var", "header", "field", "id", "prefix", "suffix", "format", "policy", "rotation", "version", "hint",
    "label", "usage", "used", "rate", "window", "reset", "mode", "enabled", "required", "provider", "source",
    "location", "ref", "arn", "manager", "regex", "pattern", "column", "param", "placeholder", "strength"})
_BEFORE_WORDS = frozenset({"max", "min", "num", "total", "count", "no"})
_NOT_SECRETS = frozenset({"true", "false", "null", "none", "nil", "undefined", "yes", "no", "on", "off"})


def _secret_at(segments: list[str]) -> int | None:
    """The index of the segment that names a secret (the last such), or None."""
    found = None
    for i, seg in enumerate(segments):
        if seg in _SECRET_WORDS or (seg == "key" and i and segments[i - 1] in _KEY_WORDS):
            found = i
        elif i == 0 and seg.endswith(("password", "passwd", "secret", "token")) and seg not in ("bypass",):
            found = i  # PGPASSWORD, authtoken: one glued word
    return found


def _names_a_secret(key: str) -> bool:
    """Whether `key` (of `key=value`) names a secret itself rather than something about one."""
    segments = [s.lower() for s in _SEGMENTS.split(key.strip("-_.")) if s]
    at = _secret_at(segments)
    if at is None:
        return False
    if segments[at] == "pwd" and at == 0:
        return False  # PWD= is a shell's working directory; MYSQL_PWD= a password
    return not (any(s in _ABOUT_WORDS for s in segments[at + 1:]) or any(s in _BEFORE_WORDS for s in segments[:at]))


def _assigns_a_secret(m: re.Match[str]) -> bool:
    """`password=password` or `token=self.token` pass a variable along; `token_expiry=3600` and
    `password_policy=strict` say something about a secret; neither holds one."""
    key_match = re.match(r"[\w.-]+", m.group(1))
    key = key_match.group(0) if key_match else ""
    value = m.group(2)
    if not _names_a_secret(key) or _DOTTED.match(value) or _CALL.match(value) or value.lower() == key.lower():
        return False
    if value.lower() in _NOT_SECRETS:
        return False
    # A bare `pass=12` is a test tally, not a password.
    return not (key.lower() == "pass" and value.isdigit())


def _may_be_secret(value: str) -> bool:
    """A value prose names as a password that is not a placeholder, a variable or code fetching it."""
    return not (value.lower() in _NOT_SECRETS or _DOTTED.match(value) or _CALL.match(value))


def redact_value(value: Any, found: Counter[str], keys: bool = False) -> Any:
    """Redact every string inside a JSON value; with `keys`, the names of its members too."""
    if isinstance(value, str):
        clean, n = redact_text(value)
        found.update(n)
        return clean
    if isinstance(value, list):
        return [redact_value(v, found, keys) for v in value]
    if isinstance(value, dict):
        if not keys:
            return {k: redact_value(v, found) for k, v in value.items()}
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = redact_value(k, found) if isinstance(k, str) else k
            while name in out:  # two keys that differed only in their secret stay two members
                name += "'"
            out[name] = redact_value(v, found, keys)
        return out
    return value


def redact_record_parts(found: Counter[str], *, scope: str | None = None, client_op_id: str | None = None,
                        fields: dict[str, Any] | None = None) -> tuple[str | None, str | None, dict[str, Any] | None]:
    """The parts of a record besides its text and source that a writer names: its scope, its
    idempotency key and its fields, keys included. Returns (scope, client_op_id, fields).

    A `client_op_id` that held a secret keeps a short digest of what it was, so two keys that
    differed only in their secret still name two writes (a repeat of either is still recognised).
    """
    if scope is not None:
        scope = redact_value(scope, found)
    if client_op_id is not None:
        clean, n = redact_text(client_op_id)
        if n:
            found.update(n)
            clean += "#" + hashlib.sha256(client_op_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        client_op_id = clean
    if fields is not None:
        fields = redact_value(fields, found, keys=True)
    return scope, client_op_id, fields


def label_secrets(label: str) -> Counter[str]:
    """The credentials a short label (a kind, an id) holds, also where one is glued to a prefix
    (`mem_ghp_...`: no word boundary before `ghp_`, so redact_text alone would not see it)."""
    found: Counter[str] = Counter()
    starts = [0] + [m.end() for m in re.finditer(r"[_.:/-]+", label[:1024])]
    for at in starts:
        _clean, n = redact_text(label[at:])
        if n:
            found.update(n)
            break
    return found


def describe(found: Counter[str]) -> str:
    """'redacted 2 secrets before writing: 1 github_token, 1 password_assignment' (kinds, never values)."""
    total = sum(found.values())
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(found.items()))
    return f"redacted {total} secret{'s' if total != 1 else ''} before writing: {kinds}"
