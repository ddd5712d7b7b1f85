"""Issue 19 items 2 and 3: `retained share / unshare / sync` at the command line, and what is shared
and what never is. Real git: the project's own bare remote (origin) over file:// and over `git daemon`
on 127.0.0.1, one clone per teammate, each with its own HOME, git identity and store; every command
runs as a real `python -m retained` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retained.team import git as team_git
from tests.helpers.team import all_objects, git, git_daemon

MEMORY_REF = team_git.MEMORY_REF


class Teammate:
    """A clone of the project with a HOME, a git identity and a store of its own."""

    def __init__(self, root: Path, name: str, origin: str) -> None:
        self.name = name
        self.home = root / name / "home"
        self.home.mkdir(parents=True)
        (self.home / ".gitconfig").write_text(f"[user]\n\tname = {name.title()} Tester\n\temail = {name}@example.com\n",
                                              encoding="utf-8")
        self.store = root / name / "store"
        self.env = {**os.environ, "HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config"),
                    "RETAINED_DIR": str(self.store), "RETAINED_EMBED": "off"}
        self.checkout = root / name / "shop"
        git("clone", "--quiet", origin, str(self.checkout), env={"HOME": str(self.home)})

    def run(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "retained", *args], cwd=cwd or self.checkout, capture_output=True,
                              text=True, timeout=120, env={**self.env, **(env or {})}, input=input)

    def ok(self, *args: str, **kw) -> str:
        proc = self.run(*args, **kw)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc.stdout

    def json(self, *args: str, **kw) -> dict:
        return json.loads(self.ok("--json", *args, **kw))

    def write(self, text: str, *extra: str, **kw) -> str:
        return self.json("write", text, *extra, **kw)["id"]

    def search(self, query: str) -> dict[str, dict]:
        proc = self.run("--json", "search", query, "-k", "50")
        hits = json.loads(proc.stdout)["hits"]
        assert proc.returncode == (0 if hits else 1), proc.stderr  # exit 1: nothing found
        return {h["id"]: h for h in hits}


def make_origin(root: Path) -> str:
    """The project's remote, with one commit on main (a code repository, as teams have)."""
    bare = root / "origin.git"
    git("init", "--bare", "--quiet", "-b", "main", str(bare))
    seed = root / "seed"
    git("init", "--quiet", "-b", "main", str(seed))
    (seed / "README").write_text("shop\n", encoding="utf-8")
    git("-C", str(seed), "add", "README")
    git("-C", str(seed), "-c", "user.name=Seed", "-c", "user.email=seed@example.com", "commit", "--quiet", "-m", "seed")
    git("-C", str(seed), "push", "--quiet", bare.as_uri(), "main")
    return bare.as_uri()


@pytest.fixture
def origin(tmp_path) -> str:
    return make_origin(tmp_path)


@pytest.fixture
def team(tmp_path, origin):
    def make(name: str, url: str | None = None) -> Teammate:
        return Teammate(tmp_path, name, url or origin)
    return make


def remote_git_dir(url: str) -> Path:
    return Path(url.removeprefix("file://"))


# -- item 2: the commands -------------------------------------------------------------------------------
def test_share_and_sync_bring_a_teammates_decision_into_every_read_with_its_author(team, origin):
    ann, bob = team("ann"), team("bob")
    rid = ann.write("we deploy the shop on Tuesdays", "--kind", "decision")
    out = ann.ok("share")
    assert "sharing" in out and "pushed 1" in out, out
    bob.ok("share")
    hits = bob.search("deploy Tuesdays")
    assert list(hits) == [rid] and hits[rid]["author"] == "Ann Tester <ann@example.com>"
    got = bob.json("get", rid)["records"][0]
    assert got["author"] == {"name": "Ann Tester", "email": "ann@example.com"}
    assert "by Ann Tester" in bob.ok("brief")
    # the project's own branches are untouched: the memory lives on a ref of its own
    heads = git("ls-remote", origin).stdout.decode()
    assert "refs/heads/main" in heads and MEMORY_REF in heads
    assert git("-C", str(bob.checkout), "status", "--porcelain").stdout == b""


