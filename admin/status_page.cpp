#include "admin/status_page.hpp"

namespace delayd::admin {

namespace {

// Values reach the page through textContent and SVG attributes only (never innerHTML), so a
// business name, a problem text or a job's payload cannot inject markup.
constexpr std::string_view kHtml = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>delayd status</title>
<style>
:root { --fg: #1d2330; --muted: #6a7282; --line: #dde1e8; --card: #ffffff; --bg: #f3f5f8;
        --accent: #2f6fdf; --accent2: #e0892b; --ok: #1f8a4c; --bad: #c0392b; }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 20px; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: var(--fg); background: var(--bg); }
header { display: flex; align-items: baseline; gap: 16px; margin-bottom: 10px; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 0 0 8px; }
.muted { color: var(--muted); }
#banner { padding: 9px 14px; border-radius: 6px; margin-bottom: 12px; font-weight: 600; }
#banner.ok { background: #e3f4ea; color: var(--ok); }
#banner.bad { background: #fbe5e2; color: var(--bad); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); gap: 10px; margin-bottom: 12px; }
.card, .panel { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; white-space: nowrap;
               overflow: hidden; text-overflow: ellipsis; }
.card .value.small { font-size: 13px; padding-top: 4px; white-space: normal; word-break: break-all; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; margin-bottom: 12px; }
@media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--line); }
td.n, th.n { text-align: right; }
.scroll { max-height: 210px; overflow-y: auto; }
svg { width: 100%; display: block; }
svg text { font: 10px system-ui, "DejaVu Sans", sans-serif; fill: var(--muted); }
svg .count { fill: var(--fg); }
svg .bar { fill: var(--accent); }
svg .bar.late { fill: var(--accent2); }
svg .axis { stroke: var(--line); }
svg .line { fill: none; stroke: var(--accent); stroke-width: 2; }
svg .line.accepted { stroke: var(--accent2); stroke-dasharray: 4 3; }
form { display: flex; gap: 8px; margin-bottom: 8px; }
input { flex: 1; padding: 6px 8px; border: 1px solid var(--line); border-radius: 4px; font: inherit; }
button { padding: 6px 14px; border: 0; border-radius: 4px; background: var(--accent); color: #fff; font: inherit; cursor: pointer; }
pre { margin: 0; padding: 8px; background: #f7f8fa; border-radius: 4px; max-height: 220px; overflow: auto;
      white-space: pre-wrap; word-break: break-all; font-size: 12px; }
.legend span { margin-right: 12px; }
.sw { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; vertical-align: -1px; }
</style>
</head>
<body>
<header>
  <h1>delayd</h1>
  <span class="muted">updated <span id="updated">never</span>, <span id="polls">0</span> refreshes</span>
  <span class="muted" id="fetch-error"></span>
</header>
<div id="banner" class="ok"><span id="problem">loading&hellip;</span></div>

<div class="cards">
  <div class="card"><div class="label">held in memory</div><div class="value" id="held">-</div></div>
  <div class="card"><div class="label">in the wheel</div><div class="value" id="in_wheel">-</div></div>
  <div class="card"><div class="label">in flight</div><div class="value" id="in_flight">-</div></div>
  <div class="card"><div class="label">pending in Redis</div><div class="value" id="pending">-</div></div>
  <div class="card"><div class="label">accepted</div><div class="value" id="accepted">-</div></div>
  <div class="card"><div class="label">delivered</div><div class="value" id="delivered">-</div></div>
  <div class="card"><div class="label">delivered / s</div><div class="value" id="delivered-rate">-</div></div>
  <div class="card"><div class="label">next due</div><div class="value small" id="next_due">-</div></div>
</div>

<div class="grid">
  <div class="panel">
    <h2>Due in the next minutes and hours (all shards)</h2>
    <svg id="due-chart" viewBox="0 0 600 200" role="img" aria-label="due timeline"></svg>
  </div>
  <div class="panel">
    <h2>Delivered and accepted per second, last 10 minutes</h2>
    <svg id="rate-chart" viewBox="0 0 600 200" role="img" aria-label="throughput"></svg>
    <div class="legend muted"><span><i class="sw" style="background:var(--accent)"></i>delivered</span>
      <span><i class="sw" style="background:var(--accent2)"></i>accepted</span>
      <span id="rate-window"></span></div>
  </div>
</div>

<div class="grid">
  <div class="panel">
    <h2>Lateness (produce time - deliver_at), <span id="lateness-count">0</span> deliveries, by bucket upper bound</h2>
    <svg id="lateness-chart" viewBox="0 0 600 200" role="img" aria-label="lateness histogram"></svg>
  </div>
  <div class="panel">
    <h2>Pending per business</h2>
    <div class="scroll"><table><thead><tr><th>business</th><th class="n">pending</th></tr></thead>
      <tbody id="business-table"></tbody></table></div>
    <h2 style="margin-top:12px">Pending per shard <span class="muted" id="shards-owned"></span></h2>
    <div class="scroll"><table><thead><tr><th>shard</th><th class="n">pending</th><th>owned here</th></tr></thead>
      <tbody id="shard-table"></tbody></table></div>
  </div>
</div>

<div class="grid">
  <div class="panel">
    <h2>Counters since start</h2>
    <table><tbody id="counter-table"></tbody></table>
  </div>
  <div class="panel">
    <h2>Look a job up</h2>
    <form id="job-form"><input id="job-id" placeholder="job id" autocomplete="off"><button type="submit">Look up</button></form>
    <pre id="job-result" class="muted">a job's record, as GET /jobs/{id} returns it</pre>
  </div>
</div>

<script>
"use strict";
const REFRESH_MS = 2000, KEEP_MS = 10 * 60 * 1000, SVG = "http://www.w3.org/2000/svg";
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? { "Authorization": "Bearer " + token } : {};
const samples = [];  // {t, delivered, accepted}: the rates' history, this page's memory only
let polls = 0;

const $ = (id) => document.getElementById(id);
const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "-");
function setText(id, text) { const e = $(id); if (e) e.textContent = text; }

async function getJson(path) {
  const r = await fetch(path, { headers, cache: "no-store" });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (r.status === 401) throw new Error("401: open this page as /#token=<admin.token>");
  if (!r.ok) throw new Error(path + ": " + r.status + (body && body.error ? " " + body.error : ""));
  return body;
}

function svgEl(parent, tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}

// Vertical bars with a label under each and the count above it; count i gets id idPrefix + i.
function bars(svg, labels, counts, idPrefix, barClass) {
  svg.replaceChildren();
  const W = 600, H = 200, top = 16, bottom = 24, n = counts.length;
  const max = Math.max(1, ...counts), slot = W / n, h = H - top - bottom;
  svgEl(svg, "line", { x1: 0, x2: W, y1: H - bottom, y2: H - bottom, class: "axis" });
  counts.forEach((c, i) => {
    const bh = c > 0 ? Math.max(1, (c / max) * h) : 0;
    svgEl(svg, "rect", { x: i * slot + slot * 0.12, y: H - bottom - bh, width: slot * 0.76, height: bh, class: barClass });
    svgEl(svg, "text", { x: i * slot + slot / 2, y: H - bottom - bh - 4, "text-anchor": "middle", class: "count", id: idPrefix + i }, fmt(c));
    svgEl(svg, "text", { x: i * slot + slot / 2, y: H - 8, "text-anchor": "middle" }, labels[i]);
  });
}

function seconds(s) {
  if (s < 1) return (s * 1000) + "ms";
  return s + "s";
}

function drawLateness(l) {
  if (!l) return;
  const labels = l.counts.map((_, i) => i < l.bounds_s.length ? seconds(l.bounds_s[i]) : ">" + seconds(l.bounds_s[l.bounds_s.length - 1]));
  bars($("lateness-chart"), labels, l.counts, "lateness-", "bar late");
  setText("lateness-count", fmt(l.count));
}

function drawRates() {
  const svg = $("rate-chart");
  svg.replaceChildren();
  const W = 600, H = 200, top = 14, bottom = 22, left = 44;
  const rates = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i], dt = (b.t - a.t) / 1000;
    if (dt > 0) rates.push({ t: b.t, d: (b.delivered - a.delivered) / dt, a: (b.accepted - a.accepted) / dt });
  }
  const now = samples.length ? samples[samples.length - 1].t : Date.now();
  const max = Math.max(1, ...rates.map((r) => Math.max(r.d, r.a)));
  const x = (t) => left + ((t - (now - KEEP_MS)) / KEEP_MS) * (W - left - 4);
  const y = (v) => H - bottom - (v / max) * (H - top - bottom);
  svgEl(svg, "line", { x1: left, x2: W, y1: H - bottom, y2: H - bottom, class: "axis" });
  svgEl(svg, "line", { x1: left, x2: W, y1: top, y2: top, class: "axis" });
  svgEl(svg, "text", { x: left - 4, y: top + 4, "text-anchor": "end" }, fmt(Math.round(max)));
  svgEl(svg, "text", { x: left - 4, y: H - bottom + 4, "text-anchor": "end" }, "0");
  svgEl(svg, "text", { x: left, y: H - 6 }, "-10 min");
  svgEl(svg, "text", { x: W - 4, y: H - 6, "text-anchor": "end" }, "now");
  if (rates.length) {
    svgEl(svg, "polyline", { class: "line accepted", points: rates.map((r) => x(r.t).toFixed(1) + "," + y(r.a).toFixed(1)).join(" ") });
    svgEl(svg, "polyline", { class: "line", points: rates.map((r) => x(r.t).toFixed(1) + "," + y(r.d).toFixed(1)).join(" ") });
    setText("delivered-rate", fmt(Math.round(rates[rates.length - 1].d * 10) / 10));
  }
  setText("rate-window", rates.length + " samples");
}

