/* The "Copy" button of each code block of rendered Markdown (markdown.js calls decorate() on
 * every fragment it renders). Copies with the Clipboard API, or, where it is missing or refused
 * (a page not served over HTTPS, an old browser), by selecting the code and copying the
 * selection; if even that fails the code stays selected and the button says to press Ctrl+C.
 * The result is shown on the button and announced to screen readers (a polite live region). */
(function (global) {
  "use strict";

  var RESET_MS = 2000;
  var announcer = null;

  function announce(text) {
    if (!announcer) {
      announcer = document.createElement("div");
      announcer.className = "visually-hidden";
      announcer.setAttribute("role", "status");
      announcer.setAttribute("aria-live", "polite");
      document.body.appendChild(announcer);
    }
    announcer.textContent = "";
    setTimeout(function () { announcer.textContent = text; }, 50);
  }

  // Each <pre> of ``root`` gets a header with its language and a Copy button.
  function decorate(root) {
    root.querySelectorAll("pre").forEach(function (pre) {
      if (pre.parentNode && pre.parentNode.classList && pre.parentNode.classList.contains("code-block")) return;
      var block = document.createElement("div");
      block.className = "code-block";
      var head = document.createElement("div");
      head.className = "code-head";
      var lang = document.createElement("span");
      lang.className = "code-lang";
      var code = pre.querySelector("code");
      lang.textContent = (code && code.dataset.lang) || "text";
      var button = document.createElement("button");
      button.type = "button";
      button.className = "code-copy";
      button.textContent = "Copy";
      var hidden = document.createElement("span");
      hidden.className = "visually-hidden";
      hidden.textContent = " code";
      button.appendChild(hidden);
      head.appendChild(lang);
      head.appendChild(button);
      pre.replaceWith(block);
      block.appendChild(head);
      block.appendChild(pre);
    });
  }

  function selectCode(pre) {
    var range = document.createRange();
    range.selectNodeContents(pre);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function copyBySelection(pre) {
    selectCode(pre);
    var copied = false;
    try { copied = document.execCommand("copy"); } catch (e) { copied = false; }
    if (copied) window.getSelection().removeAllRanges();
    return copied;
  }

  function done(button, ok) {
    button.firstChild.textContent = ok ? "Copied" : "Press Ctrl+C";
    button.classList.toggle("copied", ok);
    announce(ok ? "Code copied to the clipboard." : "Could not copy: the code is selected, press Ctrl+C to copy it.");
    clearTimeout(button._reset);
    button._reset = setTimeout(function () {
      button.firstChild.textContent = "Copy";
      button.classList.remove("copied");
    }, RESET_MS);
  }

  function copy(button) {
    var pre = button.closest(".code-block").querySelector("pre");
    var text = pre.textContent;
    var clipboard = navigator.clipboard;
    if (clipboard && clipboard.writeText && window.isSecureContext) {
      clipboard.writeText(text).then(
        function () { done(button, true); },
        function () { done(button, copyBySelection(pre)); }
      );
      return;
    }
    done(button, copyBySelection(pre));
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.code-copy");
    if (button) copy(button);
  });

  global.ChatCodeCopy = { decorate: decorate };
})(window);
