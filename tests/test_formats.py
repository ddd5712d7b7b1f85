"""The format editors on their own: splices keep every other byte; YAML refuses what it cannot keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from retained.installers import jsonc
from retained.installers.formats import EDITORS
from retained.installers.safe_file import ConfigError

ENTRY = {"command": "/x/retained", "args": ["serve"]}


@pytest.mark.parametrize("text", [
    "{}",
    "{}\n",
    '{\n  "a": 1\n}\n',
    '{\n  // c\n  "a": 1, // trailing\n  "mcpServers": {\n    "x": {"command": "y"}\n  }\n}\n',
    '{"a": 1, "b": [1, 2]}',
    '{\r\n\t"a": "\u00e9\u2615",\r\n\t"mcpServers": {}\r\n}\r\n',
    '{\n    "a": 1,\n}\n',
])
def test_set_then_remove_round_trips_and_touches_nothing_else(text):
    new = jsonc.set_value(text, ["mcpServers", "retained"], ENTRY)
    doc = jsonc.loads(new)
    assert doc["mcpServers"]["retained"] == ENTRY
    assert {k: v for k, v in doc.items() if k != "mcpServers"} == {k: v for k, v in jsonc.loads(text).items() if k != "mcpServers"}
    assert ("\r\n" in new) == ("\r\n" in text)
    back = jsonc.remove_key(new, ["mcpServers", "retained"], prune=0 if "mcpServers" in text else 1)
    assert jsonc.loads(back) == jsonc.loads(text)
    assert back.count("//") == text.count("//")


@pytest.mark.parametrize("bad, line", [('{\n  "a": 1,\n  "a": 2\n}', 3), ('{\n  "a": \n}', 3), ("[1, 2", 1)])
def test_parse_errors_name_the_line(bad, line):
    with pytest.raises(jsonc.JSONCError) as e:
        jsonc.parse(bad)
    assert e.value.line == line


def test_strict_json_refuses_comments_and_trailing_commas():
    with pytest.raises(jsonc.JSONCError, match="comments"):
        jsonc.parse('{"a": 1 // no\n}', comments=False)
    with pytest.raises(jsonc.JSONCError, match="trailing comma"):
        jsonc.parse('{"a": 1,}', trailing_commas=False)


def test_yaml_editor_edits_plain_files_and_refuses_commented_ones(tmp_path):
    ed = EDITORS["yaml"]
    path = tmp_path / "config.yaml"
    out = ed.apply(path, "model: x\nservers:\n  other: {command: y}\n",
                   [{"op": "member", "at": ["servers", "retained"], "value": ENTRY}], install=True)
    assert ed.load(path, out)["servers"] == {"other": {"command": "y"}, "retained": ENTRY}
    back = ed.apply(path, out, [{"op": "member", "at": ["servers", "retained"], "value": ENTRY}], install=False)
    assert ed.load(path, back) == {"model": "x", "servers": {"other": {"command": "y"}}}
    with pytest.raises(ConfigError, match="comments"):
        ed.apply(path, "# mine\nmodel: x\n", [{"op": "member", "at": ["s", "r"], "value": ENTRY}], install=True)
    with pytest.raises(ConfigError, match="does not parse at line 2"):
        ed.load(path, "a: 1\nb: c: d\n")


def test_toml_editor_keeps_comments(tmp_path):
    ed = EDITORS["toml"]
    text = '# top\n[mcp_servers.a]\n# inside\ncommand = "x"  # trailing\n'
    new = ed.apply(Path("c.toml"), text, [{"op": "member", "at": ["mcp_servers", "retained"], "value": ENTRY}],
                   install=True)
    assert new.startswith(text) and ed.load(Path("c.toml"), new)["mcp_servers"]["retained"] == ENTRY