function fillTable(tbodyId, rows, idPrefix) {
  const tbody = $(tbodyId);
  tbody.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    row.forEach((cell, i) => {
      const td = document.createElement("td");
      if (typeof cell === "number") { td.className = "n"; if (i === 1 && idPrefix) td.id = idPrefix + row[0]; }
      td.textContent = typeof cell === "number" ? fmt(cell) : cell;
      tr.appendChild(td);
    });
    tbody.appendChild(tr);
  }
  if (!rows.length) {
    const tr = document.createElement("tr"), td = document.createElement("td");
    td.colSpan = 3; td.className = "muted"; td.textContent = "none";
    tr.appendChild(td); tbody.appendChild(tr);
  }
}

let owned = [];

function showStats(s) {
  setText("held", fmt(s.held));
  setText("in_wheel", fmt(s.in_wheel));
  setText("in_flight", fmt(s.in_flight));
  setText("next_due", s.next_due_iso || "none");
  const c = s.counters || {};
  setText("accepted", fmt(c.accepted));
  setText("delivered", fmt(c.delivered));
  fillTable("counter-table", Object.keys(c).sort().map((k) => [k, c[k]]), "counter-");
  owned = s.shards || [];
  setText("shards-owned", "(" + owned.length + " owned here)");
  const banner = $("banner");
  if (!s.alive) { banner.className = "bad"; setText("problem", "the scheduling loop is not turning (starting up, or stuck)"); }
  else if (s.problem) { banner.className = "bad"; setText("problem", "problem: " + s.problem); }
  else { banner.className = "ok"; setText("problem", "all well"); }
  drawLateness(s.lateness);
  const t = Date.now();
  const last = samples[samples.length - 1];
  if (last && ((c.delivered || 0) < last.delivered || (c.accepted || 0) < last.accepted)) samples.length = 0;  // restarted
  samples.push({ t, delivered: c.delivered || 0, accepted: c.accepted || 0 });
  while (samples.length && samples[0].t < t - KEEP_MS) samples.shift();
  drawRates();
}