def test_share_over_git_daemon_on_localhost(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    make_origin(served)
    with git_daemon(served) as base:
        url = base + "origin.git"
        ann, bob = Teammate(tmp_path, "ann", url), Teammate(tmp_path, "bob", url)
        rid = ann.write("main is protected", "--kind", "convention")
        ann.ok("share")
        bob.ok("share")
        assert list(bob.search("main protected")) == [rid]


def test_dry_run_lists_exactly_the_records_that_would_leave_and_sends_nothing(team, origin):
    ann = team("ann")
    shared = {ann.write("use UTC in every log line", "--kind", "convention"),
              ann.write("a scratch thought worth sharing", "--shared")}
    ann.write("my own scratch note")
    ann.write("never share this decision", "--kind", "decision", "--private")
    listed = ann.json("share", "--dry-run")
    assert {r["id"] for r in listed["records"]} == shared and listed["would_share"] == 2
    text = ann.ok("share", "--dry-run")
    assert "would share 2 records" in text and all(rid in text for rid in shared)
    assert MEMORY_REF not in git("ls-remote", origin).stdout.decode()  # nothing left the machine
    ann.ok("share")
    assert ann.json("share", "--dry-run")["records"] == []  # all of it is on the remote now


def test_sync_json_says_what_it_pulled_pushed_which_writers_it_saw_and_what_it_refused(team):
    ann, bob = team("ann"), team("bob")
    ann.ok("share")
    bob.ok("share")
    ann.write("invoices are numbered per tenant", "--kind", "fact")
    ann.write("the queue retries three times", "--kind", "fact")
    pushed = ann.json("sync")
    assert pushed["ok"] and pushed["projects"][0]["pushed"] == 2
    pulled = bob.json("sync")["projects"][0]
    assert sum(pulled["pulled"].values()) == 2 and len(pulled["writers"]) == 1 and pulled["refused"] == []
    assert pulled["pushed"] == 0 and pulled["pending"] == 0
    line = bob.ok("sync")
    assert "pulled 0 records, pushed 0, 1 writer seen, nothing refused" in line


def test_unshare_stops_sharing_and_teammates_records_leave_the_index(team):
    ann, bob = team("ann"), team("bob")
    rid = ann.write("staging lives in eu-west-1", "--kind", "fact")
    ann.ok("share")
    bob.ok("share")
    assert list(bob.search("staging")) == [rid]
    assert "stopped sharing" in bob.ok("unshare")
    assert bob.search("staging") == {}
    assert "nothing is shared" in bob.ok("sync")
    assert bob.json("verify")["intact"]


def test_errors_are_one_line_with_the_readmes_exit_codes(team, tmp_path):
    ann = team("ann")
    outside = tmp_path / "not-a-checkout"
    outside.mkdir()
    proc = ann.run("share", cwd=outside)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "git checkout" in proc.stderr
    proc = ann.run("share", "--remote", "upstream")
    assert proc.returncode == 2 and "no git remote named 'upstream'" in proc.stderr and "Traceback" not in proc.stderr
    proc = ann.run("share", "--personal", "")
    assert proc.returncode == 2
    proc = ann.run("write", "x", "--private", "--shared")
    assert proc.returncode == 2 and "contradict" in proc.stderr
    ann.write("the API is versioned in the URL", "--kind", "convention")
    proc = ann.run("share", "--remote", (tmp_path / "gone.git").as_uri())
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith("error:")]) == 1
    assert ann.json("verify")["intact"]  # the local store is untouched by the failed sync


