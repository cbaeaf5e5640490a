/* A minimal, safe markdown renderer for chat messages.
 *
 * Safety by construction: the whole text is HTML-escaped FIRST; the renderer then only adds
 * a fixed set of tags (p, br, strong, em, code, pre, ul, ol, li, blockquote, h3-h5, a) around
 * already-escaped text. Links are kept only for http(s), mailto and same-site paths, and open
 * with rel="noopener noreferrer nofollow". No attribute ever receives unescaped input.
 *
 * Subset: fenced code blocks (```), inline `code`, **bold**, *italic* / _italic_,
 * [text](url), # headings, - / * / 1. lists, > quotes, paragraphs and line breaks.
 */
(function (global) {
  "use strict";

  var ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) { return ESCAPES[c]; });
  }

  function safeUrl(escapedUrl) {
    // The URL is already escaped (no quotes or angle brackets can remain in it).
    var url = escapedUrl.trim();
    if (/^(https?:\/\/|mailto:)/i.test(url)) return url;
    if (/^\/(?!\/)/.test(url) || /^#/.test(url)) return url;
    return null;
  }

  var MARK = "\uE000";

  function inline(escaped) {
    // Code spans first: their content is not formatted further. Links are set aside while
    // emphasis is applied, so an underscore in a URL never becomes <em>.
    var parts = escaped.split(/(`[^`\n]+`)/g);
    return parts.map(function (part) {
      if (/^`[^`\n]+`$/.test(part)) return "<code>" + part.slice(1, -1) + "</code>";
      var links = [];
      var text = part.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, function (whole, label, url) {
        var safe = safeUrl(url);
        if (!safe) return whole;
        links.push({ label: label, url: safe });
        return MARK + (links.length - 1) + MARK;
      });
      text = emphasis(text);
      return text.replace(new RegExp(MARK + "(\\d+)" + MARK, "g"), function (whole, index) {
        var link = links[Number(index)];
        if (!link) return "";
        return '<a href="' + link.url + '" rel="noopener noreferrer nofollow" target="_blank">' +
          emphasis(link.label) + "</a>";
      });
    }).join("");
  }

  function emphasis(text) {
    return text
      .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*\w])\*([^*\n]+)\*(?!\w)/g, "$1<em>$2</em>")
      .replace(/(^|[^_\w])_([^_\n]+)_(?!\w)/g, "$1<em>$2</em>");
  }

  function render(text) {
    var lines = escapeHtml(text || "").split(/\r?\n/);
    var out = [];
    var paragraph = [];
    var list = null; // {tag, items}
    var quote = [];
    var i = 0;

    function flushParagraph() {
      if (paragraph.length) out.push("<p>" + paragraph.map(inline).join("<br>") + "</p>");
      paragraph = [];
    }
    function flushList() {
      if (list) {
        out.push("<" + list.tag + ">" + list.items.map(function (item) {
          return "<li>" + inline(item) + "</li>";
        }).join("") + "</" + list.tag + ">");
      }
      list = null;
    }
    function flushQuote() {
      if (quote.length) out.push("<blockquote>" + quote.map(inline).join("<br>") + "</blockquote>");
      quote = [];
    }
    function flushAll() { flushParagraph(); flushList(); flushQuote(); }

    while (i < lines.length) {
      var line = lines[i];
      var fence = /^\s*```/.test(line);
      if (fence) {
        flushAll();
        var code = [];
        i += 1;
        while (i < lines.length && !/^\s*```/.test(lines[i])) { code.push(lines[i]); i += 1; }
        out.push("<pre><code>" + code.join("\n") + "</code></pre>");
        i += 1; // the closing fence (or the end of a still-streaming block)
        continue;
      }
      var heading = /^(#{1,3})\s+(.*)$/.exec(line);
      var bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
      var numbered = /^\s*\d{1,9}[.)]\s+(.*)$/.exec(line);
      var quoted = /^&gt;\s?(.*)$/.exec(line);
      if (heading) {
        flushAll();
        var level = heading[1].length + 2; // h3..h5 inside a message
        out.push("<h" + level + ">" + inline(heading[2]) + "</h" + level + ">");
      } else if (bullet || numbered) {
        flushParagraph(); flushQuote();
        var tag = bullet ? "ul" : "ol";
        if (list && list.tag !== tag) flushList();
        if (!list) list = { tag: tag, items: [] };
        list.items.push((bullet || numbered)[1]);
      } else if (quoted) {
        flushParagraph(); flushList();
        quote.push(quoted[1]);
      } else if (!line.trim()) {
        flushAll();
      } else {
        flushList(); flushQuote();
        paragraph.push(line);
      }
      i += 1;
    }
    flushAll();
    return out.join("");
  }

  function renderInto(element, text) {
    element.innerHTML = render(text);
    element.classList.add("md-rendered");
  }

  global.ChatMarkdown = { render: render, renderInto: renderInto, escapeHtml: escapeHtml };
})(window);
