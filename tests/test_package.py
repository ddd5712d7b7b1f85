"""Issue 30, item 5: a package ready to publish. One version source; the sdist and the wheel build and pass
`twine check`; the built wheel installs with pipx and with uv tool in a clean environment where
`retained doctor` is then green; server.json meets the MCP Registry's rules and names the package; the
README carries the mcp-name marker that proves the package's ownership to the Registry.

Builds run on a clean checkout (tests/helpers/plugin_checkout.py): a build writes into its source tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from retained import __version__
from tests.helpers import plugin_checkout

checkout = plugin_checkout.checkout  # the fixture, by name
REPO = plugin_checkout.REPO
BIN = Path(sys.executable).parent

# The MCP Registry's rules for the parts of server.json retained uses, as its published schema
# (static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json) states them.
REGISTRY_RULES = {
    "type": "object",
    "required": ["name", "description", "version"],
    "properties": {
        "$schema": {"type": "string", "format": "uri"},
        "name": {"type": "string", "pattern": r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$", "minLength": 3, "maxLength": 200},
        "description": {"type": "string", "minLength": 1, "maxLength": 100},
        "version": {"type": "string", "maxLength": 255},
        "websiteUrl": {"type": "string", "format": "uri"},
        "repository": {"type": "object", "required": ["url", "source"],
                       "properties": {"url": {"type": "string"}, "source": {"type": "string"}}},
        "packages": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["registryType", "identifier", "version", "transport"],
            "properties": {
                "registryType": {"type": "string"}, "registryBaseUrl": {"type": "string"},
                "identifier": {"type": "string"},
                "version": {"type": "string", "minLength": 1, "not": {"const": "latest"}},
                "fileSha256": {"type": "string", "pattern": "^[a-f0-9]{64}$"},
                "runtimeHint": {"type": "string"},
                "transport": {"type": "object", "required": ["type"],
                              "properties": {"type": {"enum": ["stdio", "streamable-http", "sse"]}}},
                "runtimeArguments": {"type": "array", "items": {"$ref": "#/$defs/argument"}},
                "packageArguments": {"type": "array", "items": {"$ref": "#/$defs/argument"}},
                "environmentVariables": {"type": "array", "items": {
                    "type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                                   "isRequired": {"type": "boolean"}, "isSecret": {"type": "boolean"},
                                   "format": {"enum": ["string", "number", "boolean", "filepath"]}}}},
            }}},
    },
    "$defs": {"argument": {"type": "object", "required": ["type"], "properties": {
        "type": {"enum": ["positional", "named"]}, "value": {"type": "string"}, "name": {"type": "string"}},
        "anyOf": [{"properties": {"type": {"const": "named"}}, "required": ["name"]},
                  {"properties": {"type": {"const": "positional"}}, "anyOf": [{"required": ["value"]},
                                                                             {"required": ["valueHint"]}]}]}},
}


def _load(name: str) -> dict:
    return json.loads((REPO / name).read_text())


def test_one_version_source_every_manifest_carries_it():
    import tomlkit

    pyproject = tomlkit.parse((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"] == "retained.__version__"
    versions = {
        ".claude-plugin/plugin.json": _load(".claude-plugin/plugin.json")["version"],
        ".claude-plugin/marketplace.json": _load(".claude-plugin/marketplace.json")["plugins"][0]["version"],
        ".codex-plugin/plugin.json": _load(".codex-plugin/plugin.json")["version"],
        "plugin.json": _load("plugin.json")["version"],
        "gemini-extension.json": _load("gemini-extension.json")["version"],
        "server.json": _load("server.json")["version"],
        "server.json packages[0]": _load("server.json")["packages"][0]["version"],
    }
    assert {k: v for k, v in versions.items() if v != __version__} == {}, f"retained/__init__.py says {__version__}"
    assert f"## {__version__}" in (REPO / "CHANGELOG.md").read_text()


def test_server_json_meets_the_registry_rules_and_names_the_package():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extras")
    server = _load("server.json")
    jsonschema.validate(server, REGISTRY_RULES)
    pypi = [p for p in server["packages"] if p["registryType"] == "pypi"]
    assert [p["identifier"] for p in pypi] == ["retained"]  # the name in pyproject.toml
    assert re.search(r'^name = "retained"$', (REPO / "pyproject.toml").read_text(), re.M)
    marker = re.search(r"<!-- mcp-name: (\S+) -->", (REPO / "README.md").read_text())
    assert marker and marker.group(1) == server["name"]  # the README the index shows proves ownership


@pytest.fixture(scope="module")
def dist(checkout, tmp_path_factory) -> Path:
    if not (BIN / "twine").exists():
        pytest.skip("build and twine are in the test extras: pip install -e '.[test]'")
    pytest.importorskip("build", reason="build is in the test extras")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(checkout)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_sdist_and_wheel_build_and_pass_twine_check(dist):
    files = sorted(dist.iterdir())
    assert [f.name for f in files] == [f"retained-{__version__}-py3-none-any.whl", f"retained-{__version__}.tar.gz"]
    proc = subprocess.run([str(BIN / "twine"), "check", "--strict", *map(str, files)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.count("PASSED") == 2, proc.stdout + proc.stderr
    with zipfile.ZipFile(files[0]) as wheel:
        names = wheel.namelist()
        meta = wheel.read(f"retained-{__version__}.dist-info/METADATA").decode()
    assert "retained/hooks/launch.sh" in names and "retained/hooks/launch.py" in names
    assert f"retained-{__version__}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in meta and "Project-URL: Repository," in meta
    assert "Classifier: Programming Language :: Python :: 3.10" in meta
    assert "Description-Content-Type: text/markdown" in meta and "<!-- mcp-name: " in meta


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETAINED_", "PIP_", "UV_", "PIPX_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), PATH=f"{home / 'bin'}:/usr/bin:/bin", XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"), **extra)
    return env


def _green_doctor(home: Path, project: Path, env: dict[str, str]) -> None:
    retained = home / "bin" / "retained"
    assert subprocess.run([str(retained), "--version"], env=env, capture_output=True, text=True,
                          timeout=120).stdout.strip() == f"retained {__version__}"
    proc = subprocess.run([str(retained), "install", "--yes", "--host", "claude"], env=env, cwd=project,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([str(retained), "doctor", "--host", "claude"], env=env, cwd=project, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_the_built_wheel_installs_as_a_tool_and_doctor_is_green(dist, tool, tmp_path, project):
    exe = BIN / tool if (BIN / tool).exists() else shutil.which(tool)
    if exe is None:
        pytest.skip(f"{tool} is not installed (pip install {tool})")
    home = tmp_path / "clean-home"
    (home / "bin").mkdir(parents=True)
    wheel = next(dist.glob("*.whl"))
    if tool == "pipx":
        env = _clean_env(home, PIPX_HOME=str(home / ".pipx"), PIPX_BIN_DIR=str(home / "bin"),
                         PIPX_MAN_DIR=str(home / "man"), PIPX_DEFAULT_PYTHON=shutil.which("python3") or "python3")
        cmd = [str(exe), "install", str(wheel)]
    else:
        env = _clean_env(home, UV_TOOL_DIR=str(home / ".uv-tools"), UV_TOOL_BIN_DIR=str(home / "bin"),
                         UV_CACHE_DIR=str(home / ".cache" / "uv"), UV_PYTHON_DOWNLOADS="never")
        cmd = [str(exe), "tool", "install", str(wheel)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _green_doctor(home, project, env)
