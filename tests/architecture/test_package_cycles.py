"""The top-level packages import one another in one direction only, and the platform imports
none of the packages above it.

import-linter's layers (``make lint``) name the packages it knows; this test reads every
top-level package of the repository, so a new one that imports back and forth fails here even
before a contract names it."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]

#: The packages above the platform: ``chatplatform`` imports none of them.
ABOVE_THE_PLATFORM = ("chats", "summaries", "memory", "console", "config")


def top_level_packages() -> list[str]:
    return sorted(
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name != "tests" and not path.parent.name.startswith(".")
    )


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *top_level_packages(), exclude_type_checking_imports=True, cache_dir=None
    )


def package_imports(graph: grimp.ImportGraph, packages: list[str]) -> dict[str, set[str]]:
    """Which other top-level packages each package imports directly, from any of its modules."""
    edges: dict[str, set[str]] = {package: set() for package in packages}
    for module in graph.modules:
        importer = module.split(".")[0]
        if importer not in edges:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")[0]
            if target in edges and target != importer:
                edges[importer].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle through the package graph, each from its smallest name (depth-first)."""
    found: list[list[str]] = []
    for start in sorted(edges):
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges[node]):
                if nxt == start:
                    found.append([*path, start])
                elif nxt not in path and nxt > start:
                    stack.append((nxt, [*path, nxt]))
    return found


def test_the_package_graph_is_read_from_the_repository() -> None:
    packages = top_level_packages()
    assert {"chatplatform", "chats", "summaries", "memory", "console", "config"} <= set(packages)
    edges = package_imports(graph(), packages)
    # Imports the layers rely on are seen, so an empty graph cannot pass the tests below.
    assert "chatplatform" in edges["chats"]
    assert "chats" in edges["console"]
    assert "chats" in edges["config"]


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_top_level_packages_import_each_other() -> None:
    edges = package_imports(graph(), top_level_packages())
    assert cycles(edges) == []


def test_the_platform_imports_no_package_above_it() -> None:
    g = graph()
    upward = sorted(
        (module, imported)
        for module in {"chatplatform"} | g.find_descendants("chatplatform")
        for imported in g.find_modules_directly_imported_by(module)
        if imported.split(".")[0] in ABOVE_THE_PLATFORM
    )
    assert upward == []
