// The status page's script (admin/status_page.hpp says what the page shows and which element ids
// the tests read). Served inline in the page, so it must never hold a closing script tag.
//
// Values reach the page through textContent and SVG attributes only (never innerHTML), so a
// business name, a problem text or a job's payload cannot inject markup.
// The script keeps its own style (double quotes), which clang-format would change:
// clang-format off
"use strict";
const REFRESH_MS = 2000, KEEP_MS = 10 * 60 * 1000, SVG = "http://www.w3.org/2000/svg";
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? { "Authorization": "Bearer " + token } : {};
const samples = [];  // {t, delivered, accepted}: the rates' history, this page's memory only
let polls = 0;
// What the token grants, from /whoami: "admin", "read" or "open"; null until known. With "read",
// <body> has the class read-only, which hides every element of class "write" (status.css).
let access = null;

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
  // Partitions the groups assigned here, per topic read: an idle instance shows 0 of each.
  const parts = s.partitions || {};
  const spread = Object.keys(parts).sort().map((t) => t + " " + parts[t]).join(", ");
  setText("shards-owned", "(" + owned.length + " owned here" + (spread ? "; partitions here: " + spread : "") + ")");
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

async function whoami() {
  try {
    access = (await getJson("/whoami")).access;
  } catch (e) {
    access = null;
  }
  document.body.classList.toggle("read-only", access === "read");
  setText("access", access ? "access: " + access : "");
}

async function loop() {
  if (access === null) await whoami();
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

// --- What the Jobs and the Dead letters views share: a filter read from a form, a paged table
// over a GET list, and an action on a whole filter (dry run, confirm, the operation's progress).

// The non-empty fields of a form, trimmed, under their parameter names: fields is [name, id] pairs.
function formFilter(fields) {
  const f = {};
  for (const [name, id] of fields) {
    const v = $(id).value.trim();
    if (v) f[name] = v;
  }
  return f;
}

async function send(method, path, body) {
  const init = {method, headers: Object.assign({}, headers), cache: "no-store"};
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const r = await fetch(path, init);
  let json = null;
  try {
    json = await r.json();
  } catch (e) {
    json = null;
  }
  return {status: r.status, body: json};
}

const answered = (r) => r.status >= 200 && r.status < 300 && r.body !== null;
const refusal = (r) => r.status + " " + (r.body && r.body.error ? r.body.error : "");

// A table row: each cell is a node (put in the cell as it is) or [text, class].
function row(id, cells) {
  const tr = document.createElement("tr");
  tr.id = id;
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell instanceof Node) {
      td.appendChild(cell);
    } else {
      td.textContent = cell[0];
      if (cell[1]) td.className = cell[1];
    }
    tr.appendChild(td);
  }
  return tr;
}

// A job-id that opens the job's drawer (and brings it into view, from the Dead letters view).
function jobLink(id) {
  const open = document.createElement("button");
  open.type = "button";
  open.className = "link";
  open.textContent = id;
  open.addEventListener("click", () => {
    openJob(id);
    $("job-drawer").scrollIntoView({block: "nearest"});
  });
  return open;
}

// A paged table over GET o.path with the filter o.filter() as its parameters, 50 rows a page:
// o.list names the answer's array, o.row makes an element's row, the answer's "next" is the
// cursor of the page after. Returns load(more): load(false) starts again (after o.onReset()),
// load(true) appends the next page. o.table, o.more and o.note are element ids.
function pagedTable(o) {
  let cursor = null;
  return async (more) => {
    const q = new URLSearchParams(o.filter());
    q.set("limit", "50");
    if (more && cursor) q.set("cursor", cursor);
    if (!more) {
      $(o.table).replaceChildren();
      o.onReset();
    }
    const r = await send("GET", o.path + "?" + q.toString());
    if (r.status !== 200 || !r.body) {
      setText(o.note, "GET " + o.path + ": " + refusal(r));
      return;
    }
    for (const item of r.body[o.list] || []) $(o.table).appendChild(o.row(item));
    cursor = r.body.next || null;
    $(o.more).hidden = !cursor;
    const shown = $(o.table).children.length;
    setText(
        o.note,
        shown + " shown" + (cursor ? ", more to page through" : ", the end of the walk") +
            (r.body.partial ? " (a rare match: pages come short)" : "") + "; not a snapshot");
  };
}

