// Form behaviour declared in the markup (no inline handlers, so the Content-Security-Policy
// can refuse inline scripts): <select data-autosubmit> submits its form on change, and
// <form data-confirm="question"> asks before it is submitted.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit") && target.form) {
      target.form.submit();
    }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });
})();
