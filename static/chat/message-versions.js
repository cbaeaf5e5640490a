/* Versions of an edited or regenerated message: "‹ 2/3 ›" in the message's header steps
 * through them. The newest is the message itself; an earlier one is shown read-only in place
 * of the text, fetched once from GET <versionsUrl> (the message's versions, oldest first).
 *
 * A message has versions when the server marks it (data-versions on the item: how many); an
 * edit or a regenerated reply on this page raises the number (message-actions.js), and the
 * control follows. A reply that starts streaming again shows its newest version. */
(function () {
  "use strict";

  var configElement = document.getElementById("chat-config");
  var list = document.getElementById("messages");
  if (!configElement || !list) return;
  var config = JSON.parse(configElement.textContent);
  var md = window.ChatMarkdown;
  var state = new WeakMap(); // item -> {at (0-based), versions (fetched list) or null}

  var REPLACED = {
    edited: "replaced by an edit",
    regenerated: "replaced by a regenerated reply",
    resent: "replaced when its message was edited",
  };

  function count(item) { return Number(item.dataset.versions) || 1; }

  function button(text, label, onClick) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "msg-version-step";
    b.textContent = text;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  function control(item) {
    var box = item.querySelector(":scope > .msg-meta > .msg-versions");
    if (count(item) < 2) {
      if (box) box.remove();
      return null;
    }
    if (!box) {
      box = document.createElement("span");
      box.className = "msg-versions";
      box.setAttribute("role", "group");
      box.setAttribute("aria-label", "Versions of this message");
      var position = document.createElement("span");
      position.className = "msg-version-at";
      position.setAttribute("aria-live", "polite");
      box.appendChild(button("‹", "Earlier version", function () { step(item, -1); }));
      box.appendChild(position);
      box.appendChild(button("›", "Later version", function () { step(item, 1); }));
      var meta = item.querySelector(".msg-meta");
      meta.insertBefore(box, meta.querySelector(".msg-anchor"));
    }
    return box;
  }

  function render(item) {
    var box = control(item);
    if (!box) return;
    var n = count(item);
    var s = state.get(item);
    var at = s ? s.at : n - 1;
    var steps = box.querySelectorAll(".msg-version-step");
    steps[0].disabled = at <= 0;
    steps[1].disabled = at >= n - 1;
    box.querySelector(".msg-version-at").textContent = (at + 1) + "/" + n;
  }

  function showVersion(item, at) {
    var n = count(item);
    var s = state.get(item);
    var body = item.querySelector(".msg-body");
    var toggle = item.querySelector(".msg-expand");
    var old = item.querySelector(":scope > .msg-version");
    if (old) old.remove();
    s.at = at;
    if (at >= n - 1) { // the newest: the message itself
      body.hidden = false;
      if (toggle) toggle.hidden = false;
      return render(item);
    }
    var version = s.versions[at];
    var view = document.createElement("div");
    view.className = "msg-version";
    var label = document.createElement("p");
    label.className = "msg-version-label";
    label.textContent = "Version " + (at + 1) + " of " + n + ", " +
      (REPLACED[version.replaced] || "replaced") + " (read-only)";
    var text = document.createElement("div");
    text.className = "msg-version-body";
    md.renderInto(text, version.content || "");
    view.appendChild(label);
    view.appendChild(text);
    body.hidden = true;
    if (toggle) toggle.hidden = true;
    body.after(view);
    render(item);
  }

  function step(item, by) {
    var n = count(item);
    var s = state.get(item) || { at: n - 1, versions: null };
    state.set(item, s);
    var at = Math.max(0, Math.min(n - 1, s.at + by));
    if (at === s.at) return;
    if (s.versions && s.versions.length === n) return showVersion(item, at);
    var url = config.versionsUrl.replace("{id}", encodeURIComponent(item.dataset.messageId));
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data || !data.versions) return;
        s.versions = data.versions;
        item.dataset.versions = String(data.versions.length);
        showVersion(item, Math.min(at, data.versions.length - 1));
      })
      .catch(function () { /* the current version stays shown */ });
  }

  // Back to the newest version, forgetting what was fetched (a new version came, or the
  // message is being written again).
  function reset(item) {
    var s = state.get(item);
    if (!s) return render(item);
    state.delete(item);
    var old = item.querySelector(":scope > .msg-version");
    if (old) old.remove();
    item.querySelector(".msg-body").hidden = false;
    var toggle = item.querySelector(".msg-expand");
    if (toggle) toggle.hidden = false;
    render(item);
  }

  list.querySelectorAll("li.msg[data-versions]").forEach(render);
  window.ChatMessageVersions = { reset: reset };
  new MutationObserver(function (changes) {
    changes.forEach(function (change) {
      var item = change.target;
      if (!item.classList || !item.classList.contains("msg")) return;
      if (change.attributeName === "data-versions") {
        var s = state.get(item);
        if (s && s.versions && s.versions.length !== count(item)) reset(item);
        else render(item);
      } else if (item.dataset.status === "streaming") {
        reset(item);
      }
    });
  }).observe(list, { attributes: true, subtree: true, attributeFilter: ["data-versions", "data-status"] });
})();