function showOverview(o) {
  setText("pending", fmt(o.pending));
  fillTable("business-table", Object.keys(o.pending_by_business).sort().map((b) => [b, o.pending_by_business[b]]), "business-");
  fillTable("shard-table", Object.keys(o.pending_by_shard).sort().map((k) => [k, o.pending_by_shard[k], owned.includes(k) ? "yes" : ""]), "shard-");
  const short = (w) => w.replace(/ min/g, "m").replace(/ h/g, "h").replace(/ /g, "");
  bars($("due-chart"), o.due.map((w) => short(w.window)), o.due.map((w) => w.count), "due-", "bar");
}

async function refresh() {
  const errors = [];
  const [stats, overview] = await Promise.allSettled([getJson("/stats"), getJson("/overview")]);
  if (stats.status === "fulfilled") showStats(stats.value); else errors.push(stats.reason.message);
  if (overview.status === "fulfilled") showOverview(overview.value); else errors.push(overview.reason.message);
  if (stats.status === "fulfilled" && overview.status === "fulfilled") setText("polls", String(++polls));
  if (stats.status !== "fulfilled") { $("banner").className = "bad"; setText("problem", "cannot read /stats: " + stats.reason.message); }
  setText("fetch-error", errors.join("; "));
  setText("updated", new Date().toLocaleTimeString("en-GB"));
}

async function loop() {
  try { await refresh(); } catch (e) { setText("fetch-error", String(e)); }
  setTimeout(loop, REFRESH_MS);
}

$("job-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const id = $("job-id").value.trim();
  const out = $("job-result");
  if (!id) return;
  out.className = "";
  out.textContent = "looking up " + id + "\u2026";
  try {
    const r = await fetch("/jobs/" + encodeURIComponent(id), { headers, cache: "no-store" });
    const text = await r.text();
    let shown = text;
    try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON: as it came */ }
    out.textContent = r.status + "\n" + shown;
  } catch (e) {
    out.textContent = String(e);
  }
});

loop();
</script>
</body>
</html>
)html";

// Only this origin's JSON may be fetched; scripts and styles are the inline ones above.
constexpr std::string_view kCsp =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace

std::string_view status_page_html() { return kHtml; }

std::string_view status_page_csp() { return kCsp; }

}  // namespace delayd::admin
