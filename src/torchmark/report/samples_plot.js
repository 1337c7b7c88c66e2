// Each result's raw samples as the dashboard's run page and the static report both draw
// them (one code path): a box a result, every sample shown, each divided by its
// result's median so that cases of any size share one axis; hover: the sample in its
// unit. torchmarkSamplesPlot(div, results): results of report/views.py samples_shown.
// Needs history_plot.js (its unit formatting).
"use strict";
window.torchmarkSamplesPlot = function (div, results) {
  const { shown, esc } = window.torchmarkHistoryPlot;
  const traces = results.map((r) => {
    const sorted = [...r.samples].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)] || 1;
    return { type: "box", name: `${esc(r.case)} [${esc(r.metric)}]`,
      y: r.samples.map((v) => v / median), boxpoints: "all", jitter: 0.4, pointpos: 0,
      marker: { size: 3 }, text: r.samples.map((v) => shown(v, r.unit)),
      hoverinfo: "text+name" };
  });
  Plotly.newPlot(div, traces, {
    margin: { l: 60, r: 10, t: 10, b: 120 }, showlegend: false,
    yaxis: { title: { text: "sample / its result's median" } },
  }, { displaylogo: false, responsive: true });
};
