"""Authorship a teammate can prove: each writer signs the head of its log with an SSH key, through
`ssh-keygen -Y sign` (as git signs commits with `gpg.format=ssh`), and every clone checks the heads it
takes in against the key it pinned for that writer the first time it saw one (trust on first use).

On the memory ref, beside `writers/<writer>.jsonl` (docs/FORMAT.md, "Signed heads"):

    signatures/<writer>.sig   the head signed, as four lines (`message`), then ssh-keygen's armored
                              signature of exactly those bytes in the namespace `retained-memory`
    allowed_signers           one line per writer that signs, in ssh-keygen's allowed-signers format:
                              `<writer> namespaces="retained-memory" <key type> <base64>`

In the project's team directory, `signers.json` is this clone's pin file: per writer the key first
seen, the last head it verified and that head's signature (so a head already verified costs nothing
and this clone can put the signature back on the ref), and the last refusal.

The key is git's `user.signingkey` when `gpg.format` is `ssh` (a private key, a public key whose private
half ssh-agent holds, or a `key::` literal), else one retained makes once (ed25519, no passphrase) and
keeps in the user's config directory (`config_dir`), never in the store or a repository.
`RETAINED_SIGN=off` signs nothing (checks still run).

A writer's status (`Verdict.status`): `signed` (its head verifies with its pinned key), `unsigned` (it
never signed: shown, not refused, so teams without keys work), or `refused`, named in one line: a head
without signature from a writer that signed before (or that allowed_signers lists), a head signed by
another key, a signature that does not match the head or does not verify. A refused writer's lines are
taken in up to the last head this clone verified (or the head its signature covers, when only lines
after it are unsigned). Without ssh-keygen every writer is `unsigned`, with a note; nothing fails.

A sync calls `Signatures.check` on what it fetched (before tombstones are vouched for) and puts
`Signatures.files` into the tree it commits. Only heads are signed: the cost is per writer, not per line.
An Ed25519 signature (the key retained makes, and most keys git signs with) is checked in this process
(`verify_here`, with the `cryptography` package the MCP SDK brings); any other key type by
`ssh-keygen -Y verify`, one process each. A test holds the two to the same verdicts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from .. import durable, records
from ..errors import StoreError
from ..paths import expand_user, home_of
from ..switches import switch
from . import state, wlog
from .git import config, environment

NAMESPACE = "retained-memory"
ALLOWED_SIGNERS = "allowed_signers"
SIGNATURES = "signatures"
PINS = "signers.json"
KEY_NAME = "signing_key"
SIGNED, UNSIGNED, REFUSED = "signed", "unsigned", "refused"
TIMEOUT = 10.0
MAX_SIGNATURE = 16 * 1024
MAX_ALLOWED = 1024 * 1024
_BEGIN = b"-----BEGIN SSH SIGNATURE-----\n"
_HEAD = re.compile(rb"retained-memory signed head\nwriter ([a-z0-9][a-z0-9_-]{2,63})\nseq ([1-9][0-9]{0,15})\n"
                   rb"sha256 ([0-9a-f]{64})\n\Z")
_ARMOR = re.compile(rb"-----BEGIN SSH SIGNATURE-----\n([A-Za-z0-9+/=\n]{1,12000})-----END SSH SIGNATURE-----\n?\Z")
_ALLOWED = re.compile(r'([a-z0-9][a-z0-9_-]{2,63}) namespaces="retained-memory" ([a-z0-9@.-]{1,64}) '
                      r"([A-Za-z0-9+/]{1,8192}={0,2})\Z")
NO_KEYGEN = ("ssh-keygen was not found: no signature was checked or made, so every writer shows as unsigned "
             "(install OpenSSH's ssh-keygen)")
KEY_TYPES = frozenset(("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                       "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com"))


class BadSignature(ValueError):
    """A signature file or key that is not what retained writes (the reason, in a few words)."""


class SigningError(Exception):
    """ssh-keygen could not sign or check (one line, no key material)."""


class Signature(NamedTuple):
    """A parsed `signatures/<writer>.sig`: the head it claims and the public key that made it."""

    writer: str
    seq: int
    sha256: str
    key: str  # "<type> <base64>", taken from the signature itself
    raw: bytes
    blob: bytes  # the SSHSIG blob the armor holds

    @property
    def message(self) -> bytes:
        return self.raw[:self.raw.index(_BEGIN)]

    @property
    def armor(self) -> bytes:
        return self.raw[self.raw.index(_BEGIN):]


class Verdict(NamedTuple):
    status: str  # SIGNED, UNSIGNED or REFUSED
    keep: int  # how many lines of the writer's file (as fetched) may be taken in
    problem: str | None = None  # one line naming the writer (and the keys) when something was refused
    key: str | None = None  # the fingerprint of the key its head is signed with


class Key(NamedTuple):
    """What `ssh-keygen -Y sign -f` is given: a key file, or git's `key::` literal (ssh-agent signs)."""

    path: Path | None
    literal: str | None
    origin: str  # "git's user.signingkey" or "retained's own key"


