"""The format editors on their own: splices keep every other byte; YAML refuses what it cannot keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from retained.installers import jsonc
from retained.installers.edits import make
from retained.installers.formats import EDITORS

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


def test_toml_editor_keeps_comments(tmp_path):
    ed = EDITORS["toml"]
    text = '# top\n[mcp_servers.a]\n# inside\ncommand = "x"  # trailing\n'
    new = ed.apply(Path("c.toml"), text, [make({"op": "member", "at": ["mcp_servers", "retained"], "value": ENTRY})],
                   install=True)
    assert new.startswith(text) and ed.load(Path("c.toml"), new)["mcp_servers"]["retained"] == ENTRY


def _random_document(rng):
    import json

    def value(depth=0):
        r = rng.random()
        if depth > 2 or r < 0.4:
            return rng.choice([1, "s", True, None, 2.5, "ü"])
        if r < 0.7:
            return {f"k{i}": value(depth + 1) for i in range(rng.randint(0, 3))}
        return [value(depth + 1) for _ in range(rng.randint(0, 3))]

    def render(v, indent, level, comments, trailing):
        if not isinstance(v, dict) or not v:
            return json.dumps(v, ensure_ascii=False)
        if indent is None:
            return "{" + ", ".join(json.dumps(k) + ": " + render(x, None, 0, False, False) for k, x in v.items()) + "}"
        pad = indent * (level + 1)
        out = "{\n"
        for i, (k, x) in enumerate(v.items()):
            last = i == len(v) - 1
            out += pad + json.dumps(k) + ": " + render(x, indent, level + 1, comments, trailing)
            out += ("," if not last or trailing else "") + (" // note" if comments and rng.random() < 0.3 else "") + "\n"
        return out + indent * level + "}"

    doc = {f"t{i}": value() for i in range(rng.randint(0, 4))}
    if rng.random() < 0.5:
        doc["mcpServers"] = {f"s{i}": {"command": "x"} for i in range(rng.randint(0, 2))}
    indent = rng.choice([None, "  ", "    ", "\t"])
    comments = indent is not None and rng.random() < 0.3
    trailing = indent is not None and rng.random() < 0.2
    text = render(doc, indent, 0, comments, trailing) + rng.choice(["", "\n"])
    if rng.random() < 0.2:
        text = text.replace("\n", "\r\n")
    return doc, text, comments or trailing


def test_splices_on_many_layouts_change_only_our_entries():
    """Seeded random documents in every layout: set, remove, append and remove-item round-trip exactly."""
    import json
    import random

    rng = random.Random(20261129)
    for _ in range(600):
        doc, text, lenient = _random_document(rng)
        new = jsonc.set_value(text, ["mcpServers", "retained"], ENTRY)
        want = dict(doc)
        want["mcpServers"] = dict(doc.get("mcpServers", {}), retained=ENTRY)
        assert jsonc.loads(new) == want, text
        if not lenient:
            json.loads(new)  # strict JSON stays strict
        back = jsonc.remove_key(new, ["mcpServers", "retained"], prune=0 if "mcpServers" in doc else 1)
        assert jsonc.loads(back) == doc, text
        added = jsonc.append_item(text, ["hooks", "SessionStart"], {"hooks": [{"command": "c"}]})
        assert jsonc.loads(added)["hooks"]["SessionStart"] == [{"hooks": [{"command": "c"}]}]
        gone = jsonc.remove_key(jsonc.remove_item(added, ["hooks", "SessionStart"], 0), ["hooks", "SessionStart"], prune=1)
        assert jsonc.loads(gone) == doc, text
