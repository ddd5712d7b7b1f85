"""Issue 17 items 18 and 24: the README's first command works where a system-wide `pip install` is
refused (PEP 668: Debian, Ubuntu, Homebrew), and the README agrees with itself about its tools."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def _first_command() -> str:
    return re.findall(r"```sh\n(.*?)```", README, re.S)[0].strip()


def test_the_first_command_needs_no_system_wide_pip_install():
    """Under PEP 668 `python3 -m pip install .` outside a virtual environment is refused."""
    command = _first_command()
    installs = [step.strip() for step in command.split("&&") if "pip install" in step or "tool install" in step]
    assert installs, command
    for step in installs:
        assert step.startswith(("pipx ", "uv tool ")) or re.match(r"\S*/bin/pip install ", step), step
    assert "python3 -m venv " in command or installs[0].startswith(("pipx ", "uv tool "))


def _tree_copy(dest: Path) -> Path:
    """What a newcomer has: the source tree, without this checkout's environment or build output."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".git", ".venv", "*.egg-info", "build", "__pycache__",
                                                              "bench", "tests", "node_modules"))
    return dest


def test_the_documented_virtual_environment_path_works_in_a_fresh_home(tmp_path):
    """The first command, run as written in a fresh HOME from a copy of the tree. The dependencies'
    download is left out (PIP_NO_DEPS): write, search and verify use the standard library only (the
    README's Layout section), and the words-only search (RETAINED_EMBED=off) needs no model."""
    home = tmp_path / "fresh-home"
    home.mkdir()
    src = _tree_copy(tmp_path / "retained-src")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETAINED_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HOME=str(home), PIP_NO_DEPS="1", PIP_DISABLE_PIP_VERSION_CHECK="1", RETAINED_EMBED="off",
               XDG_DATA_HOME=str(home / ".local" / "share"), XDG_CACHE_HOME=str(home / ".cache"))
    proc = subprocess.run(["bash", "-c", _first_command()], cwd=src, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "intact: 1 records" in proc.stdout, proc.stdout
    assert (home / ".venvs" / "retained" / "bin" / "retained").exists()


@pytest.mark.parametrize("tool,install", [("pipx", "pipx install ."), ("uv", "uv tool install .")])
def test_the_one_step_installers_the_readme_names_work(tmp_path, tool, install):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed here")
    assert f"`{install}`" in README
    home = tmp_path / "fresh-home"
    home.mkdir()
    src = _tree_copy(tmp_path / "retained-src")
    env = dict(os.environ, HOME=str(home), PIPX_HOME=str(home / "pipx"), PIPX_BIN_DIR=str(home / "bin"),
               UV_TOOL_DIR=str(home / "uv-tools"), UV_TOOL_BIN_DIR=str(home / "bin"), RETAINED_EMBED="off")
    proc = subprocess.run(["bash", "-c", f"{install} && {home}/bin/retained write ok && {home}/bin/retained verify"],
                          cwd=src, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-1500:]


def test_the_readme_says_one_number_of_tools_and_it_is_the_tables():
    table = re.search(r"\| tool \| arguments \| returns \|\n\|[-| ]+\|\n((?:\|.*\|\n)+)", README)
    assert table is not None
    listed = len(table.group(1).strip().splitlines())
    snapshot = json.loads((ROOT / "tests" / "data" / "tools_list.json").read_text())
    assert listed == len(snapshot)
    said = [NUMBERS[w.lower()] for w in re.findall(r"\b(" + "|".join(NUMBERS) + r")\s+(?:\w+'s\s+|retained\s+)?tools\b",
                                                   README, re.I)]
    assert said and set(said) == {listed}, said
