"""The package's shape (issues 17, 31): wings at the top level, a few loose modules, no import cycle, small wings.

The import graph is read with ``ast`` (no module is imported), so every ``import`` counts, also one
inside a function: a function-level import does not cut a cycle, it hides it.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_privleak"
#: The public API and the small helpers every wing uses; anything else belongs in a wing.
LOOSE = {"__init__", "assertions", "results", "protocols", "canaries", "finite", "stats", "atomic"}
#: The package's command entry (``python -m pytest_privleak gate``, issue 36): a few lines that call into report/.
COMMAND_ENTRY = "__main__"
WINGS = {"plugin", "cache", "distribute", "progress", "data", "targets", "adapters", "attacks", "ldp", "dp",
         "embeddings", "report"}


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root``."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (absolute and relative, at any depth of the file)."""
    graph = {}
    for name, path in found.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                edges.add(module)
                edges.update(f"{module}.{alias.name}" for alias in node.names)
        graph[name] = {edge for edge in edges if edge in found and edge != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph(modules())) == []


def wing_of(module: str) -> str:
    """The wing a module sits in; an attack family counts as a wing of its own (``attacks.membership``)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "attacks" and parts[2] in FAMILIES:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def wings_importing_each_other(graph: dict[str, set[str]]) -> list[tuple[str, str, str, str]]:
    """Pairs of wings with imports both ways (an arrow that points up), each with one import of each way."""
    one_way: dict[tuple[str, str], str] = {}
    for module, imported in sorted(graph.items()):
        for other in sorted(imported):
            pair = (wing_of(module), wing_of(other))
            if pair[0] != pair[1]:
                one_way.setdefault(pair, f"{module} -> {other}")
    return sorted((a, b, one_way[(a, b)], one_way[(b, a)]) for a, b in one_way if a < b and (b, a) in one_way)


def test_layers_point_one_way_between_wings():
    """No two wings import each other, also through a function-level import (issue 31): a piece both need
    moves down (the result codec into ``results``, ``OutOfVocabularyError`` beside the protocols)."""
    assert wings_importing_each_other(import_graph(modules())) == []


def test_the_wing_check_finds_two_wings_that_import_each_other(tmp_path):
    pkg = tmp_path / "pkg"
    for wing in ("cache", "report"):
        (pkg / wing).mkdir(parents=True)
        (pkg / wing / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cache" / "results.py").write_text("def load():\n    from ..report.model import encode\n")
    (pkg / "report" / "model.py").write_text("from ..cache import results\n")
    assert [pair[:2] for pair in wings_importing_each_other(import_graph(modules(pkg)))] == [("pkg.cache", "pkg.report")]


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "wing").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "wing" / "__init__.py").write_text("")
    (pkg / "wing" / "a.py").write_text("from . import b\n")
    (pkg / "wing" / "b.py").write_text("def f():\n    from ..wing.a import x\n")
    (pkg / "c.py").write_text("import pkg.wing.a\n")
    assert cycles(import_graph(modules(pkg))) == [["pkg.wing.a", "pkg.wing.b"]]


def test_the_top_level_holds_wings_and_at_most_eight_loose_modules():
    loose = {path.stem for path in PACKAGE.glob("*.py")} - {COMMAND_ENTRY}
    wings = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert loose <= LOOSE, f"loose modules outside the public API and shared helpers: {sorted(loose - LOOSE)}"
    assert len(loose) <= 8
    entry = (PACKAGE / f"{COMMAND_ENTRY}.py").read_text(encoding="utf-8")
    assert len(entry.splitlines()) <= 6, "__main__.py delegates into report/ and holds nothing else"
    assert wings == WINGS


@pytest.mark.parametrize("wing", sorted(WINGS))
def test_every_wing_says_its_role(wing):
    doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"pytest_privleak/{wing}/__init__.py has no docstring saying what the wing is for"


#: The attack families of ``attacks/`` (issue 31): one sub-package each, and what they share at its root.
FAMILIES = {"cea", "exposure", "membership", "extraction", "mix_and_match"}
SHARED_BY_FAMILIES = {"__init__", "candidates", "inconclusive", "over_seeds", "over_canaries", "remedies", "moved",
                      "redaction"}
MAX_MODULES_PER_WING = 15


def packages(root: Path = PACKAGE) -> list[Path]:
    """Every package folder under ``root`` (the top level, its wings and their sub-packages)."""
    return sorted(path.parent for path in root.rglob("__init__.py"))


def test_attacks_holds_one_sub_package_per_family_and_only_shared_modules():
    attacks = PACKAGE / "attacks"
    families = {path.name for path in attacks.iterdir() if (path / "__init__.py").is_file()}
    loose = {path.stem for path in attacks.glob("*.py")}
    assert families == FAMILIES
    assert loose <= SHARED_BY_FAMILIES, f"attacks/ holds modules of one family: {sorted(loose - SHARED_BY_FAMILIES)}"


def module_count(package: Path) -> int:
    """Modules directly in a package folder (its ``__init__`` and sub-packages not counted)."""
    return len([path for path in package.glob("*.py") if path.stem != "__init__"])


def prefixed_modules(package: Path) -> list[str]:
    """Modules whose name repeats the package's: ``membership/membership_rmia.py``."""
    return sorted(path.name for path in package.glob("*.py") if path.stem.startswith(f"{package.name}_"))


