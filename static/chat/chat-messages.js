/* The message list of the chat view: building and updating message items (author, state,
 * anchor, attached image, body rendered as Markdown, notices). Knows nothing of the socket; chat.js drives it.
 * Everything is built with textContent or ChatMarkdown. A streaming reply is rendered once per
 * animation frame, and once more in full when it ends; a long user message (a paste) is shown
 * collapsed with a "Show all (N lines)" toggle. The list keeps the newest message in view while
 * the reader is at its end. */
(function () {
  "use strict";

  var COLLAPSE_LINES = 25;
  var COLLAPSE_CHARS = 2000;
  var FOLLOW_SLACK_PX = 48; // this close to the end still counts as reading the newest
  var texts = new WeakMap(); // message item -> its Markdown text
  var bodies = 0;

  // The list of one page: `list` is the <ol> of messages, `md` the Markdown renderer,
  // `imageUrl` the URL of a stored message's image with {id} for the message id; `ownLabel`
  // the viewer's name as their own messages show it (marks them: only the author edits).
  window.ChatMessages = function (list, md, imageUrl, ownLabel) {
    var emptyNote = document.getElementById("no-messages");

    // Following the newest message. Only the list scrolls (the page's body hides its
    // overflow: a scrolled document would show nothing but the background). While the reader
    // is at the end, the list stays there as messages arrive, replies stream, code is
    // highlighted and images load; a reader who scrolls up stays where they are until they
    // come back to the end or send a message. A link to a message (#m-12) starts there.
    var following = !location.hash;
    var lastTop = list.scrollTop;
    var stickQueued = false;

    function fromEnd() { return list.scrollHeight - list.scrollTop - list.clientHeight; }

    function toEnd() {
      list.scrollTop = list.scrollHeight;
      lastTop = list.scrollTop;
    }

    // Once per frame at most, after the changes of that frame have been laid out.
    function stick() {
      if (!following || stickQueued) return;
      stickQueued = true;
      requestAnimationFrame(function () {
        stickQueued = false;
        if (following) toEnd();
      });
    }

    function scrollToEnd() {
      if (!following) return;
      toEnd();
      stick();
    }

    list.addEventListener("scroll", function () {
      var top = list.scrollTop;
      // Up and away from the end is the reader's doing (content that shrinks only brings the
      // end closer); reaching the end again follows the newest once more.
      if (top < lastTop && fromEnd() > FOLLOW_SLACK_PX) following = false;
      else if (fromEnd() <= FOLLOW_SLACK_PX) following = true;
      lastTop = top;
    }, { passive: true });
    new MutationObserver(stick).observe(list, { childList: true, subtree: true, characterData: true });
    list.addEventListener("load", stick, true); // images
    if (window.ResizeObserver) new ResizeObserver(stick).observe(list); // rotation, keyboard

    // The newest message's text, for the conversation list (sidebar.js): a reply still
    // empty leaves the previous one; an image without words is "Image".
    function announceLatest(item, text) {
      var last = list.lastElementChild;
      while (last && !(last.classList.contains("msg-user") || last.classList.contains("msg-assistant"))) {
        last = last.previousElementSibling;
      }
      if (last !== item) return;
      var preview = text.trim() ? text : item.querySelector(".msg-image") ? "Image" : "";
      if (preview) document.dispatchEvent(new CustomEvent("chat:latest", { detail: { text: preview } }));
    }

    function messageItem(role, author, status) {
      if (emptyNote) { emptyNote.remove(); emptyNote = null; }
      if (status === "sending") following = true; // the viewer's own new message
      var item = document.createElement("li");
      item.className = "msg msg-" + role;
      item.dataset.status = status || "complete";
      if (role === "user" && author === ownLabel) item.dataset.mine = "";
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
      var body = item.querySelector(".msg-body");
      texts.set(item, text);
      if (item.dataset.status === "streaming") md.renderSoon(body, text);
      else md.renderInto(body, text);
      if (item.classList.contains("msg-user")) collapseLong(item, body, text);
      announceLatest(item, text);
    }

    // A long user message shows its first lines and a toggle (aria-expanded) to see it all.
    function collapseLong(item, body, text) {
      var lines = text.split("\n").length;
      var toggle = item.querySelector(".msg-expand");
      if (lines <= COLLAPSE_LINES && text.length <= COLLAPSE_CHARS) {
        body.classList.remove("msg-collapsed");
        if (toggle) toggle.remove();
        return;
      }
      if (!body.id) { bodies += 1; body.id = "msg-body-" + bodies; }
      if (!toggle) {
        toggle = document.createElement("button");
        toggle.type = "button";
        toggle.className = "msg-expand secondary";
        toggle.setAttribute("aria-controls", body.id);
        toggle.addEventListener("click", function () {
          var open = toggle.getAttribute("aria-expanded") !== "true";
          setExpanded(toggle, body, open);
          if (!open) item.scrollIntoView({ block: "nearest" });
        });
        body.after(toggle);
      }
      toggle.dataset.lines = lines;
      setExpanded(toggle, body, toggle.getAttribute("aria-expanded") === "true");
    }

    function setExpanded(toggle, body, open) {
      var lines = Number(toggle.dataset.lines);
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
      toggle.textContent = open ? "Show less" : "Show all (" + lines + " line" + (lines === 1 ? "" : "s") + ")";
      body.classList.toggle("msg-collapsed", !open);
    }

    // A reply that stops streaming is rendered once more in full (language detection of code).
    new MutationObserver(function (changes) {
      changes.forEach(function (change) {
        var item = change.target;
        if (change.oldValue === "streaming" && item.dataset.status !== "streaming" && texts.has(item)) {
          md.renderInto(item.querySelector(".msg-body"), texts.get(item));
        }
      });
    }).observe(list, { attributes: true, attributeFilter: ["data-status"], attributeOldValue: true, subtree: true });

    // Why the socket was closed for good, for the banner; null when it reconnects.
    function closedNotice(code) {
      if (code === 4404) return "This conversation is not available.";
      if (code === 4401) return "Your session has ended. Log in again to continue.";
      if (code === 4403) return "You no longer have access to this conversation.";
      return null;
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

    // The image of a message, as a thumbnail above its text; `href` opens it full size (none
    // for an image not stored yet: browsers do not open data: URLs in a new tab). A null
    // `src` keeps the thumbnail shown.
    function setImage(item, src, label, href) {
      var link = item.querySelector(".msg-image");
      if (!link) {
        link = document.createElement("a");
        link.className = "msg-image";
        link.target = "_blank";
        link.rel = "noopener";
        link.appendChild(document.createElement("img"));
        item.insertBefore(link, item.querySelector(".msg-body"));
      }
      var img = link.querySelector("img");
      if (src) { img.src = src; img.alt = label; }
      if (href) link.href = href; else link.removeAttribute("href");
    }

    function imageLabel(mediaType, size) {
      var kb = Math.max(1, Math.round((size || 0) / 1024));
      return "Attached image (" + mediaType + ", " + kb + " KB)";
    }

    // The composer's image on a message being sent (`attached` from ChatComposer.image()).
    function previewImage(item, attached) {
      setImage(item, attached.previewUrl, imageLabel(attached.media_type, attached.size));
    }

    // A stored message's image (`image` is {media_type, size} from its event; without it,
    // the preview already shown gets its stored URL).
    function storedImage(item, messageId, image) {
      var url = imageUrl.replace("{id}", messageId);
      setImage(item, image ? url : null, image ? imageLabel(image.media_type, image.size) : "", url);
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
      textOf: function (item) { return texts.get(item) || ""; },
      closedNotice: closedNotice,
      setAnchor: setAnchor,
      previewImage: previewImage,
      storedImage: storedImage,
      showNotice: showNotice,
    };
  };
})();
