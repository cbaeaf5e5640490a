/* Drawers of the chat page on narrow screens: the conversation list and the context panel.
 * A button [data-drawer-toggle=<id>] opens the element with that id ([data-drawer]); a
 * [data-drawer-close] inside it, the backdrop and Escape close it. While open, focus moves
 * into the drawer and stays there (Tab wraps); closing returns it to the toggle. A closed
 * drawer is inert (out of the tab order and hidden from assistive technology) only while
 * it is a drawer: on wide screens the same element is a static column (see layout.css). */
(function () {
  "use strict";

  var backdrop = document.querySelector("[data-drawer-backdrop]");
  var open = null;      // the open drawer element
  var opener = null;    // the button that opened it
  var FOCUSABLE = "a[href], button:not([disabled]), input:not([disabled]), select, textarea, summary, [tabindex]:not([tabindex='-1'])";

  function isDrawer(element) {
    // layout.css turns an element into a drawer below its breakpoint (position: fixed).
    return window.getComputedStyle(element).position === "fixed";
  }

  function toggles(id) {
    return document.querySelectorAll('[data-drawer-toggle="' + id + '"]');
  }

  function sync() {
    document.querySelectorAll("[data-drawer]").forEach(function (drawer) {
      var hidden = isDrawer(drawer) && drawer !== open;
      drawer.inert = hidden;
      if (hidden) drawer.setAttribute("aria-hidden", "true");
      else drawer.removeAttribute("aria-hidden");
    });
  }

  function show(drawer, button) {
    if (open) hide(false);
    open = drawer;
    opener = button;
    drawer.classList.add("open");
    document.body.classList.add("drawer-open");
    if (backdrop) backdrop.hidden = false;
    toggles(drawer.id).forEach(function (b) { b.setAttribute("aria-expanded", "true"); });
    sync();
    var target = drawer.querySelector("[data-drawer-close]") || drawer.querySelector(FOCUSABLE);
    if (target) target.focus();
  }

  function hide(restoreFocus) {
    if (!open) return;
    var drawer = open;
    open = null;
    drawer.classList.remove("open");
    document.body.classList.remove("drawer-open");
    if (backdrop) backdrop.hidden = true;
    toggles(drawer.id).forEach(function (b) { b.setAttribute("aria-expanded", "false"); });
    sync();
    if (restoreFocus !== false && opener) opener.focus();
    opener = null;
  }

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-drawer-toggle]");
    if (toggle) {
      var drawer = document.getElementById(toggle.getAttribute("data-drawer-toggle"));
      if (!drawer) return;
      if (open === drawer) hide(); else show(drawer, toggle);
      return;
    }
    if (event.target.closest("[data-drawer-close]") || event.target === backdrop) hide();
  });

  document.addEventListener("keydown", function (event) {
    if (!open || event.defaultPrevented) return;
    if (event.key === "Escape") {
      event.preventDefault();
      hide();
    } else if (event.key === "Tab") {
      var items = Array.prototype.filter.call(open.querySelectorAll(FOCUSABLE), function (el) {
        return el.offsetParent !== null;
      });
      if (!items.length) return;
      var first = items[0], last = items[items.length - 1];
      if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
      else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
    }
  });

  // Rotating a phone or resizing a window can turn a drawer into a column and back.
  window.addEventListener("resize", function () {
    if (open && !isDrawer(open)) hide(false);
    sync();
  });
  sync();

  window.ChatDrawer = { close: hide };
})();