@pytest.mark.parametrize("package", packages(), ids=lambda path: str(path.relative_to(PACKAGE.parent)))
def test_no_wing_holds_more_than_fifteen_modules(package):
    """A wing that grows past this is a room that wants sub-packages, as ``attacks/`` did (issue 31)."""
    assert module_count(package) <= MAX_MODULES_PER_WING, f"{package.relative_to(PACKAGE.parent)} is crowded"


@pytest.mark.parametrize("package", packages(), ids=lambda path: str(path.relative_to(PACKAGE.parent)))
def test_no_module_repeats_its_wing_name_as_a_prefix(package):
    """``membership/rmia.py``, not ``membership_rmia.py``: a shared prefix is a package not yet made."""
    assert prefixed_modules(package) == []


@pytest.mark.parametrize("package", packages(), ids=lambda path: str(path.relative_to(PACKAGE.parent)))
def test_every_sub_package_says_its_role(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package.relative_to(PACKAGE.parent)}/__init__.py has no docstring saying what it holds"


def test_the_size_and_prefix_checks_find_the_old_flat_attacks_wing(tmp_path):
    """Planted: the shape ``attacks/`` had before issue 31 (16 modules, nine named ``membership_*``)."""
    root = tmp_path / "pkg"
    (root / "membership").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "membership" / "__init__.py").write_text("")
    for index in range(16):
        (root / "membership" / f"membership_{index}.py").write_text("")
    crowded = [path.name for path in packages(root) if module_count(path) > MAX_MODULES_PER_WING]
    assert crowded == ["membership"]
    assert len(prefixed_modules(root / "membership")) == 16


def test_the_old_attack_import_paths_still_load_the_moved_modules():
    """Paths from before issue 31 keep working (with a DeprecationWarning) and give the same module."""
    import importlib

    from pytest_privleak.attacks.moved import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(f"pytest_privleak.{old}", None)  # a cached alias would import without the warning
        with pytest.warns(DeprecationWarning, match="moved to"):
            moved = importlib.import_module(f"pytest_privleak.{old}")
        assert moved is importlib.import_module(f"pytest_privleak.{new}")


def test_every_plugin_option_with_a_value_names_it_in_help():
    """``--help`` shows ``--privleak-seed=N``, not ``--privleak-seed=PRIVLEAK_SEED`` (issue 17 item 4)."""
    missing = []
    for path in (PACKAGE / "plugin").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "addoption":
                keywords = {k.arg: k.value for k in node.keywords}
                action = keywords.get("action")
                flag = isinstance(action, ast.Constant) and action.value in ("store_true", "store_false", "count")
                if not flag and "metavar" not in keywords:
                    missing.append(f"{path.name}:{node.lineno} {ast.literal_eval(node.args[0])}")
    assert missing == []


def test_every_hook_says_when_pytest_calls_it():
    """Each ``pytest_*`` hook implementation of the plugin wing has a docstring (issue 17 item 4)."""
    missing = [f"{path.name}:{node.lineno} {node.name}"
               for path in (PACKAGE / "plugin").glob("*.py")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_")
               and not ast.get_docstring(node)]
    assert missing == []


def test_the_import_lines_the_docs_show_resolve():
    """Every ``from pytest_privleak... import ...`` line in README.md and docs/ names things that exist."""
    import importlib
    import re

    root = PACKAGE.parent
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    line = re.compile(r"^from (pytest_privleak[\w.]*) import ([\w, ]+)$", re.M)
    seen = 0
    for page in pages:
        for module, names in line.findall(page.read_text(encoding="utf-8")):
            imported = importlib.import_module(module)
            for name in (part.strip() for part in names.split(",")):
                assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}"), \
                    f"{page.name}: from {module} import {name}"
                seen += 1
    assert seen > 10
