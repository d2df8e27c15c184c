"""The module maps in docs/architecture.md are true: every import keeps to its row's rule.

docs/architecture.md holds two kinds of table (each a Markdown table; names in backticks):

- `| package | owns | may import |`: one row per top-level package (`memvault_vault`, ...), naming
  the other top-level packages its modules may import (`memvault_core`, `memvault` for the
  generated protobuf code). Third-party and standard-library imports are free.
- `| module | owns | may import |`: rows for the modules and subpackages of one package. A module is
  governed by the row with the longest name that is it or contains it; it may import modules of its
  own row and those under the names in its row's "may import" cell ("(nothing)": none). Rows for
  later work say "(to come)" in their "owns" cell.

The tests fail when an import (anywhere in a module, `TYPE_CHECKING` blocks included) breaks its
rule, when a module has no row, and when a row or a "may import" name matches no module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# Every package of libs/ and services/ is checked, found on disk so a new one cannot be missed;
# libs/protos (`memvault`) is generated code.
SOURCES = {
    path.name: path
    for path in sorted([*ROOT.glob("libs/*/src/memvault_*"), *ROOT.glob("services/*/src/memvault_*")])
    if path.is_dir() and (path / "__init__.py").exists()
}
GENERATED = {"memvault": ROOT / "libs/protos/src/memvault"}
PROJECT = re.compile(r"memvault(_\w+)?$")
HEADER = re.compile(r"^\|\s*(module|package)\s*\|\s*owns\s*\|\s*may import\s*\|\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Row:
    name: str
    owns: str
    may_import: tuple[str, ...]
    line: int


@dataclass
class Map:
    packages: dict[str, Row] = field(default_factory=dict)
    modules: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_map(text: str) -> Map:
    """Every `package` and `module` table of the document."""
    found = Map()
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        header = HEADER.match(lines[index].strip())
        index += 1
        if not header:
            continue
        index += 1  # the |---| line
        while index < len(lines) and lines[index].lstrip().startswith("|"):
            cells = [cell.strip() for cell in lines[index].strip().strip("|").split("|")]
            number = index + 1
            index += 1
            if len(cells) != 3:
                found.problems.append(f"architecture.md:{number}: a row needs three cells: {lines[index - 1]}")
                continue
            names = re.findall(r"`([^`]+)`", cells[0])
            may_import = tuple(re.findall(r"`([^`]+)`", cells[2]))
            if len(names) != 1:
                found.problems.append(f"architecture.md:{number}: name one module in backticks: {cells[0]}")
                continue
            if not may_import and cells[2] != "(nothing)":
                found.problems.append(f"architecture.md:{number}: 'may import' names nothing in backticks: {cells[2]}")
            row = Row(names[0], cells[1], may_import, number)
            if header.group(1).lower() == "package":
                found.packages[row.name] = row
            else:
                found.modules.append(row)
    return found


def modules_of(package: str, directory: Path) -> dict[str, Path]:
    """Module name -> file, for every .py file of a package (a package is its __init__.py)."""
    found: dict[str, Path] = {}
    for path in sorted(directory.rglob("*.py")):
        parts = [package, *path.relative_to(directory).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(module: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported module) for each project import of a module, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.append((node.lineno, candidate if candidate in known else base))
    return [(line, name) for line, name in found if PROJECT.match(name.split(".")[0])]


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def check(text: str, sources: dict[str, Path], generated: dict[str, Path]) -> list[str]:
    """Every way the code and the maps in `text` disagree, one line each."""
    found = read_map(text)
    problems = list(found.problems)
    modules: dict[str, Path] = {}
    for package, directory in sources.items():
        modules.update(modules_of(package, directory))
    known = set(modules)
    for package, directory in generated.items():
        known.update(modules_of(package, directory))

    for package in sources:
        if package not in found.packages:
            problems.append(f"no row for package {package} in a `| package | owns | may import |` table")
    rows_by_name: dict[str, Row] = {}
    for row in found.modules:
        if row.name in rows_by_name:
            problems.append(f"architecture.md:{row.line}: a second row for {row.name}")
        rows_by_name[row.name] = row
        if "." not in row.name:
            problems.append(f"architecture.md:{row.line}: {row.name} is a package: its row goes in the package table")
        if "(to come)" not in row.owns and not any(under(module, row.name) for module in modules):
            problems.append(f"architecture.md:{row.line}: row {row.name} matches no module")
    for row in found.modules:
        for name in row.may_import:
            if not any(under(module, name) for module in known) and name not in rows_by_name:
                problems.append(f"architecture.md:{row.line}: {row.name} may import {name}, which is no module")
    for row in found.packages.values():
        for name in row.may_import:
            if name not in found.packages:
                problems.append(f"architecture.md:{row.line}: {row.name} may import {name}, which has no package row")

    for module, path in sorted(modules.items()):
        top = module.split(".")[0]
        package_row = found.packages.get(top)
        # A row named after a whole package would cover every module nobody wrote a row for: the
        # package's own __init__ belongs to its `package` row, and module rows name something inside.
        covering = [row for row in found.modules if "." in row.name and under(module, row.name)]
        if module == top and package_row is not None:
            covering.append(Row(top, package_row.owns, (), package_row.line))
        if not covering:
            problems.append(f"{module} ({path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}): no row")
            continue
        row = max(covering, key=lambda candidate: len(candidate.name))
        own = row.name if "." in row.name else None
        for line, imported in imports_of(module, path, known):
            if (own and under(imported, own)) or any(under(imported, name) for name in row.may_import):
                continue
            imported_top = imported.split(".")[0]
            if imported_top != top and package_row is not None and imported_top in package_row.may_import:
                continue
            problems.append(f"{module}:{line} imports {imported}, which its row ({row.name}) does not allow")
    return problems


def test_the_code_keeps_to_the_module_maps_in_docs_architecture() -> None:
    assert {"memvault_core", "memvault_devstack", "memvault_vault", "memvault_gateway"} <= set(SOURCES)
    problems = check(DOC.read_text(), SOURCES, GENERATED)
    assert not problems, "docs/architecture.md and the code disagree:\n" + "\n".join(problems)


def test_the_check_finds_a_forbidden_import_a_module_without_a_row_and_a_stale_row(tmp_path: Path) -> None:
    package = tmp_path / "memvault_demo"
    (package / "domain").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "domain" / "__init__.py").write_text("")
    (package / "domain" / "rules.py").write_text("from memvault_demo.store import save\n")
    (package / "domain" / "names.py").write_text("from . import rules\n")  # its own row: allowed
    (package / "store.py").write_text("import asyncpg\nimport memvault_core.errors\nimport memvault_vault\n")
    (package / "extra.py").write_text("")
    doc = """
