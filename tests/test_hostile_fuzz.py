"""Issue 17: a fuzz test of every reader of untrusted input. Log lines, MCP lines, import files,
`--field` values, the config files install and doctor read, and the page's request bodies, each fed
the depth, size, encoding, type and structure mutations of tests/helpers/fuzz.py (seeded: the same
cases every run). The promise is the same everywhere: no traceback, no exit 3, no crash of a server,
the documented error. Families that still break a reader on main are xfail(strict), named.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest

from retained import records
from tests.helpers.fuzz import FAMILIES, Mutator, one_line, sample
from tests.helpers.hostile import LEXICAL, append_line, cli_here, cli_json, no_crash
from tests.helpers.ui_server import UiServer
from tests.mcp_wire import WireServer


@pytest.fixture(autouse=True)
def _words_only(monkeypatch):
    for k, v in LEXICAL.items():
        monkeypatch.setenv(k, v)


def _families(broken: dict[str, str]) -> list:
    """The families as parameters, those still broken on main marked xfail(strict) with why."""
    return [pytest.param(f, id=f, marks=pytest.mark.xfail(strict=True, reason=broken[f])) if f in broken else f
            for f in FAMILIES]


LOG_TEMPLATES = [
    b'{"id":"mem_fuzz","kind":"note","prev":"' + b"0" * 64 + b'","seq":2,"sha256":"' + b"1" * 64
    + b'","text":@,"ts":"2026-01-01T00:00:00Z"}',
    b'{"id":"mem_fuzz","kind":"note","prev":"' + b"0" * 64 + b'","seq":@,"sha256":"' + b"1" * 64
    + b'","text":"x","ts":"2026-01-01T00:00:00Z"}',
    b'{"forgotten":{"by":@},"id":"mem_fuzz","kind":"note","prev":"' + b"0" * 64 + b'","seq":2,"sha256":"' + b"1" * 64
    + b'","ts":"2026-01-01T00:00:00Z"}',
]


# -- log lines -----------------------------------------------------------------------------------------------
def test_every_mutated_log_line_parses_to_a_record_or_a_bad_line():
    """records.parse_line, the one reader of log lines, meets every mutation of every family."""
    seen = 0
    for template in LOG_TEMPLATES:
        for family, label, doc in sample(Mutator(template), size_cap=1024 * 1024):
            try:
                records.parse_line(doc)
            except records.BadLine as bad:
                assert bad.reason and "\n" not in bad.reason, (family, label)
            seen += 1
    assert seen > 150


@pytest.mark.parametrize("family", FAMILIES)
def test_a_log_full_of_mutated_lines_leaves_every_command_working(store_dir, family):
    first = cli_json("write", "a good record before the hostile lines")
    docs = one_line(sample(Mutator(LOG_TEMPLATES[0], seed=len(family)), (family,), per_family=12, size_cap=256 * 1024))
    for _f, _label, doc in docs:
        append_line(store_dir, doc)
    last = cli_here("write", "a good record after them")
    no_crash(last, "write")
    assert last.returncode == 0, last.stderr
    for args in (["verify"], ["brief"], ["reindex"], ["list"], ["search", "good record"], ["get", first["id"]],
                 ["maintain"], ["scopes"], ["export"]):
        proc = cli_here(*args)
        no_crash(proc, f"{family}: {args[0]}")
    report = cli_json("verify")
    assert report["corrupt_count"] >= 1 and report["records"] == 2, report


# -- MCP lines -----------------------------------------------------------------------------------------------
MCP_TEMPLATES = [
    b'{"jsonrpc":"2.0","id":#ID#,"method":"tools/call","params":{"name":"memory_write","arguments":{"text":"fuzz",'
    b'"fields":{"f":@}}}}',
    b'{"jsonrpc":"2.0","id":#ID#,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":@}}}',
    b'{"jsonrpc":"2.0","id":#ID#,"method":"tools/call","params":@}',
]
_MCP_BROKEN: dict[str, str] = {}


@pytest.mark.parametrize("family", _families(_MCP_BROKEN))
def test_the_server_answers_every_mutated_request_under_its_id_and_keeps_serving(family):
    docs = []
    for t, template in enumerate(MCP_TEMPLATES):
        docs += one_line(sample(Mutator(template, seed=t), (family,), per_family=10, size_cap=512 * 1024))
    server = WireServer(env=LEXICAL)
    try:
        server.initialize()
        waiting = []
        for n, (_f, label, doc) in enumerate(docs, start=100):
            line = doc.replace(b"#ID#", str(n).encode())
            server.send_raw(line)
            if line.startswith(b'{"jsonrpc":"2.0","id":%d,' % n):  # its id can be read from its head
                waiting.append((n, label))
        deadline = time.monotonic() + 30  # one wait for them all: replies may come in any order
        while time.monotonic() < deadline and server.proc.poll() is None:
            if all(json.dumps(n) in server.replies for n, _label in waiting):
                break
            time.sleep(0.1)
        unanswered = [label for n, label in waiting if json.dumps(n) not in server.replies]
        assert server.proc.poll() is None, f"the server died: {server.stderr[-800:]}"
        reply = server.call("alive", "memory_list", {"limit": 1}, timeout=30)
        assert reply["result"].get("isError") is not True
        assert unanswered == [], unanswered
    finally:
        if server.proc.poll() is None:
            assert server.close() == 0, server.stderr[-800:]


# -- import files ---------------------------------------------------------------------------------------------
IMPORT_TEMPLATES = [b'{"id":"mem_fuzz1","kind":"note","text":"imported","f":@}', b'{"id":"mem_fuzz2","text":@}',
                    b'{"id":@,"text":"x"}', b'{"id":"mem_fuzz3","text":"x","scope":@}',
                    b'{"id":"mem_fuzz4","text":"x","kind":@}', b'{"id":"mem_fuzz5","text":"x","supersedes":@}']
_IMPORT_BROKEN: dict[str, str] = {}


@pytest.mark.parametrize("family", _families(_IMPORT_BROKEN))
def test_an_import_file_of_mutated_lines_is_read_without_a_crash(tmp_path, family):
    good = b'{"id":"mem_good","kind":"note","text":"a good imported record"}\n'
    lines = [good]
    for t, template in enumerate(IMPORT_TEMPLATES):
        lines += [doc + b"\n" for _f, _l, doc in one_line(sample(Mutator(template, seed=t), (family,), per_family=6,
                                                                  size_cap=256 * 1024))]
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(lines))
    for args in ([str(path)], [str(path), "--apply"]):
        proc = cli_here("import", *args)
        no_crash(proc, f"import {family}")
        assert proc.returncode in (0, 1, 2)
    assert cli_json("get", "mem_good")["records"][0]["text"] == "a good imported record"
    assert cli_here("verify").returncode == 0


MARKDOWN = [
    ("a heading 2,000 levels deep", "#" * 2000 + " deep\n\n- item\n"),
    ("bullets nested 5,000 deep", "## TODO\n\n" + "".join("  " * i + "- level\n" for i in range(0, 5000, 50))),
    ("an unclosed fence", "## Conventions\n\n```\nnever closed\n"),
    ("an unclosed comment", "## Conventions\n\n<!-- never closed\n- hidden\n"),
    ("NUL bytes", "## Conventions\n\n- tabs\x00 not spaces\n"),
    ("CRLF line ends", "## Conventions\r\n\r\n- tabs, not spaces\r\n"),
    ("a BOM", "\ufeff## Conventions\n\n- tabs, not spaces\n"),
    ("a 1 MiB line", "## Facts\n\n- " + "x" * (1024 * 1024) + "\n"),
    ("front matter only", "---\ntype: user\n---\n"),
    ("10,000 sections", "".join(f"## s{i}\n\ntext {i}\n\n" for i in range(10_000))),
]


@pytest.mark.parametrize("label,text", MARKDOWN, ids=[m[0] for m in MARKDOWN])
def test_a_hostile_instruction_file_is_imported_or_refused_without_a_crash(tmp_path, label, text):
    path = tmp_path / "CLAUDE.md"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    proc = cli_here("import", str(path))
    no_crash(proc, label)
    assert proc.returncode in (0, 1, 2)


def test_an_instruction_file_that_is_not_utf8_is_read_or_refused_without_a_crash(tmp_path):
    path = tmp_path / "AGENTS.md"
    path.write_bytes(b"## Conventions\n\n- caf\xe9 and \xff\xfe bytes\n")
    no_crash(cli_here("import", str(path)))


# -- --field values -------------------------------------------------------------------------------------------
_FIELD_BROKEN: dict[str, str] = {}


@pytest.mark.parametrize("family", _families(_FIELD_BROKEN))
def test_every_mutated_field_value_is_written_or_refused_as_usage(store_dir, family):
    docs = one_line(sample(Mutator(b"@"), (family,), per_family=8, size_cap=64 * 1024))
    for _f, label, doc in docs:
        if b"\x00" in doc or len(doc) > 100_000:
            continue  # no NUL, and no argument over 128 KiB, can pass through argv
        proc = cli_here("write", "fuzzed field", "--field", "f=" + doc.decode("utf-8", "surrogateescape"))
        no_crash(proc, f"--field {label}")
        assert proc.returncode in (0, 2), (label, proc.stderr)
    assert cli_here("verify").returncode == 0  # whatever was written reads back as records


# -- config files read by install and doctor -------------------------------------------------------------------------
CONFIGS = {
    "claude": (".claude.json", b'{"mcpServers":@}'),
    "claude-settings": (".claude/settings.json", b'{"hooks":@}'),
    "cursor": (".cursor/mcp.json", b"@"),
}
_CONFIG_BROKEN: dict[str, str] = {}


@pytest.mark.parametrize("family", _families(_CONFIG_BROKEN))
def test_install_and_doctor_refuse_a_mutated_config_without_a_crash_and_touch_nothing(isolate_home, family):
    for name, (rel, template) in CONFIGS.items():
        host = name.split("-")[0]
        for _f, label, doc in sample(Mutator(template, seed=len(name)), (family,), per_family=4, size_cap=256 * 1024):
            path = isolate_home / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if name == "claude-settings":
                (isolate_home / ".claude.json").write_text("{}")
            path.write_bytes(doc)
            proc = cli_here("install", "--host", host, "--yes")  # in process: the promise is about the files
            no_crash(proc, f"install {name}: {label}")
            assert proc.returncode in (0, 1), (label, proc.stderr[-300:])  # a mutation may still be a good config
            if proc.returncode == 1:
                assert path.read_bytes() == doc, f"{name}: {label}: a refused file was changed"
            no_crash(cli_here("uninstall", "--host", host, "--yes"), f"uninstall {name}: {label}")


def test_doctor_reports_a_deeply_nested_config_as_a_failed_check(isolate_home):
    (isolate_home / ".claude").mkdir()
    (isolate_home / ".claude.json").write_text("{}")
    (isolate_home / ".claude" / "settings.json").write_bytes(b'{"hooks":' + b"[" * 5000 + b"]" * 5000 + b"}")
    proc = cli_here("doctor", "--host", "claude")
    no_crash(proc, "doctor")
    assert proc.returncode == 1


@pytest.mark.parametrize("label,text", [("nested 5,000 deep", "a = " + "[" * 5000 + "]" * 5000 + "\n"),
                                        ("inline tables 3,000 deep", "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n"),
                                        ("not UTF-8", "model = \"caf\udce9\"\n"), ("a BOM", "\ufeffmodel = \"o3\"\n"),
                                        ("a duplicate table", "[mcp_servers.x]\ncommand='a'\n[mcp_servers.x]\ncommand='b'\n"),
                                        ("mcp_servers of the wrong type", "mcp_servers = 5\n"),
                                        ("mcp_servers an array", "mcp_servers = [1, 2]\n"),
                                        ("mcp_servers a string", 'mcp_servers = "x"\n'),
                                        ("hooks not a table", "hooks = true\n"),
                                        ("our entry of the wrong type", "[mcp_servers]\nretained = 3\n"),
                                        ("features a string", 'features = "memories"\n'),
                                        ("a cut file", "[mcp_servers.other]\ncommand = \"ot")])
def test_codex_install_refuses_a_hostile_config_toml_and_touches_nothing(isolate_home, label, text):
    path = isolate_home / ".codex" / "config.toml"
    path.parent.mkdir()
    data = text.encode("utf-8", "surrogateescape")
    path.write_bytes(data)
    proc = cli_here("install", "--host", "codex", "--yes")
    no_crash(proc, label)
    if proc.returncode != 0:
        assert path.read_bytes() == data
    no_crash(cli_here("doctor", "--host", "codex"), f"doctor: {label}")


DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("host,rel,data", [
    ("codex", ".codex/hooks.json", '{"hooks": ' + DEEP + "}"),
    ("gemini", ".gemini/settings.json", '{"mcpServers": ' + DEEP + "}"),
    ("vscode", ".vscode/mcp.json", '{"servers": ' + DEEP + "}"),
    ("opencode", ".config/opencode/opencode.json", '{"mcp": ' + DEEP + "}"),
])
def test_every_hosts_config_nested_deep_is_a_failed_check_or_a_refusal(isolate_home, host, rel, data):
    """The rest of item 1's config class: each host's own files, read by install, uninstall and doctor."""
    path = isolate_home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)
    for args in (["install", "--host", host, "--yes"], ["uninstall", "--host", host, "--yes"], ["doctor", "--host", host]):
        proc = cli_here(*args)
        no_crash(proc, " ".join(args))
        assert proc.returncode in (0, 1), (args, proc.stderr[-300:])
    assert path.read_text() == data, "a refused file was changed"


def test_a_host_memory_file_nested_deep_is_skipped_without_a_crash(isolate_home):
    (isolate_home / ".gemini").mkdir()
    (isolate_home / ".gemini" / "projects.json").write_text('{"projects": ' + DEEP + "}")
    (isolate_home / ".gemini" / "GEMINI.md").write_text("- keep the changelog current\n")
    proc = cli_here("import", "--from", "gemini")
    no_crash(proc)
    assert proc.returncode == 0 and "would add 1" in proc.stdout, proc.stdout + proc.stderr


# -- the page's request bodies -----------------------------------------------------------------------------------
UI_TEMPLATES = [(b'{"ids":@,"reason":"r"}', "/api/forget"), (b'{"ids":["mem_x"],"reason":@}', "/api/forget"),
                (b'{"ids":["mem_x"],"confirm":@}', "/api/purge"), (b"@", "/api/unforget"),
                (b'{"text":@}', "/api/record/mem_x/supersede")]
_UI_BROKEN: dict[str, str] = {}


def _post(server: UiServer, path: str, body: bytes) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        conn.request("POST", path, body=body, headers={"Host": f"127.0.0.1:{server.port}", "X-Retained-Token": server.token,
                                                       "Content-Type": "application/json"})
        res = conn.getresponse()
        res.read()
        return res.status
    finally:
        conn.close()


@pytest.mark.parametrize("family", _families(_UI_BROKEN))
def test_every_mutated_request_body_is_a_4xx_and_the_page_keeps_serving(store_dir, family):
    cli_json("write", "a record the page shows")
    with UiServer(store_dir) as server:
        bad = []
        for t, (template, path) in enumerate(UI_TEMPLATES):
            for _f, label, doc in sample(Mutator(template, seed=t), (family,), per_family=6, size_cap=256 * 1024):
                status = _post(server, path, doc)
                if status >= 500 or server.proc.poll() is not None:
                    bad.append(f"{path} {label}: {status}")
        assert server.proc.poll() is None, "the page's server died"
        assert bad == [], bad
