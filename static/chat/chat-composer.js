/* The composer: its image, its error line, the commands offered as the user types one
 * (command-menu.js) and whether the message will fit the next turn whole (message-fit.js).
 * An image is chosen with the Image button or pasted
 * into the message box; it is checked here (type, size, and that the browser can show it; the
 * server checks again by the file's own header), shown as a removable chip with a thumbnail,
 * and sent with the text as base64 inside the socket's message frame (chat.js), so it is
 * stored with its message in one step and nothing is left behind by a message never sent. */
(function () {
  "use strict";

  function sizeLabel(bytes) {
    if (bytes < 1024 * 1024) return Math.ceil(bytes / 1024) + " KB";
    return (bytes / (1024 * 1024)).toFixed(1) + " MB";
  }

  // `config` is the page's chat config; `form` the composer form.
  window.ChatComposer = function (config, form) {
    var input = document.getElementById("composer-input");
    var composerError = document.getElementById("composer-error");
    var fileInput = document.getElementById("attachment");
    var chip = document.getElementById("attachment-chip");
    var image = null;   // {media_type, data (base64), previewUrl (data: URL), name, size}
    var reading = null; // the file being read; a later choice replaces it
    // Made before chat.js listens for Enter: Enter that takes a command does not send.
    var menu = window.ChatCommandMenu(config.commands, input);
    var fit = window.ChatMessageFit(config, form, input);

    function showError(text) {
      composerError.textContent = text;
      composerError.hidden = !text;
    }

    function clear() {
      image = null;
      reading = null;
      fileInput.value = "";
      chip.hidden = true;
      chip.textContent = "";
      input.required = true;
    }

    function showChip() {
      chip.textContent = "";
      var thumb = document.createElement("img");
      thumb.className = "chip-thumb";
      thumb.src = image.previewUrl;
      thumb.alt = "";
      var name = document.createElement("span");
      name.textContent = image.name + " (" + sizeLabel(image.size) + ")";
      var remove = document.createElement("button");
      remove.type = "button";
      remove.className = "chip-remove";
      remove.setAttribute("aria-label", "Remove the image");
      remove.textContent = "×";
      remove.addEventListener("click", function () {
        clear();
        showError("");
        input.focus();
      });
      chip.appendChild(thumb);
      chip.appendChild(name);
      chip.appendChild(remove);
      chip.hidden = false;
      input.required = false; // an image may be sent without text
    }

    function attach(file) {
      showError("");
      clear();
      if (!file) return;
      if (config.attachmentTypes.indexOf(file.type) < 0) {
        showError("Attach a PNG, JPEG, GIF or WebP image.");
        return;
      }
      if (file.size > config.maxAttachmentBytes) {
        showError("The image is larger than " + Math.round(config.maxAttachmentBytes / 1048576) + " MB.");
        return;
      }
      reading = file;
      var reader = new FileReader();
      reader.addEventListener("load", function () {
        if (reading !== file) return;
        var url = String(reader.result); // data:<type>;base64,<data>
        var probe = new Image();
        probe.addEventListener("load", function () {
          if (reading !== file) return;
          reading = null;
          image = {
            media_type: file.type,
            data: url.slice(url.indexOf(",") + 1),
            previewUrl: url,
            name: file.name || "Pasted image",
            size: file.size,
          };
          showChip();
        });
        probe.addEventListener("error", function () {
          if (reading !== file) return;
          clear();
          showError("The file is not a PNG, JPEG, GIF or WebP image.");
        });
        probe.src = url;
      });
      reader.addEventListener("error", function () {
        if (reading !== file) return;
        clear();
        showError("The image could not be read.");
      });
      reader.readAsDataURL(file);
    }

    fileInput.addEventListener("change", function () {
      attach(fileInput.files && fileInput.files[0]);
    });

    input.addEventListener("paste", function (event) {
      var data = event.clipboardData;
      var files = data && data.files;
      if (!files || !files.length || files[0].type.indexOf("image/") !== 0) return;
      // A pasted screenshot carries no text; text copied with a picture keeps its text.
      if (!data.getData("text/plain")) event.preventDefault();
      attach(files[0]);
    });

    // A message frame; a message sent again carries its image again (it may not be stored).
    function messageFrame(clientId, content, image) {
      var frame = { type: "message", client_id: clientId, content: content };
      if (image) frame.image = image;
      return frame;
    }

    function newClientId() {
      if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
      var bytes = new Uint8Array(16);
      crypto.getRandomValues(bytes);
      return Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
    }

    return {
      showError: showError,
      messageFrame: messageFrame,
      newClientId: newClientId,
      // The image to send ({media_type, data, previewUrl, size}), or null.
      image: function () { return image; },
      // Whether a chosen image is still being read (sending now would leave it out).
      busy: function () { return reading !== null; },
      // The message was sent: the composer starts afresh.
      clear: function () {
        clear();
        menu.close();
        fit.reset();
      },
    };
  };
})();
