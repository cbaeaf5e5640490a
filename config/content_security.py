"""The Content-Security-Policy every page is sent with (django-csp).

Scripts only from this origin (no inline scripts or handlers); styles also inline (style
attributes carry computed widths); connect-src 'self' covers the same-origin WebSocket. Kept
apart from the settings so the policy reads as one piece; the settings choose whether it is
enforced or only reported.
"""

from __future__ import annotations

from typing import Any

from csp.constants import NONE, SELF, UNSAFE_INLINE


def content_security_policy(report_uri: str = "") -> dict[str, Any]:
    """The policy, reporting violations to ``report_uri`` when one is given."""
    return {
        "DIRECTIVES": {
            "default-src": [SELF],
            "script-src": [SELF],
            "style-src": [SELF, UNSAFE_INLINE],
            "img-src": [SELF, "data:", "blob:"],
            "connect-src": [SELF],
            "object-src": [NONE],
            "base-uri": [SELF],
            "form-action": [SELF],
            "frame-ancestors": [NONE],
            **({"report-uri": [report_uri]} if report_uri else {}),
        }
    }
