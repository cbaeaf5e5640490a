/* The commands, offered while the user types one: a listbox under the composer, filtered by
 * what follows the "/" of the message's first word. The list is the server's (the page's chat
 * config, `commands`: name, usage, description), the one /help answers from.
 *
 * Keys: ArrowDown / ArrowUp choose, Enter or Tab takes the chosen command (Tab: the first when
 * none is chosen), Escape closes the list until the text changes. Enter with none chosen sends
 * the message as typed. The textarea keeps the focus; the chosen option is its
 * aria-activedescendant, and a polite status says how many commands match. */
(function () {
  "use strict";

  var FIRST_WORD = /^\/(\S*)$/; // a "/" and the command's name being typed, nothing after

  // `commands`: [{name, usage, description}]; `input`: the composer's textarea. Its keydown
  // listener must be added before the one that sends on Enter (chat.js), which it stops
  // when Enter takes a command.
  window.ChatCommandMenu = function (commands, input) {
    if (!commands || !commands.length) return { close: function () {} };
    var list = document.createElement("ul");
    list.id = "command-menu";
    list.className = "command-menu";
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "Commands");
    list.hidden = true;
    var status = document.createElement("p");
    status.className = "visually-hidden";
    status.setAttribute("role", "status");
    input.after(list);
    list.after(status);
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", list.id);

    var shown = [];    // the commands listed now
    var active = -1;   // index of the chosen one in `shown`, -1: none
    var dismissed = null; // the text Escape closed the list on

    function option(command, index) {
      var item = document.createElement("li");
      item.id = "command-option-" + command.name;
      item.className = "command-option";
      item.setAttribute("role", "option");
      item.setAttribute("aria-selected", "false");
      var usage = document.createElement("span");
      usage.className = "command-usage";
      usage.textContent = command.usage;
      var description = document.createElement("span");
      description.className = "command-description";
      description.textContent = command.description;
      item.appendChild(usage);
      item.appendChild(description);
      // The textarea keeps the focus (and the caret) while an option is clicked.
      item.addEventListener("mousedown", function (event) { event.preventDefault(); });
      item.addEventListener("click", function () { take(index); });
      return item;
    }

    function setActive(index) {
      active = index;
      Array.prototype.forEach.call(list.children, function (item, i) {
        item.setAttribute("aria-selected", i === index ? "true" : "false");
        if (i === index) item.scrollIntoView({ block: "nearest" });
      });
      if (index >= 0) input.setAttribute("aria-activedescendant", list.children[index].id);
      else input.removeAttribute("aria-activedescendant");
    }

    function close() {
      if (list.hidden) return;
      list.hidden = true;
      list.textContent = "";
      shown = [];
      setActive(-1);
      status.textContent = "";
    }

    function update() {
      var text = input.value;
      var typed = FIRST_WORD.exec(text);
      if (!typed || text === dismissed) return close();
      dismissed = null;
      var prefix = typed[1].toLowerCase();
      var matches = commands.filter(function (c) { return c.name.indexOf(prefix) === 0; });
      if (!matches.length) return close();
      var same = matches.length === shown.length &&
        matches.every(function (c, i) { return c === shown[i]; });
      if (same && !list.hidden) return;
      shown = matches;
      list.textContent = "";
      matches.forEach(function (command, i) { list.appendChild(option(command, i)); });
      list.hidden = false;
      setActive(-1);
      status.textContent = matches.length + (matches.length === 1 ? " command" : " commands") +
        ": arrow keys to choose, Enter or Tab to take, Escape to close.";
    }

    function take(index) {
      var command = shown[index];
      if (!command) return;
      input.value = "/" + command.name + " ";
      close();
      input.focus();
      input.setSelectionRange(input.value.length, input.value.length);
      input.dispatchEvent(new Event("input", { bubbles: true }));
    }

    input.addEventListener("input", update);
    input.addEventListener("blur", close);
    input.addEventListener("keydown", function (event) {
      if (list.hidden || event.isComposing) return;
      var key = event.key;
      var handled = true;
      if (key === "ArrowDown") setActive(active + 1 < shown.length ? active + 1 : 0);
      else if (key === "ArrowUp") setActive(active > 0 ? active - 1 : shown.length - 1);
      else if (key === "Escape") { dismissed = input.value; close(); }
      else if (key === "Tab" && !event.shiftKey) take(active >= 0 ? active : 0);
      else if (key === "Enter" && !event.shiftKey && active >= 0) take(active);
      else handled = false;
      if (!handled) return;
      event.preventDefault();
      event.stopImmediatePropagation(); // Enter took a command: it does not send
    });

    return { close: close };
  };
})();
