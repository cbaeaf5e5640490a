"""No strategy name is compared outside the strategy registry.

A strategy says what it needs (``chatplatform.core.context.strategies``); code elsewhere asks
it (``strategy_for(name).needs...``) instead of comparing names, so adding a strategy touches
its registry entry, not every module that cares. This reads the source of every package and
script (not the tests; migrations keep the names they were written with) and lists each
comparison against a strategy name: ``==``/``!=``, ``in (...)``, ``case "..."``, query filters
such as ``.filter(strategy="hybrid")`` or ``strategy__in=[...]``, and ``===`` in the scripts of
the pages. Names passed as data (``--strategy hybrid``, a default) are fine.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from chatplatform.core.context.strategies import strategy_names

ROOT = Path(__file__).resolve().parents[2]
#: The registry: the entries and the names' type.
ALLOWED = {
    Path("chatplatform/core/context/strategies.py"),
    Path("chatplatform/core/context/types.py"),
}
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "node_modules",
    "staticfiles",
    "tests",
    "migrations",
    "var",
    "docs",
    "__pycache__",
}
#: Calls whose keyword arguments filter by a field.
FILTER_CALLS = {"filter", "exclude", "get", "Q", "get_or_create", "update_or_create"}
NAMES = frozenset(strategy_names())


def _files(suffixes: tuple[str, ...]) -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT)
        if SKIPPED_DIRS & set(relative.parts[:-1]) or relative in ALLOWED:
            continue
        if path.suffix in suffixes and path.is_file():
            yield relative


def _names_in(node: ast.AST | None) -> list[str]:
    """The strategy names ``node`` is (a string) or holds (a tuple, list or set of strings)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [n for item in node.elts for n in _names_in(item)]
    return []


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def name_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, what) for each comparison against a strategy name in Python ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            names = [n for part in [node.left, *node.comparators] for n in _names_in(part)]
            if names:
                found.append((node.lineno, f"compares with {', '.join(names)}"))
        elif isinstance(node, ast.MatchValue) and _names_in(node.value):
            found.append((node.lineno, f"case {', '.join(_names_in(node.value))}"))
        elif isinstance(node, ast.Call) and _call_name(node) in FILTER_CALLS:
            for keyword in node.keywords:
                field = (keyword.arg or "").split("__")[0]
                if field == "strategy" and _names_in(keyword.value):
                    found.append((node.lineno, f"filters {keyword.arg}={_names_in(keyword.value)}"))
    return sorted(found)


_SCRIPT_COMPARISON = re.compile(
    r"""(?:[!=]==?\s*["'](?P<a>{names})["'])|(?:["'](?P<b>{names})["']\s*[!=]==?)""".format(
        names="|".join(re.escape(name) for name in sorted(NAMES))
    )
)


def test_no_strategy_name_is_compared_outside_the_registry() -> None:
    places = []
    for path in _files((".py",)):
        for number, what in name_comparisons((ROOT / path).read_text(encoding="utf-8")):
            places.append(f"{path}:{number}: {what}")
    for path in _files((".js", ".html")):
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if _SCRIPT_COMPARISON.search(line):
                places.append(f"{path}:{number}: {line.strip()[:80]}")
    assert not places, (
        "Strategy names compared outside the registry: ask the strategy what it needs "
        "(strategy_for(name).needs...) instead:\n" + "\n".join(places)
    )


def test_the_check_finds_each_kind_of_comparison() -> None:
    source = """
if policy.strategy == "hybrid": pass
if "sliding_window" != policy.strategy: pass
if strategy in ("rolling_summary", "server_compaction"): pass
match policy.strategy:
    case "hybrid": pass
ContextPolicy.objects.filter(retrieval_dense=True, strategy="hybrid")
ContextPolicy.objects.exclude(strategy__in=["sliding_window"])
Q(strategy="hybrid")
PackingPolicy(strategy="sliding_window")
parser.add_argument("--strategy", default="hybrid")
if policy.strategy == "hybridish": pass
"""
    assert [line for line, _ in name_comparisons(source)] == [2, 3, 4, 6, 7, 8, 9]
    assert _SCRIPT_COMPARISON.search('summaries: strategy === "sliding_window" ? 0 : n')
    assert not _SCRIPT_COMPARISON.search('var fallback = "hybrid";')
