"""mypy over the package in the layout it installs in, the gate README's test command runs.

    python .ci/typecheck.py [mypy arguments...]

pyproject.toml maps the top-level folders `installers/`, `hooks/` and `templates/` into `retained`,
and their relative imports (`from ... import native`) only resolve in that layout, which an editable
install hides from mypy. So this builds the layout from symbolic links in a temp folder and runs mypy
there with pyproject.toml's `[tool.mypy]`; error paths are given back as paths of this tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("installers", "hooks", "templates")


def layout(base: Path) -> Path:
    pkg = base / "retained"
    pkg.mkdir()
    for entry in (ROOT / "retained").iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, pkg / entry.name)
    for folder in MAPPED:
        os.symlink(ROOT / folder, pkg / folder)
    return pkg


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="retained-typecheck-") as tmp:
        layout(Path(tmp))
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--cache-dir", str(ROOT / ".mypy_cache"), "-p", "retained", *sys.argv[1:]]
        out = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    text = out.stdout + out.stderr
    for folder in MAPPED:
        text = text.replace(f"retained/{folder}/", f"{folder}/")
    sys.stdout.write(text)
    return out.returncode


if __name__ == "__main__":
    raise SystemExit(main())