// An action on a whole filter: o.dry POSTs o.body(true) to o.path and shows what it would do
// (o.would(the dry run's answer)); then o.run, after a confirm() (o.question(matched)), POSTs
// o.body(false) and follows GET /operations/{id} every second to its end, the operation's status
// in o.result's data-status. Returns reset(), for a new filter: no count, the run disabled, no
// result.
function operationFlow(o) {
  let matched = null;
  const result = $(o.result);
  $(o.dry).addEventListener("click", async () => {
    const r = await send("POST", o.path, o.body(true));
    if (!answered(r)) {
      setText(o.result, "dry run: " + refusal(r));
      return;
    }
    matched = r.body.matched;
    setText(
        o.result,
        "dry run: " + o.would(r.body) +
            (r.body.complete === false ? " (at least: the count stopped)" : ""));
    $(o.run).disabled = false;
  });
  $(o.run).addEventListener("click", async () => {
    if (matched === null || !confirm(o.question(matched))) return;
    const about = matched;
    $(o.run).disabled = true;
    const r = await send("POST", o.path, o.body(false));
    if (!answered(r) || r.body.operation === undefined) {
      setText(o.result, "run: " + refusal(r));
      return;
    }
    const id = r.body.operation;
    const follow = async () => {
      const op = await send("GET", "/operations/" + encodeURIComponent(id));
      if (op.status !== 200 || !op.body) {
        setText(o.result, "operation " + id + ": GET /operations: " + refusal(op));
        return;
      }
      const b = op.body;
      setText(
          o.result,
          "operation " + id + ": " + b.status + ", done " + fmt(b.done) + " of about " + fmt(about) + ", skipped " +
              JSON.stringify(b.skipped || {}) + ", failed " + fmt(b.failed));
      result.dataset.status = b.status || "";
      if (b.status === "running" || b.status === "stopping") setTimeout(follow, 1000);
    };
    follow();
  });
  return () => {
    matched = null;
    $(o.run).disabled = true;
    setText(o.result, "");
    delete result.dataset.status;
  };
}

// --- The Jobs view: GET /jobs with the form's filter, a page at a time; a job's drawer with its
// record (GET /jobs/{id}) and the actions on it; a bulk action on the filter, dry run first.
let drawerId = null;

// The filter of the form, as GET /jobs's parameters (and a bulk action's filter).
const jobsFilter = () => formFilter([
  ["id_prefix", "jobs-search"], ["state", "jobs-state"], ["business", "jobs-business"],
  ["due_from", "jobs-due-from"], ["due_to", "jobs-due-to"], ["error", "jobs-error"]]);

const jobRow = (j) => row("job-row-" + j.job_id, [
  jobLink(j.job_id), [j.business, ""], [j.state, "state"], [j.deliver_at_iso, ""], [fmt(j.attempt), "n"],
  [j.error || "", "muted"]]);

async function openJob(id) {
  drawerId = id;
  $("job-drawer").hidden = false;
  setText("drawer-id", id);
  setText("act-result", "");
  const r = await send("GET", "/jobs/" + encodeURIComponent(id));
  $("drawer-record").textContent = r.status + "\n" + JSON.stringify(r.body, null, 2);
  const b = r.body || {};
  setText(
      "drawer-lateness",
      b.ready_at && b.deliver_at ? "delivered " + (b.ready_at - b.deliver_at) + " ms after its time" : "");
}

// An action on the open job, after the operator confirmed it; the verdict, then the job again.
async function act(name, method, path, body) {
  if (!drawerId || !confirm(name + " job " + drawerId + "?")) return;
  const r = await send(method, path, body);
  setText("act-result", name + ": " + r.status + " " + JSON.stringify(r.body));
  await openJob(drawerId).catch(() => {});
  setText("act-result", name + ": " + r.status + " " + JSON.stringify(r.body));
}

