"""The docs tell the truth: the README's test command is what CI runs, every command is documented."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_blocks():
    return re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_ci_runs_exactly_the_readme_test_command():
    test_command = _readme_blocks()[1].strip()
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci


def test_every_cli_command_is_in_the_readme():
    from retained.cli import build_parser

    readme = (ROOT / "README.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"retained {name}" in readme, name
