// torchmark report: draws the page from the JSON in #report-data; plots are drawn when
// they scroll into view, so a store of hundreds of cases opens at once.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const app = document.getElementById("app");
  const seriesById = new Map(data.series.map((s) => [s.id, s]));
  const whyOf = new Map();  // a change's index -> its explanations' lines
  for (const e of data.explanations || []) {
    if (!whyOf.has(e.change)) whyOf.set(e.change, []);
    whyOf.get(e.change).push(e.lines);
  }
  const UNITS = [[1e-9, "ns"], [1e-6, "us"], [1e-3, "ms"], [1, "s"]];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) node.setAttribute(k, v);
    }
    for (const c of children) node.append(c instanceof Node ? c : String(c));
    return node;
  }
  function scaleFor(unit, values) {
    if (unit !== "s") return [1, unit];
    const finite = values.filter((v) => v !== null && isFinite(v));
    const m = finite.length ? Math.min(...finite) : 1;
    let best = UNITS[0];
    for (const u of UNITS) if (m >= u[0]) best = u;
    return best;
  }
  function fmt(x, unit) {
    if (x === null || x === undefined || !isFinite(x)) return "-";
    const [scale, name] = scaleFor(unit, [x]);
    const v = x / scale;
    return (Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en") : v.toPrecision(4)) +
      " " + name;
  }
  function pct(ratio) {
    return ratio === null ? "-" : (ratio >= 1 ? "+" : "") + ((ratio - 1) * 100).toFixed(1) + "%";
  }
  // plotly reads a few HTML tags in its texts: stored names (from anyone's files) are
  // escaped before they reach a plot
  function esc(text) {
    return String(text ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function when(iso) { return iso ? String(iso).slice(0, 19).replace("T", " ") : ""; }
  function table(header, rows, numeric) {
    const head = el("tr", {}, ...header.map((h) => el("th", {}, h)));
    const body = rows.map((r) => {
      const tr = el("tr", r.attrs || {});
      r.cells.forEach((c, i) => tr.append(
        el("td", { class: (numeric.includes(i) ? "num " : "") + (r.classes?.[i] || "") }, c)));
      return tr;
    });
    return el("div", { class: "scroll" }, el("table", {}, el("thead", {}, head),
      el("tbody", {}, ...body)));
  }
  const CONFIG = { displaylogo: false, responsive: true };
  function section(id, title) {
    const node = el("section", { id }, el("h2", {}, title));
    app.append(node);
    return node;
  }

  // -- runs ------------------------------------------------------------------------
  section("runs", `Runs (${data.runs.length})`).append(data.runs.length ? table(
    ["run", "started (UTC)", "status", "command", "commit", "torch", "machine", "env",
      "results"],
    data.runs.map((r) => ({ cells: [r.id, when(r.started), r.status, r.command,
      (r.commit || "").slice(0, 10) + (r.dirty ? "+" : ""), r.torch || "", r.machine || "",
      r.env || "", r.results] })), [0, 8]) : el("p", { class: "empty" }, "no runs"));

  // -- regressions -----------------------------------------------------------------
  section("regressions", `Regressions and improvements (${data.changes.length})`).append(
    data.changes.length ? table(
    ["case", "metric", "change", "95% CI of ratio", "last good", "first bad", "commit",
      "torch", "machine", "recovered", "mark", "why"],
    data.changes.map((c, i) => ({
      attrs: { class: c.kind + (c.mark === "dismissed" ? " marked" : "") },
      classes: { 2: "change" },
      cells: [seriesById.has(c.series) ? el("a", { href: "#" + c.series, class: "to-case" },
        c.case) : c.case, c.metric,
        pct(c.ratio), c.low === null ? "-" : `[${c.low.toFixed(3)}, ${c.high.toFixed(3)}]`,
        "run " + c.last_good, "run " + c.first_bad, c.commit, c.torch, c.machine || "",
        c.recovered ? "run " + c.recovered : "no", c.mark ? c.mark + (c.note ? ": " + c.note : "") : "",
        whyOf.has(i) ? el("a", { href: "#why-" + i }, "why") : ""],
    })), [2]) : el("p", { class: "empty" }, "no change detected"));

  // -- where each regression lives (rootcause/explain.py) ----------------------------
  const why = section("why", `Why: where each regression lives (${whyOf.size})`);
  if (!whyOf.size) {
    why.append(el("p", { class: "empty" }, "no regression holds per-function counts or " +
      "kernel lists on both of its runs (`torchmark explain --collect` counts a statement " +
      "at two commits)"));
  }
  for (const [i, texts] of whyOf) {
    const c = data.changes[i];
    texts.forEach((lines, k) => {
      why.append(el("details", { id: k === 0 ? "why-" + i : null, open: "" },
        el("summary", {}, `${c.case} [${c.metric}] ${pct(c.ratio)}: run ${c.last_good} ` +
          `against run ${c.first_bad}`),
        el("pre", { class: "why" }, lines.join("\n"))));
    });
  }

  // -- A/B of two runs -------------------------------------------------------------
  const abSection = section("ab", "A/B: two runs");
  if (data.ab && data.ab.rows.length) {
    abSection.append(el("p", {}, `candidate run ${data.ab.candidate} / baseline run ` +
      `${data.ab.baseline}: each case's ratio with its interval and verdict, as ` +
      "`torchmark serve` compares two runs, the largest change first" +
      (data.ab.total > data.ab.rows.length ? ` (the ${data.ab.rows.length} largest of ` +
        `${data.ab.total} cases)` : "")));
    if (data.ab.rows.some((r) => r.ratio !== null)) {
      abSection.append(el("div", { class: "plot tall", id: "ab-plot", "data-kind": "ab" }));
    }
    const unplotted = data.ab.rows.filter((r) => r.ratio === null);  // no ratio to draw
    if (unplotted.length) {
      abSection.append(el("p", { class: "unplotted" }, `Not drawn (no ratio): ` +
        unplotted.map((r) => `${r.case} [${r.metric}] ${r.verdict}`).join("; ")));
    }
  } else {
    abSection.append(el("p", { class: "empty" }, "no two of the 20 newest runs hold a case in common (--ab names two)"));
  }

  // -- one run's raw samples -------------------------------------------------------
  const distSection = section("distributions", "Raw samples of one run");
  if (data.distributions && data.distributions.cases.length) {
    distSection.append(el("p", {}, `run ${data.distributions.run}: each case's raw samples ` +
      "relative to its median (hover for the values)"));
    distSection.append(el("div", { class: "plot tall", id: "dist-plot", "data-kind": "dist" }));
  } else {
    distSection.append(el("p", { class: "empty" }, "no raw samples"));
  }

  // -- cases -------------------------------------------------------------------------
  const drawn = data.drawn || { series: data.series.length, series_drawn: data.series.length,
    points_cut: 0 };
  const casesSection = section("cases", `Cases (${drawn.series} series)`);
  if (drawn.series_drawn < drawn.series || drawn.points_cut) {
    casesSection.append(el("p", { class: "summarised" },
      `Drawn: ${drawn.series_drawn} of ${drawn.series} series (those with a detected ` +
      `change first), each in ${drawn.max_points} points at most ` +
      `(${drawn.points_cut} series longer: their runs drawn in buckets, each the median of ` +
      "its runs, change points kept as their own runs). Changes were detected over every " +
      "series and every run; `torchmark history CASE` shows any series whole."));
  }
  for (const s of data.series) {
    casesSection.append(el("div", { class: "case", id: s.id },
      el("h3", {}, s.title),
      el("div", { class: "meta" }, `${s.metric} - machine ${s.machine || "?"} - env ` +
        `${s.env || "-"} - ${s.runs} runs${s.reduced ? ` drawn as ${s.points.length} buckets` : ""}` +
        ` - ${s.changes.length} change(s) - id ${s.case_id}`),
      s.environment_change ? el("div", { class: "env-change" },
        `A new series: ${s.environment_change}; runs before it are not compared with ` +
        "these.") : "",
      el("div", { class: "plot", "data-kind": "series", "data-series": s.id })));
  }

  // -- plots -------------------------------------------------------------------------
  function seriesPlot(div, s) {
    window.torchmarkHistoryPlot(div, { metric: s.metric, unit: s.unit, labels: s.labels }, [s]);
  }
  function abPlot(div) {
    const rows = data.ab.rows.filter((r) => r.ratio !== null);
    const colors = { slower: "#cf222e", faster: "#1a7f37", unsure: "#bf8700", unmeasured: "#8250df", failed: "#cf222e" };
    const label = (r, i) => `${i + 1}. ${esc(r.case)} [${esc(r.metric)}]`;
    const labels = rows.map(label);
    // a trace a verdict: an error bar takes one colour, not a list (it drew them black)
    const traces = [...new Set(rows.map((r) => r.verdict))].map((verdict) => {
      const mine = rows.map((r, i) => [r, i]).filter(([r]) => r.verdict === verdict);
      const color = colors[verdict] || "#57606a";
      return {
        type: "scatter", mode: "markers", orientation: "h", name: verdict,
        x: mine.map(([r]) => r.ratio), y: mine.map(([r, i]) => labels[i]),
        marker: { color, size: 8 },
        error_x: { type: "data", symmetric: false, color,
          array: mine.map(([r]) => (r.high === null ? 0 : r.high - r.ratio)),
          arrayminus: mine.map(([r]) => (r.low === null ? 0 : r.ratio - r.low)) },
        text: mine.map(([r]) => `${esc(r.case)}<br>ratio ${r.ratio.toFixed(3)} ${pct(r.ratio)}` +
          `<br>${r.verdict}`),
        hoverinfo: "text",
      };
    });
    Plotly.newPlot(div, traces, {
      margin: { l: 260, r: 10, t: 10, b: 40 }, xaxis: { title: { text: "candidate / baseline" } },
      yaxis: { automargin: true, autorange: "reversed", categoryorder: "array", categoryarray: labels },
      shapes: [{ type: "line", x0: 1, x1: 1, yref: "paper", y0: 0, y1: 1, line: { dash: "dot" } }],
    }, CONFIG);
  }
  function distPlot(div) {
    window.torchmarkSamplesPlot(div, data.distributions.cases);
  }
  function draw(div) {
    if (div.dataset.drawn) return;
    div.dataset.drawn = "1";
    const kind = div.dataset.kind;
    if (kind === "series") seriesPlot(div, seriesById.get(div.dataset.series));
    else if (kind === "ab") abPlot(div);
    else if (kind === "dist") distPlot(div);
  }
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) if (e.isIntersecting) { observer.unobserve(e.target); draw(e.target); }
  }, { rootMargin: "300px" });
  document.querySelectorAll(".plot").forEach((div) => observer.observe(div));

  // a link to a case (from the regressions list) draws its plot and marks the section
  function showTarget() {
    document.querySelectorAll(".case.target").forEach((n) => n.classList.remove("target"));
    const id = decodeURIComponent(location.hash.slice(1));
    const section = id && document.getElementById(id);
    if (section && section.classList.contains("case")) {
      section.classList.add("target");
      draw(section.querySelector(".plot"));
      section.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", showTarget);
  showTarget();
  document.body.dataset.ready = "1";
})();
