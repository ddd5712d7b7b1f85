"""Git as a subprocess, for retained's own bare repository of one shared project. Never a shell.

Every call has explicit arguments, a timeout, no terminal (a new session, stdin closed:
`GIT_TERMINAL_PROMPT=0`, so a credential prompt fails instead of hanging a background sync), no pager,
no hooks, no signing, no automatic gc, English messages (`LC_ALL=C`) and plumbing or porcelain-v1
output only. The variables through which a calling git (a hook) would point us at *its* repository
(`git rev-parse --local-env-vars`) are removed, so nothing here can touch the project's own `.git`.
Failures become one-line `TeamError`s that say what to do.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import NamedTuple

from ..errors import RetainedError

MEMORY_REF = "refs/retained/memory"
#: Where a sync keeps what it fetched (private to retained's bare repository).
FETCHED_REF = "refs/retained/fetched"
_LOCAL_ENV = ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
              "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
              "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
              "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE")
_OPTIONS = ("--no-pager", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "gc.auto=0",
            "-c", "maintenance.auto=false", "-c", "core.logAllRefUpdates=false", "-c", "transfer.fsckObjects=true")
#: Who retained's memory commits are by: a fixed name, so that no commit says more than the records do.
_COMMITTER = {"GIT_AUTHOR_NAME": "retained", "GIT_AUTHOR_EMAIL": "retained@invalid",
              "GIT_COMMITTER_NAME": "retained", "GIT_COMMITTER_EMAIL": "retained@invalid"}
LOCAL_TIMEOUT = 60.0
#: Fewer objects than this are written (and fetched, git's own default) as loose objects, more as a pack.
UNPACK_LIMIT = 100
#: The bound retained keeps its bare repository within after each sync (`Git.maintain`).
LOOSE_LIMIT = 256
PACK_LIMIT = 8
_PACK_TYPES = {"commit": 1, "tree": 2, "blob": 3}
NETWORK_TIMEOUT = 60.0


class TeamError(RetainedError):
    """A sync step that failed for a reason outside retained (git, the network, the remote)."""


class GitMissing(TeamError):
    """git cannot be run at all: nothing to retry until it is installed."""


class OutOfTime(TeamError):
    """The sync's time budget ran out before a git call could start."""


class PushOutcome(NamedTuple):
    ok: bool
    stale: bool  # the remote moved since the fetch: fetch, merge and push again
    reason: str | None  # one line when not ok


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LOCAL_ENV}
    env.update(GIT_TERMINAL_PROMPT="0", GCM_INTERACTIVE="never", GIT_PAGER="cat", PAGER="cat", LC_ALL="C",
               LANGUAGE="C", GIT_ADVICE="0")
    return env


def quoted(text: str, limit: int = 200) -> str:
    """What git or a remote said (input from outside: a server's ERR packet, `remote:` lines), as one
    line of data: quoted, control characters and markers escaped, at most `limit` characters."""
    flat = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                   for c in text.strip())
    flat = flat.replace("<<<", "‹‹‹").replace(">>>", "›››")
    if len(flat) > limit:
        flat = flat[:limit] + "…"
    return '"' + flat.replace('"', "'") + '"'


def public_url(url: str) -> str:
    """A remote's URL as retained shows and stores it: without a password or token (`user:secret@`, a
    token alone as the user of an https URL, `?token=` style query parameters)."""
    m = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)([^@/]*)@(.*)$", url)
    if m is not None:
        scheme, userinfo, rest = m.groups()
        user = userinfo.split(":", 1)[0]
        keep = ":" not in userinfo and scheme.lower().startswith("ssh") and user
        url = f"{scheme}{user}@{rest}" if keep else f"{scheme}{rest}"
    return re.sub(r"([?&][^=&#]*(?:token|key|secret|password|passwd|auth|sig)[^=&#]*=)[^&#]*", r"\1***", url,
                  flags=re.IGNORECASE)


def _last_words(stderr: bytes) -> str:
    """git's own reason in one line, quoted as data: its last fatal/error line, else its last line."""
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    for prefix in ("fatal:", "error:"):
        for ln in lines:
            if ln.startswith(prefix):
                return quoted(ln[len(prefix):].strip())
    return quoted(lines[-1]) if lines else "no message"


