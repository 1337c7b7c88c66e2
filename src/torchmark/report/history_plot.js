// A case's history as the dashboard and the static report both draw it (one code path):
// a series of report/views.py history_series, commits on the x axis in commit order,
// the band of the 25th-75th percentiles, the change points marked with their size.
// torchmarkHistoryPlot(div, series, onPick): onPick(run) is called with a clicked
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

  function draw(div, s, onPick) {
    const [scale, unit] = scaleFor(s.unit, s.points.map((p) => p.value));
    const x = s.points.map((_, i) => i);
    const labels = s.points.map((p) => p.commit || p.started.slice(0, 16).replace("T", " "));
    const hover = s.points.map((p) => `${esc(p.commit || "(no commit)")} ${esc(p.subject)}<br>` +
      `${shown(p.value, s.unit)} (25-75%: ${shown(p.low, s.unit)} .. ${shown(p.high, s.unit)}, ` +
      `${p.n} samples)<br>torch ${esc(p.torch || "?")} - ${esc(s.machine || "?")} - ` +
      `run${p.runs.length > 1 ? "s" : ""} ${p.runs.length > 3 ? p.runs[0] + " .. " + p.runs[p.runs.length - 1] : p.runs.join(", ")}`);
    const ys = (key) => s.points.map((p) => (p[key] === null ? null : p[key] / scale));
    const traces = [
      { x, y: ys("high"), mode: "lines", line: { width: 0 }, hoverinfo: "skip", showlegend: false },
      { x, y: ys("low"), mode: "lines", line: { width: 0 }, fill: "tonexty",
        fillcolor: "rgba(9,105,218,0.15)", hoverinfo: "skip", name: "25-75% of the samples" },
      { x, y: ys("value"), mode: "lines+markers", name: `median (${esc(s.machine || "?")})`,
        text: hover, hovertemplate: "%{text}<extra></extra>", line: { color: "#0969da" },
        marker: { size: s.points.length > 150 ? 4 : 7 } },
    ];
    const shapes = [], annotations = [];
    for (const c of s.changes) {
      const color = c.kind === "regression" ? "#cf222e" : "#1a7f37";
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: c.at - 0.5, x1: c.at - 0.5,
        y0: 0, y1: 1, line: { color, dash: "dash", width: 2 } });
      annotations.push({ x: c.at - 0.5, y: 1, xref: "x", yref: "paper", showarrow: false,
        yanchor: "bottom", font: { color, size: 11 },
        text: pct(c.ratio) + (c.mark ? ` (${esc(c.mark)})` : "") });
    }
    const step = Math.max(1, Math.ceil(x.length / 12));
    Plotly.newPlot(div, traces, {
      margin: { t: 24, r: 20, b: 80, l: 70 }, shapes, annotations, showlegend: false,
      hovermode: "closest",
      xaxis: { tickmode: "array", tickvals: x.filter((i) => i % step === 0),
        ticktext: labels.filter((_, i) => i % step === 0).map(esc), tickangle: -35,
        range: x.length < 3 ? [-1, x.length] : undefined,
        title: { text: "commit (in commit order)" } },
      yaxis: { title: { text: `${esc(s.metric)} (${unit})` }, rangemode: "tozero" },
    }, { displaylogo: false, responsive: true });
    if (onPick) {
      div.on("plotly_click", (event) => {
        const point = s.points[event.points[0].x];
        onPick(point.runs[point.runs.length - 1]);
      });
    }
  }
  draw.scaleFor = scaleFor;  // for the pages' tables: one unit scaling
  draw.shown = shown;
  return draw;
})();
