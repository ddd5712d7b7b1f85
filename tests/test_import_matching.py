"""An import knows what is there: a line that closely matches a current record is not added again, and
one that matches a record a later one corrected is not brought back as current unless asked."""

from __future__ import annotations

import subprocess

from tests.conftest import cli_json


def _project(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project.resolve()


def test_an_import_says_per_line_what_matches_a_current_or_a_corrected_record_and_skips_both(store_dir, tmp_path):
    project = _project(tmp_path)
    here = {"cwd": str(project)}
    old = cli_json("write", "Use PostgreSQL 15 for the orders database.", "--kind", "decision", **here)["id"]
    new = cli_json("write", "Use PostgreSQL 16 for the orders database.", "--kind", "decision",
                   "--supersedes", old, **here)["id"]
    tests = cli_json("write", "Run the test suite with make check before every push.", "--kind", "convention",
                     **here)["id"]
    (project / "CLAUDE.md").write_text(
        "# Shop\n\n## Decisions\n\n- Use PostgreSQL 15 for the orders database.\n"
        "- Run the test suite with `make check` before every push!\n- Deploys happen on Tuesdays after review.\n")

    dry = cli_json("import", str(project / "CLAUDE.md"), **here)
    by_text = {a["text"]: a for a in dry["actions"]}
    corrected = by_text["Use PostgreSQL 15 for the orders database."]
    assert corrected["action"] == "skip" and corrected["id"] == old
    assert new in corrected["why"] and "not brought back as current" in corrected["why"]
    close = by_text["Run the test suite with `make check` before every push!"]
    assert close["action"] == "already" and close["id"] == tests and "closely matches current record" in close["why"]
    assert by_text["Deploys happen on Tuesdays after review."]["action"] == "add"
    assert (dry["would_add"], dry["already"], dry["skipped"]) == (1, 1, 1)

    assert cli_json("import", str(project / "CLAUDE.md"), "--apply", **here)["added"] == 1
    hits = cli_json("search", "--words", "PostgreSQL orders database", **here)["hits"]
    assert [h["id"] for h in hits if "PostgreSQL" in h["text"]] == [new]  # the correction alone is current

    again = cli_json("import", str(project / "CLAUDE.md"), "--include-superseded", "--apply", **here)
    assert again["added"] == 1 and "--include-superseded" in next(a["why"] for a in again["actions"] if a["action"] == "add")
