// torchmark's dashboard: draws the page whose data the server embedded (report/views.py),
// with plotly.js served by the same server. Nothing is fetched from another host.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const kind = document.body.dataset.kind;
  const app = document.getElementById("app");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat(Infinity)) {
      if (c !== null && c !== undefined && c !== "") node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }
  function link(href, text) { return el("a", { href }, text); }
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
    const s = q.toString();
    return s ? "?" + s : "";
  }
  const value = window.torchmarkHistoryPlot.shown;
  function pct(ratio) {
    if (ratio === null || ratio === undefined) return "-";
    const change = (ratio - 1) * 100;  // signed both ways, as the CLI's tables print it
    return `${change > 0 ? "+" : ""}${change.toFixed(1)}%`;
  }
  function table(header, rows, opts) {
    const head = el("tr", {}, header.map((h, i) => el("th", {
      class: opts && opts.sortable ? "sortable" : null,
      onclick: opts && opts.sortable ? () => sortBy(i) : null }, h)));
    const body = el("tbody", {}, rows);
    const t = el("table", { class: opts && opts.cls }, el("thead", {}, head), body);
    const order = {};
    function sortBy(i) {
      order[i] = !order[i];
      const sorted = Array.from(body.children).sort((a, b) => {
        const x = a.children[i].dataset.sort ?? a.children[i].textContent;
        const y = b.children[i].dataset.sort ?? b.children[i].textContent;
        const nx = Number(x), ny = Number(y);
        const c = isNaN(nx) || isNaN(ny) ? x.localeCompare(y) : nx - ny;
        return order[i] ? c : -c;
      });
      body.replaceChildren(...sorted);
    }
    return t;
  }
  function td(content, sort, cls) {
    return el("td", { "data-sort": sort === undefined ? null : String(sort), class: cls || null }, content);
  }
  function filters(fields, values, kept) {
    // empty fields left out of the address (a pasted link holds only the filters set);
    // `kept`: parameters the form does not show, carried as they are
    const dropEmpty = (e) => { for (const f of e.target.elements) if (f.name && !f.value) f.disabled = true; };
    return el("form", { class: "filters", method: "get", onsubmit: dropEmpty },
      fields.map(([name, label, options]) => el("label", {}, label, options
        ? el("select", { name }, el("option", { value: "" }, "any"),
          options.map((o) => el("option", { value: o, selected: values[name] === o }, o)))
        : el("input", { name, value: values[name] ?? "" }))),
      Object.entries(kept || {}).map(([name, v]) => el("input", { type: "hidden", name, value: v ?? "" })),
      el("button", { type: "submit" }, "Filter"));
  }
  // what the detection could not judge, as `torchmark regressions` says it
  function checkedNote(c) {
    const parts = [];
    if (c.short) parts.push(`${c.short} of the ${c.series} series have under ${c.min_runs} runs, too few to tell a change`);
    if (c.left_out_runs) parts.push(`${c.left_out_runs} run${c.left_out_runs === 1 ? "" : "s"} of fewer than 3 samples left out`);
    return parts.length ? el("p", { class: "note" }, parts.join("; ") + ".") : "";
  }
  function pager(page, perPage, total, params) {
    const last = Math.max(1, Math.ceil(total / perPage));
    return el("p", { class: "pager" },
      page > 1 ? link(query({ ...params, page: page - 1 }), "previous") : "",
      el("span", {}, `page ${page} of ${last} (${total})`),
      page < last ? link(query({ ...params, page: page + 1 }), "next") : "");
  }

  // one of Compare's tables (report/views.py compare_tables)
  function compareTable(t) {
    const width = t.columns.length + 1;
    const rows = [];
    for (const r of t.rows) {
      if (r.threads !== null) rows.push(el("tr", {}, el("th", { colspan: width, class: "group" }, `${r.threads} thread${r.threads === 1 ? "" : "s"}`)));
      rows.push(el("tr", {}, el("th", {}, (r.env ? r.env + " " : "") + r.name),
        r.cells.map((c) => c === null ? el("td") : el("td", { class: `num${c.grade ? " grade-" + c.grade : ""}` },
          c.case_id ? link(`/cases/${encodeURIComponent(c.case_id)}`, c.text) : c.text))));
    }
    return el("div", { class: "compare" },
      el("table", { class: "compare" }, el("caption", {}, t.label),
        el("thead", {}, el("tr", {}, el("th"), t.columns.map((c) => el("th", {}, c)))),
        el("tbody", {}, rows)),
      el("p", { class: "note" }, t.note));
  }

  const pages = {
    runs() {
      app.append(filters([["machine", "machine"], ["env", "env"], ["commit", "commit"],
        ["command", "command"], ["since", "since"], ["until", "until"]], data.filters),
      data.runs.length ? "" : el("p", {}, "No run matches."),
      table(["run", "started (UTC)", "command", "commit", "torch", "machine", "env", "results", "status"],
        data.runs.map((r) => el("tr", {}, td(link(`/runs/${r.id}`, r.id), r.id),
          td(r.started.slice(0, 19).replace("T", " ")), td(r.command),
          td((r.commit || "").slice(0, 10) + (r.dirty ? "+" : ""), undefined, null),
          td(r.torch || ""), td(r.machine || ""), td(r.env || ""), td(r.results, r.results, "num"),
          td(r.status)))),
      pager(data.page, data.per_page, data.total, { ...data.filters, per_page: data.per_page }));
    },
    run() {
      const r = data.run;
      app.append(el("p", {}, `${r.command || ""}`, el("br"),
        `commit ${r.commit || "-"} ${r.subject ? "(" + r.subject + ")" : ""} - torch ${r.torch || "-"} - machine ${r.machine || "-"} - env ${r.env || "-"}`,
        el("br"), `started ${(r.started || "").slice(0, 19).replace("T", " ")} UTC - status `,
        el("span", { class: r.status === "ok" ? "" : "failed" }, r.status || "?"),
        ` - ${r.results} results`,
        ...(r.resumed || []).flatMap((x) => [el("br"),
          `resumed ${x.at.slice(0, 19).replace("T", " ")} UTC: ${x.command}`])),
      r.status !== "ok" && r.status !== "running" && !r.results ? el("p", { class: "env-change" },
        `This run ended ${r.status} before it stored a result: the command's own output says why.`) : "",
      el("p", {}, data.previous !== null ? link(`/compare${query({ a: data.previous, b: r.id })}`,
        `compare with the run before on this machine and env (run ${data.previous})`) : "the first run on this machine and env"),
      el("h2", {}, "Results"),
      el("p", { class: "note" }, "This page's times as Compare lays them out (each cell a link to its case's history); every result of the page, failures and other metrics included, is in the table below them."),
      ...data.tables.map(compareTable),
      el("h2", {}, "Each result"),
      table(["case", "metric", "n", "median", "IQR", "warnings", "failure"],
        data.results.map((x) => el("tr", {}, td(link(`/cases/${encodeURIComponent(x.case_id)}`, x.case)),
          td(x.metric), td(x.n, x.n, "num"), td(value(x.median, x.unit), x.median, "num"),
          td(value(x.iqr, x.unit), x.iqr, "num"), td(x.warnings ? el("span", { title: x.warning_text.join("\n") }, `${x.warnings}: ${x.warning_text[0]}`) : "0", x.warnings), td(x.failure || ""))),
        { sortable: true }),
      pager(data.page, data.per_page, data.total, { per_page: data.per_page }));
      if (data.samples.length) {
        const div = el("div", { class: "plot", id: "samples" });
        app.append(el("h2", {}, "Raw samples"),
          el("p", { class: "note" }, "This page's results, each sample divided by its result's median (hover: the sample)."),
          div);
        window.torchmarkSamplesPlot(div, data.samples);
      }
      app.append(el("h2", {}, "Fingerprint"),
      table(["field", "value"], Object.entries(data.fingerprint).map(([k, v]) =>
        el("tr", {}, td(el("code", {}, k)), td(String(v))))),
      el("h2", {}, "Provenance"),
      table(["field", "value"], Object.entries(data.provenance).map(([k, v]) =>
        el("tr", {}, td(el("code", {}, k)), td(typeof v === "object" ? JSON.stringify(v) : String(v))))));
    },
    case() {
      const setup = data.setup && data.setup.trim() !== "pass" ? data.setup : "";
      app.append(el("p", { class: "note" }, `id ${data.case_id} - ${data.frontend}` +
        (data.threads ? ` - ${data.threads} thread${data.threads === 1 ? "" : "s"}` : "") +
        (data.device ? ` - ${data.device}` : ""),
        Object.keys(data.params).length ? ` - params ${JSON.stringify(data.params)}` : ""),
      data.stmt ? el("pre", { class: "stmt" }, (setup ? `# setup\n${setup}\n# timed\n` : "") + data.stmt) : "",
      data.series.length ? el("p", { class: "note", id: "picked" }, "Click two points to compare their runs.") : "",
      ...(data.failures.length ? [el("p", { class: "env-change" }, "This case has no measurement: each of its results failed. The newest:"),
        table(["run", "started (UTC)", "metric", "failure"], data.failures.map((f) => el("tr", {},
          td(link(`/runs/${f.run}`, f.run)), td(f.started.slice(0, 19).replace("T", " ")), td(f.metric), td(f.failure))))] : []));
      const picked = [];
      data.plots.forEach((plot, i) => {
        const series = plot.series.map((k) => data.series[k]);
        const div = el("div", { class: "plot", id: `plot-${i}` });
        const changes = series.flatMap((s) => s.changes.map((c) => [s, c]));
        app.append(el("h2", {}, `${plot.metric}` + (series.length > 1 ? ` - ${series.length} series` :
          ` - machine ${series[0].machine || "?"} - env ${series[0].env || "-"}`)),
          ...series.filter((s) => s.environment_change).map((s) => el("div", { class: "env-change" },
            `A new series on ${s.machine || "?"}: ${s.environment_change}`)),
          ...series.filter((s) => s.reduced).map((s) => el("p", { class: "note" }, `${s.machine || "?"}${s.env ? " / " + s.env : ""}: ${s.runs} runs drawn as ${s.points.length} buckets (each its runs' median; change points kept as their own runs)`)),
          div,
          changes.length ? table(["change", "machine", "env", "size", "interval", "last good", "first bad", "mark", ""],
            changes.map(([s, c]) => el("tr", { id: `change-${c.first_bad}` }, td(c.kind, undefined, c.kind),
              td(s.machine || "?"), td(s.env || "-"),
              td(pct(c.ratio)), td(`${pct(c.low)} .. ${pct(c.high)}`),
              td(link(`/runs/${c.last_good}`, c.last_good)), td(link(`/runs/${c.first_bad}`, c.first_bad)),
              td(c.mark ? `${c.mark}${c.note ? ": " + c.note : ""}` : "new"),
              td(link(`/compare${query({ a: c.last_good, b: c.first_bad })}`, "compare"))))) : "");
        window.torchmarkHistoryPlot(div, plot, series, (run) => {
          picked.push(run);
          const note = document.getElementById("picked");
          if (picked.length === 2) {
            const [a, b] = picked.splice(0, 2);
            note.replaceChildren("Compare ", link(`/compare${query({ a, b })}`, `run ${a} with run ${b}`));
          } else {
            note.textContent = `Picked run ${picked[0]}: click another point.`;
          }
        });
      });
    },
    regressions() {
      // the size filter as a percent, as it reads back (a fraction of 1 or more is refused
      // as ambiguous: 1.5 could be 1.5% or 150%)
      const f = { ...data.filters, min_size: data.filters.min_size ?
        `${+(data.filters.min_size * 100).toPrecision(6)}%` : "" };
      app.append(filters([["metric", "metric", ["wall", "device", "kernel", "batch", "instructions", "memory", "allocated", "compile"]],
        ["machine", "machine"], ["env", "env"], ["case", "case (id, title or a * pattern)"],
        ["state", "state", ["new", "confirmed", "not-confirmed", "dismissed", "acknowledged", "recovered"]],
        ["min_size", "size at least (10% or 0.1)"]], f, { since_commit: data.since_commit }),
      data.since_commit ? el("p", {}, `Only the regressions whose first bad run started after the first run of commit ${data.since_commit}.`) : "",
      el("p", { class: "note" }, `changes detected ${new Date(data.status.computed_at * 1000).toISOString().slice(0, 19).replace("T", " ")} UTC in ${data.status.scan_seconds.toFixed(1)} s${data.status.refreshing ? " (detecting again: the store changed)" : ""}`),
      data.regressions.length ? el("p", { class: "note" }, "change: the level after against the level " +
        "before, each the median of its runs in the series (up to the next change); compare: the last good and the first bad run alone.") : "",
      data.regressions.length ? table(["case", "metric", "before -> after", "change", "interval", "machine", "env", "first bad", "commit", "state", ""],
        data.regressions.map((r) => el("tr", {}, td(link(`/cases/${encodeURIComponent(r.case_id)}#change-${r.first_bad}`, r.case), r.case),
          td(r.metric), td(`${value(r.before, r.unit)} -> ${value(r.after, r.unit)}`, r.before, "num"),
          td(pct(r.ratio), r.ratio, "num regression"), td(`${pct(r.low)} .. ${pct(r.high)}`),
          td(r.machine || ""), td(r.env || "-"), td(link(`/runs/${r.first_bad}`, r.first_bad), r.first_bad), td(r.commit),
          td(r.state + (r.note ? `: ${r.note}` : "")),
          td([link(`/compare${query({ a: r.last_good, b: r.first_bad })}`, "compare"),
            data.writable ? (r.mark ? [" ", markButton(r, "reopened", "reopen")] :
              [" ", markButton(r, "acknowledged", "acknowledge"), " ", markButton(r, "dismissed", "dismiss")]) : ""]))),
        { sortable: true }) : el("p", {}, "No regression detected" + (data.status.checked.series ?
          ` among ${data.status.checked.series} series.` : ": the store holds no series yet.")),
      checkedNote(data.status.checked),
      pager(data.page, data.per_page, data.total, { ...f, since_commit: data.since_commit, per_page: data.per_page }));
    },
    compare() {
      // what the page was asked for, kept by its other pages and orders
      const asked = { a: data.baseline, b: data.candidate, threshold: data.threshold, per_page: data.per_page };
      const side = (name, runs, note) => [typeof name === "string" ? `${name}: ` : "",
        runs.length > 1 ? "runs " : "run ", ...runs.flatMap((id, i) => [i ? ", " : "", link(`/runs/${id}`, String(id))]),
        note ? ` (${note})` : ""];
      app.append(el("p", {}, "baseline ", ...side(data.baseline, data.baseline_runs, data.baseline_note),
        ", candidate ", ...side(data.candidate, data.candidate_runs, data.candidate_note),
        `; threshold ${(data.threshold * 100).toFixed(1)}%; ${data.total} cases in common, `,
        data.sort === "case" ? ["by case (", link(query({ ...asked, sort: "change" }), "the largest change first instead"), ")"]
          : ["the largest change first (", link(query({ ...asked, sort: "case" }), "by case instead"), ")"]),
      data.environment_differences.length ? el("div", { class: "env-change" },
        "The runs' environments differ in what changes performance: " + data.environment_differences.join("; ")) : "",
      table(["case", "metric", "baseline", "candidate", "change", "interval", "verdict", "why"],
        data.rows.map((r) => el("tr", {}, td(link(`/cases/${encodeURIComponent(r.case_id)}`, r.case), r.case),
          td(r.means ? `${r.metric} (means)` : r.metric), td(value(r.baseline, r.unit), r.baseline, "num"),
          td(value(r.candidate, r.unit), r.candidate, "num"), td(pct(r.ratio), r.ratio, "num"),
          td(`${pct(r.low)} .. ${pct(r.high)}`), td(r.verdict, undefined, r.verdict),
          td(el("span", { class: "note" }, r.reason)))), { sortable: true }),
      data.rows.some((r) => r.verdict === "unmeasured") ? el("p", { class: "note" },
        "unmeasured: these two runs alone do not hold enough samples to judge the case (the why column says what is missing); " +
        "a change the regressions feed shows is found across the case's whole history, many runs either side.") : "",
      pager(data.page, data.per_page, data.total, { ...asked, sort: data.sort }),
      data.explanations.length ? el("h2", {}, "Where the slower cases' changes live") : "",
      ...data.explanations.map((lines) => el("pre", {}, lines.join("\n"))),
      data.only_baseline ? el("p", { class: "note" }, `${data.only_baseline} case(s) only in the baseline`) : "",
      data.only_candidate ? el("p", { class: "note" }, `${data.only_candidate} case(s) only in the candidate`) : "");
    },
    search() {
      app.append(el("form", { method: "get" }, el("input", { name: "q", value: data.query, autofocus: true }),
        el("button", { type: "submit" }, "Search")),
      data.query ? table(["case", "frontend", "params"], data.cases.map((c) => el("tr", {},
        td(link(`/cases/${encodeURIComponent(c.case_id)}`, c.title)), td(c.frontend),
        td(el("code", {}, JSON.stringify(c.params)))))) : "",
      data.query && !data.cases.length ? el("p", {}, "No case matches" + (data.page > 1 ? " on this page." : ".")) : "",
      data.query && (data.page > 1 || data.more) ? el("p", { class: "pager" },
        data.page > 1 ? link(query({ q: data.query, per_page: data.per_page, page: data.page - 1 }), "previous") : "",
        el("span", {}, `page ${data.page}`),
        data.more ? link(query({ q: data.query, per_page: data.per_page, page: data.page + 1 }), "next") : "") : "",
      data.query ? "" : el("p", { class: "note" }, "Text a case's id, statement, label, " +
        "sub-label, description or parameters hold (any case, by id, a page at a time)."));
    },
  };

  function markButton(r, mark, label) {
    return el("button", { type: "button", onclick: async (event) => {
      const note = window.prompt(`Note for ${label} (${r.case})`, "") ;
      if (note === null) return;
      const response = await fetch("/api/v1/regressions/mark", { method: "POST",
        headers: { "Content-Type": "application/json" }, credentials: "same-origin",
        body: JSON.stringify({ key: r.key, mark, note }) });
      event.target.closest("td").previousSibling.textContent = response.ok
        ? `${mark}${note ? ": " + note : ""}` : `failed: ${(await response.json()).error}`;
    } }, label);
  }

  pages[kind]();
})();