# -- pure: the message, the signature file, keys ---------------------------------------------------------
def message(writer: str, seq: int, sha256: str) -> bytes:
    """The bytes a writer signs for its head: its id, the head's seq and its `sha256` (which chains
    every line before it). A tombstone keeps the original hash, so a purge leaves the signature valid."""
    return b"retained-memory signed head\nwriter %s\nseq %d\nsha256 %s\n" % (writer.encode(), seq, sha256.encode())


def head(entries: list[wlog.Entry]) -> tuple[int, str] | None:
    return (entries[-1].rec["seq"], entries[-1].rec["sha256"]) if entries else None


def _string(blob: bytes, pos: int) -> tuple[bytes, int]:
    """One SSH wire-format string at `pos`, and where the next field starts."""
    if pos + 4 > len(blob):
        raise BadSignature("it ends inside a field")
    end = pos + 4 + int.from_bytes(blob[pos:pos + 4], "big")
    if end > len(blob):
        raise BadSignature("a field runs past its end")
    return blob[pos + 4:end], end


def public_key(blob: bytes) -> str:
    """`<type> <base64>` of a public key blob, for a key type ssh-keygen signs with."""
    kind = _string(blob, 0)[0].decode("ascii", "replace")
    if kind not in KEY_TYPES:
        raise BadSignature(f"its key type {kind[:40]!r} is not one retained accepts")
    return f"{kind} {base64.b64encode(blob).decode()}"


