/* Usage charts of the tenant usage page and of a policy's change page (Chart.js 4, vendored
   under static/vendor/chartjs): each chart is drawn when its canvas is on the page. */
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
  function canvas(id, height) {
    var element = document.getElementById(id);
    if (element) element.parentElement.style.height = height;
    return element;
  }
  var tokens = canvas("tokens-chart", "320px");
  if (tokens) new window.Chart(tokens, {
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
  var cost = canvas("cost-chart", "320px");
  if (cost) new window.Chart(cost, {
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
  var policyCount = data.policies ? data.policies.labels.length : 0;
  var policies = canvas("policies-chart", Math.max(140, 70 + 44 * policyCount) + "px");
  if (policies && data.policies) new window.Chart(policies, {
    type: "bar",
    data: {
      labels: data.policies.labels,
      datasets: [
        { label: "Billed", data: data.policies.cost, backgroundColor: "#2f5bd3" },
        { label: "Whole history with caching", data: data.policies.full_history_cost, backgroundColor: "#2fd39b" },
      ],
    },
    options: Object.assign({}, common, {
      indexAxis: "y",
      scales: { x: { beginAtZero: true, title: { display: true, text: "USD" } } },
    }),
  });
  document.body.dataset.chartsReady = "1";
})();
