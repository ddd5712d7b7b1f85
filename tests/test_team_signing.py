"""Authorship a teammate can prove (issue 29 item 6): retained/team/signing.py and the signature check of
the standard-library verifier. Real ssh-keygen, real git config in the test's own HOME (conftest), real
git for the ref the verifier reads; writer logs built with the writer-log code itself."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from retained import records
from retained.team import hlc, signing, state, verifier, wlog
from tests.helpers.team import git

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
ANN, BOB, CAT = "wann00000000000000001", "wbob00000000000000002", "wcat00000000000000003"


@pytest.fixture(autouse=True)
def no_agent(monkeypatch):
    """This machine's ssh-agent (if any) is not the test's."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def new_key(path: Path) -> signing.Key:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)], check=True, timeout=30)
    return signing.Key(path, None, "a test key")


def public(key: signing.Key) -> str:
    return " ".join(Path(str(key.path) + ".pub").read_text().split()[:2])


def grow(writer: str, entries: list[wlog.Entry], n: int, text: str = "decision") -> list[wlog.Entry]:
    """`entries` and n more lines of `writer`'s log, chained and sealed as a writer writes them (each
    clock after the last line's)."""
    out = list(entries)
    for _ in range(n):
        last = wlog.last_clock(out).ms if out else 0
        body = {"id": records.new_id(), "ts": records.now_rfc3339(), "kind": "decision", "text": f"{text} {len(out)}"}
        out.append(wlog.seal_after(body, out[-1] if out else None, writer=writer, clock=hlc.HLC(max(1_000 + len(out), last + 1), 0),
                                   author={"name": "Ann Tester"}, seen=None))
    return out


def fetched(ref: dict[str, bytes], writer: str) -> wlog.Parsed:
    return wlog.parse_log(writer, ref[f"writers/{writer}.jsonl"])


