/* The console's only script: charts (uPlot) from the JSON the server put in the page, live
   charts fed by htmx's refreshes, and the copy button. No inline script anywhere (the CSP
   allows only this file and the vendored libraries). */
(function () {
  "use strict";

  const HISTORY = 200; // points kept per live chart

  function css(name, fallback) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  function palette() {
    return [css("--c1", "#2563eb"), css("--c2", "#dc2626"), css("--c3", "#059669"),
            css("--c4", "#d97706"), css("--c5", "#7c3aed"), css("--c6", "#0891b2")];
  }

  function axes() {
    const stroke = css("--muted", "#666");
    const grid = { stroke: css("--grid", "rgba(127,127,127,0.2)"), width: 1 };
    return [
      { stroke: stroke, grid: grid, ticks: grid },
      { stroke: stroke, grid: grid, ticks: grid, size: 60 },
    ];
  }

  function make(el, series, data, opts) {
    if (el._uplot) { el._uplot.destroy(); }
    const colors = palette();
    const width = Math.max(el.clientWidth || 300, 240);
    const u = new uPlot(Object.assign({
      width: width,
      height: 200,
      series: [{}].concat(series.map(function (s, i) {
        return Object.assign({ stroke: colors[i % colors.length], width: 2, points: { show: false } }, s);
      })),
      axes: axes(),
      legend: { live: true },
    }, opts || {}), data, el);
    el._uplot = u;
    return u;
  }

  function read(node) {
    try { return JSON.parse(node.dataset.json || node.textContent); } catch (e) { return null; }
  }

  /* --- a key's usage ------------------------------------------------------------------- */

  function usageCharts(root) {
    const source = root.querySelector ? root.querySelector("#usage-data") : null;
    if (!source || source._done) { return; }
    source._done = true;
    const d = read(source);
    const start = Date.parse(d.start) / 1000;
    const end = Date.parse(d.end) / 1000;
    const byStart = {};
    d.rows.forEach(function (r) { byStart[Date.parse(r[0]) / 1000] = r; });
    // Every bucket of the range, zeros where nothing was used (the API lists buckets with use).
    const xs = [], cols = d.columns.map(function () { return []; });
    for (let t = start; t < end; t += d.step) {
      xs.push(t);
      const row = byStart[t];
      cols.forEach(function (c, i) { c.push(row ? row[i + 1] : 0); });
    }
    const col = function (name) { return cols[d.columns.indexOf(name)]; };
    const bars = uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.8, 40] }) : undefined;
    root.querySelectorAll('[data-chart="usage"]').forEach(function (el) {
      const kind = el.dataset.usage;
      if (kind === "requests") {
        make(el, [{ label: "requests", paths: bars, fill: css("--c1-fill", "rgba(37,99,235,0.35)") },
                  { label: "errors", paths: bars, fill: css("--c2-fill", "rgba(220,38,38,0.5)") }],
             [xs, col("requests"), col("errors")]);
      } else if (kind === "tokens") {
        make(el, [{ label: "tokens in" }, { label: "tokens out" }],
             [xs, col("prompt_tokens"), col("completion_tokens")]);
      } else if (kind === "cost") {
        const money = function (v) { return v == null ? "\u2013" : v.toFixed(6); };
        const ax = axes();
        ax[1].values = function (u, vals) { return vals.map(money); };
        ax[1].size = 80;
        make(el, [{ label: "cost", value: function (u, v) { return money(v); } }],
             [xs, col("cost_micros").map(function (v) { return v / 1e6; })], { axes: ax });
      }
    });
  }

  /* --- live charts: in flight by upstream, a drill's requests/s by upstream -------------- */

  const live = { xs: [], series: {} };
  const traffic = {}; // drill id -> { last: {at, totals}, xs: [], series: {} }

  function push(store, t, values) {
    store.xs.push(t);
    Object.keys(values).forEach(function (name) {
      if (!store.series[name]) { store.series[name] = store.xs.slice(0, -1).map(function () { return null; }); }
    });
    Object.keys(store.series).forEach(function (name) {
      store.series[name].push(name in values ? values[name] : null);
    });
    if (store.xs.length > HISTORY) {
      store.xs.shift();
      Object.keys(store.series).forEach(function (name) { store.series[name].shift(); });
    }
  }

  function draw(el, store, label) {
    if (!el) { return; }
    const names = Object.keys(store.series).sort();
    make(el, names.map(function (n) { return { label: n }; }),
         [store.xs.slice()].concat(names.map(function (n) { return store.series[n].slice(); })),
         { scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } } });
    el.dataset.points = String(store.xs.length);
    el.dataset.label = label;
  }

  function liveReading(root) {
    root.querySelectorAll(".live-reading").forEach(function (node) {
      if (node._done) { return; }
      node._done = true;
      const r = read(node);
      if (!r) { return; }
      const values = {};
      r.members.forEach(function (m) { values[m.series] = m.value; });
      push(live, Date.parse(r.at) / 1000, values);
      draw(document.querySelector('[data-chart="live"]'), live, "in flight");
    });
  }

  function trafficReadings(root) {
    root.querySelectorAll(".traffic-reading").forEach(function (node) {
      if (node._done) { return; }
      node._done = true;
      const r = read(node);
      if (!r) { return; }
      const id = node.dataset.drill;
      const store = traffic[id] || (traffic[id] = { last: null, xs: [], series: {} });
      const at = Date.parse(r.at) / 1000;
      const totals = {};
      r.upstreams.forEach(function (u) {
        const name = u.route + "/" + u.pool + "/" + u.upstream;
        totals[name] = Object.values(u.requests).reduce(function (a, b) { return a + b; }, 0);
      });
      if (store.last && at > store.last.at) {
        const dt = at - store.last.at, rates = {};
        Object.keys(totals).forEach(function (name) {
          const before = store.last.totals[name] || 0;
          rates[name] = Math.max(0, totals[name] - before) / dt;
        });
        push(store, at, rates);
      }
      store.last = { at: at, totals: totals };
      const chart = node.parentNode.querySelector('[data-chart="traffic"][data-drill="' + id + '"]');
      draw(chart, store, "requests/s");
      node.parentNode.querySelectorAll('.rate-now').forEach(function (cell) {
        const s = store.series[cell.dataset.series];
        const v = s && s.length ? s[s.length - 1] : null;
        cell.textContent = v == null ? "…" : v.toFixed(1);
        cell.dataset.value = v == null ? "" : String(v);
      });
    });
  }

  /* --- copy a secret ---------------------------------------------------------------------- */

  function copyButtons(root) {
    root.querySelectorAll("button.copy").forEach(function (button) {
      if (button._bound) { return; }
      button._bound = true;
      button.addEventListener("click", function () {
        const target = document.querySelector(button.dataset.copy);
        const status = button.parentNode.querySelector(".copied");
        const text = target.textContent.trim();
        const done = function () { if (status) { status.textContent = "Copied."; } };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done, function () { select(target); });
        } else {
          select(target);
          try { document.execCommand("copy"); done(); } catch (e) { /* selected for the person */ }
        }
      });
    });
  }

  function select(node) {
    const range = document.createRange();
    range.selectNodeContents(node);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  function init(root) {
    usageCharts(root);
    liveReading(root);
    trafficReadings(root);
    copyButtons(root);
  }

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:afterSettle", function () { init(document); });
  let resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      document.querySelectorAll(".chart").forEach(function (el) {
        if (el._uplot) { el._uplot.setSize({ width: Math.max(el.clientWidth, 240), height: 200 }); }
      });
    }, 150);
  });
})();