const jobPath = (suffix) => "/jobs/" + encodeURIComponent(drawerId) + suffix;
$("act-cancel").addEventListener("click", () => act("cancel", "DELETE", jobPath("")));
$("act-run-now").addEventListener("click", () => act("run now", "POST", jobPath("/run-now")));
$("act-retry").addEventListener("click", () => act("retry", "POST", jobPath("/retry")));
$("act-reschedule").addEventListener("click", () => {
  const v = $("act-at").value.trim();
  act("reschedule", "POST", jobPath("/reschedule"), {deliver_at: /^[0-9]+$/.test(v) ? Number(v) : v});
});

const resetBulk = operationFlow({
  path: "/jobs/bulk", dry: "bulk-dry", run: "bulk-run", result: "bulk-result",
  body: (dryRun) => ({
    action: $("bulk-action").value,
    filter: jobsFilter(),
    dry_run: dryRun,
    rate_per_s: Number($("bulk-rate").value) || 500
  }),
  would: (b) => fmt(b.matched) + " jobs would be acted on",
  question: (n) => $("bulk-action").value + " " + n + " jobs?"
});

const loadJobs = pagedTable({
  path: "/jobs", list: "jobs", filter: jobsFilter, row: jobRow,
  table: "jobs-table", more: "jobs-more", note: "jobs-note", onReset: resetBulk
});

$("jobs-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  loadJobs(false);
});
$("jobs-more").addEventListener("click", () => loadJobs(true));

// --- The Dead letters view: GET /dead-letters with the form's filter, a page at a time; a
// redrive of the filter's dead letters (POST /dead-letters/redrive), dry run first.

// The filter of the form, as GET /dead-letters's parameters (and a redrive's filter).
const deadLettersFilter = () => formFilter([
  ["reason", "dl-reason"], ["business", "dl-business"], ["since", "dl-since"], ["until", "dl-until"]]);

function deadLetterRow(d) {
  const s = d.source;
  return row("dl-row-" + d.partition + "-" + d.offset, [
    [typeof d.at === "number" && d.at >= 0 ? new Date(d.at).toISOString() : "", ""], [d.reason || "", "reason"],
    [d.error || "", "error"], d.job_id ? jobLink(d.job_id) : ["", ""], [d.business || "", ""],
    [s ? s.topic + " [" + s.partition + "] @" + s.offset : "", "muted"],
    [fmt(d.size) + " B" + (d.value_kept === false ? ", value not kept" : ""), "n"], [fmt(d.redrive_count), "n"]]);
}

const resetRedrive = operationFlow({
  path: "/dead-letters/redrive", dry: "dl-dry", run: "dl-run", result: "dl-result",
  body: (dryRun) => ({
    filter: deadLettersFilter(),
    dry_run: dryRun,
    rate_per_s: Number($("dl-rate").value) || 500
  }),
  would: (b) => {
    // matched counts the dead letters a redrive would skip (would_skip, by reason) too.
    const skip = b.would_skip || {};
    const skipped = Object.values(skip).reduce((a, n) => a + n, 0);
    const n = b.matched - skipped;
    return fmt(n) + (n === 1 ? " dead letter would be redriven" : " dead letters would be redriven") +
        (skipped ? ", " + fmt(skipped) + " would be skipped " + JSON.stringify(skip) : "");
  },
  question: (n) => "redrive " + n + " dead letters?"
});

const loadDeadLetters = pagedTable({
  path: "/dead-letters", list: "dead_letters", filter: deadLettersFilter, row: deadLetterRow,
  table: "dl-table", more: "dl-more", note: "dl-note", onReset: resetRedrive
});

$("dl-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  loadDeadLetters(false);
});
$("dl-more").addEventListener("click", () => loadDeadLetters(true));

loop();
