/* The chat view: speaks the conversation WebSocket protocol (chats/consumers.py).
 *
 * Out: {"type":"message","client_id","content","image"?}, {"type":"stop"},
 *      {"type":"resume","message_id","last_seq"}, regenerate and edit (message-actions.js).
 * In:  ack, message, reply, delta (seq), done (usage), error (code, message), resync,
 *      reply_state, command (the answer to a command, naming the client_id that asked).
 *
 * A message keeps its client_id until it is acknowledged, so re-sending it after a dropped
 * socket or from the Retry button never stores it twice. A reply being streamed keeps the
 * last delta seq it showed; after a reconnect the page asks to resume from there.
 *
 * The message list is chat-messages.js, the composer's image chat-composer.js, regenerate and
 * edit message-actions.js: all are loaded before this script. An image travels in the message frame ({media_type, data}).
 */
(function () {
  "use strict";

  var configElement = document.getElementById("chat-config");
  if (!configElement) return;
  var config = JSON.parse(configElement.textContent);
  var md = window.ChatMarkdown;

  var list = document.getElementById("messages");
  var form = document.getElementById("composer");
  var input = document.getElementById("composer-input");
  var stopButton = document.getElementById("stop");
  var banner = document.getElementById("connection");
  var view = window.ChatMessages(list, md, config.imageUrl, config.userLabel);
  var composer = window.ChatComposer(config, form);
  var actions = window.ChatMessageActions(list, view, function (f) { return sendFrame(f); }, config.isLatestWindow);
  var messageFrame = composer.messageFrame;
  var newClientId = composer.newClientId;
  var scrollToEnd = view.scrollToEnd;
  var messageItem = view.messageItem;
  var setState = view.setState;
  var setBody = view.setBody;
  var setAnchor = view.setAnchor;
  var showNotice = view.showNotice;

  var socket = null;
  var reconnectDelay = 500;
  var reconnectTimer = null;
  var unacked = {};      // client_id -> {content, image, element}
  var sentByMessage = {}; // user message id -> {client_id, content} (stored: no image needed)
  var replies = {};      // reply message id -> {element, text, lastSeq, status, answers}
  var streaming = null;  // the reply id being streamed, if any
  var UNKNOWN_SEQ = 2147483647;

  // --- rendering ---------------------------------------------------------------------------

  function renderStored() {
    list.querySelectorAll("li.msg").forEach(function (item) {
      var body = item.querySelector(".msg-body");
      var text = body.textContent;
      if (item.classList.contains("msg-user") && item.dataset.clientId) {
        sentByMessage[item.dataset.messageId] = { client_id: item.dataset.clientId, content: text };
      }
      if (item.classList.contains("msg-assistant")) {
        var id = item.dataset.messageId;
        replies[id] = {
          element: item, text: text, lastSeq: 0, ahead: {}, status: item.dataset.status,
          answers: item.dataset.answers,
        };
        if (item.dataset.status === "streaming") {
          // A reply still running (the page was reloaded): resume it from its first delta.
          streaming = id;
          replies[id].text = "";
          setStreaming(true);
        }
      }
      view.setBody(item, text);
    });
    list.querySelectorAll("li.msg-assistant[data-status=failed]").forEach(function (item) {
      addRetry(item, item.dataset.answers);
    });
  }

  function addRetry(item, userMessageId, clientId, content, image) {
    var sent = clientId
      ? { client_id: clientId, content: content, image: image }
      : sentByMessage[userMessageId];
    if (!sent || !sent.client_id) return;
    var notice = item.querySelector(".msg-notice") || showNotice(item, "", "error");
    if (notice.querySelector("button")) return;
    var retry = document.createElement("button");
    retry.type = "button";
    retry.className = "retry";
    retry.textContent = "Retry";
    retry.addEventListener("click", function () {
      retry.disabled = true;
      var reply = replies[item.dataset.messageId];
      if (reply && item.classList.contains("msg-assistant")) reply.retrying = true;
      notice.remove();
      setState(item, "retrying…");
      sendFrame(messageFrame(sent.client_id, sent.content, sent.image));
    });
    notice.appendChild(document.createTextNode(" "));
    notice.appendChild(retry);
  }

  function setStreaming(on) {
    stopButton.hidden = !on;
    stopButton.disabled = !on;
  }

  // --- the socket --------------------------------------------------------------------------

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + config.wsPath);
    socket.addEventListener("open", onOpen);
    socket.addEventListener("message", function (event) {
      var data;
      try { data = JSON.parse(event.data); } catch (e) { return; }
      handle(data);
    });
    socket.addEventListener("close", onClose);
  }

  function onOpen() {
    reconnectDelay = 500;
    banner.hidden = true;
    document.body.classList.add("chat-connected");
    if (streaming) {
      var reply = replies[streaming];
      sendFrame({ type: "resume", message_id: Number(streaming), last_seq: reply.lastSeq });
    }
    Object.keys(unacked).forEach(function (clientId) {
      var pending = unacked[clientId];
      sendFrame(messageFrame(clientId, pending.content, pending.image));
    });
  }

  function onClose(event) {
    document.body.classList.remove("chat-connected");
    socket = null;
    // Not found, the session ended or the access did: reconnecting cannot help.
    var ended = view.closedNotice(event.code);
    if (ended) { banner.textContent = ended; banner.hidden = false; return; }
    banner.textContent = "Connection lost. Reconnecting…";
    banner.hidden = false;
    clearTimeout(reconnectTimer);
    reconnectTimer = setTimeout(connect, reconnectDelay);
    reconnectDelay = Math.min(reconnectDelay * 2, 10000);
  }

  function sendFrame(frame) {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify(frame));
      return true;
    }
    return false; // sent again (unacked messages, resume) when the socket reopens
  }

  // --- incoming events ---------------------------------------------------------------------

  function handle(data) {
    if (actions.handle(data)) return; // regenerate and edit (message-actions.js)
    switch (data.type) {
      case "ack": return onAck(data);
      case "message": return onMessage(data);
      case "reply": return onReply(data);
      case "delta": return onDelta(data);
      case "done": return onDone(data);
      case "error": return onError(data);
      case "resync": case "reply_state": return onState(data);
      case "command": return onCommand(data);
      case "spend_warning": return showSpending(data.message, false);
      default: document.dispatchEvent(new CustomEvent("chat:event", { detail: data })); // sidebar.js
    }
  }

  // The server has the message with this client_id: its bubble stops showing "sending…"
  // (and is not sent again on a reconnect). Returns what was pending, if anything.
  function markSent(clientId) {
    var pending = clientId && unacked[clientId];
    if (!pending) return null;
    delete unacked[clientId];
    pending.element.dataset.status = "complete";
    setState(pending.element, "");
    return pending;
  }

  function onAck(data) {
    var pending = markSent(data.client_id);
    if (!pending) return;
    var item = pending.element;
    item.dataset.messageId = data.message_id;
    item.dataset.clientId = data.client_id;
    setAnchor(item, data.seq);
    if (pending.image) view.storedImage(item, data.message_id);
    sentByMessage[data.message_id] = { client_id: data.client_id, content: pending.content };
  }

  function onMessage(data) {
    // Another participant's message (group conversations).
    if (data.client_id && unacked[data.client_id]) return;
    if (list.querySelector('li[data-message-id="' + data.message_id + '"]')) return;
    var item = messageItem(data.role === "assistant" ? "assistant" : "user", data.author || "", data.status);
    item.dataset.messageId = data.message_id;
    setAnchor(item, data.seq);
    if (data.image) view.storedImage(item, data.message_id, data.image);
    setBody(item, data.content || "");
    scrollToEnd();
  }

  function replyFor(id, answers) {
    var reply = replies[id];
    if (reply) return reply;
    var item = list.querySelector('li[data-message-id="' + id + '"]') ||
      messageItem("assistant", config.botName, "streaming");
    item.dataset.messageId = id;
    if (answers) item.dataset.answers = answers;
    reply = replies[id] = {
      element: item, text: "", lastSeq: 0, ahead: {}, status: "streaming", answers: answers
    };
    return reply;
  }

  function onReply(data) {
    var reply = replyFor(data.message_id, data.answers);
    reply.text = ""; reply.lastSeq = 0; reply.ahead = {}; reply.status = "streaming"; reply.retrying = false;
    reply.element.dataset.status = "streaming";
    var old = reply.element.querySelector(".msg-notice");
    if (old) old.remove();
    setState(reply.element, data.offline ? "offline provider · writing…" : "writing…");
    setBody(reply.element, "");
    streaming = String(data.message_id);
    setStreaming(true);
    scrollToEnd();
  }

  function onDelta(data) {
    var reply = replyFor(data.message_id);
    if (data.seq <= reply.lastSeq) return; // seen already (resumed from an earlier seq)
    if (data.seq !== reply.lastSeq + 1) {
      // A gap: keep this one (a socket gets each delta once, and after a reconnect a live
      // delta can come before the older ones the resume sends) and ask for what is missing.
      reply.ahead[data.seq] = data.text;
      sendFrame({ type: "resume", message_id: Number(data.message_id), last_seq: reply.lastSeq });
      return;
    }
    reply.lastSeq = data.seq;
    reply.text += data.text;
    while (reply.ahead[reply.lastSeq + 1] !== undefined) { // what was kept now follows on
      reply.lastSeq += 1;
      reply.text += reply.ahead[reply.lastSeq];
      delete reply.ahead[reply.lastSeq];
    }
    setBody(reply.element, reply.text);
    scrollToEnd();
  }

  function finish(reply, status) {
    reply.status = status;
    reply.element.dataset.status = status;
    if (streaming === String(reply.element.dataset.messageId)) {
      streaming = null;
      setStreaming(false);
    }
  }

  function onDone(data) {
    var reply = replyFor(data.message_id);
    finish(reply, data.status);
    if (reply.lastSeq >= UNKNOWN_SEQ) {
      // Followed from a stored snapshot: fetch the final text (the server answers resync).
      sendFrame({ type: "resume", message_id: Number(data.message_id), last_seq: UNKNOWN_SEQ });
    }
    setState(reply.element, data.stopped ? "stopped" : "");
    if (data.stopped) showNotice(reply.element, "Stopped. The text so far is kept.", "info");
    if (data.tool_calls && data.tool_calls.length) showToolCalls(reply.element, data.tool_calls);
    window.ChatMeter && window.ChatMeter.load(reply.answers || data.message_id);
  }

  // The tools a reply called for the client that offered them (the SDK-compatible API).
  function showToolCalls(element, calls) {
    var list = document.createElement("ul");
    list.className = "msg-tools";
    list.setAttribute("aria-label", "Tools called");
    calls.forEach(function (call) {
      var item = document.createElement("li");
      var name = document.createElement("code");
      var input = document.createElement("code");
      name.textContent = call.name;
      input.textContent = JSON.stringify(call.input);
      item.append("Called ", name, " with ", input);
      list.appendChild(item);
    });
    element.appendChild(list);
  }

  function onError(data) {
    if (data.code === "quota_exceeded") showSpending(data.message, true);
    if (data.message_id) {
      var reply = replyFor(data.message_id);
      finish(reply, data.status || "failed");
      setState(reply.element, data.status !== "incomplete" ? "failed" : /^(max_tokens|model_context_window_exceeded)$/.test(data.code) ? "cut short" : "interrupted");
      showNotice(reply.element, data.message, "error");
      if (data.retryable !== false) addRetry(reply.element, reply.answers);
      return;
    }
    var pending = data.client_id && unacked[data.client_id];
    if (pending) {
      delete unacked[data.client_id];
      setState(pending.element, "not sent");
      pending.element.dataset.status = "failed";
      showNotice(pending.element, data.message, "error");
      if (data.code === "rate_limited") {
        addRetry(pending.element, null, data.client_id, pending.content, pending.image);
      } else if (!input.value) {
        input.value = pending.content; // refused (e.g. the image): the text is not lost
      }
      return;
    }
    composer.showError(data.message || "Something went wrong.");
  }

  // A spending limit's warning, or its hard limit, reached: the banner above the messages.
  function showSpending(text, refused) {
    var banner = document.getElementById("spend-banner");
    if (!banner || !text) return;
    banner.textContent = text;
    banner.classList.toggle("spend-refused", refused);
    banner.hidden = false;
  }

  function onState(data) {
    var reply = replyFor(data.message_id, data.answers);
    if (reply.retrying && data.status === "failed") return; // the state before the retry
    reply.text = data.content || "";
    reply.ahead = {};
    setBody(reply.element, reply.text);
    if (data.status === "streaming") {
      // The delta log is gone: show the stored text, skip deltas, fetch the end on done.
      reply.lastSeq = UNKNOWN_SEQ;
      return;
    }
    finish(reply, data.status);
    setState(reply.element, data.status === "complete" ? "" : data.status);
    if (data.status === "failed" || (data.status === "incomplete" && data.error_message)) {
      showNotice(reply.element, data.error_message || "The reply failed.", "error");
      if (data.status === "failed") addRetry(reply.element, reply.answers);
    }
    if (data.type === "resync") window.ChatMeter && window.ChatMeter.load(reply.answers || data.message_id);
  }

  function onCommand(data) {
    // A command is answered, not stored: the answer is the sender's confirmation.
    markSent(data.client_id);
    var item = messageItem("system", "/" + data.command, "complete");
    setBody(item, data.text || "");
    scrollToEnd();
  }

  // --- sending -----------------------------------------------------------------------------

  function send() {
    var content = input.value;
    if (composer.busy()) {
      composer.showError("The image is still loading; send again in a moment.");
      return;
    }
    var attached = composer.image();
    if (!content.trim() && !attached) return;
    if (content.length > config.maxChars) {
      composer.showError("The message has " + content.length + " characters; the limit is " + config.maxChars + ".");
      return;
    }
    composer.showError("");
    composer.clear();
    var image = attached ? { media_type: attached.media_type, data: attached.data } : null;
    var clientId = newClientId();
    var item = messageItem("user", config.userLabel, "sending");
    item.dataset.clientId = clientId;
    if (attached) view.previewImage(item, attached);
    setBody(item, content);
    setState(item, "sending…");
    unacked[clientId] = { content: content, image: image, element: item };
    sendFrame(messageFrame(clientId, content, image));
    input.value = "";
    scrollToEnd();
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    send();
  });

  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });

  stopButton.addEventListener("click", function () {
    stopButton.disabled = true;
    sendFrame({ type: "stop" });
  });

  renderStored();
  if (config.isLatestWindow) {
    connect();
  } else {
    form.querySelector("fieldset").disabled = true;
  }
  scrollToEnd();

  // For tests and debugging: the live socket (e.g. to simulate a dropped connection).
  window.ChatSocket = {
    drop: function () { if (socket) socket.close(); },
    receive: handle, // an event as if the server had sent it
  };
})();