# -- item 3: the boundary --------------------------------------------------------------------------------
def test_a_record_that_is_not_shared_is_written_to_no_git_object_of_the_remote(team, origin, tmp_path):
    ann, bob = team("ann"), team("bob")
    other = tmp_path / "other-project"
    git("init", "--quiet", str(other))
    git("-C", str(other), "remote", "add", "origin", "https://example.com/acme/other.git")
    never = {
        "MARK-NOTE-1": ("--kind", "note"),
        "MARK-CHECKPOINT-2": ("--kind", "checkpoint"),
        "MARK-PREFERENCE-3": ("--kind", "preference"),
        "MARK-GLOBAL-4": ("--kind", "decision", "--scope", "global"),
        "MARK-PRIVATE-5": ("--kind", "decision", "--private"),
    }
    for marker, flags in never.items():
        ann.write(f"{marker} stays on this machine", *flags)
    ann.write("MARK-OTHER-6 belongs to another project", "--kind", "decision", cwd=other)
    ann.ok("checkpoint", "MARK-CHECKPOINT-7 where the work stands")
    ann.write("MARK-SHARED-8 a note shared on purpose", "--shared")
    kept = ann.write("MARK-DECISION-9 goes to the team", "--kind", "decision")
    fixed = ann.json("write", "MARK-CORRECTION-10 corrects it", "--supersedes", kept)["id"]
    ann.ok("share")
    bob.ok("share")
    objects = all_objects(remote_git_dir(origin))
    for marker in [*never, "MARK-OTHER-6", "MARK-CHECKPOINT-7"]:
        assert marker.encode() not in objects, marker
    for marker in ("MARK-SHARED-8", "MARK-DECISION-9", "MARK-CORRECTION-10"):
        assert marker.encode() in objects, marker
    assert set(bob.search("MARK")) == {fixed, *[r for r in bob.search("MARK") if r != fixed]}
    assert len(bob.search("MARK")) == 2  # the shared note and the correction (the decision it corrects is superseded)


def test_redaction_runs_again_before_a_record_leaves(team, origin):
    ann = team("ann")
    secret = "AKIA" + "Z7QXW3RT5YV2KM4N"
    ann.write(f"the deploy key is {secret}", "--kind", "fact", env={"RETAINED_REDACT": "off"})
    assert secret in ann.ok("list")  # kept verbatim on this machine, as asked
    out = ann.run("share")
    assert out.returncode == 0, out.stderr
    assert secret.encode() not in all_objects(remote_git_dir(origin))


def test_share_personal_syncs_global_memory_between_your_machines_and_never_to_a_project(team, tmp_path, origin):
    laptop, desktop = team("me"), team("me2")
    (desktop.home / ".gitconfig").write_text((laptop.home / ".gitconfig").read_text(), encoding="utf-8")
    private = tmp_path / "me-private.git"
    git("init", "--bare", "--quiet", str(private))
    pref = laptop.write("MARK-PERSONAL-1 I like short commit messages", "--kind", "preference", "--scope", "global")
    project = laptop.write("MARK-PROJECT-2 the shop uses Postgres", "--kind", "fact")
    laptop.ok("share", "--personal", private.as_uri())
    laptop.ok("share")
    desktop.ok("share", "--personal", private.as_uri())
    assert pref in desktop.search("MARK-PERSONAL-1")
    assert project not in desktop.search("MARK-PROJECT-2")  # desktop does not share the project
    assert b"MARK-PERSONAL-1" not in all_objects(remote_git_dir(origin))
    assert b"MARK-PROJECT-2" not in all_objects(private)
    proc = laptop.run("share", "--remote", private.as_uri())
    assert proc.returncode == 2 and "personal remote" in proc.stderr


# -- item 6: the docs' verifier on a real shared remote ----------------------------------------------------
def test_the_stdlib_verifier_in_format_md_passes_on_a_real_shared_remote(team, origin, tmp_path):
    import re

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Team memory"):]
    verifier = tmp_path / "verifier.py"
    verifier.write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1), encoding="utf-8")
    ann, bob = team("ann"), team("bob")
    ann.write("we deploy on Tuesdays", "--kind", "decision")
    ann.ok("share")
    bob.write("the API is versioned in the URL", "--kind", "convention")
    bob.ok("share")
    ann.ok("sync")
    # exactly the recipe the section gives: a bare clone, the ref fetched, the verifier run
    copy = tmp_path / "memory.git"
    git("clone", "--bare", "--quiet", origin, str(copy))
    git("-C", str(copy), "fetch", "--quiet", "origin", f"{MEMORY_REF}:{MEMORY_REF}")
    proc = subprocess.run([sys.executable, "-I", "-S", str(verifier), str(copy)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    # each teammate signed with the key retained made in its HOME: two different keys
    assert len(lines) == 2 and all(": intact: 1 records; signed by ED25519 key SHA256:" in line for line in lines), lines
    assert len({line.rpartition(" ")[2] for line in lines}) == 2
