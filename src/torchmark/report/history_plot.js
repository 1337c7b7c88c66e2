// A case's history as the dashboard and the static report both draw it (one code path):
// series of report/views.py history_series (machines, envs: one trace each) on one
// axis of commits in commit order (history_plots), each with the band of its 25th-75th
// percentiles and its change points marked with their size.
// torchmarkHistoryPlot(div, plot, series, onPick): onPick(run) is called with a clicked
// point's (newest) run. torchmarkHistoryPlot.shown(value, unit): a value in its unit
// ("12.3 us"), as the plots show it.
"use strict";
window.torchmarkHistoryPlot = (function () {
  const UNITS = [[1, "s"], [1e-3, "ms"], [1e-6, "us"], [1e-9, "ns"]];
  function scaleFor(unit, values) {
    if (unit !== "s") return [1, unit];
    const finite = values.filter((v) => v !== null && isFinite(v) && v > 0);
    const m = finite.length ? Math.min(...finite) : 1;
    for (const [scale, name] of UNITS) if (m >= scale) return [scale, name];
    return UNITS[UNITS.length - 1];
  }
  function shown(v, unit) {
    if (v === null || v === undefined) return "-";
    const [scale, name] = scaleFor(unit, [v]);
    return `${(v / scale).toPrecision(4)} ${name}`;
  }
  function esc(text) {
    return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }
  function pct(ratio) { return `${ratio >= 1 ? "+" : ""}${((ratio - 1) * 100).toFixed(1)}%`; }

  const COLORS = ["#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#0a7c86", "#57606a"];
  function band(color) {
    const n = parseInt(color.slice(1), 16);
    return `rgba(${n >> 16},${(n >> 8) & 255},${n & 255},0.15)`;
  }
  function seriesName(s) {
    return `${s.machine || "?"}${s.env ? " / " + s.env : ""}${s.environment_change ? " (" + s.environment_change.split(":")[0] + " on)" : ""}`;
  }

  // plot: {metric, unit, labels: the commit axis' ticks}; series: the series it draws,
  // each point at its place `x` on that axis (report/views.py history_plots).
  function draw(div, plot, series, onPick) {
    const [scale, unit] = scaleFor(plot.unit, series.flatMap((s) => s.points.map((p) => p.value)));
    const many = series.length > 1;
    const traces = [], shapes = [], annotations = [];
    series.forEach((s, k) => {
      const color = COLORS[k % COLORS.length];
      const x = s.points.map((p) => p.x);
      const hover = s.points.map((p) => `${esc(p.commit || "(no commit)")} ${esc(p.subject)}<br>` +
        `${shown(p.value, s.unit)} (25-75%: ${shown(p.low, s.unit)} .. ${shown(p.high, s.unit)}, ` +
        `${p.n} samples)<br>torch ${esc(p.torch || "?")} - ${esc(seriesName(s))} - ` +
        `run${p.runs.length > 1 ? "s" : ""} ${p.runs.length > 3 ? p.runs[0] + " .. " + p.runs[p.runs.length - 1] : p.runs.join(", ")}`);
      const ys = (key) => s.points.map((p) => (p[key] === null ? null : p[key] / scale));
      traces.push(
        { x, y: ys("high"), mode: "lines", line: { width: 0 }, hoverinfo: "skip", showlegend: false },
        { x, y: ys("low"), mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: band(color),
          hoverinfo: "skip", showlegend: false },
        { x, y: ys("value"), mode: "lines+markers", name: esc(seriesName(s)),
          text: hover, hovertemplate: "%{text}<extra></extra>", line: { color },
          customdata: s.points.map((p) => p.runs[p.runs.length - 1]),
          marker: { size: s.points.length > 150 ? 4 : 7 } });
      for (const c of s.changes) {
        const mark = c.kind === "regression" ? "#cf222e" : "#1a7f37";
        const at = s.points[c.at].x;
        shapes.push({ type: "line", xref: "x", yref: "paper", x0: at - 0.5, x1: at - 0.5,
          y0: 0, y1: 1, line: { color: many ? color : mark, dash: "dash", width: 2 } });
        annotations.push({ x: at - 0.5, y: 1, xref: "x", yref: "paper", showarrow: false,
          yanchor: "bottom", font: { color: mark, size: 11 },
          text: pct(c.ratio) + (c.mark ? ` (${esc(c.mark)})` : "") });
      }
    });
    const places = plot.labels.length;
    const step = Math.max(1, Math.ceil(places / 12));
    const ticks = plot.labels.map((_, i) => i).filter((i) => i % step === 0);
    Plotly.newPlot(div, traces, {
      margin: { t: 24, r: 20, b: 80, l: 70 }, shapes, annotations, showlegend: many,
      legend: { orientation: "h", y: -0.35 }, hovermode: "closest",
      xaxis: { tickmode: "array", tickvals: ticks, ticktext: ticks.map((i) => esc(plot.labels[i])),
        tickangle: -35, range: places < 3 ? [-1, places] : undefined, automargin: true,
        title: { text: "commit (in commit order)" } },
      yaxis: { title: { text: `${esc(plot.metric)} (${unit})` }, rangemode: "tozero", automargin: true },
    }, { displaylogo: false, responsive: true });
    if (onPick) {
      div.on("plotly_click", (event) => {
        const run = event.points[0].customdata;
        if (run !== undefined) onPick(run);
      });
    }
  }
  draw.scaleFor = scaleFor;  // for the pages' tables: one unit scaling
  draw.shown = shown;
  draw.esc = esc;
  return draw;
})();