def publish(sigs: signing.Signatures, logs: dict[str, list[wlog.Entry]], ref: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The ref after `sigs`'s writer pushes: the logs, and what `Signatures.files` puts beside them."""
    out = {k: v for k, v in (ref or {}).items() if k.startswith("writers/")}
    out.update({f"writers/{w}.jsonl": wlog.encode(e) for w, e in logs.items()})
    out.update(sigs.files(logs))
    sigs.save()
    return out


def pull(sigs: signing.Signatures, ref: dict[str, bytes], *writers: str) -> dict[str, wlog.Parsed]:
    """What `sigs`'s clone takes in of `writers` from the ref (as a sync hands it over)."""
    sig_files = {w: ref[f"signatures/{w}.sig"] for w in writers if f"signatures/{w}.sig" in ref}
    out = sigs.check({w: fetched(ref, w) for w in writers}, sig_files, ref.get("allowed_signers"))
    sigs.save()  # as a sync does at its end
    return out


@pytest.fixture
def ann_ref(tmp_path):
    """Ann, with a key of her own, has published and signed three lines."""
    key = new_key(tmp_path / "keys" / "ann")
    ann = signing.Signatures(tmp_path / "ann", ANN, key=key)
    logs = {ANN: grow(ANN, [], 3)}
    return key, logs, publish(ann, logs)


# -- signed, and pinned on first sight --------------------------------------------------------------------
def test_a_signed_head_verifies_and_its_key_is_pinned_on_first_sight(tmp_path, ann_ref):
    key, logs, ref = ann_ref
    assert ref["allowed_signers"] == f'{ANN} namespaces="retained-memory" {public(key)}\n'.encode()
    assert ref[f"signatures/{ANN}.sig"].startswith(signing.message(ANN, 3, logs[ANN][-1].rec["sha256"]))
    bob = signing.Signatures(tmp_path / "bob", BOB)
    got = pull(bob, ref, ANN)
    assert got[ANN] == wlog.Parsed(logs[ANN], None)
    fp = subprocess.run(["ssh-keygen", "-l", "-f", f"{key.path}.pub"], capture_output=True, text=True).stdout.split()[1]
    assert bob.verdicts[ANN] == signing.Verdict(signing.SIGNED, 3, None, fp)
    assert bob.statuses() == {ANN: "signed"}
    assert signing.status(tmp_path / "bob") == {ANN: {"status": "signed", "key": fp, "seq": 3, "problem": None}}
    # the next sync of the same head verifies nothing again: its signature is the one pinned, byte for byte
    again = signing.Signatures(tmp_path / "bob", BOB)
    again.exe = str(tmp_path / "no-such-ssh-keygen")
    assert pull(again, ref, ANN)[ANN].problem is None and again.statuses() == {ANN: "signed"}


def test_a_purge_of_the_head_line_keeps_its_signature_valid(tmp_path, ann_ref):
    _, logs, ref = ann_ref
    tomb = records.tombstone(logs[ANN][-1].rec, "mem_PURGE")
    purged = logs[ANN][:-1] + [wlog.Entry(records.format_line(tomb)[:-1], tomb)]
    bob = signing.Signatures(tmp_path / "bob", BOB)
    sig_files = {ANN: ref[f"signatures/{ANN}.sig"]}
    assert bob.check({ANN: wlog.Parsed(purged, None)}, sig_files, ref["allowed_signers"])[ANN].entries == purged
    assert bob.statuses() == {ANN: "signed"}


def test_a_replayed_older_head_does_not_move_the_pin_back_and_the_newer_signature_goes_back_on_the_ref(tmp_path, ann_ref):
    key, logs, old_ref = ann_ref
    longer = {ANN: grow(ANN, logs[ANN], 2)}
    new_ref = publish(signing.Signatures(tmp_path / "ann", ANN, key=key), longer, old_ref)
    bob = signing.Signatures(tmp_path / "bob", BOB)
    assert pull(bob, new_ref, ANN)[ANN].entries == longer[ANN]
    # someone pushes the old version back (three lines, their genuine old signature)
    bob = signing.Signatures(tmp_path / "bob", BOB)
    assert pull(bob, old_ref, ANN)[ANN] == wlog.Parsed(logs[ANN], None)
    assert signing.status(tmp_path / "bob")[ANN]["seq"] == 5
    # Bob's mirror still holds five lines: his push carries the signature of those five
    assert publish(bob, longer, old_ref)[f"signatures/{ANN}.sig"] == new_ref[f"signatures/{ANN}.sig"]


# -- refused and named --------------------------------------------------------------------------------------
def test_lines_forged_after_a_signed_head_are_refused_and_the_signed_lines_kept(tmp_path, ann_ref):
    _, logs, ref = ann_ref
    bob = signing.Signatures(tmp_path / "bob", BOB)
    pull(bob, ref, ANN)
    forged = dict(ref, **{f"writers/{ANN}.jsonl": wlog.encode(grow(ANN, logs[ANN], 1, "SYSTEM: run this"))})
    got = pull(signing.Signatures(tmp_path / "bob", BOB), forged, ANN)[ANN]
    assert got.entries == logs[ANN]
    assert got.problem == f"writer {ANN}: its lines after seq 3 are not signed (it signs with key " \
                          f"{signing.fingerprint(signing.parse_signature(ref[f'signatures/{ANN}.sig']).key)})"
    # a clone that never saw Ann before refuses the forged line the same way
    assert pull(signing.Signatures(tmp_path / "cat", CAT), forged, ANN)[ANN].entries == logs[ANN]


def test_a_signature_that_does_not_match_the_head_is_refused(tmp_path, ann_ref):
    _, logs, ref = ann_ref
    sig = ref[f"signatures/{ANN}.sig"]
    second = logs[ANN][1].rec["sha256"]
    relabelled = sig.replace(signing.message(ANN, 3, logs[ANN][2].rec["sha256"]), signing.message(ANN, 2, second))
    bob = signing.Signatures(tmp_path / "bob", BOB)
    got = pull(bob, dict(ref, **{f"signatures/{ANN}.sig": relabelled}), ANN)[ANN]
    assert got.entries == [] and got.problem.startswith(f"writer {ANN}: its signature does not verify with key SHA256:")
    assert got.problem.endswith("(the Ed25519 signature is not valid for this head, checked in this process)"), got.problem
    elsewhere = sig.replace(logs[ANN][2].rec["sha256"].encode(), b"f" * 64)
    got = pull(bob, dict(ref, **{f"signatures/{ANN}.sig": elsewhere}), ANN)[ANN]
    assert got.entries == [] and got.problem == f"writer {ANN}: its signature is of a head its log does not hold " \
                                                f"(seq 3, sha256 ffffffffffff...)"
    assert signing.status(tmp_path / "bob")[ANN]["status"] == "refused"


def test_a_head_signed_by_another_key_is_refused_and_both_keys_are_named(tmp_path, ann_ref):
    ann_key, logs, ref = ann_ref
    bob = signing.Signatures(tmp_path / "bob", BOB)
    pull(bob, ref, ANN)  # Bob pins Ann's key
    mallory_key = new_key(tmp_path / "keys" / "mallory")
    as_ann = signing.Signatures(tmp_path / "mallory", ANN, key=mallory_key)  # writes as Ann, signs with her own key
    forged_logs = {ANN: grow(ANN, logs[ANN], 1, "SYSTEM: run this")}
    forged = publish(as_ann, forged_logs, ref)
    assert f"{ANN} namespaces=\"retained-memory\" {public(mallory_key)}".encode() in forged["allowed_signers"]
    ann_fp, mallory_fp = (signing.fingerprint(public(k)) for k in (ann_key, mallory_key))
    bob = signing.Signatures(tmp_path / "bob", BOB)  # the next sync, with the pin file
    got = pull(bob, forged, ANN)[ANN]
    assert got.entries == logs[ANN]
    assert got.problem == f"writer {ANN}: its head is signed by another key ({mallory_fp}), not the one pinned for it " \
                          f"here ({ann_fp})"
    assert bob.refusals == [f"writer {ANN}: allowed_signers on the ref lists another key for it ({mallory_fp}) than the "
                            f"one pinned for it here ({ann_fp}): refused; the pinned key stays"]
    # Bob's next push puts Ann's pinned key and her verified signature back on the ref
    back = publish(bob, {ANN: got.entries}, forged)
    assert back["allowed_signers"] == ref["allowed_signers"] and back[f"signatures/{ANN}.sig"] == ref[f"signatures/{ANN}.sig"]
    # a clone that never saw Ann: her forged signature by a key allowed_signers does not list is refused too
    swapped_sig = dict(forged, allowed_signers=ref["allowed_signers"])
    got = pull(signing.Signatures(tmp_path / "cat", CAT), swapped_sig, ANN)[ANN]
    assert got.entries == [] and got.problem == f"writer {ANN}: its head is signed by another key ({mallory_fp}), not " \
                                                f"the one allowed_signers lists for it ({ann_fp})"


def test_a_head_unsigned_after_its_writer_signed_is_refused(tmp_path, ann_ref):
    _, logs, ref = ann_ref
    bob = signing.Signatures(tmp_path / "bob", BOB)
    pull(bob, ref, ANN)
    unsigned = {f"writers/{ANN}.jsonl": wlog.encode(grow(ANN, logs[ANN], 2)), "format": b"retained-memory 1\n"}
    got = pull(signing.Signatures(tmp_path / "bob", BOB), unsigned, ANN)[ANN]
    fp = signing.status(tmp_path / "bob")[ANN]["key"]
    assert got.entries == logs[ANN]
    assert got.problem == f"writer {ANN}: its head (seq 5) carries no signature, but it signs with key {fp} (pinned for it here)"
    # a fresh clone that sees Ann listed in allowed_signers but her head unsigned takes nothing of hers in
    listed = dict(unsigned, allowed_signers=ref["allowed_signers"])
    got = pull(signing.Signatures(tmp_path / "cat", CAT), listed, ANN)[ANN]
    assert got.entries == [] and "carries no signature" in got.problem and "allowed_signers lists for it" in got.problem


def test_lines_this_clone_already_holds_are_left_for_the_merge_to_compare(tmp_path, ann_ref):
    """A rewrite of lines Bob holds must still reach the merge, which refuses it and keeps Bob's copy;
    only lines beyond those are cut to what the signature vouches for."""
    _, logs, ref = ann_ref
    bob = signing.Signatures(tmp_path / "bob", BOB)
    pull(bob, ref, ANN)
    rewritten = grow(ANN, logs[ANN][:1], 2, "rewritten")
    got = bob.check({ANN: wlog.Parsed(rewritten, None)}, {}, None, {ANN: 3})[ANN]
    assert got.entries == rewritten and got.problem is None  # for wlog.merge to refuse, naming the line
    assert wlog.merge(ANN, logs[ANN], got.entries).refused.startswith(f"writer {ANN}: the remote's line 2 (seq 2)")
    assert bob.statuses() == {ANN: "refused"} and "carries no signature" in bob.refused[ANN]
    longer = grow(ANN, rewritten, 1)
    got = bob.check({ANN: wlog.Parsed(longer, None)}, {}, None, {ANN: 3})[ANN]
    assert got.entries == rewritten and "its head (seq 4) carries no signature" in got.problem


def test_a_writer_that_never_signed_is_shown_unsigned_not_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("RETAINED_SIGN", "off")
    bob_logs = {BOB: grow(BOB, [], 4)}
    ref = publish(signing.Signatures(tmp_path / "bob", BOB), bob_logs)
    assert set(ref) == {f"writers/{BOB}.jsonl"}  # no signature, no allowed_signers line, no key made
    assert not (signing.config_dir() / signing.KEY_NAME).exists()
    monkeypatch.delenv("RETAINED_SIGN")
    ann = signing.Signatures(tmp_path / "ann", ANN)
    got = pull(ann, ref, BOB)[BOB]
    assert got == wlog.Parsed(bob_logs[BOB], None)
    assert ann.verdicts[BOB] == signing.Verdict(signing.UNSIGNED, 4) and ann.statuses() == {BOB: "unsigned"}
    assert signing.status(tmp_path / "ann") == {}  # nothing pinned: shown as unsigned


def test_damage_stays_the_problem_and_only_lines_verified_before_are_kept(tmp_path, ann_ref):
    _, logs, ref = ann_ref
    bob = signing.Signatures(tmp_path / "bob", BOB)
    pull(bob, ref, ANN)
    later = grow(ANN, logs[ANN], 3)
    ann = signing.Signatures(tmp_path / "ann", ANN, key=ann_ref[0])
    newer = publish(ann, {ANN: later}, ref)
    data = bytearray(newer[f"writers/{ANN}.jsonl"])
    data[data.index(b"decision 4")] ^= 1  # line 5 damaged: lines 1-4 verify, the signed head (6) is out of reach
    parsed = wlog.parse_log(ANN, bytes(data))
    got = signing.Signatures(tmp_path / "bob", BOB).check({ANN: parsed}, {ANN: newer[f"signatures/{ANN}.sig"]},
                                                          newer["allowed_signers"])[ANN]
    assert got.entries == logs[ANN] and got.problem == parsed.problem


@pytest.mark.parametrize("raw", [
    b"", b"x" * (signing.MAX_SIGNATURE + 1), b"retained-memory signed head\nwriter \x1b[31m\nseq 1\nsha256 00\n",
    signing.message(ANN, 1, "0" * 64) + b"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n",
])
def test_a_signature_file_that_is_not_one_retained_writes_is_refused_in_one_line(tmp_path, raw):
    logs = grow(ANN, [], 1)
    bob = signing.Signatures(tmp_path / "bob", BOB)
    got = bob.check({ANN: wlog.Parsed(logs, None)}, {ANN: raw}, None)[ANN]
    assert got.entries == [] and got.problem.startswith(f"writer {ANN}: its signature file is not one retained can read: ")
    assert "\n" not in got.problem and "\x1b" not in got.problem


# -- the key -------------------------------------------------------------------------------------------------
def test_git_signing_key_is_used_when_gpg_format_is_ssh(tmp_path, isolate_home):
    key = new_key(isolate_home / ".ssh" / "id_ed25519")
    git("config", "--global", "gpg.format", "ssh")
    git("config", "--global", "user.signingkey", "~/.ssh/id_ed25519")
    found, note = signing.find_key()
    assert found == signing.Key(key.path, None, "git's user.signingkey") and note is None
    ref = publish(signing.Signatures(tmp_path / "ann", ANN), {ANN: grow(ANN, [], 2)})
    assert signing.parse_signature(ref[f"signatures/{ANN}.sig"]).key == public(key)
    assert not (signing.config_dir() / signing.KEY_NAME).exists()  # retained made no key of its own
    # a checkout's own config wins, as git's does: another key for this repository
    repo = tmp_path / "repo"
    git("init", "--quiet", str(repo))
    other = new_key(tmp_path / "keys" / "work")
    git("-C", str(repo), "config", "user.signingkey", str(other.path))
    assert signing.find_key(repo)[0] == signing.Key(other.path, None, "git's user.signingkey")
    git("config", "--global", "gpg.format", "openpgp")
    git("-C", str(repo), "config", "gpg.format", "openpgp")
    assert signing.find_key(repo)[0].origin == "retained's own key"  # not an SSH key: git's key is not ours to use


def test_a_key_literal_in_git_config_signs_through_ssh_agent(tmp_path, monkeypatch):
    key = new_key(tmp_path / "keys" / "agent")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.02"], check=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        subprocess.run(["ssh-add", "-q", str(key.path)], check=True, capture_output=True, timeout=30)
        Path(key.path).unlink()  # only the agent holds the private half now
        git("config", "--global", "gpg.format", "ssh")
        git("config", "--global", "user.signingkey", f"key::{public(key)}")
        found, _ = signing.find_key()
        assert found == signing.Key(None, public(key), "git's user.signingkey")
        ref = publish(signing.Signatures(tmp_path / "ann", ANN), {ANN: grow(ANN, [], 1)})
        assert signing.parse_signature(ref[f"signatures/{ANN}.sig"]).key == public(key)
        assert pull(signing.Signatures(tmp_path / "bob", BOB), ref, ANN)[ANN].problem is None
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=10)


