"""Check every writer's log on a memory ref, with the standard library and git only (no retained).

    python verifier.py GIT_DIR [REF]     (REF defaults to refs/retained/memory)

For a remote: `git clone --bare URL m.git && git -C m.git fetch origin
refs/retained/memory:refs/retained/memory`, then `python verifier.py m.git`. Prints one line per
writer and exits 0 when every chain holds, 1 otherwise. This file is the verifier docs/FORMAT.md shows;
it shares no code with retained on purpose, so that it checks the format, not retained against itself.
"""

import hashlib
import json
import subprocess
import sys


def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def check_writer(writer, data, purges):
    """(records verified, problem or None, tombstones) of one writer's file; purge listings go into `purges`."""
    state: dict = {"prev": "0" * 64, "clock": [-1, -1]}
    tombs: dict = {}
    lines = data.split(b"\n")
    if lines.pop():
        return len(lines), f"line {len(lines) + 1} has no newline at its end", tombs
    for n, raw in enumerate(lines, 1):
        try:
            rec = json.loads(raw)
            problem = check_line(writer, n, rec, state, purges, tombs) or (canon(rec) != raw and "is not canonical JSON")
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            problem = "is not a valid record"
        if problem:
            return n - 1, f"line {n} {problem}", tombs
    return len(lines), None, tombs


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
    return None


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
    for writer, data in sorted(writer_logs(files, version).items()):
        count, problem, found = check_writer(writer, data, purges)
        results[writer], tombs[writer] = [count, problem], found
    for writer, found in tombs.items():
        unlisted = [n for key, n in found.items() if key not in purges]
        if unlisted and results[writer][1] is None:
            results[writer][1] = f"line {min(unlisted)}: a tombstone no purge record lists"
    lines = [f"{w}: " + (f"intact: {c} records" if p is None else f"{p} ({c} lines verified before it)")
             for w, (c, p) in sorted(results.items())]
    return lines, all(p is None for _, p in results.values())


if __name__ == "__main__":
    report, ok = verify(read_ref(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "refs/retained/memory"))
    print("\n".join(report))
    sys.exit(0 if ok else 1)