| package | owns | may import |
|---|---|---|
| `memvault_demo` | a demo | `memvault_core` |
| `memvault_core` | shared code | (nothing) |

| module | owns | may import |
|---|---|---|
| `memvault_demo.domain` | rules | (nothing) |
| `memvault_demo.store` | SQL | `memvault_demo.domain` |
| `memvault_demo.rpc` | the wire | `memvault_demo.store` |
| `memvault_demo.web` | pages (to come) | `memvault_demo.missing` |
"""
    problems = check(doc, {"memvault_demo": package}, {})

    assert problems == [
        "architecture.md:11: row memvault_demo.rpc matches no module",
        "architecture.md:12: memvault_demo.web may import memvault_demo.missing, which is no module",
        "memvault_demo.domain.rules:1 imports memvault_demo.store, which its row (memvault_demo.domain) does not allow",
        f"memvault_demo.extra ({package / 'extra.py'}): no row",
        "memvault_demo.store:3 imports memvault_vault, which its row (memvault_demo.store) does not allow",
    ]
    # A row named after the whole package covers its __init__ only, never a module without a row.
    doc = doc.replace(
        "| `memvault_demo.domain` | rules",
        "| `memvault_demo` | all | `memvault_demo` |\n| `memvault_demo.domain` | rules",
    )
    assert f"memvault_demo.extra ({package / 'extra.py'}): no row" in check(doc, {"memvault_demo": package}, {})
