"""The chat's markdown renderer escapes HTML first (run with Node.js when it is installed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

RENDERER = Path(__file__).resolve().parents[2] / "static" / "chat" / "markdown.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js is not installed")


def render(texts: list[str]) -> list[str]:
    script = (
        "global.window = global; require(process.argv[1]);"
        "const texts = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(texts.map(t => window.ChatMarkdown.render(t))));"
    )
    assert NODE is not None
    result = subprocess.run(
        [NODE, "-e", script, str(RENDERER)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(result.stdout)


def test_html_is_escaped_before_any_formatting():
    [html] = render(['<img src=x onerror="alert(1)"> <script>alert(2)</script>'])
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html


def test_only_safe_links_become_anchors():
    [ok, bad, data] = render(
        [
            "[docs](https://example.com/a_b_?q=1&x=2)",
            "[click](javascript:alert(1))",
            '[x](data:text/html,<script>) [y](" onmouseover="alert(1))',
        ]
    )
    assert '<a href="https://example.com/a_b_?q=1&amp;x=2" rel="noopener noreferrer nofollow"' in ok
    assert "<a" not in bad and "javascript:alert(1)" in bad
    assert "<a" not in data and "<script>" not in data


def test_the_markdown_subset():
    [html] = render(["# Title\n**bold** *it* `co<de>`\n\n- one\n- two\n\n```\n<b>x</b>\n```"])
    assert "<h3>Title</h3>" in html
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<code>co&lt;de&gt;</code>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert "<pre><code>&lt;b&gt;x&lt;/b&gt;</code></pre>" in html
