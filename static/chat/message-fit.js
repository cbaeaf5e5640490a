/* Before sending: whether the message being written fits this chat's next turn whole, or
 * will be cut. The server measures the draft with the assembly itself (the policy's budget,
 * the model's counter: POST <messageFitUrl> text=...), a moment after the user stops typing;
 * the answer is shown under the composer in a polite status line the textarea points to.
 *
 * Drafts surely within the room are not sent to be measured: a counter never counts more
 * tokens than a text has UTF-8 bytes (byte-level BPE: at most one token a byte; the local
 * estimator: the same, give or take a token), so a draft of fewer bytes than the room, less
 * a small slack, fits whole. The room comes from the last answer. */
(function () {
  "use strict";

  var DELAY_MS = 400;
  var SLACK_TOKENS = 16;
  // Past this share of the room a message that fits says so (how close it comes).
  var NEAR = 0.8;

  window.ChatMessageFit = function (config, form, input) {
    var note = document.createElement("p");
    note.id = "composer-fit";
    note.className = "composer-fit";
    note.setAttribute("role", "status");
    note.hidden = true;
    var error = document.getElementById("composer-error");
    error.before(note);
    var csrf = form.querySelector("[name=csrfmiddlewaretoken]");
    var number = new Intl.NumberFormat();
    var encoder = new TextEncoder();
    var commands = (config.commands || []).map(function (c) { return c.name; });
    var timer = null;
    var asked = 0;     // the number of the last request; older answers are ignored
    var room = null;   // tokens a message may have to be sent whole (from the last answer)
    var measured = null; // the text of the last answer shown

    function fmt(n) { return number.format(n); }

    function show(kind, text) {
      note.textContent = text || "";
      note.hidden = !text;
      note.dataset.kind = kind || "";
      if (text) input.setAttribute("aria-describedby", note.id);
      else input.removeAttribute("aria-describedby");
    }

    function isCommand(text) {
      var first = text.trim().split(/\s+/)[0];
      return first.charAt(0) === "/" && commands.indexOf(first.slice(1)) >= 0;
    }

    function describe(fit) {
      var about = fit.exact ? "" : "about ";
      if (!fit.fits) {
        var text = "This message is " + about + fmt(fit.tokens) + " tokens; this chat's policy fits " +
          fmt(fit.kept) + ": it will be cut, keeping its beginning and its end, with a marker where " +
          "text is left out. Shorten it, or split it into several messages, to send it whole.";
        if (fit.model_window > fit.policy_limit) {
          text += " (The model reads up to " + fmt(fit.model_window) + " tokens; this chat's policy " +
            "limits prompts to " + fmt(fit.policy_limit) + ": an administrator can raise it, or let longer messages through whole.)";
        }
        return show("cut", text);
      }
      if (fit.beyond_policy) {
        return show("whole", "This message is " + about + fmt(fit.tokens) + " tokens, more than " +
          "this chat's policy leaves for it (" + fmt(fit.room) + "): it will be sent whole, " +
          "because the policy allows a longer turn when the model's window (" +
          fmt(fit.model_window) + " tokens) holds it. This turn costs more than usual.");
      }
      if (fit.tokens >= NEAR * fit.room) {
        return show("fits", "This message is " + about + fmt(fit.tokens) + " tokens: it fits this " +
          "chat's policy whole (up to " + fmt(fit.room) + ").");
      }
      show("", "");
    }

    function check() {
      timer = null;
      var text = input.value;
      if (text === measured) return;
      var bytes = encoder.encode(text).length;
      if (!text.trim() || isCommand(text) || text.length > config.maxChars ||
          (room !== null && bytes + SLACK_TOKENS <= room)) {
        measured = null;
        asked += 1; // an answer still on its way is out of date
        return show("", "");
      }
      var mine = ++asked;
      var body = new FormData();
      body.append("text", text);
      fetch(config.messageFitUrl, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": csrf ? csrf.value : "" },
      })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (data) {
          if (mine !== asked || !data || !data.fit) return;
          room = data.fit.room;
          measured = text;
          describe(data.fit);
        })
        .catch(function () { /* informative only: sending still works */ });
    }

    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(check, DELAY_MS);
    });

    return {
      // The message was sent (or the composer emptied): nothing to say about it any more.
      reset: function () {
        clearTimeout(timer);
        timer = null;
        asked += 1;
        measured = null;
        show("", "");
      },
    };
  };
})();
