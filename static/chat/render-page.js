/* Render every [data-md] element of a page (summaries) with the safe markdown subset. */
document.querySelectorAll("[data-md]").forEach(function (element) {
  window.ChatMarkdown.renderInto(element, element.textContent);
});
