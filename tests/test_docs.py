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


def test_the_readme_test_command_installs_the_host_clis_first():
    """A newcomer's one command must not skip the host end-to-end tests for want of the CLIs."""
    test_command = _readme_blocks()[1].strip()
    assert test_command.startswith("bash .ci/npm-tools.sh && "), test_command


def test_the_readme_names_the_pinned_host_versions():
    pins = dict(re.findall(r'"(@[\w./-]+)@([\d.]+)"', (ROOT / ".ci" / "npm-tools.sh").read_text()))
    readme = (ROOT / "README.md").read_text()
    for package in ("@anthropic-ai/claude-code", "@openai/codex", "@google/gemini-cli"):
        row = next(line for line in readme.splitlines() if f"`{package}`" in line)
        assert f"| {pins[package]} |" in row, (package, pins[package], row)


def test_every_cli_command_is_in_the_readme():
    from retained.cli import build_parser

    readme = (ROOT / "README.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"retained {name}" in readme, name
