"""Issue 17 item 5, the rest of its class: a purge leaves no byte of what it purged in any file of the
store, whatever its length or wherever a copy sits, and names each file it could not clean.

Black-box: torn copies made as a crashed append leaves them (FORMAT.md's recipe), the CLI as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retained import records
from tests.helpers.hostile import LEXICAL, append_line, cli, cli_json, every_file_bytes


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


def _torn(store_dir: Path, text: str, cut: int, fields: dict | None = None) -> None:
    """A crashed append of a record of `text`, cut `cut` characters into the value of its first field
    (or of its text)."""
    last = json.loads((store_dir / "log.jsonl").read_bytes().splitlines()[-1])
    rec = records.seal({"seq": last["seq"] + 1, "id": records.new_id(), "ts": records.now_rfc3339(), "kind": "note",
                        "text": text, "prev": last["sha256"], **(fields or {})})
    line = records.format_line(rec)
    value = next(iter(fields.values())) if fields else text
    key = next(iter(fields)) if fields else "text"
    at = line.index(f'"{key}":"'.encode()) + len(key) + 4
    append_line(store_dir, line[: at + len(json.dumps(value, ensure_ascii=False)[1 : cut + 1].encode())], newline=False)


def _left(store_dir: Path, needle: bytes) -> list[str]:
    return [name for name, data in every_file_bytes(store_dir).items() if needle in data]


@pytest.mark.parametrize("cut", [1, 3, 5, 8, 11])
def test_a_torn_copy_cut_after_any_number_of_characters_leaves_with_the_purge(store_dir, cut):
    text = "Vb4Kx9Lq2Z then a longer tail that the torn copy never reached"
    cli_json("write", "an unrelated record first")
    _torn(store_dir, text, cut)
    rid = cli_json("write", text)["id"]
    assert any(name.startswith("quarantine/") for name in every_file_bytes(store_dir))
    proc = cli("forget", rid, "--purge", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert not [n for n in every_file_bytes(store_dir) if n.startswith("quarantine/")]
    assert _left(store_dir, text[:cut].encode()) == [] or cut < 4  # (a few letters may occur elsewhere)


@pytest.mark.parametrize("text", ["Q7", "k9Zq", "Wx3Pq8Rz1"])
def test_a_short_text_and_its_torn_copy_leave_with_the_purge(store_dir, text):
    cli_json("write", "an unrelated record first")
    _torn(store_dir, text, len(text))
    rid = cli_json("write", text)["id"]
    proc = cli("forget", rid, "--purge", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert [n for n in _left(store_dir, f'"{text}"'.encode())] == []
    assert not [n for n in every_file_bytes(store_dir) if n.startswith("quarantine/")]


def test_a_short_field_value_in_a_torn_copy_leaves_with_the_purge(store_dir):
    cli_json("write", "an unrelated record first")
    # ("code" sorts before "text": the torn copy ends inside the field, before any of the text)
    _torn(store_dir, "a record with a short code field", 6, {"code": "ZX-9914"})
    rid = cli_json("write", "a record with a short code field", "--field", 'code="ZX-9914"')["id"]
    assert cli("forget", rid, "--purge", "--yes").returncode == 0
    assert _left(store_dir, b"ZX-991") == []


def test_a_torn_copy_of_another_record_survives_a_purge(store_dir):
    """A purge takes what it purged, nothing else: a fragment of an unrelated write stays in quarantine."""
    cli_json("write", "an unrelated record first")
    _torn(store_dir, "Mn5Tq a fragment of some other write", 5)
    rid = cli_json("write", "Pq8Ws the record to purge")["id"]
    assert cli("forget", rid, "--purge", "--yes").returncode == 0
    assert _left(store_dir, b'"text":"Mn5Tq') != []


def test_a_file_of_the_store_that_a_purge_cannot_clean_is_named(store_dir):
    rid = cli_json("write", "Rk2Vw9 the text to purge")["id"]
    stray = store_dir / "notes" / "copy.txt"
    stray.parent.mkdir()
    stray.write_text("someone copied it here: Rk2Vw9 the text to purge\n")
    proc = cli("forget", rid, "--purge", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "notes/copy.txt" in proc.stdout + proc.stderr
    assert stray.exists()  # a purge never deletes a file it does not own; it says so instead


def test_a_purge_of_an_imported_record_spares_files_that_share_only_its_provenance(store_dir, tmp_path):
    """Short provenance values (`"format": "claude-md"`) are in many files: only the writer's own
    strings are matched however short; provenance by its 12-character runs, as before."""
    md = tmp_path / "CLAUDE.md"
    md.write_text("# Shop\n\n## Conventions\n\n- Kx7 tabs\n")
    assert cli("import", str(md), "--apply").returncode == 0
    rid = cli_json("list", "--scope", "*")["records"][0]["id"]  # filed under the file's folder, not global
    notes = store_dir / "sessions"
    notes.mkdir(exist_ok=True)
    (notes / "other.json").write_text('{"format": "claude-md", "shown": []}')
    assert cli("forget", rid, "--purge", "--yes").returncode == 0
    assert (notes / "other.json").exists()
    assert _left(store_dir, b"Kx7 tabs") == []
