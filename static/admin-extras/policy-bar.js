/* The ContextPolicy form's live bar: how the window would be divided, recomputed from the
 * form fields as they change (the same arithmetic the assembly uses, simplified: section
 * budgets are caps, the history takes what they leave). The server still validates on save. */
(function () {
  "use strict";

  function start() {
    var root = document.getElementById("policy-bar");
    var windowsElement = document.getElementById("policy-model-windows");
    if (!root || !windowsElement) return;
    var windows = JSON.parse(windowsElement.textContent);
    // Which sections each strategy shows (its registry entry's needs).
    var strategiesElement = document.getElementById("policy-strategy-sections");
    var strategies = strategiesElement ? JSON.parse(strategiesElement.textContent) : null;
    var form = root.closest("form") || document.querySelector("#contextpolicy_form");
    if (!form) return;
    var track = document.getElementById("policy-bar-track");
    var legend = document.getElementById("policy-bar-legend");
    var total = document.getElementById("policy-bar-total");
    var warning = document.getElementById("policy-bar-warning");
    var format = new Intl.NumberFormat();

    function field(name) { return form.querySelector("[name=" + name + "]"); }
    function value(name) {
      var input = field(name);
      if (!input) return 0;
      var n = parseInt(input.value, 10);
      return isNaN(n) ? 0 : Math.max(0, n);
    }
    function text(name) { var input = field(name); return input ? input.value : ""; }
    function checked(name) { var input = field(name); return input ? input.checked : true; }
    // Read-only (preset) policies render values as text, not inputs.
    function readonly(name) {
      var box = form.querySelector(".field-" + name + " .readonly");
      if (!box) return null;
      return box.textContent.trim();
    }
    function num(name) {
      if (field(name)) return value(name);
      var shown = readonly(name);
      var n = shown ? parseInt(shown.replace(/[^0-9]/g, ""), 10) : 0;
      return isNaN(n) ? 0 : n;
    }

    function compute() {
      var profile = windows[text("model_profile")] || null;
      var maxContext = num("max_context_tokens");
      var modelWindow = profile ? profile.context_window : maxContext;
      var usable = Math.min(maxContext, modelWindow);
      var reserve = num("reserved_response_tokens");
      var prompt = usable - reserve;
      var shows = strategies
        ? strategies.strategies[text("strategy") || strategies["default"]]
        : null;
      shows = shows || { summaries: true, retrieval: false };
      var percent = text("budget_unit") === "percent";
      var asked = {
        system: num("system_budget"),
        instructions: checked("instructions_enabled") ? num("instructions_budget") : 0,
        facts: checked("facts_enabled") ? num("facts_budget") : 0,
        summaries: shows.summaries ? num("summaries_budget") : 0,
        retrieval: shows.retrieval ? num("retrieval_budget") : 0,
      };
      var tokens = {};
      if (percent) {
        tokens.system = Math.floor(Math.max(prompt, 0) * asked.system / 100);
        var rest = Math.max(prompt - tokens.system, 0);
        tokens.instructions = Math.floor(rest * asked.instructions / 100);
        tokens.facts = Math.floor(rest * asked.facts / 100);
        tokens.summaries = Math.floor(rest * asked.summaries / 100);
        tokens.retrieval = Math.floor(rest * asked.retrieval / 100);
      } else {
        tokens = asked;
      }
      var sections = tokens.system + tokens.instructions + tokens.facts + tokens.summaries +
        tokens.retrieval;
      var shares = asked.instructions + asked.facts + asked.summaries + asked.retrieval;
      var history = prompt - sections;
      var problems = [];
      if (profile && maxContext > profile.context_window) {
        problems.push("Max context tokens (" + format.format(maxContext) + ") exceed the window of " +
          profile.name + " (" + format.format(profile.context_window) + "): only " +
          format.format(profile.context_window) + " can be used; lower it to that or less.");
      }
      if (profile && reserve > profile.max_output_tokens) {
        problems.push("The reply reserve (" + format.format(reserve) + ") exceeds what " + profile.name +
          " can write (" + format.format(profile.max_output_tokens) + "): lower it.");
      }
      if (prompt <= 0) {
        problems.push("The reply reserve takes the whole window: lower it or raise max context tokens.");
      } else if (percent && shares > 100) {
        problems.push("Instructions, facts, summaries and retrieval shares add up to " +
          shares + "%: lower them to 100% or less.");
      } else if (history < 0) {
        problems.push("The section budgets exceed the prompt budget by " + format.format(-history) +
          " tokens: lower them or raise max context tokens.");
      }
      return {
        window: usable, reserve: reserve, problems: problems,
        parts: [
          { name: "system", label: "System prompt", tokens: tokens.system },
          { name: "instructions", label: "Instructions", tokens: tokens.instructions },
          { name: "facts", label: "Facts", tokens: tokens.facts },
          { name: "summaries", label: "Summaries", tokens: tokens.summaries },
          { name: "retrieval", label: "Retrieved", tokens: tokens.retrieval },
          { name: "history", label: "History (what is left)", tokens: Math.max(history, 0) },
          { name: "reserve", label: "Reply reserve", tokens: reserve },
        ],
      };
    }

    function render() {
      var result = compute();
      var sum = result.parts.reduce(function (a, p) { return a + p.tokens; }, 0);
      var scale = Math.max(sum, result.window, 1);
      track.textContent = "";
      legend.textContent = "";
      result.parts.forEach(function (part) {
        if (part.tokens > 0) {
          var segment = document.createElement("span");
          segment.className = "seg seg-" + part.name;
          segment.style.width = (100 * part.tokens / scale) + "%";
          segment.title = part.label + ": " + format.format(part.tokens) + " tokens";
          track.appendChild(segment);
        }
        var item = document.createElement("li");
        var swatch = document.createElement("span");
        swatch.className = "swatch seg-" + part.name;
        item.appendChild(swatch);
        item.appendChild(document.createTextNode(" " + part.label + ": " + format.format(part.tokens) +
          " (" + (result.window ? Math.round(100 * part.tokens / result.window) : 0) + "%)"));
        legend.appendChild(item);
      });
      total.textContent = "· window used: " + format.format(result.window) + " tokens";
      warning.hidden = !result.problems.length;
      warning.textContent = result.problems.join(" ");
      root.classList.toggle("has-problems", result.problems.length > 0);
    }

    form.addEventListener("input", render);
    form.addEventListener("change", render);
    render();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