class Git:
    """One bare repository, run through git. `spent` adds up the seconds git itself took."""

    def __init__(self, git_dir: Path, *, timeout: float = LOCAL_TIMEOUT, network_timeout: float = NETWORK_TIMEOUT,
                 budget: float | None = None):
        self.git_dir = git_dir
        self.timeout = timeout
        self.network_timeout = network_timeout
        self.budget = budget  # seconds for every call together (a background sync must end in time)
        self.deadline = None if budget is None else time.monotonic() + budget
        self.spent = 0.0
        self.calls = 0

    def run(self, *args: str, input: bytes | None = None, ok: tuple[int, ...] = (0,), network: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run git on this repository. `ok`: the exit codes that are not failures. `network`: the remote's
        URL when the call reaches it (a failure then says the remote could not be reached)."""
        exe = shutil.which("git")
        if exe is None:
            raise GitMissing("git is not installed or not on PATH; team memory needs it",
                             hint="install git, then run `retained sync` again (nothing was lost)")
        argv = [exe, *_OPTIONS, "--git-dir", str(self.git_dir), *args]
        limit = self._limit(network is not None)
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**environment(), **(env or {})},
                                    start_new_session=True)
        except OSError as e:
            raise GitMissing(f"could not run git: {e.strerror or e}", hint="check that git works: `git --version`") from None
        try:
            out, err = proc.communicate(input, timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            if self.deadline is not None and time.monotonic() >= self.deadline - 0.01:
                raise OutOfTime(f"git {args[0]} was stopped: the sync's time budget of {self.budget:.0f} s ran out",
                                hint="it goes on where it stopped at the next sync; nothing was lost") from None
            raise TeamError(f"git {args[0]} took longer than {limit:.0f} s and was stopped",
                            hint="check the network and the remote, then run `retained sync` again") from None
        finally:
            self.spent += time.perf_counter() - started
            self.calls += 1
        result = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if proc.returncode in ok:
            return result
        if network:
            raise TeamError(f"cannot reach the team remote {public_url(network)}: {_last_words(err)}",
                            hint="check the URL, the network and your git credentials; records wait here and go "
                                 "with the next sync")
        raise TeamError(f"git {args[0]} failed: {_last_words(err)}",
                        hint="run `retained sync` again; if it keeps failing, run `retained doctor`")

    def _limit(self, network: bool) -> float:
        limit = self.network_timeout if network else self.timeout
        if self.deadline is None:
            return limit
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime(f"the sync ran out of its time budget ({self.budget:.0f} s)",
                            hint="it goes on where it stopped at the next sync; nothing was lost")
        return min(limit, left)

    # -- the repository ------------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the bare repository if it is missing (no templates, so no sample hooks)."""
        if (self.git_dir / "HEAD").exists():
            return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.run("init", "--bare", "--quiet", "--template=", str(self.git_dir))
        for key, value in (("core.logAllRefUpdates", "false"), ("gc.auto", "0"), ("core.fsync", "committed"),
                           ("transfer.fsckObjects", "true")):
            self.run("config", key, value)

    def rev(self, ref: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", ref + "^{commit}", ok=(0, 1))
        oid = proc.stdout.decode().strip()
        return oid if proc.returncode == 0 and oid else None

    def update_ref(self, ref: str, oid: str | None) -> None:
        if oid is None:
            self.run("update-ref", "-d", ref)
        else:
            self.run("update-ref", ref, oid)

    # -- the remote ------------------------------------------------------------------------------------------
    def fetch(self, url: str, ref: str) -> str | None:
        """Fetch the remote's `ref` into FETCHED_REF, in one round trip; None when the remote has no such
        ref (yet). Forced, since a purge rewrites the ref's history; the pattern (`ref*`) makes a missing
        ref an empty match instead of an error, and --prune drops FETCHED_REF when the ref is gone."""
        self.run("fetch", "--quiet", "--prune", "--no-tags", url, f"+{ref}*:{FETCHED_REF}*", network=url)
        return self.rev(FETCHED_REF)

    def push(self, url: str, commit: str, ref: str, expect: str | None) -> PushOutcome:
        """Push `commit` to `ref` only if the remote still holds `expect` (None: no such ref)."""
        proc = self.run("push", "--porcelain", f"--force-with-lease={ref}:{expect or ''}", url, f"{commit}:{ref}",
                        network=url, ok=(0, 1))
        if proc.returncode == 0:
            return PushOutcome(True, False, None)
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            flag, _, rest = line.partition("\t")
            if flag == "!":
                summary = rest.partition("\t")[2]
                # Lost a race: the remote moved since our fetch (seen by us, or by the server while it
                # took its ref lock, e.g. two first pushes at once).
                stale = any(words in summary for words in ("stale info", "fetch first", "non-fast-forward",
                                                           "failed to update ref", "failed to lock"))
                remote_says = [ln[len("remote:"):].strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines()
                               if ln.startswith("remote:") and ln[len("remote:"):].strip()]
                why = quoted(summary) + (f": the remote said {quoted(remote_says[-1])}" if remote_says else "")
                return PushOutcome(False, stale, why)
        return PushOutcome(False, False, _last_words(proc.stderr))

    # -- objects ------------------------------------------------------------------------------------------------
    def tree_files(self, commit: str) -> dict[str, str]:
        """{path: blob oid} of every file of the commit's tree."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", commit).stdout
        files = {}
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, _, path = entry.partition(b"\t")
            mode, kind, oid = meta.split()
            if kind == b"blob":
                files[path.decode("utf-8", "surrogateescape")] = oid.decode()
        return files

    def blobs(self, oids: list[str]) -> dict[str, memoryview]:
        """The contents of many blobs, in one `git cat-file --batch` call (views into its output, not
        copies: a first sync reads every writer's whole log this way)."""
        if not oids:
            return {}
        wanted = list(dict.fromkeys(oids))
        out = self.run("cat-file", "--batch", input=("\n".join(wanted) + "\n").encode()).stdout
        view = memoryview(out)
        found, pos = {}, 0
        for oid in wanted:
            header_end = out.index(b"\n", pos)
            header = out[pos:header_end].split()
            if len(header) < 3 or header[1] == b"missing":
                raise TeamError(f"object {oid} is missing from retained's copy of the team repository",
                                hint="run `retained sync` again (it fetches again)")
            size = int(header[2])
            found[oid] = view[header_end + 1 : header_end + 1 + size]
            pos = header_end + 2 + size
        return found

    def write_objects(self, objects: list[tuple[str, bytes]]) -> None:
        """Write (type, content) objects, in one git call: a pack without deltas made here, unpacked into
        loose objects when small (as `git fetch` does below its unpack limit), else kept as a pack. An
        object the repository already holds is not written again (when unpacked)."""
        if not objects:
            return
        parts = [b"PACK", struct.pack(">II", 2, len(objects))]
        for kind, data in objects:
            size = len(data)
            head, byte, size = bytearray(), (_PACK_TYPES[kind] << 4) | (size & 0x0F), size >> 4
            while size:
                head.append(byte | 0x80)
                byte, size = size & 0x7F, size >> 7
            head.append(byte)
            parts += [bytes(head), zlib.compress(data, 1)]
        pack = b"".join(parts)
        pack += hashlib.sha1(pack).digest()
        if len(objects) < UNPACK_LIMIT:
            self.run("unpack-objects", "-q", input=pack)
        else:
            self.run("index-pack", "--stdin", input=pack)

    def commit(self, tree: str, parents: list[str], message: str) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.run(*args, input=message.encode(), env=_COMMITTER).stdout.decode().strip()

    def message(self, commit: str) -> str:
        raw = self.run("cat-file", "commit", commit).stdout.decode("utf-8", "replace")
        return raw.partition("\n\n")[2]

    def roots(self, commit: str) -> list[str]:
        return self.run("rev-list", "--max-parents=0", commit).stdout.decode().split()

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.run("merge-base", "--is-ancestor", older, newer, ok=(0, 1)).returncode == 0

    def collect(self) -> None:
        """Drop every object no ref reaches (after a purge rewrote the history): nothing purged stays here."""
        self.run("reflog", "expire", "--expire=now", "--all")
        self.run("gc", "--prune=now", "--quiet")

    def loose_objects(self) -> int:
        """How many loose objects the repository holds (its `objects/xx/` folders, counted here)."""
        count = 0
        with os.scandir(self.git_dir / "objects") as folders:
            for folder in folders:
                if len(folder.name) == 2 and folder.is_dir():
                    count += sum(1 for _ in os.scandir(folder.path))
        return count

    def packs(self) -> int:
        return sum(1 for _ in (self.git_dir / "objects" / "pack").glob("*.pack"))

    def maintain(self) -> list[str]:
        """Keep the repository within its bound after a sync: at most LOOSE_LIMIT loose objects (past it,
        they go into one new pack and the unreachable ones are dropped) and at most PACK_LIMIT packs
        (past it, all become one). The first step costs in proportion to the loose objects, the second
        to the whole repository but comes once per PACK_LIMIT packs. Returns the steps taken."""
        steps = []
        if self.loose_objects() > LOOSE_LIMIT:
            self.run("repack", "-d", "-q")  # the loose objects any ref reaches, into one new pack
            self.run("prune", "--expire=now")  # the rest: a commit whose push lost a race, nothing else
            steps.append("packed loose objects")
        if self.packs() > PACK_LIMIT:
            self.run("repack", "-a", "-d", "-q")
            steps.append("joined packs")
        return steps


def object_id(kind: str, data: bytes) -> str:
    """The git object id (SHA-1 object format) of an object with this content, without running git."""
    return hashlib.sha1(b"%s %d\0" % (kind.encode(), len(data)) + data).hexdigest()


def tree_content(entries: dict[str, tuple[str, str]]) -> bytes:
    """The content of a tree object of {name: (type, oid)} entries, "tree" or "blob", in git's order
    (a tree's name sorts as if it ended in "/")."""
    mode = {"tree": b"40000", "blob": b"100644"}
    key = {name: name + "/" if kind == "tree" else name for name, (kind, _) in entries.items()}
    return b"".join(mode[entries[name][0]] + b" " + name.encode() + b"\0" + bytes.fromhex(entries[name][1])
                    for name in sorted(entries, key=key.__getitem__))


#: What a sync asks of git's configuration, in one call: the author, and the key it signs with.
CONFIG_KEYS = ("user.name", "user.email", "gpg.format", "user.signingkey")


def config(cwd: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """{key: value} of CONFIG_KEYS as the checkout at `cwd` sees them (the last value of each; unset
    keys left out), in one `git config` call."""
    exe = shutil.which("git")
    if exe is None:
        return {}
    pattern = "^(" + "|".join(k.replace(".", r"\.") for k in CONFIG_KEYS) + ")$"
    try:
        proc = subprocess.run([exe, "config", "-z", "--get-regexp", pattern], cwd=cwd, capture_output=True, timeout=10,
                              env=environment(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, str] = {}
    for item in proc.stdout.decode("utf-8", "replace").split("\0"):
        name, _, value = item.partition("\n")
        if name and value.strip():
            found[name.lower()] = value.strip()
    return found


def author(cwd: str | os.PathLike[str] | None = None, values: dict[str, str] | None = None) -> dict[str, str]:
    """{name, email} from git's configuration as the project's checkout sees it (keys left out when
    unset). `values`: what `config` read already."""
    values = config(cwd) if values is None else values
    return {field: values[key] for key, field in (("user.name", "name"), ("user.email", "email")) if values.get(key)}


def remote_url(checkout: str | os.PathLike[str], name: str = "origin") -> str | None:
    """`git remote get-url NAME` in the project's checkout, or None when it has no such remote."""
    exe = shutil.which("git")
    if exe is None:
        raise GitMissing("git is not installed or not on PATH; team memory needs it", hint="install git, then retry")
    proc = subprocess.run([exe, "remote", "get-url", name], cwd=checkout, capture_output=True, timeout=10,
                          env=environment(), stdin=subprocess.DEVNULL)
    url = proc.stdout.decode("utf-8", "replace").strip()
    return url if proc.returncode == 0 and url else None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        proc.kill()
    proc.communicate()
