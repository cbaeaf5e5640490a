/* The composer's image attachment and its error line: choosing an image (type and size
 * checked here, again on the server), the chip that shows it, and the upload that sends it
 * with the message text over HTTP (the reply then arrives on the socket like any other). */
(function () {
  "use strict";

  // `config` is the page's chat config; `form` the composer form.
  window.ChatComposer = function (config, form) {
    var sendButton = document.getElementById("send");
    var composerError = document.getElementById("composer-error");
    var fileInput = document.getElementById("attachment");
    var chip = document.getElementById("attachment-chip");
    var attachment = null;

    function showError(text) {
      composerError.textContent = text;
      composerError.hidden = !text;
    }

    function csrfToken() {
      var field = form.querySelector("input[name=csrfmiddlewaretoken]");
      return field ? field.value : "";
    }

    function upload(content) {
      var data = new FormData();
      data.append("image", attachment);
      data.append("text", content);
      sendButton.disabled = true;
      fetch(config.attachmentUrl, {
        method: "POST",
        body: data,
        headers: { "X-CSRFToken": csrfToken() },
        credentials: "same-origin",
      }).then(function (response) {
        return response.json().catch(function () { return {}; });
      }).then(function (body) {
        var message = body && body.error ? body.error.message : "The image could not be sent.";
        showError(message);
      }).catch(function () {
        showError("The image could not be sent (network error).");
      }).then(function () { sendButton.disabled = false; });
    }

    function clearAttachment() {
      attachment = null;
      fileInput.value = "";
      chip.hidden = true;
      chip.textContent = "";
    }

    fileInput.addEventListener("change", function () {
      showError("");
      var file = fileInput.files && fileInput.files[0];
      if (!file) { clearAttachment(); return; }
      if (config.attachmentTypes.indexOf(file.type) < 0) {
        clearAttachment();
        showError("Attach a PNG, JPEG, GIF or WebP image.");
        return;
      }
      if (file.size > config.maxAttachmentBytes) {
        clearAttachment();
        showError("The image is larger than " + Math.round(config.maxAttachmentBytes / 1048576) + " MB.");
        return;
      }
      attachment = file;
      chip.hidden = false;
      chip.textContent = "";
      var name = document.createElement("span");
      name.textContent = file.name + " (" + Math.ceil(file.size / 1024) + " KB)";
      var remove = document.createElement("button");
      remove.type = "button";
      remove.className = "chip-remove";
      remove.setAttribute("aria-label", "Remove the image");
      remove.textContent = "×";
      remove.addEventListener("click", clearAttachment);
      chip.appendChild(name);
      chip.appendChild(remove);
    });

    return {
      showError: showError,
      hasAttachment: function () { return attachment !== null; },
      upload: upload,
    };
  };
})();
