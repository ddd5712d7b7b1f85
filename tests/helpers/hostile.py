"""What the hostile-input tests share: the CLI as a subprocess, records written as FORMAT.md says
(by any other program), and the promise every answer to bad input keeps: a clear error, never a
traceback, never exit 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from retained import records

#: Words only: these tests are about what the store does with bad input, not about meaning.
LEXICAL = {"RETAINED_EMBED": "off"}


def needs_its_own_process(args: tuple[str, ...], env: dict[str, str] | None, cwd: str | Path | None) -> bool:
    """An environment or a folder of its own, or a command that serves or hooks (`serve`, `ui`, `hook`
    change process-wide state: signals, the collector, a listening socket)."""
    command = next((a for a in args if not a.startswith("-")), "")
    return env is not None or cwd is not None or command in ("serve", "ui", "hook") or args[:1] == ("--dir",)


def cli(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None, cwd: str | Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`retained ARGS`, words only; stdout and stderr as text. In this process (`cli_here`) unless the call
    needs a process of its own: an environment or a folder of its own, or a command that serves or
    hooks (`serve`, `ui`, `hook` change process-wide state); then `python -m retained` in a fresh interpreter."""
    if not needs_its_own_process(args, env, cwd):
        return cli_here(*args, input=input)
    full = dict(os.environ, **LEXICAL)
    full.update(env or {})
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run([sys.executable, "-m", "retained", *args], input=data, capture_output=True,
                          env=full, cwd=cwd, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def cli_here(*args: str, input: str | bytes | None = None, settings: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """`retained ARGS` in this process (the console entry's `main`), words only unless `settings` says
    otherwise, for a promise that is not about the process: a fresh interpreter costs each call ~0.2 s
    of start-up and imports. Anything that escapes `main` is written to stderr as a traceback, so
    `no_crash` still sees it."""
    extra = LEXICAL if settings is None else settings
    import io
    import traceback
    from contextlib import redirect_stderr, redirect_stdout

    from retained.entry import main

    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()  # with .buffer, as sys.stdout has (export writes bytes)
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="surrogateescape", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace", write_through=True)
    saved_env = {k: os.environ.get(k) for k in extra}
    limit = sys.getrecursionlimit()
    data = input.encode() if isinstance(input, str) else (input or b"")
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    saved_stdin, sys.stdin = sys.stdin, stdin
    os.environ.update(extra)
    sys.setrecursionlimit(1000)  # as a fresh interpreter has it (a test may have raised it for the session)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 2
            except BaseException:  # a crash, said as a fresh interpreter would say it
                traceback.print_exc()
                code = 1
    finally:
        sys.stdin = saved_stdin
        sys.setrecursionlimit(limit)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out.flush()
    err.flush()
    return subprocess.CompletedProcess([sys.executable, "-m", "retained", *args], code,
                                       out_bytes.getvalue().decode("utf-8", "replace"),
                                       err_bytes.getvalue().decode("utf-8", "replace"))


def cli_json(*args: str, **kw: Any) -> dict[str, Any]:
    proc = cli(*args, "--json", **kw)
    assert proc.stdout.strip(), (proc.returncode, proc.stderr)
    return json.loads(proc.stdout)


def no_crash(proc: subprocess.CompletedProcess[str], what: str = "") -> None:
    """The promise for every answer to bad input: no traceback, no internal error (exit 3)."""
    label = what or " ".join(str(a) for a in proc.args[3:])[:120]
    assert "Traceback" not in proc.stderr, f"{label}: {proc.stderr[-1500:]}"
    assert "internal error" not in proc.stderr, f"{label}: {proc.stderr[-600:]}"
    assert proc.returncode != 3, f"{label}: exit 3: {proc.stderr[-600:]}"


def one_line_error(proc: subprocess.CompletedProcess[str], what: str = "") -> str:
    """A refusal: exit 1 or 2, and one `error:` line on stderr; returns that line."""
    no_crash(proc, what)
    assert proc.returncode in (1, 2), f"{what}: exit {proc.returncode}: {proc.stdout[-400:]} {proc.stderr[-400:]}"
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, f"{what}: {proc.stderr[-600:]}"
    return errors[0]


def append_line(store_dir: Path, raw: bytes, newline: bool = True) -> None:
    """What any other program can do to the log: append bytes (FORMAT.md's lock taken, as it asks)."""
    import fcntl

    store_dir.mkdir(parents=True, exist_ok=True)
    with open(store_dir / "log.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(store_dir / "log.jsonl", "ab") as f:
            f.write(raw + (b"\n" if newline else b""))


def sealed_chain(specs: list[dict[str, Any]], start_seq: int = 1, prev: str = records.GENESIS) -> list[dict[str, Any]]:
    """Valid records (FORMAT.md's hash and chain) from partial ones: seq, id, ts and prev filled in."""
    out = []
    for i, spec in enumerate(specs):
        rec = {"seq": start_seq + i, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": "note", "prev": prev}
        rec.update(spec)
        rec = records.seal(rec)
        prev = rec["sha256"]
        out.append(rec)
    return out


def jsonl(recs: list[dict[str, Any]]) -> bytes:
    return b"".join(records.format_line(r) for r in recs)


def every_file_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under a directory (a store's), by relative path."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def file_size_limit(limit: int):
    """A subprocess `preexec_fn` that caps the files the child may write at `limit` bytes, as a full
    disk would (the write fails with EFBIG instead of killing the child with SIGXFSZ)."""
    import resource
    import signal

    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre
