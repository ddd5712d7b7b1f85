"""The shape of the house, checked with `ast` over every module of retained/ and installers/:
SQL lives only in the index package, nothing outside store.py touches a private name of Store, and
the two central classes stay small enough to read.

Each detector is also run on a planted violation, so a detector that stopped seeing anything fails.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX_PACKAGE = ROOT / "retained" / "index"
CLASS_MAX = 400

# SQL as retained writes it: upper-case keywords in a statement's shape. Docstrings are prose and may
# name a statement; "DELETE" alone (an HTTP method) is not a statement.
_SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|PRAGMA|WITH|CREATE|DROP|ALTER|VACUUM|BEGIN|COMMIT|ROLLBACK)\b(?!\s*$)"
    r"|\bSELECT\b.+?\bFROM\b|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\bPRAGMA\s+\w+|\bCREATE\s+(TABLE|INDEX|UNIQUE|VIRTUAL|VIEW|TRIGGER)\b|\bWITH\s+\w+\s+AS\b",
    re.S,
)


def _modules() -> list[Path]:
    return sorted(p for d in ("retained", "installers") for p in (ROOT / d).rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def sql_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string in `source` that reads as SQL; an f-string counts as its
    literal parts joined, so a statement split around placeholders is still seen."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    inside_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "{}".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings | skip:
            text = node.value
        else:
            continue
        if _SQL.search(text):
            found.append((node.lineno, " ".join(text.split())[:70]))
    return sorted(found)


def _store_privates() -> set[str]:
    """Every private name Store defines: its methods and the attributes it sets on self."""
    tree = ast.parse((ROOT / "retained" / "store.py").read_text("utf-8"))
    store = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store")
    names = {n.name for n in store.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(store):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.endswith("__")}


def private_uses(source: str, privates: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each use of one of `privates` on anything but `self`, as an attribute or as a
    string handed to getattr / hasattr / setattr."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in privates:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in privates):
            found.append((node.lineno, str(node.args[1].value)))
    return sorted(found)


def class_lengths(source: str) -> dict[str, int]:
    """Lines of each top-level class, from `class` to its last line."""
    tree = ast.parse(source)
    return {n.name: n.end_lineno - n.lineno + 1 for n in tree.body if isinstance(n, ast.ClassDef) and n.end_lineno}


def long_functions(source: str, at_least: int) -> dict[str, int]:
    """Lines of every function (methods and nested ones too) of `at_least` lines or more, by name."""
    tree = ast.parse(source)
    return {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno
            and n.end_lineno - n.lineno + 1 >= at_least}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- the promises ----------------------------------------------------------------------------------
def test_no_sql_text_outside_the_index_package():
    outside = [p for p in _modules() if INDEX_PACKAGE not in p.parents]
    found = [f"{_rel(p)}:{line}: {text!r}" for p in outside for line, text in sql_strings(p.read_text("utf-8"))]
    assert not found, ("SQL outside retained/index/ (give it a named function in the index package and call "
                       "that):\n  " + "\n  ".join(found))


def test_the_index_package_holds_the_sql_and_offers_no_raw_query():
    inside = [p for p in INDEX_PACKAGE.glob("*.py")]
    assert sum(len(sql_strings(p.read_text("utf-8"))) for p in inside) > 50  # the detector sees it there
    from retained.index import Index

    public = {name for name in dir(Index) if not name.startswith("_")}
    assert not public & {"query", "execute", "db", "sql", "connection"}, public


def test_no_module_outside_store_touches_a_private_name_of_store():
    privates = _store_privates()
    assert {"_write_lock", "_refresh", "_sem"} <= privates  # what the walk found in Store
    found = [f"{_rel(p)}:{line}: {name}" for p in _modules() if p != ROOT / "retained" / "store.py"
             for line, name in private_uses(p.read_text("utf-8"), privates)]
    assert not found, ("private names of Store used outside store.py (give Store a public method for what "
                       "is needed):\n  " + "\n  ".join(found))


def test_index_and_store_stay_under_400_lines():
    index = class_lengths((INDEX_PACKAGE / "__init__.py").read_text("utf-8"))["Index"]
    store = class_lengths((ROOT / "retained" / "store.py").read_text("utf-8"))["Store"]
    assert index < CLASS_MAX and store < CLASS_MAX, {"Index": index, "Store": store}


FUNCTION_LONG, FUNCTION_LONG_MAX, FUNCTION_MAX = 50, 8, 100


def test_functions_stay_short_and_no_class_grows_past_400_lines():
    """At most 8 functions of 50 lines or more in the whole package, none over 100, and no class over
    400 lines (issue 16: a function a reader can hold, a class a reader can finish)."""
    long, classes = {}, {}
    for path in _modules():
        source = path.read_text("utf-8")
        long.update({f"{_rel(path)}:{name}": n for name, n in long_functions(source, FUNCTION_LONG).items()})
        tree = ast.parse(source)
        classes.update({f"{_rel(path)}:{n.name}": n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
                        if isinstance(n, ast.ClassDef) and n.end_lineno})
    assert len(long) <= FUNCTION_LONG_MAX, sorted(long.items(), key=lambda kv: -kv[1])
    assert all(n <= FUNCTION_MAX for n in long.values()), {k: n for k, n in long.items() if n > FUNCTION_MAX}
    assert all(n <= CLASS_MAX for n in classes.values()), {k: n for k, n in classes.items() if n > CLASS_MAX}


def test_every_package_folder_is_listed_for_the_wheel():
    """pyproject lists its packages one by one: a new package folder left out of the list is missing
    from every built install, while the editable install of development hides it."""
    import tomlkit

    setuptools = tomlkit.parse((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    packages = set()
    for name, folder in setuptools["package-dir"].items():  # package name -> the folder it is built from
        for init in (ROOT / str(folder)).rglob("__init__.py"):
            packages.add(".".join([str(name), *init.parent.relative_to(ROOT / str(folder)).parts]))
    assert "retained.index" in packages
    assert packages <= set(setuptools["packages"]), sorted(packages - set(setuptools["packages"]))


def test_each_detector_sees_a_planted_violation():
    planted_sql = (
        'rows = store.index.query("SELECT id FROM records WHERE scope = ?", (s,))\n'
        'n = f"SELECT COUNT(*) FROM {table} WHERE {where}"\n'
        'db.execute("PRAGMA user_version")\n'
        'x = "update records set text = ?" if False else "DELETE FROM vectors"\n'
        'METHODS = frozenset({"GET", "DELETE"})  # not SQL\n'
        'def f():\n    """SELECT the newest records FROM the log (prose, a docstring)."""\n'
    )
    assert [line for line, _ in sql_strings(planted_sql)] == [1, 2, 3, 4]
    planted_private = (
        "store._write_lock.acquire()\n"
        "self.store._refresh()\n"
        "lock = getattr(store, '_write_lock', None)\n"
        "self._write_lock = object()  # a class's own attribute of the same name\n"
    )
    assert [line for line, _ in private_uses(planted_private, {"_write_lock", "_refresh"})] == [1, 2, 3]
    assert class_lengths("class A:\n" + "    x = 1\n" * 400) == {"A": 401}
    planted_long = "class C:\n    def m(self):\n" + "        x = 1\n" * 60 + "def short():\n    return 1\n"
    assert long_functions(planted_long, FUNCTION_LONG) == {"m": 61}
