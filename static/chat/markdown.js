/* Markdown of messages and summaries: marked (GFM: tables, nested lists, fenced code) turns the
 * text into HTML, DOMPurify sanitises it, highlight.js colours the code. Loaded after the three
 * libraries (static/vendor/, see MANIFEST.json) and before code-copy.js.
 *
 * Safety: HTML written in a message is shown as text, never as markup (marked's html tokens are
 * escaped); everything marked produces then goes through DOMPurify, which keeps only safe tags
 * and attributes and only http(s), mailto and same-site links. Links open in a new tab with
 * rel="noopener noreferrer nofollow"; images written in Markdown are shown as links (a message
 * never makes the page fetch a third party's image).
 *
 * Streaming: renderSoon() renders at most once per animation frame (and less often when a long
 * text takes long to render), and a render replaces only the top-level blocks that changed, so
 * the text above a growing reply neither flickers nor loses its selection.
 */
(function (global) {
  "use strict";

  var ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  var SAFE_URL = /^(?:(?:https?|mailto):|[/?#](?!\/))/i;
  // Code longer than this is not auto-detected (highlight.js tries every language on it).
  var AUTO_DETECT_MAX = 20000;

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) { return ESCAPES[c]; });
  }

  function highlighted(text, lang, streaming) {
    var hljs = global.hljs;
    if (hljs && lang && hljs.getLanguage(lang)) {
      return { html: hljs.highlight(text, { language: lang, ignoreIllegals: true }).value, lang: lang };
    }
    // Detecting a language costs a pass per language: only once the text is final.
    if (hljs && !lang && !streaming && text.length <= AUTO_DETECT_MAX) {
      var found = hljs.highlightAuto(text);
      if (found.language && found.relevance >= 5) return { html: found.value, lang: found.language };
    }
    return { html: escapeHtml(text), lang: lang };
  }

  function parser(streaming) {
    var renderer = {
      html: function (token) { return escapeHtml(token.text); },
      heading: function (token) {
        var level = Math.min(token.depth + 2, 6); // h3..h6 inside a message
        return "<h" + level + ">" + this.parser.parseInline(token.tokens) + "</h" + level + ">\n";
      },
      image: function (token) {
        return '<a href="' + escapeHtml(token.href) + '">' + escapeHtml(token.text || token.href) + "</a>";
      },
      code: function (token) {
        var lang = ((token.lang || "").match(/^[\w+#.-]*/) || [""])[0].toLowerCase();
        var code = highlighted(token.text.replace(/\n$/, ""), lang, streaming);
        var label = code.lang ? ' data-lang="' + escapeHtml(code.lang) + '"' : "";
        return '<pre><code class="hljs' + (code.lang ? " language-" + escapeHtml(code.lang) : "") +
          '"' + label + ">" + code.html + "</code></pre>\n";
      },
    };
    var instance = new global.marked.Marked({ gfm: true, breaks: true, async: false });
    instance.use({ renderer: renderer });
    return instance;
  }

  var parsers = {};
  function parserFor(streaming) {
    var key = streaming ? "streaming" : "final";
    return parsers[key] || (parsers[key] = parser(streaming));
  }

  var PURIFY = {
    ALLOWED_URI_REGEXP: SAFE_URL,
    FORBID_TAGS: ["style", "form", "button", "textarea", "select", "img", "svg", "math"],
    FORBID_ATTR: ["style", "id", "name"],
    RETURN_DOM_FRAGMENT: true,
  };

  // The sanitised fragment of ``text``; links without a safe address become their text.
  function fragment(text, streaming) {
    var html = parserFor(streaming).parse(String(text || ""));
    var safe = global.DOMPurify.sanitize(html, PURIFY);
    safe.querySelectorAll("a").forEach(function (link) {
      var href = link.getAttribute("href");
      if (!href || !SAFE_URL.test(href.trim())) {
        link.replaceWith.apply(link, Array.prototype.slice.call(link.childNodes));
        return;
      }
      link.setAttribute("rel", "noopener noreferrer nofollow");
      link.setAttribute("target", "_blank");
    });
    safe.querySelectorAll("table").forEach(function (table) {
      var wrap = document.createElement("div");
      wrap.className = "table-wrap";
      table.replaceWith(wrap);
      wrap.appendChild(table);
    });
    if (global.ChatCodeCopy) global.ChatCodeCopy.decorate(safe);
    return safe;
  }

  // The sanitised HTML of ``text``, as a string.
  function render(text) {
    var box = document.createElement("div");
    box.appendChild(fragment(text, false));
    return box.innerHTML;
  }

  // Replace the children of ``element`` that differ from ``next``'s, keeping the equal ones.
  function morph(element, next) {
    var incoming = Array.prototype.slice.call(next.childNodes);
    var current = Array.prototype.slice.call(element.childNodes);
    var i = 0;
    while (i < incoming.length && i < current.length && current[i].isEqualNode(incoming[i])) i += 1;
    for (var j = current.length - 1; j >= i; j -= 1) element.removeChild(current[j]);
    for (; i < incoming.length; i += 1) element.appendChild(incoming[i]);
  }

  var pending = new Map();
  var frame = 0;
  var lastCost = 0; // ms the last streamed render took
  var lastAt = 0;

  function renderInto(element, text, options) {
    pending.delete(element);
    var started = performance.now();
    morph(element, fragment(text, Boolean(options && options.streaming)));
    element.classList.add("md-rendered");
    return performance.now() - started;
  }

  function flush(now) {
    frame = 0;
    // A text that takes long to render is rendered less often: at most a quarter of the time.
    if (now - lastAt < lastCost * 3) { frame = requestAnimationFrame(flush); return; }
    lastAt = now;
    var cost = 0;
    pending.forEach(function (text, element) {
      var item = element.closest("[data-status]");
      var streaming = Boolean(item && item.dataset.status === "streaming");
      cost += renderInto(element, text, { streaming: streaming });
    });
    pending.clear();
    lastCost = cost;
  }

  // Render ``text`` into ``element`` with the next animation frame (a streaming reply).
  function renderSoon(element, text) {
    pending.set(element, text);
    if (!frame) frame = requestAnimationFrame(flush);
  }

  global.ChatMarkdown = {
    render: render, renderInto: renderInto, renderSoon: renderSoon, escapeHtml: escapeHtml,
  };
})(window);
