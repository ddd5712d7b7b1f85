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


def test_the_test_command_fails_on_a_lint_finding_or_a_type_error_before_the_tests():
    """The gates of issue 16: ruff and mypy run, in that order, before pytest, joined by && so either
    one failing fails CI."""
    test_command = _readme_blocks()[1].strip()
    steps = [s.strip() for s in test_command.split("&&")]
    ruff = steps.index(".venv/bin/ruff check .")
    mypy = steps.index(".venv/bin/python .ci/typecheck.py")
    pytest_ = next(i for i, s in enumerate(steps) if "pytest" in s)
    assert ruff < mypy < pytest_


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


def test_the_architecture_page_names_only_modules_that_exist_and_stays_short():
    """docs/ARCHITECTURE.md is a newcomer's map: every file or folder it names in backticks is there,
    and it stays under 150 lines."""
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert len(page.splitlines()) < 150
    named = set(re.findall(r"`((?:retained|installers|templates|hooks|docs|bench|tests)/[\w./-]*)`", page))
    assert len(named) >= 30, named  # the page names the rooms, not a few of them
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, f"docs/ARCHITECTURE.md names what is not in the tree: {missing}"


def test_the_architecture_page_fails_on_a_module_that_disappears(tmp_path):
    """The check above is not vacuous: a named module that is gone is reported."""
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text() + "\n`retained/no_such_module.py`\n"
    named = set(re.findall(r"`((?:retained|installers|templates|hooks|docs|bench|tests)/[\w./-]*)`", page))
    assert [n for n in named if not (ROOT / n).exists()] == ["retained/no_such_module.py"]
