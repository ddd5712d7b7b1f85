"""Check every writer's log on a memory ref, with the standard library and git only (no retained).

    python verifier.py GIT_DIR [REF]     (REF defaults to refs/retained/memory)

For a remote: `git clone --bare URL m.git && git -C m.git fetch origin
refs/retained/memory:refs/retained/memory`, then `python verifier.py m.git`. Prints one line per
writer: its chain, then whose key signed its head (checked with `ssh-keygen -Y verify`) or "unsigned".
Exits 0 when every chain holds and every signature there is verifies, 1 otherwise. This file is the
verifier docs/FORMAT.md shows; it shares no code with retained on purpose, so that it checks the format,
not retained against itself.
"""

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NAMESPACE = "retained-memory"
BEGIN = b"-----BEGIN SSH SIGNATURE-----"


def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def check_writer(writer, data, purges):
    """(records verified, problem or None, tombstones, sha256 of each line verified) of one writer's
    file; purge listings go into `purges`."""
    state: dict = {"prev": "0" * 64, "clock": [-1, -1], "shas": []}
    tombs: dict = {}
    lines = data.split(b"\n")
    if lines.pop():
        return len(lines), f"line {len(lines) + 1} has no newline at its end", tombs, []
    for n, raw in enumerate(lines, 1):
        try:
            rec = json.loads(raw)
            problem = check_line(writer, n, rec, state, purges, tombs) or (canon(rec) != raw and "is not canonical JSON")
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            problem = "is not a valid record"
        if problem:
            return n - 1, f"line {n} {problem}", tombs, state["shas"][:n - 1]
    return len(lines), None, tombs, state["shas"]


def check_line(writer, n, rec, state, purges, tombs):
    if "forgotten" in rec and "text" not in rec:  # a tombstone: a purge record must list it
        tombs[(writer, rec["id"], rec["seq"], rec["sha256"])] = n
    else:
        body = {k: v for k, v in rec.items() if k != "sha256"}
        if hashlib.sha256(canon(body)).hexdigest() != rec["sha256"]:
            return f"(seq {rec.get('seq')}): bad hash"
        if rec["writer"] != writer or not rec["hlc"] > state["clock"]:
            return "names another writer, or its hlc does not advance"
        state["clock"] = rec["hlc"]
        if rec["kind"] == "forget" and rec.get("action") == "purge":
            purges.update((p["writer"], p["id"], p["seq"], p["sha256"]) for p in rec["purged"])
    if rec["prev"] != state["prev"] or rec["seq"] != n:
        return "breaks the chain"
    state["prev"] = rec["sha256"]
    state["shas"].append(rec["sha256"])
    return None


def check_signature(writer, shas, sig, allowed):
    """(what the writer's signature says, whether that is fine). `sig`: signatures/<writer>.sig (the
    signed head's four lines, then the armored SSH signature of exactly those bytes); `allowed`: the
    allowed_signers lines that name this writer."""
    if len(allowed) > 1:
        return "allowed_signers lists more than one key for it", False
    if sig is None:
        return ("unsigned", True) if not allowed else ("unsigned, though allowed_signers lists a key for it", False)
    message, _, armor = sig.partition(BEGIN)
    fields = message.decode("utf-8", "replace").split("\n")
    try:
        seq, sha = int(fields[2][len("seq "):]), fields[3][len("sha256 "):]
    except (IndexError, ValueError):
        return "its signature file is not a signed head", False
    if message != f"retained-memory signed head\nwriter {writer}\nseq {seq}\nsha256 {sha}\n".encode():
        return "its signature file is not its own signed head", False
    if not (1 <= seq <= len(shas) and shas[seq - 1] == sha):
        return f"its signature is of a head its log does not hold (seq {seq})", False
    if seq != len(shas):
        return f"its lines after seq {seq} are not signed", False
    if not allowed:
        return "signed, but allowed_signers lists no key for it", False
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        return "signature not checked: ssh-keygen not found", True
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "allowed").write_bytes(allowed[0] + b"\n")
        Path(tmp, "sig").write_bytes(BEGIN + armor)
        proc = subprocess.run([keygen, "-Y", "verify", "-f", str(Path(tmp, "allowed")), "-I", writer, "-n", NAMESPACE,
                               "-s", str(Path(tmp, "sig"))], input=message, capture_output=True, timeout=60)
    if proc.returncode != 0:
        return "its signature does not verify: " + proc.stderr.decode("utf-8", "replace").strip()[-200:], False
    return "signed by" + proc.stdout.decode("utf-8", "replace").strip().rpartition(" with")[2], True


def read_ref(git_dir, ref):
    """{path: bytes} of every file of the ref's tree (one ls-tree, one cat-file --batch)."""
    git = ["git", "--git-dir", git_dir]
    listing = subprocess.run(git + ["ls-tree", "-r", "-z", ref], capture_output=True, check=True).stdout
    entries = [e.split(b"\t", 1) for e in listing.split(b"\0") if e]
    oids = [meta.split()[2] for meta, _ in entries]
    out = subprocess.run(git + ["cat-file", "--batch"], input=b"\n".join(oids) + b"\n",
                         capture_output=True, check=True).stdout
    files, pos = {}, 0
    for _, path in entries:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        files[path.decode()] = out[header_end + 1 : header_end + 1 + size]
        pos = header_end + 2 + size
    return files


def writer_logs(files, version):
    """{writer: log} from the tree: format 2 cuts each log into segments `writers/<writer>/<n>.jsonl`
    (n zero-padded, so that their names sort in order), format 1 holds it whole in `writers/<writer>.jsonl`."""
    pieces: dict = {}
    for path in sorted(files):
        parts = path.split("/")
        if parts[0] == "writers" and path.endswith(".jsonl") and len(parts) == version + 1:
            pieces.setdefault(parts[1].removesuffix(".jsonl"), []).append(files[path])
    return {writer: b"".join(segments) for writer, segments in pieces.items()}


def verify(files):
    """One line per writer, and whether all hold."""
    version = {b"retained-memory 1": 1, b"retained-memory 2": 2}.get(files.get("format", b"").strip())
    if version is None:
        return ["no `format` file saying retained-memory 1 or 2"], False
    purges: set = set()
    results: dict = {}
    tombs: dict = {}
    shas: dict = {}
    for writer, data in sorted(writer_logs(files, version).items()):
        count, problem, tombs[writer], shas[writer] = check_writer(writer, data, purges)
        results[writer] = [count, problem]
    for writer, found in tombs.items():
        unlisted = [n for key, n in found.items() if key not in purges]
        if unlisted and results[writer][1] is None:
            results[writer][1] = f"line {min(unlisted)}: a tombstone no purge record lists"
    # allowed_signers: only lines of the shape `<writer> namespaces="retained-memory" <key>` count, one per writer
    allowed = [ln.strip() for ln in files.get("allowed_signers", b"").split(b"\n")]
    lines, ok = [], True
    for w, (c, p) in sorted(results.items()):
        mine = [ln for ln in allowed if ln.split(b" ")[:2] == [w.encode(), b'namespaces="retained-memory"']]
        said, fine = check_signature(w, shas[w], files.get(f"signatures/{w}.sig"), mine)
        ok = ok and p is None and fine
        lines.append(f"{w}: " + (f"intact: {c} records" if p is None else f"{p} ({c} lines verified before it)") + f"; {said}")
    return lines, ok


if __name__ == "__main__":
    report, ok = verify(read_ref(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "refs/retained/memory"))
    print("\n".join(report))
    sys.exit(0 if ok else 1)
