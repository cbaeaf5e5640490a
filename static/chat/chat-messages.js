/* The message list of the chat view: building and updating message items (author, state,
 * anchor, body rendered as Markdown, notices). Knows nothing of the socket; chat.js drives it.
 * Everything is built with textContent or ChatMarkdown.renderInto. */
(function () {
  "use strict";

  // The list of one page: `list` is the <ol> of messages, `md` the Markdown renderer.
  window.ChatMessages = function (list, md) {
    var emptyNote = document.getElementById("no-messages");

    function scrollToEnd() {
      if (location.hash) return;
      list.scrollTop = list.scrollHeight;
      window.scrollTo(0, document.body.scrollHeight);
    }

    function messageItem(role, author, status) {
      if (emptyNote) { emptyNote.remove(); emptyNote = null; }
      var item = document.createElement("li");
      item.className = "msg msg-" + role;
      item.dataset.status = status || "complete";
      var meta = document.createElement("div");
      meta.className = "msg-meta";
      var name = document.createElement("span");
      name.className = "msg-author";
      name.textContent = author;
      meta.appendChild(name);
      var state = document.createElement("span");
      state.className = "msg-state";
      meta.appendChild(state);
      var body = document.createElement("div");
      body.className = "msg-body";
      item.appendChild(meta);
      item.appendChild(body);
      list.appendChild(item);
      return item;
    }

    function setState(item, text) {
      var state = item.querySelector(".msg-state");
      if (state) state.textContent = text;
    }

    function setBody(item, text) {
      md.renderInto(item.querySelector(".msg-body"), text);
    }

    function setAnchor(item, seq) {
      if (!seq) return;
      item.id = "m-" + seq;
      item.dataset.seq = seq;
      var meta = item.querySelector(".msg-meta");
      if (!meta.querySelector(".msg-anchor")) {
        var anchor = document.createElement("a");
        anchor.className = "msg-anchor";
        anchor.href = "#m-" + seq;
        anchor.textContent = "#" + seq;
        meta.appendChild(anchor);
      }
    }

    function showNotice(item, text, kind) {
      var notice = item.querySelector(".msg-notice");
      if (!notice) {
        notice = document.createElement("div");
        notice.className = "msg-notice";
        notice.setAttribute("role", "alert");
        item.appendChild(notice);
      }
      notice.className = "msg-notice" + (kind ? " msg-notice-" + kind : "");
      notice.textContent = text;
      return notice;
    }

    return {
      scrollToEnd: scrollToEnd,
      messageItem: messageItem,
      setState: setState,
      setBody: setBody,
      setAnchor: setAnchor,
      showNotice: showNotice,
    };
  };
})();
