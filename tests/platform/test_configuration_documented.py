"""Every environment variable the running code reads is documented in the README's
configuration table: a setting added to the code without its line in the table fails here.

The names are found in the source, not listed here: every module of the project's installed
apps and of the package holding the settings and the ASGI application (``ASGI_APPLICATION``),
parsed for reads of the environment (``env.<kind>("NAME")``, ``os.environ.get("NAME")``,
``os.environ["NAME"]``, ``os.getenv("NAME")``, ``"NAME" in os.environ``)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

from django.apps import apps
from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def runtime_sources() -> set[Path]:
    """The project's modules that run in its processes (migrations aside)."""
    roots = {Path(config.path) for config in apps.get_app_configs()}
    asgi_module = settings.ASGI_APPLICATION.rsplit(".", 1)[0]
    spec = importlib.util.find_spec(asgi_module)
    assert spec is not None and spec.origin is not None
    roots.add(Path(spec.origin).parent)  # the settings' package
    installed = Path(sys.prefix).resolve()  # a virtualenv inside the checkout is not ours
    return {
        path
        for root in roots
        if root.resolve().is_relative_to(ROOT.resolve())
        and not root.resolve().is_relative_to(installed)
        for path in root.rglob("*.py")
        if "migrations" not in path.parts
    }


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and _is_name(node.value, "os")


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _reads_by_name(func: ast.AST) -> bool:
    """``env(...)``, ``env.<kind>(...)``, ``os.environ.get(...)``, ``os.getenv(...)``."""
    if _is_name(func, "env"):
        return True
    if not isinstance(func, ast.Attribute):
        return False
    return (
        _is_name(func.value, "env")
        or (_is_os_environ(func.value) and func.attr == "get")
        or (_is_name(func.value, "os") and func.attr == "getenv")
    )


def environment_reads(source: str) -> set[str]:
    """The environment variables ``source`` reads by name (not those it only sets)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and (first := _name(node.args[0])):
            if _reads_by_name(node.func):
                names.add(first)
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            if isinstance(node.ctx, ast.Load) and (name := _name(node.slice)):
                names.add(name)
        elif isinstance(node, ast.Compare) and any(_is_os_environ(c) for c in node.comparators):
            if name := _name(node.left):
                names.add(name)
    return names


def documented() -> set[str]:
    """The variables named in the first column of the README's configuration table."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("|"):
            first_column = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_column))
    return names


def test_the_finder_sees_every_kind_of_read():
    source = (
        "import os\n"
        "A = env.int('A', default=1)\n"
        "B = env('B')\n"
        "C = os.environ.get('C', '')\n"
        "D = os.environ['D']\n"
        "E = os.getenv('E')\n"
        "F = 'F' in os.environ\n"
        "os.environ.setdefault('SET_ONLY', '1')\n"
        "os.environ['WRITTEN'] = '1'\n"
    )
    assert environment_reads(source) == {"A", "B", "C", "D", "E", "F"}


def test_the_settings_and_the_runtime_code_are_scanned():
    sources = runtime_sources()
    scanned = {path.name for path in sources}
    assert {"settings.py", "asgi.py", "embeddings.py"} <= scanned
    read = set().union(*(environment_reads(path.read_text()) for path in sources))
    # Known readers of each kind: the settings (env.*), the ASGI start-up and the embeddings
    # (os.environ.get).
    assert {"DATABASE_URL", "WARM_UP", "EMBEDDING_THREADS"} <= read


def test_every_environment_variable_read_is_in_the_readme_table():
    read = set().union(*(environment_reads(path.read_text()) for path in runtime_sources()))
    missing = sorted(read - documented())
    assert not missing, f"not in the README's configuration table: {missing}"
