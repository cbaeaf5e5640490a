/* The context meter: how the last turn's window was split, what was left out and why, and
 * what the turn cost against sending the whole history with prompt caching (tokens second). Reads the stored per-turn record
 * (GET <meterUrl>?message=<id>, JSON). Everything is built with textContent. */
(function () {
  "use strict";

  var configElement = document.getElementById("chat-config");
  var root = document.getElementById("meter");
  if (!configElement || !root) return;
  var config = JSON.parse(configElement.textContent);
  var number = new Intl.NumberFormat();

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function fmt(n) { return number.format(n || 0); }

  // What the packing calls each kind of item, in words: [one, several].
  var KIND_WORDS = {
    message: ["message", "messages"],
    retrieved: ["recalled message", "recalled messages"],
    summary: ["summary", "summaries"],
    fact: ["fact", "facts"],
    instruction: ["standing instruction", "standing instructions"],
  };

  function kindsText(kinds) {
    return Object.keys(kinds).map(function (kind) {
      var n = kinds[kind];
      var plain = kind.replace(/_/g, " ");
      var words = KIND_WORDS[kind] || [plain, plain + "s"];
      return n + " " + words[n === 1 ? 0 : 1];
    }).join(", ");
  }

  function render(meter) {
    var body = root.querySelector(".meter-body");
    body.textContent = "";
    if (!meter) {
      body.appendChild(el("p", "muted", "No turn yet: send a message to see how its context is built."));
      return;
    }
    root.dataset.turn = meter.turn.user_message_id;
    body.appendChild(el("p", "meter-sub",
      meter.model + " · " + meter.strategy.replace(/_/g, " ") + " · counted with " + meter.counter));
    // A message cut to fit is said first, not only among what was left out.
    meter.truncated.filter(function (cut) { return cut.kind === "new_message"; }).forEach(function (cut) {
      body.appendChild(el("p", "meter-cut", "Your message was cut to " + fmt(cut.kept_tokens) + " of " +
        fmt(cut.original_tokens) + " tokens to fit this chat's policy; its middle was left out."));
    });
    if (meter.widened_by) {
      body.appendChild(el("p", "meter-cut", "Your message was longer than this chat's policy " +
        "leaves for it and was sent whole: this turn went " + fmt(meter.widened_by) +
        " tokens past the policy's limit, within the model's window."));
    }

    var total = Math.max(meter.window_tokens, 1);
    var bar = el("div", "meter-bar");
    bar.setAttribute("role", "img");
    var described = [];
    var MAIN = ["system", "instructions", "facts", "summaries", "retrieval", "history"];
    var parts = meter.segments.filter(function (s) {
      return s.tokens > 0 || MAIN.indexOf(s.name) >= 0;
    }).concat([
      { name: "free", label: "Unused", tokens: meter.free_tokens },
      { name: "reserve", label: "Reply reserve", tokens: meter.reply_reserve_tokens },
    ]);
    parts.forEach(function (part) {
      if (!part.tokens) return;
      var segment = el("span", "seg seg-" + part.name);
      segment.style.width = Math.max(0.5, 100 * part.tokens / total) + "%";
      segment.title = part.label + ": " + fmt(part.tokens) + " tokens";
      bar.appendChild(segment);
      described.push(part.label + " " + fmt(part.tokens));
    });
    bar.setAttribute("aria-label", "Window of " + fmt(total) + " tokens: " + described.join(", "));
    body.appendChild(bar);

    var legend = el("table", "meter-legend");
    var head = el("tr");
    ["", "section", "tokens", "budget", "items"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    legend.appendChild(head);
    parts.forEach(function (part) {
      var row = el("tr");
      var swatch = el("td");
      swatch.appendChild(el("span", "swatch seg-" + part.name));
      row.appendChild(swatch);
      row.appendChild(el("td", null, part.label));
      row.appendChild(el("td", "num", fmt(part.tokens)));
      row.appendChild(el("td", "num", part.budget !== undefined ? fmt(part.budget) : ""));
      row.appendChild(el("td", "num", part.items !== undefined ? fmt(part.items) : ""));
      legend.appendChild(row);
    });
    body.appendChild(legend);

    // The bill first, against the whole history sent with caching; tokens second. The
    // sentences are the server's (chatplatform/core/llm/cost_comparison.py), so the meter,
    // the admin's usage pages and the API say the same thing.
    var cost = meter.cost;
    if (cost) {
      var bill = el("p", "meter-bill meter-bill-" + cost.outcome);
      bill.appendChild(el("strong", null, cost.headline));
      body.appendChild(bill);
      body.appendChild(el("p", "meter-saved", cost.tokens_line));
      if (cost.simulated) {
        body.appendChild(el("p", "meter-simulated muted", cost.simulated_note));
      }
    }

    var usage = "Provider-reported prompt " +
      (meter.prompt_tokens_reported === null ? "—" : fmt(meter.prompt_tokens_reported)) +
      " · reply " + fmt(meter.completion_tokens);
    if (meter.cache_read_tokens || meter.cache_write_tokens) {
      usage += " · cache read " + fmt(meter.cache_read_tokens) + ", written " +
        fmt(meter.cache_write_tokens) + (cost && cost.simulated ? " (simulated)" : "") +
        " · " + meter.cache_read_percent + "% of the prompt read from cache";
    }
    body.appendChild(el("p", "meter-usage muted", usage));
    (meter.provider_context || []).forEach(function (line) {
      body.appendChild(el("p", "meter-provider muted", line));
    });

    var out = el("div", "meter-excluded");
    out.appendChild(el("h3", null, "Left out"));
    if (!meter.excluded.length && !meter.truncated.length) {
      out.appendChild(el("p", "muted", "Nothing: everything available fitted."));
    } else {
      var items = el("ul");
      meter.excluded.forEach(function (group) {
        var text = kindsText(group.kinds) + ": " + group.label;
        if (group.tokens) text += " (" + fmt(group.tokens) + " tokens)";
        items.appendChild(el("li", null, text));
      });
      meter.truncated.forEach(function (cut) {
        items.appendChild(el("li", null, cut.kind.replace(/_/g, " ") + " cut from " +
          fmt(cut.original_tokens) + " to " + fmt(cut.kept_tokens) + " tokens to fit"));
      });
      out.appendChild(items);
    }
    body.appendChild(out);
  }

  function load(messageId) {
    var url = config.meterUrl + (messageId ? "?message=" + encodeURIComponent(messageId) : "");
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : { meter: null }; })
      .then(function (data) { render(data.meter); root.dataset.loaded = "1"; })
      .catch(function () { /* the meter is informative only */ });
  }

  window.ChatMeter = { load: load };
  load(null);
})();
