"""Issue 17 item 7 (store side), the rest of its class: the log's backward reader is linear and exact,
a torn tail is described for what it may be, and an index that runs out of space says so and leaves
the store usable.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from retained.log import _lines_backwards
from tests.helpers.hostile import LEXICAL, cli, cli_json, file_size_limit, jsonl, one_line_error, sealed_chain


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("seed", range(6))
def test_reading_lines_backwards_gives_every_line_and_offset_of_a_forward_read(tmp_path, seed):
    rng = random.Random(seed)
    sizes = [rng.choice([0, 1, 5, 4095, 4096, 4097, 20_000, 70_000, 300_000]) for _ in range(rng.randint(1, 12))]
    lines = [bytes([65 + i % 26]) * n for i, n in enumerate(sizes)]
    data = b"".join(line + b"\n" for line in lines)
    path = tmp_path / "log.jsonl"
    path.write_bytes(data)
    expected, offset = [], 0
    for line in lines:
        expected.append((offset, line))
        offset += len(line) + 1
    with open(path, "rb") as f:
        got = list(_lines_backwards(f, len(data)))
    assert got == expected[::-1]


def test_reading_backwards_from_an_inner_line_end_stops_there(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    with open(path, "rb") as f:
        assert list(_lines_backwards(f, 8)) == [(4, b"two"), (0, b"one")]
        assert list(_lines_backwards(f, 0)) == []


def test_a_torn_tail_that_names_no_record_is_not_called_never_acknowledged(store_dir):
    cli_json("write", "record one")
    with open(store_dir / "log.jsonl", "ab") as f:
        f.write(b"\x00\x01garbage with no newline")
    proc = cli("write", "record two")
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert "torn line" in said and "never acknowledged" not in said, said
    assert "quarantine/" in said


def test_a_torn_copy_of_a_record_the_log_still_lacks_is_named_by_verify(store_dir):
    cli_json("write", "record one")
    two = cli_json("write", "record two, acknowledged then cut")
    path = store_dir / "log.jsonl"
    path.write_bytes(path.read_bytes()[:-1])
    write = cli("write", "record three")
    assert two["id"] in write.stderr and "never acknowledged" not in write.stderr, write.stderr
    verify = cli("verify")
    assert "quarantine/" in verify.stdout and "whole records the log lacks" in verify.stdout, verify.stdout


def test_after_a_reindex_that_ran_out_of_space_the_store_still_answers(store_dir):
    store_dir.mkdir()
    body = "lorem ipsum dolor sit amet " * 20
    (store_dir / "log.jsonl").write_bytes(jsonl(sealed_chain([{"text": f"record {i} {body}"} for i in range(2000)])))
    assert cli("verify").returncode == 0
    limit = (store_dir / "index.sqlite3").stat().st_size - 4096
    proc = subprocess.run([sys.executable, "-m", "retained", "--json", "reindex"], capture_output=True, text=True,
                          preexec_fn=file_size_limit(limit), env=dict(os.environ, **LEXICAL), timeout=300)
    line = one_line_error(proc, "reindex --json on a full disk")
    assert proc.returncode == 1 and "reindex" in line, line
    assert cli("verify").returncode == 0  # the old index stood, or is rebuilt: nothing lost
    assert cli_json("search", "record")["total_matched"] == 2000
