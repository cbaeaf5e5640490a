"""The accessibility checker of the browser tests: axe-core (vendored, pinned, in
static/vendor/MANIFEST.json; never served by the platform) run inside a Playwright page.

The script is evaluated through the browser's debugging protocol, which the page's
Content-Security-Policy does not govern, so the page is checked exactly as it is served."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
#: Violations of these impacts fail a test.
BLOCKING = ("serious", "critical")


@cache
def _axe_source() -> str:
    return AXE.read_text(encoding="utf-8")


def axe_violations(page: Any, *, context: str = "document") -> list[dict[str, Any]]:
    """axe-core's violations on ``page`` (WCAG 2.x A and AA rules and best practices), each
    with its id, impact, help text and the offending nodes' selectors."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(_axe_source())
    return page.evaluate(
        """async (context) => {
            const result = await window.axe.run(context === "document" ? document : context, {
                resultTypes: ["violations"],
            });
            return result.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => n.target.join(" ")),
            }));
        }""",
        context,
    )


def blocking(violations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The violations of impact serious or critical."""
    return [v for v in violations if v["impact"] in BLOCKING]