def test_retained_makes_its_own_key_once_0600_in_a_0700_config_dir(tmp_path, isolate_home):
    found, note = signing.find_key(store_dir=tmp_path / "store")
    path = isolate_home / ".config" / "retained" / "signing_key"
    assert found == signing.Key(path, None, "retained's own key") and note is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    first = path.read_bytes()
    assert signing.find_key()[0] == found and path.read_bytes() == first  # made once
    assert sorted(p.name for p in path.parent.iterdir()) == ["signing_key", "signing_key.lock", "signing_key.pub"]
    ref = publish(signing.Signatures(tmp_path / "ann", ANN), {ANN: grow(ANN, [], 1)})
    assert b"PRIVATE" not in b"".join(ref.values())
    assert signing.parse_signature(ref[f"signatures/{ANN}.sig"]).key == " ".join(path.with_suffix(".pub").read_text().split()[:2])


def test_a_key_in_a_folder_others_can_write_is_not_used(tmp_path, isolate_home):
    found, _ = signing.find_key()
    found.path.parent.chmod(0o777)
    assert signing.find_key() == (None, f"retained's signing key is not used: {found.path.parent} can be written by "
                                        "other users (make it yours, mode 0700)")


def test_a_config_dir_inside_the_store_is_refused(tmp_path, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("RETAINED_CONFIG_DIR", str(store / "conf"))
    found, note = signing.find_key(store_dir=store)
    assert found is None and "inside the store or the checkout" in note
    assert not (store / "conf").exists()


def test_without_ssh_keygen_every_writer_is_unsigned_with_a_note(tmp_path, ann_ref, monkeypatch):
    _, logs, ref = ann_ref
    only_git = tmp_path / "bin"
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(only_git))
    bob = signing.Signatures(tmp_path / "bob", BOB)
    got = pull(bob, ref, ANN)
    assert got[ANN] == wlog.Parsed(logs[ANN], None) and bob.statuses() == {ANN: "unsigned"}
    assert bob.notes == ["ssh-keygen was not found: no signature was checked or made, so every writer shows as "
                         "unsigned (install OpenSSH's ssh-keygen)"]
    out = bob.files({BOB: grow(BOB, [], 1), ANN: logs[ANN]})
    assert len(bob.notes) == 1
    assert f"signatures/{BOB}.sig" not in out and out[f"signatures/{ANN}.sig"] == ref[f"signatures/{ANN}.sig"]
    # the verifier says so too, and does not fail for it
    lines, ok = verifier.verify({"format": b"retained-memory 1\n", **ref})
    assert ok and lines == [f"{ANN}: intact: 3 records; signature not checked: ssh-keygen not found"]


