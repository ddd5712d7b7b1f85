"""Issue 28 item 5, growth bounded by what changed: writer logs travel in segments, so a sync that adds
k records adds O(k) bytes to the remote and to retained's own bare repository, which retained packs
back within a bound; a ref in the older one-file-per-writer format is read and written again in
segments; a purge rewrites only the segments it touches. Real git, real bare remotes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from retained import records
from retained.team import git as team_git
from retained.team import hlc, state, verifier, wlog
from retained.team.sync import SEGMENT_LINES, PurgeRequest, sync
from tests.helpers.team import PROJECT, git, local_record, reachable_objects, remote_log, texts

VERIFIER = [sys.executable, "-I", "-S", verifier.__file__]
WORDS = "deploy release cache schema index migration api token queue worker retry timeout staging replica".split()


def on_disk(git_dir: Path) -> dict[str, int]:
    """{oid: bytes on disk} of every object of a repository, loose or packed."""
    out = git("--git-dir", str(git_dir), "cat-file", "--batch-all-objects",
              "--batch-check=%(objectname) %(objectsize:disk)").stdout.decode()
    return {oid: int(size) for oid, size in (line.split() for line in out.splitlines())}


def tree_of(git_dir: Path, spec: str) -> dict[str, str]:
    """{name: oid} of a tree, e.g. `refs/retained/memory:writers/<writer>`."""
    out = git("--git-dir", str(git_dir), "ls-tree", spec).stdout.decode()
    return {line.split("\t")[1]: line.split()[2] for line in out.splitlines()}


def decision(i: int) -> dict:
    """A record as a store writes it, of the size a real decision has (a few hundred bytes)."""
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12 + i % 29))
    return local_record(f"{words} ({i})", scope=PROJECT)


def test_a_sync_that_adds_one_record_to_a_10k_line_log_adds_at_most_20_kB_to_the_remote_and_to_retaineds_repository(
        tmp_path, remote_dir):
    team, url, writer = tmp_path / "team", remote_dir.as_uri(), "wgrowth0001"
    recs = [decision(i) for i in range(10_000)]
    assert sync(team, url, writer, recs).ok
    remote_before, local_before = on_disk(remote_dir), on_disk(team / state.REPO)
    recs.append(decision(10_000))
    result = sync(team, url, writer, recs)
    assert result.ok and result.pushed == 1
    remote_added = {oid: n for oid, n in on_disk(remote_dir).items() if oid not in remote_before}
    local_added = {oid: n for oid, n in on_disk(team / state.REPO).items() if oid not in local_before}
    # the last segment, the writer's tree of segments, `writers`, the writer's signed head and the
    # `signatures` tree, the root tree and the commit
    assert len(remote_added) == len(local_added) == 7
    assert sum(remote_added.values()) <= 20_000, remote_added
    assert sum(local_added.values()) <= 20_000, local_added
    assert len(remote_log(remote_dir, writer).split(b"\n")) == 10_002  # every line, one record more


def format_1_ref(remote_dir: Path, logs: dict[str, bytes]) -> str:
    """Put a memory ref in format 1 (one whole file per writer) on the remote, as retained wrote it
    before segments; returns its commit."""
    g = ["--git-dir", str(remote_dir)]
    blobs = {w: git(*g, "hash-object", "-w", "--stdin", input=data).stdout.decode().strip() for w, data in logs.items()}
    writers = git(*g, "mktree", input="".join(f"100644 blob {oid}\t{w}.jsonl\n" for w, oid in sorted(blobs.items()))
                  .encode()).stdout.decode().strip()
    fmt = git(*g, "hash-object", "-w", "--stdin", input=b"retained-memory 1\n").stdout.decode().strip()
    tree = git(*g, "mktree", input=f"100644 blob {fmt}\tformat\n040000 tree {writers}\twriters\n".encode()).stdout.decode().strip()
    who = {"GIT_AUTHOR_NAME": "retained", "GIT_AUTHOR_EMAIL": "retained@invalid", "GIT_COMMITTER_NAME": "retained",
           "GIT_COMMITTER_EMAIL": "retained@invalid"}
    commit = git(*g, "commit-tree", tree, "-m", "retained memory of 2 writers", env=who).stdout.decode().strip()
    git(*g, "update-ref", team_git.MEMORY_REF, commit)
    return commit


def writer_log(writer: str, texts_: list[str]) -> list[wlog.Entry]:
    entries: list[wlog.Entry] = []
    for i, text in enumerate(texts_):
        body = {"id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision", "text": text, "scope": PROJECT}
        entries.append(wlog.seal_after(body, entries[-1] if entries else None, writer=writer,
                                       clock=hlc.HLC(1_700_000_000_000 + i, 0), author=None, seen=None))
    return entries


def test_a_ref_in_format_1_is_read_and_the_next_push_writes_it_again_in_segments(machines, remote_dir):
    ann, bob = "wformerann01", "wformerbob01"
    logs = {ann: wlog.encode(writer_log(ann, [f"ann decision {i}" for i in range(200)])),
            bob: wlog.encode(writer_log(bob, ["bob decision"]))}
    old = format_1_ref(remote_dir, logs)
    cat = machines("cat")
    cat.write("cat decision")
    result = cat.sync()
    assert result.ok and result.refused == [] and result.pulled == {ann: 200, bob: 1} and result.pushed == 1
    assert git("--git-dir", str(remote_dir), "show", f"{team_git.MEMORY_REF}:format").stdout == b"retained-memory 2\n"
    listing = git("--git-dir", str(remote_dir), "ls-tree", "-r", "--name-only", team_git.MEMORY_REF).stdout.decode().split()
    assert sorted(listing) == sorted(["format", *[f"writers/{ann}/{n:06d}.jsonl" for n in range(-(-200 // SEGMENT_LINES))],
                                      f"writers/{bob}/000000.jsonl", f"writers/{cat.writer}/000000.jsonl",
                                      "allowed_signers", f"signatures/{cat.writer}.sig"])
    assert remote_log(remote_dir, ann) == logs[ann] and remote_log(remote_dir, bob) == logs[bob]  # the same bytes
    parents = git("--git-dir", str(remote_dir), "rev-parse", f"{team_git.MEMORY_REF}^@").stdout.decode().split()
    assert parents == [old]  # written again on top of the old history, not a rewrite of it
    proc = subprocess.run([*VERIFIER, str(remote_dir)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and f"{ann}: intact: 200 records" in proc.stdout, proc.stdout
    dan = machines("dan")
    assert dan.sync().ok and texts(dan) == texts(cat) == {f"ann decision {i}" for i in range(200)} | {
        "bob decision", "cat decision"}


def test_a_purge_rewrites_only_the_segments_of_the_lines_it_names_and_no_reachable_object_keeps_them(
        machines, remote_dir):
    ann, bob = machines("ann"), machines("bob")
    recs = [local_record(f"ann decision {i}" + (" PURGE-SEGMENT-MARK" if i == 150 else "")) for i in range(300)]
    with ann.environment():
        assert sync(ann.team_dir, ann.remote, ann.writer, recs).ok
    assert bob.sync().ok and len(bob.mirror()[ann.writer]) == 300
    before = tree_of(remote_dir, f"{team_git.MEMORY_REF}:writers/{ann.writer}")
    assert len(before) == -(-300 // SEGMENT_LINES) > 2
    request = PurgeRequest(records.new_id(), (recs[150]["id"],), records.now_rfc3339(), "a password")
    result = bob.sync(purges=(request,))  # a teammate purges ann's record
    assert result.ok and result.rewrote and [p["id"] for p in result.purged] == [recs[150]["id"]]
    after = tree_of(remote_dir, f"{team_git.MEMORY_REF}:writers/{ann.writer}")
    assert {n for n in before if before[n] != after[n]} == {f"{150 // SEGMENT_LINES:06d}.jsonl"}  # line 151's
    assert b"PURGE-SEGMENT-MARK" not in reachable_objects(remote_dir)
    roots = git("--git-dir", str(remote_dir), "rev-list", "--max-parents=0", team_git.MEMORY_REF).stdout.split()
    assert len(roots) == 1
    with ann.environment():
        again = sync(ann.team_dir, ann.remote, ann.writer, recs)
    assert again.ok and again.published == 0 and tree_of(remote_dir, f"{team_git.MEMORY_REF}:writers/{ann.writer}") == after
    assert [r["id"] for r in ann.mirror()[ann.writer] if records.is_tombstone(r)] == [recs[150]["id"]]


def test_retaineds_bare_repository_is_packed_back_within_its_bound_after_every_sync(machines, monkeypatch):
    monkeypatch.setattr(team_git, "LOOSE_LIMIT", 20)
    monkeypatch.setattr(team_git, "PACK_LIMIT", 2)
    ann, bob = machines("ann"), machines("bob")
    most_packs = 0
    for i in range(8):
        for m in (ann, bob):
            m.write(f"{m.name} decision {i}")
            assert m.sync().ok
            repo = team_git.Git(m.team_dir / state.REPO)
            assert repo.loose_objects() <= 20 and repo.packs() <= 2, (m.name, i)
            most_packs = max(most_packs, repo.packs())
    assert most_packs >= 1 and len(on_disk(ann.team_dir / state.REPO)) > 2 * 20  # the bound had work to do
    expected = {f"{name} decision {i}" for name in ("ann", "bob") for i in range(8)}
    assert ann.sync().ok and texts(ann) == texts(bob) == expected
    proc = subprocess.run([*VERIFIER, str(ann.team_dir / state.REPO)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.count("intact: 8 records") == 2, proc.stdout


def test_a_segment_holds_a_fixed_number_of_lines():
    assert SEGMENT_LINES == 64  # docs/FORMAT.md says so; a change is a format change


def test_a_pull_reads_only_the_segments_that_changed(machines, monkeypatch):
    ann, bob = machines("ann"), machines("bob")
    recs = [local_record(f"ann decision {i}") for i in range(5 * SEGMENT_LINES - 1)]
    with ann.environment():
        assert sync(ann.team_dir, ann.remote, ann.writer, recs).ok
    assert bob.sync().ok
    read: list[list[str]] = []
    real = team_git.Git.blobs
    monkeypatch.setattr(team_git.Git, "blobs", lambda self, oids: read.append(list(oids)) or real(self, oids))
    recs += [local_record("ann decision that starts a segment"), local_record("and one more")]
    with ann.environment():
        assert sync(ann.team_dir, ann.remote, ann.writer, recs).ok
    read.clear()
    result = bob.sync()
    assert result.ok and result.pulled == {ann.writer: 2}
    assert [len(oids) for oids in read] == [3]  # the last segment, completed, the new one, ann's new signature
    assert texts(bob) == {r["text"] for r in recs}
