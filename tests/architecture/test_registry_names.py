"""No registry name is compared outside its registry: strategies, memory kinds.

A strategy says what it needs (``chatplatform.core.context.strategies``); code elsewhere asks
it (``strategy_for(name).needs...``) instead of comparing names, so adding a strategy touches
its registry entry, not every module that cares. Likewise a memory kind (fact, standing
instruction, preference: ``chatplatform.core.memory.kinds``) says its prompt section, label
and how a newer one replaces an older; code asks ``memory_kind_for(kind)``. This reads the
source of every package and script (not the tests; migrations keep the names they were
written with) and lists each comparison against a registry's name: ``==``/``!=``, ``in
(...)``, ``case "..."``, query filters on the registry's field such as
``.filter(strategy="hybrid")``, ``strategy__in=[...]`` or ``.filter(kind="instruction")``, and
``===`` in the scripts of the pages. Names passed as data (``--strategy hybrid``, a default)
are fine.

A memory kind's name ``fact`` is also what the packing calls a fact it included or left out
(``Included("fact", ...)``), a word of its own registry (``SECTION_OF_KIND``); only the kind
names no other vocabulary uses are checked in comparisons, and every name in query filters
on ``kind``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chatplatform.core.context.strategies import strategy_names
from chatplatform.core.memory.kinds import FACT, MEMORY_KIND_NAMES

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Registry:
    """A registry whose names no other module compares: the names, the model field that holds
    one, the files that define them, and what to ask instead."""

    title: str
    names: frozenset[str]
    field: str
    allowed: frozenset[Path]
    ask: str
    #: Names also filtered on ``field`` (not only compared) when the plain word is shared.
    filtered: frozenset[str] = frozenset()

    @property
    def filter_names(self) -> frozenset[str]:
        return self.names | self.filtered


STRATEGIES = Registry(
    "Strategy names",
    frozenset(strategy_names()),
    "strategy",
    frozenset(
        {
            Path("chatplatform/core/context/strategies.py"),
            Path("chatplatform/core/context/types.py"),
        }
    ),
    "ask the strategy what it needs (strategy_for(name).needs...)",
)
MEMORY_KINDS = Registry(
    "Memory kind names",
    frozenset(MEMORY_KIND_NAMES) - {FACT},
    "kind",
    frozenset(
        {
            Path("chatplatform/core/memory/kinds.py"),
            Path("chatplatform/core/memory/instructions.py"),
        }
    ),
    "ask the kind (memory_kind_for(kind).section, .label, .replaces)",
    filtered=frozenset({FACT}),
)
REGISTRIES = (STRATEGIES, MEMORY_KINDS)
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


def _files(suffixes: tuple[str, ...], allowed: frozenset[Path]) -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT)
        if SKIPPED_DIRS & set(relative.parts[:-1]) or relative in allowed:
            continue
        if path.suffix in suffixes and path.is_file():
            yield relative


def _names_in(node: ast.AST | None, names: frozenset[str]) -> list[str]:
    """The names ``node`` is (a string) or holds (a tuple, list or set of strings)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [n for item in node.elts for n in _names_in(item, names)]
    return []


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def name_comparisons(source: str, registry: Registry = STRATEGIES) -> list[tuple[int, str]]:
    """(line, what) for each comparison against a name of ``registry`` in Python ``source``."""
    found: list[tuple[int, str]] = []
    names = registry.names
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            compared = [
                n for part in [node.left, *node.comparators] for n in _names_in(part, names)
            ]
            if compared:
                found.append((node.lineno, f"compares with {', '.join(compared)}"))
        elif isinstance(node, ast.MatchValue) and _names_in(node.value, names):
            found.append((node.lineno, f"case {', '.join(_names_in(node.value, names))}"))
        elif isinstance(node, ast.Call) and _call_name(node) in FILTER_CALLS:
            for keyword in node.keywords:
                field = (keyword.arg or "").split("__")[0]
                filtered = _names_in(keyword.value, registry.filter_names)
                if field == registry.field and filtered:
                    found.append((node.lineno, f"filters {keyword.arg}={filtered}"))
    return sorted(found)


def script_comparison(registry: Registry) -> re.Pattern[str]:
    """A comparison against one of ``registry``'s names in a page's script or template."""
    return re.compile(
        r"""(?:[!=]==?\s*["'](?P<a>{names})["'])|(?:["'](?P<b>{names})["']\s*[!=]==?)""".format(
            names="|".join(re.escape(name) for name in sorted(registry.names))
        )
    )


_SCRIPT_COMPARISON = script_comparison(STRATEGIES)


@pytest.mark.parametrize("registry", REGISTRIES, ids=lambda r: r.field)
def test_no_registry_name_is_compared_outside_its_registry(registry: Registry) -> None:
    places = []
    for path in _files((".py",), registry.allowed):
        text = (ROOT / path).read_text(encoding="utf-8")
        for number, what in name_comparisons(text, registry):
            places.append(f"{path}:{number}: {what}")
    pattern = script_comparison(registry)
    for path in _files((".js", ".html"), registry.allowed):
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                places.append(f"{path}:{number}: {line.strip()[:80]}")
    assert not places, (
        f"{registry.title} compared outside the registry: {registry.ask} instead:\n"
        + "\n".join(places)
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


def test_the_check_finds_memory_kind_comparisons() -> None:
    source = """
if fact.kind == "instruction": pass
if kind in ("instruction", "preference"): pass
UserFact.objects.filter(kind="fact")
UserFact.objects.filter(kind__in=["preference"])
memory_kind_for("instruction")
fact_save(tenant, user, text, kind="preference")
if item.kind == "fact": pass
"""
    assert [line for line, _ in name_comparisons(source, MEMORY_KINDS)] == [2, 3, 4, 5]
    pattern = script_comparison(MEMORY_KINDS)
    assert pattern.search('if (memory.kind === "preference") {')
    assert not pattern.search('instruction: ["standing instruction", "standing instructions"],')