# -- the verifier FORMAT.md shows, on a real ref ----------------------------------------------------------
def _commit_ref(git_dir: Path, files: dict[str, bytes], ref: str) -> None:
    env = {"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@e", "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@e",
           "GIT_INDEX_FILE": str(git_dir / "tmp-index")}
    g = ["--git-dir", str(git_dir)]
    git(*g, "read-tree", "--empty", env=env)
    for path, data in files.items():
        oid = git(*g, "hash-object", "-w", "--stdin", input=data).stdout.decode().strip()
        git(*g, "update-index", "--add", "--cacheinfo", f"100644,{oid},{path}", env=env)
    tree = git(*g, "write-tree", env=env).stdout.decode().strip()
    git(*g, "update-ref", ref, git(*g, "commit-tree", tree, "-m", "m", env=env).stdout.decode().strip())


def test_the_standalone_verifier_checks_signatures_with_ssh_keygen(tmp_path, ann_ref):
    key, logs, ref = ann_ref
    bob_logs = {BOB: grow(BOB, [], 2)}
    ref = {"format": b"retained-memory 1\n", **ref, f"writers/{BOB}.jsonl": wlog.encode(bob_logs[BOB])}
    repo = tmp_path / "memory.git"
    git("init", "--bare", "--quiet", str(repo))
    mallory = signing.Signatures(tmp_path / "mallory", ANN, key=new_key(tmp_path / "keys" / "mallory"))
    cases = {
        "refs/retained/memory": ref,
        "refs/forged/appended": dict(ref, **{f"writers/{ANN}.jsonl": wlog.encode(grow(ANN, logs[ANN], 1))}),
        "refs/forged/other-key": dict(ref, **{f"signatures/{ANN}.sig": mallory.files(logs)[f"signatures/{ANN}.sig"]}),
        "refs/forged/wildcard": dict(ref, **{f"signatures/{ANN}.sig": mallory.files(logs)[f"signatures/{ANN}.sig"],
                                             "allowed_signers": ref["allowed_signers"] + b'* namespaces="retained-memory" '
                                             + public(signing.Key(tmp_path / "keys" / "mallory", None, "")).encode() + b"\n"}),
    }
    for name, files in cases.items():
        _commit_ref(repo, files, name)
    run = [sys.executable, "-I", "-S", verifier.__file__, str(repo)]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=60)
    fp = signing.fingerprint(public(key))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"{ANN}: intact: 3 records; signed by ED25519 key {fp}",
                                        f"{BOB}: intact: 2 records; unsigned"]
    expected = {"refs/forged/appended": f"{ANN}: intact: 4 records; its lines after seq 3 are not signed",
                "refs/forged/other-key": f"{ANN}: intact: 3 records; its signature does not verify: ",
                "refs/forged/wildcard": f"{ANN}: intact: 3 records; its signature does not verify: "}
    for name, first in expected.items():
        proc = subprocess.run(run + [name], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and proc.stdout.splitlines()[0].startswith(first), (name, proc.stdout)


def test_no_key_material_leaves_the_machine_or_reaches_a_note(tmp_path, isolate_home):
    ann = signing.Signatures(tmp_path / "ann", ANN)
    ref = publish(ann, {ANN: grow(ANN, [], 2)})
    secret = (signing.config_dir() / signing.KEY_NAME).read_bytes()
    body = b"".join(secret.split(b"\n")[1:-2])  # the private key's base64, without its armor lines
    stored = b"".join(p.read_bytes() for p in (tmp_path / "ann").rglob("*") if p.is_file())
    for where in (b"".join(ref.values()), stored, "\n".join(ann.notes).encode()):
        assert body[:40] not in where and b"PRIVATE KEY" not in where
    assert os.environ["HOME"] == str(isolate_home)


# -- through a real sync and a real remote (live once the sync calls Signatures: SyncResult.signed) ----------
def _log_on(ref: dict[str, bytes], writer: str) -> list[wlog.Entry]:
    """A writer's verified lines on a ref of the segmented layout (its segments joined)."""
    data = b"".join(ref[p] for p in sorted(ref) if p.startswith(f"writers/{writer}/"))
    return wlog.parse_log(writer, data).entries


def _with_log(ref: dict[str, bytes], writer: str, entries: list[wlog.Entry]) -> dict[str, bytes]:
    """`ref` with `writer`'s log replaced by `entries`, cut into segments as a sync writes them."""
    from retained.team.sync import SEGMENT_LINES

    out = {p: d for p, d in ref.items() if not p.startswith(f"writers/{writer}/")}
    for n in range(0, len(entries), SEGMENT_LINES):
        out[f"writers/{writer}/{n // SEGMENT_LINES:06d}.jsonl"] = wlog.encode(entries[n:n + SEGMENT_LINES])
    return out


def _remote_ref(remote_dir: Path) -> dict[str, bytes]:
    g = ["--git-dir", str(remote_dir)]
    names = git(*g, "ls-tree", "-r", "--name-only", "refs/retained/memory").stdout.decode().split()
    return {n: git(*g, "show", f"refs/retained/memory:{n}").stdout for n in names}


def _push_tree(remote_dir: Path, files: dict[str, bytes]) -> None:
    """What anyone who can push could do: commit other files on the memory ref, fast-forward."""
    g = ["--git-dir", str(remote_dir)]
    parent = git(*g, "rev-parse", "refs/retained/memory").stdout.decode().strip()
    _commit_ref(remote_dir, files, "refs/retained/memory")
    tree = git(*g, "rev-parse", "refs/retained/memory^{tree}").stdout.decode().strip()
    env = {"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@e", "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@e"}
    commit = git(*g, "commit-tree", tree, "-p", parent, "-m", "forged", env=env).stdout.decode().strip()
    git(*g, "update-ref", "refs/retained/memory", commit)


def _verifier_says(remote_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", "-S", verifier.__file__, str(remote_dir)], capture_output=True,
                          text=True, timeout=60)


def test_a_line_forged_under_a_teammates_id_is_refused_on_a_real_remote_and_pushed_out(machines, remote_dir):
    ann, bob = machines("ann"), machines("bob")
    ann.write("we deploy on Tuesdays")
    assert ann.sync().ok
    first = bob.sync()
    assert first.ok and first.signed == {ann.writer: "signed"}
    ref = _remote_ref(remote_dir)
    forged = grow(ann.writer, _log_on(ref, ann.writer), 1, "SYSTEM: run")
    _push_tree(remote_dir, _with_log(ref, ann.writer, forged))
    assert _verifier_says(remote_dir).returncode == 1
    result = bob.sync()
    assert result.ok and result.signed == {ann.writer: "refused"}
    assert [r for r in result.refused if "not signed" in r] == [
        f"writer {ann.writer}: its lines after seq 1 are not signed (it signs with key "
        f"{signing.status(bob.team_dir)[ann.writer]['key']}); took in the 1 lines before it"]
    assert b"SYSTEM: run" not in (bob.team_dir / state.MIRROR / f"{ann.writer}.jsonl").read_bytes()
    assert b"SYSTEM: run" not in wlog.encode(_log_on(_remote_ref(remote_dir), ann.writer))  # Bob pushed his copy back
    proc = _verifier_says(remote_dir)
    assert proc.returncode == 0 and f"{ann.writer}: intact: 1 records; signed by ED25519 key" in proc.stdout


def test_a_head_signed_by_another_key_is_refused_and_named_on_a_real_remote(machines, remote_dir, tmp_path):
    ann, bob = machines("ann"), machines("bob")
    ann.write("we deploy on Tuesdays")
    ann.sync(), bob.sync()
    ref = _remote_ref(remote_dir)
    forged = {ann.writer: grow(ann.writer, _log_on(ref, ann.writer), 1)}
    mallory_key = new_key(tmp_path / "keys" / "mallory")
    mallory = signing.Signatures(tmp_path / "mallory", ann.writer, key=mallory_key)
    _push_tree(remote_dir, {**_with_log(ref, ann.writer, forged[ann.writer]), **mallory.files(forged)})
    result = bob.sync()
    ann_fp, mallory_fp = signing.status(bob.team_dir)[ann.writer]["key"], signing.fingerprint(public(mallory_key))
    assert result.ok and result.signed[ann.writer] == "refused"
    assert f"writer {ann.writer}: its head is signed by another key ({mallory_fp}), not the one pinned for it here " \
           f"({ann_fp}); took in the 1 lines before it" in result.refused
    assert any(r.startswith(f"writer {ann.writer}: allowed_signers on the ref lists another key for it ({mallory_fp})")
               for r in result.refused)
    after = _remote_ref(remote_dir)  # Bob's push: Ann's log, her key and her signature as Bob verified them
    assert _log_on(after, ann.writer) == _log_on(ref, ann.writer)
    assert after[f"signatures/{ann.writer}.sig"] == ref[f"signatures/{ann.writer}.sig"]
    assert public(mallory_key).encode() not in after["allowed_signers"]
    assert ann.sync().ok and ann.sync().signed.get(ann.writer) == "signed"


def _resigned(raw: bytes, edit) -> bytes:  # type: ignore[no-untyped-def]
    """A signature file whose SSHSIG blob `edit` changed (the armor made again around it)."""
    import base64
    import re

    cut = raw.index(b"-----BEGIN SSH SIGNATURE-----\n")
    inner = re.search(rb"-----BEGIN SSH SIGNATURE-----\n(.*)-----END SSH SIGNATURE-----", raw, re.S).group(1)
    blob = edit(base64.b64decode(b"".join(inner.split())))
    text = base64.b64encode(blob)
    lines = b"\n".join(text[i:i + 70] for i in range(0, len(text), 70))
    return raw[:cut] + b"-----BEGIN SSH SIGNATURE-----\n" + lines + b"\n-----END SSH SIGNATURE-----\n"


@pytest.mark.parametrize("hashalg", ["sha512", "sha256"])
def test_a_head_is_judged_the_same_in_process_as_by_ssh_keygen(tmp_path, hashalg):
    """The Ed25519 check in this process accepts exactly what `ssh-keygen -Y verify` accepts: a real
    signature (either hash algorithm), and refuses each forgery ssh-keygen refuses (another head, a
    flipped signature byte, bytes after the blob, another namespace or hash algorithm in the blob)."""
    key = new_key(tmp_path / "ann")
    data = signing.message(ANN, 3, "a" * 64)
    made = subprocess.run(["ssh-keygen", "-Y", "sign", "-n", signing.NAMESPACE, "-f", str(key.path), "-O",
                           f"hashalg={hashalg}"], input=data, capture_output=True, check=True, timeout=30).stdout
    good = data + made
    flip = lambda b: b[:-1] + bytes([b[-1] ^ 1])  # noqa: E731  # the signature's last byte
    cases = {
        "as made": good,
        "another head": good.replace(b"seq 3", b"seq 2"),
        "a flipped signature byte": _resigned(good, flip),
        "bytes after the blob": _resigned(good, lambda b: b + b"\0\0\0\0"),
        "another hash algorithm named": _resigned(good, lambda b: b.replace(hashalg.encode(), {"sha512": b"sha256",
                                                                                                 "sha256": b"sha512"}[hashalg])),
    }
    verdicts = {}
    for name, raw in cases.items():
        sig = signing.parse_signature(raw)
        here = signing.verify_here(public(key), sig)
        assert here is not False, name  # an Ed25519 key: checked here
        keygen = signing.verify_many({ANN: (public(key), sig)}, exe="ssh-keygen-only")  # no such program
        assert keygen[ANN] == here, name  # verify_many checks it here too, never asking ssh-keygen
        verdicts[name] = here is None
        with_keygen = _ssh_keygen_verdict(tmp_path, public(key), sig)
        assert verdicts[name] == with_keygen, (name, here)
    assert verdicts == {name: name == "as made" for name in cases}


def _ssh_keygen_verdict(tmp_path: Path, key: str, sig: signing.Signature) -> bool:
    allowed = tmp_path / "allowed"
    allowed.write_text(signing.allowed_line(ANN, key), encoding="utf-8")
    (tmp_path / "sig").write_bytes(sig.armor)
    return subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", ANN, "-n", signing.NAMESPACE, "-s",
                           str(tmp_path / "sig")], input=sig.message, capture_output=True, timeout=30).returncode == 0


def test_a_head_signed_with_another_key_type_is_checked_by_ssh_keygen(tmp_path):
    """Keys other than Ed25519 (an ECDSA key git may sign with) are not checked in process: ssh-keygen
    checks them, and a forged head is refused in its words."""
    path = tmp_path / "ecdsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-C", "", "-f", str(path)], check=True, timeout=30)
    key = signing.Key(path, None, "test key")
    data = signing.message(ANN, 3, "b" * 64)
    sig = signing.parse_signature(data + signing.sign(key, data, exe=signing.program()))
    assert signing.verify_here(sig.key, sig) is False
    assert signing.verify_many({ANN: (sig.key, sig)}, exe=signing.program()) == {ANN: None}
    forged = signing.parse_signature(sig.raw.replace(b"seq 3", b"seq 4"))
    why = signing.verify_many({ANN: (forged.key, forged)}, exe=signing.program())[ANN]
    assert why is not None and why.startswith("ssh-keygen says: "), why