def fingerprint(key: str) -> str:
    """`SHA256:...` as `ssh-keygen -l` prints it: what a person compares, never the key itself."""
    blob = base64.b64decode(key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def parse_signature(raw: bytes) -> Signature:
    """Read a signature file strictly: the four message lines, then one armored SSHSIG blob of the
    `retained-memory` namespace. Raises BadSignature."""
    if len(raw) > MAX_SIGNATURE:
        raise BadSignature(f"it is longer than {MAX_SIGNATURE} bytes")
    cut = raw.find(_BEGIN)
    found = _HEAD.match(raw[:cut]) if cut > 0 else None
    armor = _ARMOR.match(raw[cut:]) if cut > 0 else None
    if found is None or armor is None:
        raise BadSignature("it is not the signed head's four lines followed by an SSH signature")
    try:
        blob = base64.b64decode(b"".join(armor.group(1).split()), validate=True)
    except ValueError:
        raise BadSignature("its signature is not base64") from None
    if blob[:6] != b"SSHSIG" or int.from_bytes(blob[6:10], "big") != 1:
        raise BadSignature("its signature is not an SSHSIG version 1 blob")
    key_blob, pos = _string(blob, 10)
    namespace, _ = _string(blob, pos)
    if namespace != NAMESPACE.encode():
        raise BadSignature(f"it is signed in another namespace ({namespace[:40].decode('ascii', 'replace')!r})")
    writer, seq, sha = (g.decode() for g in found.groups())
    return Signature(writer, int(seq), sha, public_key(key_blob), raw, blob)


def covers(sig: Signature, entries: list[wlog.Entry]) -> bool:
    """Whether the signed head is a line of `entries` (seq and sha256)."""
    return 1 <= sig.seq <= len(entries) and entries[sig.seq - 1].rec["sha256"] == sig.sha256


def allowed_line(writer: str, key: str) -> str:
    return f'{writer} namespaces="{NAMESPACE}" {key}\n'


def parse_allowed(data: bytes | None) -> tuple[dict[str, str], list[str]]:
    """{writer: key} from an allowed_signers file (the first valid line of each writer), and one note
    per kind of line left out. Lines are untrusted: only the exact shape retained writes counts."""
    keys: dict[str, str] = {}
    odd, second = 0, []
    for raw in (data or b"")[:MAX_ALLOWED].split(b"\n"):
        text = raw.decode("utf-8", "replace").strip()
        if not text or text.startswith("#"):
            continue
        found = _ALLOWED.match(text)
        try:
            key = public_key(base64.b64decode(found.group(3), validate=True)) if found else ""
        except (ValueError, BadSignature):
            key = ""
        if not found or key != f"{found.group(2)} {found.group(3)}":
            odd += 1
        elif found.group(1) in keys and keys[found.group(1)] != key:
            second.append(found.group(1))
        else:
            keys.setdefault(found.group(1), key)
    notes = [f"allowed_signers on the ref lists a second key for writer {w}: only the first counts" for w in second[:5]]
    if odd:
        notes.append(f"allowed_signers on the ref: {odd} line(s) ignored (not `<writer> namespaces=\"{NAMESPACE}\" <key>`)")
    return keys, notes


def render_allowed(keys: Mapping[str, str]) -> bytes:
    return "".join(allowed_line(w, keys[w]) for w in sorted(keys)).encode()


def _one_line(text: bytes | str, limit: int = 200) -> str:
    """Another program's words as one bounded line of printable characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[-1] if lines else "no message"
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in line)[:limit]


# -- ssh-keygen ---------------------------------------------------------------------------------------------
def program() -> str | None:
    return shutil.which("ssh-keygen")


def _env() -> dict[str, str]:
    # Never a prompt from a background sync: no askpass window, no terminal (a new session).
    return {**environment(), "SSH_ASKPASS_REQUIRE": "never"}


def _start(argv: list[str], stdin: Any) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                                start_new_session=True)
    except OSError as e:
        raise SigningError(f"could not run ssh-keygen: {e.strerror or e}") from None


def _wait(proc: subprocess.Popen[bytes], timeout: float, input: bytes | None = None) -> tuple[int, bytes, bytes]:
    try:
        out, err = proc.communicate(input, timeout=max(timeout, 0.1))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            proc.kill()
        proc.communicate()
        raise SigningError("ssh-keygen did not answer in time and was stopped") from None
    return proc.returncode, out, err


def sign(key: Key, data: bytes, *, exe: str | None = None, timeout: float = TIMEOUT) -> bytes:
    """ssh-keygen's armored signature of `data` in the retained-memory namespace. Raises SigningError."""
    exe = exe or program()
    if exe is None:
        raise SigningError("ssh-keygen was not found")
    if key.literal is None:
        code, out, err = _wait(_start([exe, "-Y", "sign", "-n", NAMESPACE, "-f", str(key.path)], subprocess.PIPE),
                               timeout, data)
    else:  # as git does: the public key in a file, ssh-agent holds the private half
        with tempfile.TemporaryDirectory(prefix="retained-sign-") as tmp:
            path = Path(tmp) / "key.pub"
            path.write_text(key.literal + "\n", encoding="utf-8")
            argv = [exe, "-Y", "sign", "-n", NAMESPACE, "-f", str(path), "-U"]
            code, out, err = _wait(_start(argv, subprocess.PIPE), timeout, data)
    if code != 0 or not out.startswith(_BEGIN[:-1]):
        raise SigningError(f"ssh-keygen could not sign with {key.origin}: {_one_line(err)}")
    return out if out.endswith(b"\n") else out + b"\n"


def _wire(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def verify_here(key: str, sig: Signature) -> str | None | bool:
    """Check an `ssh-ed25519` signature in this process, as `ssh-keygen -Y verify` checks it against
    `key` (the SSHSIG blob read strictly to its end, the namespace, the hash algorithm, and the key's
    Ed25519 signature over the signed data): None when it verifies, else why not. False when this
    process cannot check it (another key type, or no `cryptography`): ssh-keygen checks it then. One
    process less per writer; five of them were most of what checking a sync's heads cost."""
    if not key.startswith("ssh-ed25519 ") or sig.key != key:
        return False
    try:
        from cryptography.exceptions import InvalidSignature  # lazy: 8 ms (measured) only a check pays
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        return False
    blob = sig.blob  # its magic, version, namespace and key type parse_signature has checked
    try:
        key_blob, pos = _string(blob, 10)
        namespace, pos = _string(blob, pos)
        reserved, pos = _string(blob, pos)
        hash_alg, pos = _string(blob, pos)
        signature, pos = _string(blob, pos)
        public, _ = _string(key_blob, _string(key_blob, 0)[1])
        sig_kind, at = _string(signature, 0)
        raw_sig, end = _string(signature, at)
    except BadSignature as e:
        return f"its signature blob is malformed ({e})"
    if pos != len(blob) or end != len(signature):
        return "its signature blob holds bytes after its fields"
    digest = {b"sha512": hashlib.sha512, b"sha256": hashlib.sha256}.get(hash_alg)
    if digest is None or sig_kind != b"ssh-ed25519" or len(public) != 32 or len(raw_sig) != 64:
        return "its signature is not an Ed25519 signature with sha256 or sha512"
    signed = b"SSHSIG" + _wire(namespace) + _wire(reserved) + _wire(hash_alg) + _wire(digest(sig.message).digest())
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(raw_sig, signed)
    except (InvalidSignature, ValueError):
        return "the Ed25519 signature is not valid for this head, checked in this process"
    return None


def verify_many(jobs: Mapping[str, tuple[str, Signature]], *, exe: str, timeout: float = TIMEOUT) -> dict[str, str | None]:
    """{writer: None when the signature verifies with that key (as `ssh-keygen -Y verify` checks it),
    else why not}. `jobs`: {writer: (expected key, signature)}. An Ed25519 signature is checked here
    (`verify_here`); the others by ssh-keygen, side by side (one process each)."""
    out: dict[str, str | None] = {}
    rest = {}
    for writer, (key, sig) in sorted(jobs.items()):
        here = verify_here(key, sig)
        if here is False:
            rest[writer] = (key, sig)
        else:
            out[writer] = None if here is None else str(here)
    if not rest:
        return out
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="retained-verify-") as tmp:
        procs = {}
        for n, (writer, (key, sig)) in enumerate(rest.items()):
            base = Path(tmp) / str(n)
            base.with_suffix(".allowed").write_text(allowed_line(writer, key), encoding="utf-8")
            base.with_suffix(".sig").write_bytes(sig.armor)
            base.with_suffix(".msg").write_bytes(sig.message)
            with open(base.with_suffix(".msg"), "rb") as stdin:
                try:
                    procs[writer] = _start([exe, "-Y", "verify", "-f", str(base.with_suffix(".allowed")), "-I", writer,
                                            "-n", NAMESPACE, "-s", str(base.with_suffix(".sig"))], stdin)
                except SigningError as e:
                    out[writer] = str(e)
        for writer, proc in procs.items():
            try:
                code, _, err = _wait(proc, deadline - time.monotonic())
                out[writer] = None if code == 0 else f"ssh-keygen says: {_one_line(err)}"
            except SigningError as e:
                out[writer] = str(e)
    return out


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """retained's user config directory: $RETAINED_CONFIG_DIR, else `$XDG_CONFIG_HOME/retained`
    (`~/.config/retained`); on macOS `~/Library/Preferences/retained` and on Windows
    `%APPDATA%\\retained`, never the store's own directory (the user data dir there)."""
    env = os.environ if env is None else env
    chosen = env.get("RETAINED_CONFIG_DIR", "").strip()
    if chosen:
        return expand_user(chosen, env)
    if sys.platform == "win32":
        return Path(env.get("APPDATA") or home_of(env) / "AppData" / "Roaming") / "retained"
    if sys.platform == "darwin":
        return home_of(env) / "Library" / "Preferences" / "retained"
    return Path(env.get("XDG_CONFIG_HOME", "").strip() or home_of(env) / ".config") / "retained"


def _git_key(cwd: str | os.PathLike[str] | None, found: Mapping[str, str] | None = None) -> str | None:
    """git's user.signingkey when gpg.format is ssh (as the checkout at `cwd` sees them), else None.
    `found`: git's configuration as `git.config` read it already (the sync's one call for the author)."""
    found = config(cwd) if found is None else found
    if found.get("gpg.format", "").lower() != "ssh":
        return None
    return found.get("user.signingkey") or None


def _git_signing_key(value: str, env: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> Key:
    origin = "git's user.signingkey"
    literal = value[len("key::"):] if value.startswith("key::") else value if value.split(" ")[0] in KEY_TYPES else None
    if literal is not None:
        return Key(None, literal.strip(), origin)
    path = expand_user(value, env)
    return Key(path if path.is_absolute() else Path(cwd or ".").resolve() / path, None, origin)


def find_key(cwd: str | os.PathLike[str] | None = None, *, store_dir: Path | None = None,
             env: Mapping[str, str] | None = None, create: bool = True,
             git_config: Mapping[str, str] | None = None) -> tuple[Key | None, str | None]:
    """The key this user signs with, and a note (one line) when there is none. Git's ssh signing key
    first; else retained's own (`config_dir()/signing_key`), made once when `create`. `git_config`:
    git's configuration as `git.config` read it (else it is read here)."""
    env = os.environ if env is None else env
    if not switch("RETAINED_SIGN", True, env):
        return None, None
    value = _git_key(cwd, git_config)
    if value:
        return _git_signing_key(value, env, cwd), None
    folder = config_dir(env)
    keep_out = [Path(p).resolve() for p in (store_dir, cwd) if p is not None]
    if any(folder.resolve() == p or p in folder.resolve().parents for p in keep_out):
        return None, (f"retained's signing key would go in {folder}, inside the store or the checkout: records "
                      "go unsigned (set RETAINED_CONFIG_DIR to a folder of your own)")
    path = folder / KEY_NAME
    if not path.exists():
        if not create:
            return None, None
        try:
            _make_key(path)
        except (OSError, SigningError) as e:
            return None, f"could not make retained's signing key in {folder}: {getattr(e, 'strerror', None) or e}"
    unsafe = _not_private(folder)
    if unsafe:
        return None, f"retained's signing key is not used: {folder} {unsafe} (make it yours, mode 0700)"
    return Key(path, None, "retained's own key"), None


def _not_private(folder: Path) -> str | None:
    """Why another user could have put or read a key in `folder`, or None."""
    try:
        st = folder.stat()
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return "belongs to another user"
    if st.st_mode & 0o022:
        return "can be written by other users"
    return None


def _make_key(path: Path) -> None:
    """An ed25519 key without passphrase: made in a private temporary folder beside it, then moved in
    (the public half first), under a lock, so that two processes never make two keys."""
    exe = program()
    if exe is None:
        raise SigningError("ssh-keygen was not found")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.parent.stat().st_mode & 0o077:
        path.parent.chmod(0o700)
    with durable.locked(path.with_name(KEY_NAME + ".lock")):
        if path.exists():
            return
        tmp = Path(tempfile.mkdtemp(prefix=".signing-", dir=path.parent))
        try:
            argv = [exe, "-q", "-t", "ed25519", "-N", "", "-C", "retained signing key", "-f", str(tmp / KEY_NAME)]
            code, _, err = _wait(_start(argv, subprocess.DEVNULL), TIMEOUT)
            if code != 0:
                raise SigningError(f"ssh-keygen could not make a key: {_one_line(err)}")
            (tmp / KEY_NAME).chmod(0o600)
            durable.replace(tmp / (KEY_NAME + ".pub"), path.with_name(KEY_NAME + ".pub"))
            durable.replace(tmp / KEY_NAME, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# -- this clone's pins and what a sync asks -------------------------------------------------------------------
def _load_pins(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str], str | None]:
    """(pins, refusals, note) from the pin file; entries that are not well formed are left out."""
    try:
        data = state.read_json(path) or {}
    except StoreError as e:
        return {}, {}, f"{e.message}: this clone pins its teammates' keys again from what it sees next"
    pins = {}
    for writer, pin in (data.get("writers") or {}).items():
        try:
            ok = wlog.WRITER_ID.match(writer) and public_key(base64.b64decode(pin["key"].split()[1])) == pin["key"]
            seq, sha = pin["head"]
            ok = ok and isinstance(seq, int) and isinstance(sha, str) and isinstance(pin["signature"], str)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, BadSignature):
            ok = False
        if ok:
            pins[writer] = {k: pin[k] for k in ("key", "since", "head", "signature") if k in pin}
    refused = {w: p for w, p in (data.get("refused") or {}).items() if isinstance(p, str)}
    return pins, refused, None


def status(team_dir: Path) -> dict[str, dict[str, Any]]:
    """What doctor, reads and the page show per writer, from this clone's pin file only: {writer:
    {"status": "signed" | "refused", "key": fingerprint, "seq": last head verified, "problem": ...}}.
    A writer not in it is unsigned."""
    pins, refused, _ = _load_pins(Path(team_dir) / PINS)
    out: dict[str, dict[str, Any]] = {}
    for writer in sorted(set(pins) | set(refused)):
        pin = pins.get(writer)
        out[writer] = {"status": REFUSED if writer in refused else SIGNED if pin else UNSIGNED,
                       "key": fingerprint(pin["key"]) if pin else None, "seq": pin["head"][0] if pin else 0,
                       "problem": refused.get(writer)}
    return out


class Signatures:
    """One sync's view of signing for one shared project (its team directory), as `writer`.

        sigs = Signatures(team_dir, writer, cwd=checkout, store_dir=store_dir)
        parsed = sigs.check(parsed, {writer: signature bytes}, allowed_signers bytes)   # after fetching
        files = sigs.files(mirror_files)       # {path on the ref: bytes} for the commit's tree
        sigs.save()                            # at the end: the pin file, if it changed

    `key`: the key to sign with (default: `find_key(cwd, store_dir=...)`, looked up only when this
    writer's head needs a new signature)."""

    def __init__(self, team_dir: Path, writer: str, *, key: Key | None = None, cwd: str | os.PathLike[str] | None = None,
                 store_dir: Path | None = None, git_config: Mapping[str, str] | None = None) -> None:
        self.path = Path(team_dir) / PINS
        self.writer = writer
        self._key, self._cwd, self._store_dir, self._git_config = key, cwd, store_dir, git_config
        self.pins, self.refused, note = _load_pins(self.path)
        self.notes: list[str] = [note] if note else []
        self.refusals: list[str] = []  # what was refused without cutting a log (a key change on the ref)
        self.verdicts: dict[str, Verdict] = {}
        self.exe = program()
        self.remote_sigs: dict[str, bytes] = {}
        self.remote_keys: dict[str, str] = {}
        self._signed_own: tuple[tuple[int, str], bytes | None] | None = None
        self._own_fp: str | None = None  # own_key's answer once asked ("" for none)

    # -- what was fetched -----------------------------------------------------------------------------------
    def check(self, parsed: Mapping[str, wlog.Parsed], signatures: Mapping[str, bytes], allowed: bytes | None,
              held: Mapping[str, int] | None = None) -> dict[str, wlog.Parsed]:
        """Each writer's verified lines cut to what its signature vouches for, a refusal as its problem
        (the damage found first stays the problem). `signatures`: {writer: bytes of signatures/<writer>.sig}
        and `allowed`: the allowed_signers file, both as fetched (None or missing: not on the ref).
        `held`: {writer: lines this clone holds already}: those are never cut, since a merge takes none of
        them and must still see a line the remote rewrote; a refusal that cuts nothing is kept in
        `verdicts` (and the pin file) but is not the writer's problem."""
        self.remote_sigs = dict(signatures)
        self.remote_keys, notes = parse_allowed(allowed)
        self._note(*notes)
        if self.exe is None:
            self._note(NO_KEYGEN)
            self.verdicts = {w: Verdict(UNSIGNED, len(p.entries)) for w, p in parsed.items()}
            return dict(parsed)
        pending: dict[str, tuple[str, Signature]] = {}
        for writer, p in parsed.items():
            self.refused.pop(writer, None)
            self.verdicts[writer] = self._judge(writer, p, signatures.get(writer), pending)
        for writer, why in (verify_many(pending, exe=self.exe) if pending else {}).items():
            self.verdicts[writer] = self._verified(writer, parsed[writer].entries, pending[writer], why)
        out = {}
        for writer, p in parsed.items():
            v = self.verdicts[writer]
            keep = max(v.keep, (held or {}).get(writer, 0))
            out[writer] = wlog.Parsed(p.entries[:keep], p.problem or (v.problem if keep < len(p.entries) else None))
        return out

    def _judge(self, writer: str, p: wlog.Parsed, raw: bytes | None,
               pending: dict[str, tuple[str, Signature]]) -> Verdict:
        """The verdict, or a check for ssh-keygen to make (in `pending`; the verdict then is a placeholder)."""
        entries, pin, listed = p.entries, self.pins.get(writer), self.remote_keys.get(writer)
        expected, whose = (pin["key"], "pinned for it here") if pin else (listed, "allowed_signers lists for it")
        if pin and listed and listed != pin["key"]:
            self._refuse_key(writer, listed, pin["key"])
        safe = self._safe(writer, entries)
        if raw is None:
            if expected is None:
                return Verdict(UNSIGNED, len(entries))
            n = head(entries)
            return self._refused(writer, safe, f"its head (seq {n[0] if n else 0}) carries no signature, but it signs "
                                               f"with key {fingerprint(expected)} ({whose})")
        try:
            sig = parse_signature(raw)
        except BadSignature as e:
            return self._refused(writer, safe, f"its signature file is not one retained can read: {e}")
        if sig.writer != writer:
            return self._refused(writer, safe, f"its signature file is writer {sig.writer}'s")
        if expected is None:
            return self._refused(writer, safe, f"its head is signed by key {fingerprint(sig.key)}, which allowed_signers "
                                               "on the ref does not list for it")
        if sig.key != expected:
            return self._refused(writer, safe, f"its head is signed by another key ({fingerprint(sig.key)}), not the "
                                               f"one {whose} ({fingerprint(expected)})")
        if not covers(sig, entries):
            if p.problem and sig.seq > len(entries):  # the damage already says why; keep what was verified here
                return Verdict(REFUSED, safe, None, fingerprint(sig.key))
            return self._refused(writer, safe, f"its signature is of a head its log does not hold (seq {sig.seq}, "
                                               f"sha256 {sig.sha256[:12]}...)")
        if pin and pin["signature"].encode() == raw:  # verified before, byte for byte
            return self._signed(writer, entries, sig)
        pending[writer] = (expected, sig)
        return Verdict(REFUSED, safe)

    def _verified(self, writer: str, entries: list[wlog.Entry], job: tuple[str, Signature], why: str | None) -> Verdict:
        key, sig = job
        if why is not None:
            return self._refused(writer, self._safe(writer, entries),
                                 f"its signature does not verify with key {fingerprint(key)} ({why})")
        pin = self.pins.get(writer)
        if pin is None or (self._safe(writer, entries) and sig.seq >= pin["head"][0]):  # never back, never aside
            self.pins[writer] = {"key": key, "since": (pin or {}).get("since") or records.now_rfc3339(),
                                 "head": [sig.seq, sig.sha256], "signature": sig.raw.decode()}
        return self._signed(writer, entries, sig)

    def _signed(self, writer: str, entries: list[wlog.Entry], sig: Signature) -> Verdict:
        self.refused.pop(writer, None)
        if sig.seq < len(entries):  # lines appended after the signed head, by whoever could push
            return self._refused(writer, sig.seq, f"its lines after seq {sig.seq} are not signed (it signs with key "
                                                  f"{fingerprint(sig.key)})", SIGNED)
        return Verdict(SIGNED, len(entries), None, fingerprint(sig.key))

    def _safe(self, writer: str, entries: list[wlog.Entry]) -> int:
        """How many lines the last head this clone verified for `writer` covers (0 when none, or when
        `entries` no longer hold that head)."""
        pin = self.pins.get(writer)
        if not pin:
            return 0
        seq, sha = pin["head"]
        return seq if 1 <= seq <= len(entries) and entries[seq - 1].rec["sha256"] == sha else 0

    def _refused(self, writer: str, keep: int, why: str, status: str = REFUSED) -> Verdict:
        problem = f"writer {writer}: {why}"
        self.refused[writer] = problem
        pin = self.pins.get(writer)
        return Verdict(status, keep, problem, fingerprint(pin["key"]) if pin else None)

    def _refuse_key(self, writer: str, listed: str, pinned: str) -> None:
        self._refusal(f"writer {writer}: allowed_signers on the ref lists another key for it ({fingerprint(listed)}) than "
                   f"the one pinned for it here ({fingerprint(pinned)}): refused; the pinned key stays")

    # -- what goes on the ref --------------------------------------------------------------------------------
    def files(self, files: Mapping[str, list[wlog.Entry]]) -> dict[str, bytes]:
        """{path: bytes} to put in the commit's tree beside the writers' logs: `allowed_signers` and each
        writer's `signatures/<writer>.sig` for the head the tree holds. Signs this writer's head when it
        changed (one ssh-keygen call); a teammate's signature is the fetched one, or the one this clone
        verified for that head. The allowed signers are the fetched ones, each pinned writer's line
        replaced by its pinned key."""
        out: dict[str, bytes] = {}
        for writer, entries in sorted(files.items()):
            raw = self._signature_for(writer, entries) if entries else None
            if raw is not None:
                out[f"{SIGNATURES}/{writer}.sig"] = raw
        keys = {w: k for w, k in self.remote_keys.items() if w != self.writer}
        keys.update({w: p["key"] for w, p in self.pins.items()})
        listed = self.remote_keys.get(self.writer)
        if listed and self.writer in self.pins and listed != self.pins[self.writer]["key"]:
            self._note(f"allowed_signers on the ref listed another key for this writer ({fingerprint(listed)}): "
                       "replaced by this writer's own")
        if keys:
            out[ALLOWED_SIGNERS] = render_allowed(keys)
        return out

    def _signature_for(self, writer: str, entries: list[wlog.Entry]) -> bytes | None:
        now = head(entries)
        pin = self.pins.get(writer)
        if pin and tuple(pin["head"]) == now:  # verified here: never replaced by a fetched one of the same head
            return pin["signature"].encode()
        fetched = self.remote_sigs.get(writer)
        if fetched is not None and _claimed(fetched, writer, entries) == now:
            return fetched
        made = self._sign_own(now) if writer == self.writer and now is not None else None
        if made is not None:
            return made
        # An earlier head's signature, of a line these entries hold: the lines up to it stay provable.
        for raw in ([pin["signature"].encode()] if pin else []) + ([fetched] if fetched is not None else []):
            if _claimed(raw, writer, entries) is not None:
                return raw
        return None

    def _sign_own(self, now: tuple[int, str]) -> bytes | None:
        if self._signed_own is not None and self._signed_own[0] == now:
            return self._signed_own[1]
        raw = self._make_signature(now)
        self._signed_own = (now, raw)
        return raw

    def _make_signature(self, now: tuple[int, str]) -> bytes | None:
        if self.exe is None:
            self._note(NO_KEYGEN)
            return None
        key = self._key
        if key is None:
            key, note = find_key(self._cwd, store_dir=self._store_dir, git_config=self._git_config)
            self._note(note)
            if key is None and self.writer in self.pins:
                self._note(f"this writer signed its records before (key {fingerprint(self.pins[self.writer]['key'])}) "
                           "and has no key now: teammates refuse its new records until they are signed")
            if key is None:
                return None
        data = message(self.writer, *now)
        try:
            sig = parse_signature(data + sign(key, data, exe=self.exe))
        except (SigningError, BadSignature) as e:
            self._note(f"this writer's new records go unsigned: {e}")
            return None
        pin = self.pins.get(self.writer)
        if pin and pin["key"] != sig.key:
            self._note(f"{key.origin} is key {fingerprint(sig.key)}, but this writer signs with {fingerprint(pin['key'])}: "
                       "its new records go unsigned, and teammates refuse them until they are (sign with that key "
                       "again, or share under a new writer id: `retained unshare`, then `retained share`)")
            return None
        self.pins[self.writer] = {"key": sig.key, "since": (pin or {}).get("since") or records.now_rfc3339(),
                                  "head": [sig.seq, sig.sha256], "signature": sig.raw.decode()}
        return sig.raw

    def own_key(self) -> str | None:
        """The fingerprint of the key this user signs with now (its public half: the `.pub` beside a key
        file, or `ssh-keygen -y`), or None without one. Never makes a key. Only this proves that lines
        of this writer's own log that this clone does not hold were written by this user (a store
        restored from a backup): a pin lives in the store, and a restore brings back an old one."""
        if self._own_fp is not None:
            return self._own_fp or None
        key = self._key or find_key(self._cwd, store_dir=self._store_dir, create=False, git_config=self._git_config)[0]
        found = ""
        try:
            if key is not None and key.literal is not None:
                found = key.literal
            elif key is not None and key.path is not None:
                pub = Path(str(key.path) + ".pub")
                if pub.is_file():
                    found = pub.read_text(encoding="utf-8", errors="replace")
                elif self.exe is not None:
                    code, out, _ = _wait(_start([self.exe, "-y", "-f", str(key.path)], subprocess.DEVNULL), TIMEOUT)
                    found = out.decode("ascii", "replace") if code == 0 else ""
            parts = found.split()
            blob = parts[1] if len(parts) > 1 else ""
            self._own_fp = fingerprint(public_key(base64.b64decode(blob, validate=True)))
        except (OSError, ValueError, SigningError, BadSignature):
            self._own_fp = ""
        return self._own_fp or None

    # -- state -----------------------------------------------------------------------------------------------
    def statuses(self) -> dict[str, str]:
        """{writer: signed | unsigned | refused} as this sync found them."""
        return {w: v.status if v.problem is None else REFUSED for w, v in sorted(self.verdicts.items())}

    def save(self) -> None:
        """Write the pin file if this sync changed it (one atomic write; a sync calls it once, at its end:
        a sync that dies first only costs the next one the checks again)."""
        data = {"version": 1, "writers": self.pins, "refused": self.refused}
        try:
            if (state.read_json(self.path) or {}) == data:
                return
        except StoreError:
            pass
        try:  # atomic, without fsync: a pin file lost to a power cut costs pinning again, never a record
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            durable.write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True).encode() + b"\n", sync=False)
        except OSError as e:
            self._note(f"could not save this clone's pinned keys ({self.path.name}): {e.strerror or e}")

    def _refusal(self, line: str) -> None:
        if line not in self.refusals:
            self.refusals.append(line)

    def _note(self, *lines: str | None) -> None:
        for line in lines:
            if line and line not in self.notes:
                self.notes.append(line)


def _claimed(raw: bytes, writer: str, entries: list[wlog.Entry]) -> tuple[int, str] | None:
    """The head a signature file of `writer` names, when it is a line of `entries` (its signature is
    checked elsewhere); else None."""
    cut = raw.find(_BEGIN)
    found = _HEAD.match(raw[:cut]) if 0 < cut <= MAX_SIGNATURE else None
    if found is None or found.group(1).decode() != writer:
        return None
    seq, sha = int(found.group(2)), found.group(3).decode()
    return (seq, sha) if 1 <= seq <= len(entries) and entries[seq - 1].rec["sha256"] == sha else None
