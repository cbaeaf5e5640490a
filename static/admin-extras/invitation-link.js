/* The invitation link shown once after an invitation is created: "Copy" puts it on the
   clipboard (or selects it, where the clipboard is not available) and says so. */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest(".invitation-copy") : null;
    if (!button) return;
    var field = document.getElementById(button.getAttribute("data-copy-target"));
    if (!field) return;
    field.focus();
    field.select();
    function done(text) { button.textContent = text; }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(field.value).then(
        function () { done("Copied"); },
        function () { done("Selected: press Ctrl+C"); }
      );
    } else {
      done("Selected: press Ctrl+C");
    }
  });
})();
