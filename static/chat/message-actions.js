/* Regenerate and edit-and-resend in the chat view: a "Regenerate" button on the last reply (to
 * the viewer's own message, or any for a tenant admin: the list's data-regenerates-any) and an
 * "Edit" button on the last user message (the viewer's own), shown while no reply streams.
 * Frames out: {"type":"regenerate","message_id"} and {"type":"edit","message_id","content"}.
 * Events in (handle() takes them before chat.js): message_edited, reply_superseded, and an
 * error naming the action. The new reply then streams as any reply (chat.js: reply, delta,
 * done), in the same bubble, with Stop available. The version replaced is kept: each change
 * adds one to the message's versions (data-versions; message-versions.js steps through them). */
(function () {
  "use strict";

  // ``send(frame)`` sends a frame (false when the socket is closed); ``enabled``: the page
  // shows the newest messages (an older window has no last exchange to change).
  window.ChatMessageActions = function (list, view, send, enabled) {
    var editing = null; // the user message being edited

    function last(selector) {
      var all = list.querySelectorAll(selector);
      return all.length ? all[all.length - 1] : null;
    }

    function byId(id) {
      return id ? list.querySelector('li.msg[data-message-id="' + id + '"]') : null;
    }

    // The last user message (stored) and its reply, when they are the conversation's last.
    function lastExchange() {
      var question = last("li.msg-user");
      if (!question || !question.dataset.messageId) return null;
      var reply = last("li.msg-assistant");
      if (!reply || reply.dataset.answers !== question.dataset.messageId || !reply.dataset.messageId) return null;
      return { question: question, reply: reply };
    }

    function button(text, label, onClick) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "secondary msg-action";
      b.textContent = text;
      b.setAttribute("aria-label", label);
      b.addEventListener("click", onClick);
      return b;
    }

    function setActions(item, kinds) {
      var box = item.querySelector(":scope > .msg-actions");
      var want = kinds.join(",");
      if (box && box.dataset.kinds === want) return;
      if (box) box.remove();
      if (!kinds.length) return;
      box = document.createElement("div");
      box.className = "msg-actions";
      box.dataset.kinds = want;
      if (kinds.indexOf("regenerate") >= 0) {
        box.appendChild(button("Regenerate", "Regenerate this reply", function () { regenerate(item); }));
      }
      if (kinds.indexOf("edit") >= 0) {
        box.appendChild(button("Edit", "Edit this message and send it again", function () { edit(item); }));
      }
      item.appendChild(box);
    }

    function update() {
      var exchange = enabled ? lastExchange() : null;
      var idle = !list.querySelector("li.msg[data-status=streaming], li.msg[data-status=sending]");
      list.querySelectorAll(".msg-actions").forEach(function (box) {
        var item = box.parentNode;
        if (!exchange || (item !== exchange.reply && item !== exchange.question)) box.remove();
      });
      if (!exchange) return;
      var open = idle && !editing;
      var mine = exchange.question.hasAttribute("data-mine");
      var regenerates = mine || list.hasAttribute("data-regenerates-any");
      setActions(exchange.reply, open && regenerates ? ["regenerate"] : []);
      setActions(exchange.question, open && mine ? ["edit"] : []);
    }

    function notConnected(item) {
      view.showNotice(item, "Not connected: try again when the connection is back.", "error");
    }

    function regenerate(reply) {
      var old = reply.querySelector(".msg-notice");
      if (old) old.remove();
      if (!send({ type: "regenerate", message_id: Number(reply.dataset.messageId) })) return notConnected(reply);
      setActions(reply, []);
      view.setState(reply, "regenerating…");
    }

    // One more version of `item` (the one replaced is kept as a revision).
    function addVersion(item) {
      if (item) item.dataset.versions = String((Number(item.dataset.versions) || 1) + 1);
    }

    function edit(item) {
      if (window.ChatMessageVersions) window.ChatMessageVersions.reset(item);
      editing = item;
      update();
      var body = item.querySelector(".msg-body");
      var form = document.createElement("form");
      form.className = "msg-edit";
      var fieldId = "edit-" + item.dataset.messageId;
      var label = document.createElement("label");
      label.htmlFor = fieldId;
      label.textContent = "Edit your message";
      var field = document.createElement("textarea");
      field.id = fieldId;
      field.value = view.textOf(item);
      field.rows = Math.min(12, Math.max(3, field.value.split("\n").length));
      var error = document.createElement("p");
      error.className = "composer-error";
      error.setAttribute("role", "alert");
      error.hidden = true;
      var buttons = document.createElement("div");
      buttons.className = "msg-edit-actions";
      var save = document.createElement("button");
      save.type = "submit";
      save.textContent = "Save and resend";
      var cancel = button("Cancel", "Cancel editing", function () { close(); });
      buttons.appendChild(save);
      buttons.appendChild(cancel);
      form.appendChild(label);
      form.appendChild(field);
      form.appendChild(error);
      form.appendChild(buttons);
      body.hidden = true;
      var toggle = item.querySelector(".msg-expand");
      if (toggle) toggle.hidden = true;
      body.after(form);
      field.focus();
      form.addEventListener("keydown", function (event) {
        if (event.key === "Escape") { event.preventDefault(); close(); }
        if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); form.requestSubmit(); }
      });
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        if (!field.value.trim()) return showEditError("The message is empty.");
        error.hidden = true;
        var frame = { type: "edit", message_id: Number(item.dataset.messageId), content: field.value };
        if (!send(frame)) return showEditError("Not connected: try again when the connection is back.");
        save.disabled = cancel.disabled = field.readOnly = true;
        save.textContent = "Saving…";
      });
    }

    function showEditError(text) {
      var form = editing && editing.querySelector("form.msg-edit");
      if (!form) return;
      var error = form.querySelector(".composer-error");
      error.textContent = text;
      error.hidden = false;
      var save = form.querySelector("button[type=submit]");
      save.disabled = form.querySelector(".msg-action").disabled = false;
      save.textContent = "Save and resend";
      form.querySelector("textarea").readOnly = false;
    }

    function close() {
      if (!editing) return;
      var item = editing;
      editing = null;
      var form = item.querySelector("form.msg-edit");
      if (form) form.remove();
      item.querySelector(".msg-body").hidden = false;
      var toggle = item.querySelector(".msg-expand");
      if (toggle) toggle.hidden = false;
      update();
    }

    function markEdited(item, when) {
      var meta = item.querySelector(".msg-meta");
      var label = meta.querySelector(".msg-edited");
      if (!label) {
        label = document.createElement("span");
        label.className = "msg-edited";
        label.textContent = "edited";
        meta.insertBefore(label, meta.querySelector(".msg-anchor"));
      }
      if (when) label.title = "Edited " + new Date(when).toLocaleString();
    }

    function handle(data) {
      if (data.type === "message_edited") {
        var item = byId(data.message_id);
        if (!item) return true;
        if (editing === item) close();
        view.setBody(item, data.content || "");
        markEdited(item, data.edited_at);
        addVersion(item);
        var reply = byId(data.reply_id);
        addVersion(reply);
        if (reply) view.setState(reply, "writing a new reply…");
        return true;
      }
      if (data.type === "reply_superseded") {
        var superseded = byId(data.message_id);
        addVersion(superseded);
        if (superseded) view.setState(superseded, "regenerating…");
        return true;
      }
      if (data.type === "error" && data.action) {
        if (data.action === "edit" && editing) { showEditError(data.message); return true; }
        var exchange = lastExchange();
        var target = exchange ? exchange.reply : null;
        if (!target) return false; // chat.js shows it by the composer
        view.setState(target, "");
        view.showNotice(target, data.message, "error");
        update();
        return true;
      }
      return false;
    }

    new MutationObserver(update).observe(list, {
      childList: true, subtree: true, attributes: true,
      attributeFilter: ["data-status", "data-message-id", "data-answers"],
    });
    update();

    return { handle: handle };
  };
})();
