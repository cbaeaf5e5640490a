/* Colour theme: light, dark or the system's (prefers-color-scheme), chosen with
 * <select data-theme-choice> and kept in localStorage. Loaded in <head> (not deferred) so the
 * stored choice is applied before the first paint: <html data-theme="light|dark">; no
 * attribute follows the system (theme.css uses light-dark() with color-scheme). */
(function () {
  "use strict";
  var KEY = "chatplatform-theme";
  var root = document.documentElement;

  function stored() {
    try {
      var value = window.localStorage.getItem(KEY);
      return value === "light" || value === "dark" ? value : "system";
    } catch (e) {
      return "system"; // storage refused (privacy settings): follow the system
    }
  }

  function apply(choice) {
    if (choice === "light" || choice === "dark") root.setAttribute("data-theme", choice);
    else root.removeAttribute("data-theme");
  }

  function choose(choice) {
    try {
      if (choice === "system") window.localStorage.removeItem(KEY);
      else window.localStorage.setItem(KEY, choice);
    } catch (e) { /* the choice still holds for this page */ }
    apply(choice);
  }

  apply(stored());

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("select[data-theme-choice]").forEach(function (select) {
      select.value = stored();
      select.addEventListener("change", function () { choose(select.value); });
    });
  });
  // Another tab changed it.
  window.addEventListener("storage", function (event) {
    if (event.key === KEY || event.key === null) apply(stored());
  });

  window.ChatTheme = { choose: choose, current: stored };
})();
