"""No provider name is compared outside the providers' registry: every other module asks the
provider's entry (``chatplatform.core.llm.providers``) what it needs to know.

The runtime packages are read as Python syntax trees: a comparison with a registered
provider's name (``== "anthropic"``, ``!= "offline"``, ``in ("openai", ...)``, a ``match``
case), a group of providers' names (``("anthropic", "offline")``), or a query filtering on
one (``filter(provider="anthropic")``, ``Q(model_profile__provider="offline")``) is a finding.
The registry module and migrations may name providers; tests and tooling may pass names as
data (creating a profile is not a comparison). The token counter called ``anthropic``
(``profile.tokenizer``) is a counter's name, not a provider's.
"""

from __future__ import annotations

import ast
from pathlib import Path

from chatplatform.core.llm.providers import PROVIDER_NAMES

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_PACKAGES = ("chatplatform", "chats", "memory", "summaries", "bench")
#: Where provider names belong: the registry of providers.
ALLOWED = {Path("chatplatform/core/llm/providers.py")}
#: Calls whose keyword arguments filter rows (a ``provider=`` there compares).
FILTERS = {"filter", "exclude", "get", "Q", "get_or_create", "update_or_create"}


def _names_in(node: ast.AST) -> bool:
    """Whether ``node`` is a provider name, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in PROVIDER_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_in(element) for element in node.elts)
    return False


def _is_tokenizer(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "tokenizer"


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def provider_name_comparisons(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of every comparison of, or filter on, a provider name in ``source``."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_in(o) for o in operands) and not any(_is_tokenizer(o) for o in operands):
                found.append((node.lineno, ast.get_source_segment(source, node) or ""))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            # A group of providers kept outside the registry (``("anthropic", "offline")``).
            names = [e for e in node.elts if isinstance(e, ast.Constant) and _names_in(e)]
            if len(names) > 1:
                found.append((node.lineno, ast.get_source_segment(source, node) or ""))
        elif isinstance(node, ast.match_case):
            if any(_names_in(n) for n in ast.walk(node.pattern)):
                segment = ast.get_source_segment(source, node.pattern) or ""
                found.append((node.pattern.lineno, segment))
        elif isinstance(node, ast.Call):
            lookups = [
                k.arg
                for k in node.keywords
                if k.arg is not None
                and (k.arg == "provider" or "provider__" in k.arg or k.arg.endswith("__provider"))
                and _names_in(k.value)
            ]
            if lookups and (_call_name(node) in FILTERS or any("__" in arg for arg in lookups)):
                found.append((node.lineno, ast.get_source_segment(source, node) or ""))
    return sorted(dict(reversed(found)).items())  # one finding per line: the outermost


def test_no_provider_name_is_compared_outside_the_registry() -> None:
    places = []
    for package in RUNTIME_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or relative in ALLOWED:
                continue
            for line, code in provider_name_comparisons(path.read_text()):
                places.append(f"{relative}:{line}: {code}")
    assert not places, (
        "provider names compared outside chatplatform.core.llm.providers (ask the provider's "
        "entry instead):\n" + "\n".join(places)
    )


def test_the_scan_finds_each_kind_of_comparison() -> None:
    source = """
if profile.provider == "anthropic": pass
if access.provider != "offline": pass
if provider not in ("anthropic", "openai"): pass
ANTHROPIC_CACHE = ("anthropic", "offline")
if profile.provider in ANTHROPIC_CACHE: pass
rows = ModelProfile.objects.filter(tenant__isnull=True, provider="anthropic")
simulated = Count("pk", filter=Q(model_profile__provider="offline"))
match profile.provider:
    case "openai": pass
"""
    assert [line for line, _ in provider_name_comparisons(source)] == [2, 3, 4, 5, 7, 8, 10]


def test_names_passed_as_data_and_other_names_are_not_findings() -> None:
    source = """
profile = ModelProfile.objects.create(provider="offline", model="offline")
fields = {"provider": "anthropic"}
if profile.tokenizer != "anthropic": pass
if kind.simulated: pass
if strategy == "hybrid": pass
"""
    assert provider_name_comparisons(source) == []
