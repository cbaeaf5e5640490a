/* The conversation sidebar and the chat header, kept up to date while the page is open: a
 * "conversation" event (the conversation was named after its first exchange) renames the
 * heading, the page title and the sidebar's entry; the entry previews the newest message
 * (chat-messages.js reports it as "chat:latest"); a conversation menu closes when another
 * opens or on Escape. chat.js passes on the socket's events as "chat:event". */
(function () {
  "use strict";

  var configElement = document.getElementById("chat-config");
  var config = configElement ? JSON.parse(configElement.textContent) : {};
  var heading = document.getElementById("chat-title");

  function rename(conversationId, title) {
    if (!title) return;
    if (String(conversationId) === String(config.conversationId)) {
      if (heading) heading.textContent = title;
      document.title = title + " · chatplatform";
      document.querySelectorAll('input[name=title][id$="-title-' + conversationId + '"]').forEach(function (input) {
        if (!input.value) input.value = title;
      });
    }
    var entry = document.querySelector('li[data-conversation-id="' + conversationId + '"] .conversation-title');
    if (entry) entry.textContent = title;
  }

  document.addEventListener("chat:event", function (event) {
    var data = event.detail || {};
    if (data.type === "conversation") rename(data.conversation_id, data.title);
  });

  // The open conversation's entry previews its newest message, as the server does on the
  // next load (90 characters). A page of earlier messages does not show the newest.
  var PREVIEW_CHARS = 90;
  function preview(text) {
    if (!config.isLatestWindow) return;
    var entry = document.querySelector('li[data-conversation-id="' + config.conversationId + '"] .conversation-preview');
    if (!entry) return;
    var chars = Array.from(text);
    entry.textContent = chars.length > PREVIEW_CHARS ? chars.slice(0, PREVIEW_CHARS - 1).join("") + "…" : text;
  }

  document.addEventListener("chat:latest", function (event) {
    if (event.detail && event.detail.text) preview(event.detail.text);
  });

  // One conversation menu open at a time.
  document.addEventListener("toggle", function (event) {
    var menu = event.target;
    if (!(menu instanceof HTMLDetailsElement) || !menu.hasAttribute("data-menu") || !menu.open) return;
    document.querySelectorAll("details[data-menu][open]").forEach(function (other) {
      if (other !== menu) other.open = false;
    });
    var field = menu.querySelector("input[name=title]");
    if (field) field.focus();
  }, true);

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var menu = document.activeElement && document.activeElement.closest("details[data-menu][open]");
    if (!menu) return;
    menu.open = false;
    menu.querySelector("summary").focus();
    event.preventDefault(); // the drawer around it stays open
  }, true);

  // The open conversation is in view in the list.
  var current = document.querySelector(".conv-item.current");
  var column = current && current.closest(".sidebar");
  if (column) column.scrollTop = Math.max(0, current.offsetTop - column.clientHeight / 2);

  window.ChatSidebar = { rename: rename, preview: preview };
})();
