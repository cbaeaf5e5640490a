/* Usage charts of the tenant usage page (Chart.js 4, vendored under static/vendor/chartjs). */
(function () {
  "use strict";
  var dataElement = document.getElementById("usage-data");
  if (!dataElement || !window.Chart) return;
  var data = JSON.parse(dataElement.textContent);
  var common = {
    responsive: true,
    maintainAspectRatio: false,
    animation: false,
    interaction: { mode: "index", intersect: false },
    plugins: { legend: { position: "bottom" } },
  };
  function line(label, values, color, dashed) {
    return {
      label: label, data: values, borderColor: color, backgroundColor: color,
      borderDash: dashed ? [6, 4] : [], pointRadius: 2, tension: 0.2,
    };
  }
  var tokens = document.getElementById("tokens-chart");
  tokens.parentElement.style.height = "320px";
  new window.Chart(tokens, {
    type: "line",
    data: {
      labels: data.labels,
      datasets: [
        line("Prompt", data.prompt, "#2f5bd3"),
        line("Completion", data.completion, "#d38a2f"),
        line("Cache read", data.cache_read, "#2fd39b"),
        line("Cache written", data.cache_write, "#6b5bd3"),
        line("Whole history (hypothetical)", data.hypothetical, "#b00020", true),
      ],
    },
    options: Object.assign({}, common, { scales: { y: { beginAtZero: true, title: { display: true, text: "tokens" } } } }),
  });
  var cost = document.getElementById("cost-chart");
  cost.parentElement.style.height = "320px";
  new window.Chart(cost, {
    type: "bar",
    data: {
      labels: data.labels,
      datasets: [
        { label: "Cost", data: data.cost, backgroundColor: "#2f5bd3" },
        { label: "Whole history with caching", data: data.full_history_cost, backgroundColor: "#2fd39b" },
      ],
    },
    options: Object.assign({}, common, { scales: { y: { beginAtZero: true, title: { display: true, text: "USD" } } } }),
  });
  document.body.dataset.chartsReady = "1";
})();
