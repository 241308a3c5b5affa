// tlcap dashboard. One WebSocket (/api/v1/live) brings the overview of every target and, on
// a target's page, its areas (the changed rows, a full table now and then); see docs/http.md.
// Rates (events/s, net time per second, calls per second) are differences of successive
// cumulative values. After a daemon restart the page reconnects with backoff and says so.
"use strict";

const $ = (id) => document.getElementById(id);
const HISTORY = 300; // chart points kept (one per live message)
const SPARK = 60; // sparkline points

const S = {
  ws: null,
  backoff: 500,
  page: null, // null: overview; else the target's name
  startMs: null, // daemon start seen on this connection's first message
  restarts: 0,
  updates: 0,
  prevTargets: new Map(), // name -> {t, events}
  spark: new Map(), // name -> [events/s]
  rows: new Map(), // area id -> row
  prevRows: new Map(), // area id -> {t, net, count}
  chosen: new Set(), // area ids charted
  series: [], // [[Date, v1, v2, ...]] for the chosen ids (in chosenOrder)
  chosenOrder: [],
  sortKey: "net",
  sortDir: -1,
  chart: null,
  ctx: null, // the context shown (null: not chosen yet: Neutral, or the only one)
  contexts: [], // the target's contexts, as the select lists them
  autoChosen: false, // the top areas were ticked for this page and context
  windows: [], // the rolling windows' lengths (ns), one column each
  tokenRefused: false, // tlcapd refused the token the page sent
};

function fmtInt(v) {
  return v === null || v === undefined ? "" : Number(v).toLocaleString("en-US");
}
function fmtBytes(v) {
  if (v === null || v === undefined) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + u[i];
}
function fmtNs(v) {
  if (v === null || v === undefined) return "";
  if (v < 1e3) return v + " ns";
  if (v < 1e6) return (v / 1e3).toFixed(2) + " µs";
  if (v < 1e9) return (v / 1e6).toFixed(2) + " ms";
  return (v / 1e9).toFixed(3) + " s";
}
function td(text, cls, key) {
  const c = document.createElement("td");
  c.textContent = text;
  if (cls) c.className = cls;
  if (key) c.dataset.k = key;
  return c;
}
function setStatus(state, text) {
  const s = $("status");
  s.dataset.state = state;
  s.dataset.restarts = String(S.restarts);
  s.textContent = text;
}

// ---- connection ----

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(proto + "//" + location.host + "/api/v1/live", "tlcap-live");
  S.ws = ws;
  S.startMs = null;
  let sentToken = false;
  ws.onopen = () => {
    S.backoff = 500;
    const t = sessionStorage.getItem("tlcap-token"); // asked once, kept for the tab
    if (t) { ws.send("token " + t); sentToken = true; }
    subscribe();
  };
  ws.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (m.type === "auth") { // tlcapd has a token file (SPEC 8): ask for it once
      if (sentToken) return; // ours is on its way; a wrong one closes the socket
      const t = window.prompt(S.tokenRefused
        ? "tlcapd refused that token. Enter its access token:"
        : "tlcapd asks for its access token:");
      if (!t) {
        setStatus("refused", S.tokenRefused ? "tlcapd refused the token: reload to try again"
                                            : "a token is needed to see this tlcapd");
        return;
      }
      sessionStorage.setItem("tlcap-token", t);
      ws.send("token " + t);
      sentToken = true;
      subscribe();
      return;
    }
    onLive(m);
  };
  ws.onclose = (ev) => {
    S.ws = null;
    if (ev.code === 1008 && ev.reason === "bad token") { // say so, then ask again
      sessionStorage.removeItem("tlcap-token");
      S.tokenRefused = true;
      setStatus("refused", "tlcapd refused the token");
      setTimeout(connect, 500);
      return;
    }
    const wait = S.backoff;
    S.backoff = Math.min(S.backoff * 2, 5000);
    setStatus("reconnecting", "disconnected from tlcapd: reconnecting in " +
              (wait / 1000).toFixed(1) + " s");
    setTimeout(connect, wait);
  };
  ws.onerror = () => {}; // onclose follows and reconnects
}

function subscribe() {
  if (S.ws && S.ws.readyState === WebSocket.OPEN)
    S.ws.send(S.page === null ? "overview" : "target " + S.page);
}

let knownStart = null;

function onLive(m) {
  S.updates++;
  document.body.dataset.updates = String(S.updates);
  const d = m.daemon;
  if (knownStart !== null && d.start_unix_ms !== knownStart) {
    S.restarts++;
    // statistics restarted with the daemon: the rates start over
    S.prevTargets.clear();
    S.prevRows.clear();
  }
  const restarted = S.restarts > 0;
  knownStart = d.start_unix_ms;
  setStatus(restarted ? "restarted" : "live",
            restarted ? "live (reconnected: tlcapd restarted at " +
                        new Date(d.start_unix_ms).toLocaleTimeString() + ")" : "live");
  let txt = "tlcapd " + d.version + " · subscribers " + d.subscribers + " · dashboards " +
            d.websockets;
  if (d.store) txt += " · store queue " + fmtBytes(d.store.queue_bytes) + " · stored " +
                      fmtBytes(d.store.on_disk_bytes) + " in " + d.store.on_disk_segments +
                      " segments" + (d.store.disk_full ? " · DISK FULL" : "");
  if (d.disk_free !== null) txt += " · disk free " + fmtBytes(d.disk_free);
  $("daemon").textContent = txt;
  renderTargets(m.t, m.targets);
  if (m.areas && S.page !== null && m.areas.target === S.page) renderAreas(m.t, m.areas);
}

// ---- overview ----

function sparkSvg(vals) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 " + SPARK + " 20");
  svg.setAttribute("preserveAspectRatio", "none");
  const max = Math.max(1, ...vals);
  const pts = vals.map((v, i) => (SPARK - vals.length + i) + "," + (19 - 18 * v / max).toFixed(1));
  const pl = document.createElementNS(ns, "polyline");
  pl.setAttribute("points", pts.join(" "));
  svg.appendChild(pl);
  return svg;
}

// One card per target: its state, the event rate now and over the last minute (sparkline),
// what went wrong (gaps, resyncs, clock resets, bytes skipped, drops), what is on disk of it
// (sealed and open segments: the same figures the header adds up), and a slot for its
// budgets that stays empty until the daemon reports some.
function fig(label, value, key, bad, title) {
  const d = document.createElement("div");
  d.className = "fig" + (bad ? " bad" : "");
  if (title) d.title = title;
  const l = document.createElement("span");
  l.className = "label";
  l.textContent = label;
  const v = document.createElement("span");
  v.className = "value";
  v.dataset.k = key;
  v.textContent = value;
  d.append(l, v);
  return d;
}

function targetCard(t, x) {
  const prev = S.prevTargets.get(x.name);
  let rate = 0, brate = 0;
  if (prev && t > prev.t) {
    rate = Math.max(0, (x.events - prev.events) * 1000 / (t - prev.t));
    brate = Math.max(0, (x.bytes - prev.bytes) * 1000 / (t - prev.t));
  }
  S.prevTargets.set(x.name, { t: t, events: x.events, bytes: x.bytes });
  const sp = S.spark.get(x.name) || [];
  if (prev) sp.push(rate);
  while (sp.length > SPARK) sp.shift();
  S.spark.set(x.name, sp);

  const card = document.createElement("article");
  card.className = "card" + (x.state === "connected" ? "" : " down");
  card.dataset.target = x.name;
  const h = document.createElement("h3");
  const a = document.createElement("a");
  a.href = "#/target/" + encodeURIComponent(x.name);
  a.textContent = x.name;
  const st = document.createElement("span");
  st.className = "badge state-" + x.state;
  st.dataset.k = "state";
  st.textContent = x.state === "connected" ? "connected" : "down";
  h.append(a, " ", st);
  const peer = document.createElement("div");
  peer.className = "peer";
  peer.textContent = x.format + (x.peer ? " · " + x.peer : "");
  const load = document.createElement("div");
  load.className = "load";
  load.title = "events per second, the last " + SPARK + " updates";
  const rv = document.createElement("span");
  rv.className = "rate";
  rv.dataset.k = "rate";
  rv.textContent = fmtInt(Math.round(rate));
  const unit = document.createElement("span");
  unit.className = "unit";
  unit.textContent = "events/s · " + fmtBytes(Math.round(brate)) + "/s";
  load.append(sparkSvg(sp), rv, unit);

  const figs = document.createElement("div");
  figs.className = "figs";
  const s = x.storage;
  figs.append(
    fig("events", fmtInt(x.events), "events"),
    fig("received", fmtBytes(x.bytes), "bytes"),
    fig("gaps", fmtInt(x.gaps), "gaps", false, "gaps the statistics closed at"),
    fig("resets", fmtInt(x.clock_resets || 0), "resets", false, "clock restarts (board resets)"),
    fig("resyncs", fmtInt(x.resyncs), "resyncs", x.resyncs > 0),
    fig("skipped", fmtBytes(x.skipped), "skipped", x.skipped > 0, "bytes skipped by the decoder"),
    fig("drops", fmtInt(x.drops), "drops", x.drops > 0, "events dropped at the area limit"),
    fig("anomalies", fmtInt(x.anomalies), "anomalies"),
    fig("stored", s ? fmtBytes(s.disk_bytes) : "off", "stored", false,
        "its segments on disk, sealed and open"),
    fig("segments", s ? fmtInt(s.disk_segments) : "", "segments"),
    fig("store drops", s ? fmtInt(s.dropped) : "", "store-drops", s && s.dropped > 0),
    fig("subscribers", fmtInt(x.subscribers), "subscribers"));
  card.append(h, peer, load, figs);
  // budgets: filled when the daemon reports them for this target (docs/http.md)
  const bd = document.createElement("div");
  bd.className = "budgets";
  bd.dataset.k = "budgets";
  if (Array.isArray(x.budgets) && x.budgets.length > 0) {
    for (const b of x.budgets) {
      const e = document.createElement("span");
      e.className = "budget" + (b.violated ? " bad" : "");
      e.textContent = (b.name || "budget") + (b.violated ? ": violated" : ": ok");
      bd.appendChild(e);
    }
  } else {
    bd.hidden = true;
  }
  card.appendChild(bd);
  return card;
}

function renderTargets(t, targets) {
  const frag = document.createDocumentFragment();
  for (const x of targets) frag.appendChild(targetCard(t, x));
  $("cards").replaceChildren(frag);
  $("no-targets").hidden = targets.length > 0;
  if (S.page !== null) {
    const me = targets.find((x) => x.name === S.page);
    $("tstate").textContent = me ? "(" + (me.state === "connected" ? "connected" : "down") +
                                   ", " + fmtInt(me.events) + " events)" : "(unknown target)";
  }
}

// ---- a target's areas ----

function rowId(r) {
  return r.handle + "/" + r.context + "/" + r.state;
}
function areaName(r) {
  return r.name || r.handle;
}

function renderAreas(t, a) {
  if (a.missing) {
    S.rows.clear();
  } else {
    if (a.full) S.rows.clear();
    // rows come as arrays in the order of a.cols (the names are sent once per message)
    for (const arr of a.rows) {
      const r = {};
      a.cols.forEach((c, i) => { r[c] = arr[i]; });
      S.rows.set(rowId(r), r);
    }
  }
  updateContexts();
  if (!S.autoChosen && a.full && S.rows.size > 0) autoChoose();
  // chart: a point per message, for every charted area (rates from cumulative values)
  const point = [new Date(t)];
  for (const id of S.chosenOrder) {
    const r = S.rows.get(id);
    const prev = S.prevRows.get(id);
    let v = null;
    if (r && prev && t > prev.t) {
      v = $("metric").value === "calls"
        ? (r.count - prev.count) * 1000 / (t - prev.t)
        : ((r.net || 0) - (prev.net || 0)) / 1e6 * 1000 / (t - prev.t);
      if (v < 0) v = null;
    }
    point.push(v);
  }
  for (const [id, r] of S.rows) S.prevRows.set(id, { t: t, net: r.net, count: r.count });
  if (S.chosenOrder.length > 0) {
    S.series.push(point);
    while (S.series.length > HISTORY) S.series.shift();
    drawChart();
  }
  setWindows(a.windows_ns || []);
  drawTable();
}

// The contexts of the target's code rows: Neutral first (the areas over all contexts), then
// each core, task or thread. One is shown at a time; data and state areas are in every view.
function updateContexts() {
  const seen = new Set();
  for (const r of S.rows.values()) if (r.kind === "code") seen.add(r.context);
  const list = [...seen].sort((x, y) => (x === "Neutral" ? -1 : y === "Neutral" ? 1 :
                                         x.localeCompare(y, "en", { numeric: true })));
  if (list.join("\n") !== S.contexts.join("\n")) {
    S.contexts = list;
    const sel = $("ctx");
    sel.replaceChildren(...list.map((c) => {
      const o = document.createElement("option");
      o.value = c;
      o.textContent = c === "Neutral" ? "all (Neutral)" : c;
      return o;
    }));
  }
  if (S.ctx === null || !list.includes(S.ctx)) S.ctx = list.length ? list[0] : null;
  $("ctx").value = S.ctx === null ? "" : S.ctx;
  $("ctx").disabled = list.length < 2;
}

function inView(r) {
  return r.kind !== "code" || r.context === S.ctx;
}

// The page opens on a chart with data: the areas with the most net time in the context shown
// are ticked once (the user's own ticks are kept after that).
function autoChoose() {
  S.autoChosen = true;
  if (S.chosen.size > 0) return;
  const top = [...S.rows].filter(([, r]) => r.kind === "code" && inView(r) && r.net > 0)
    .sort((x, y) => y[1].net - x[1].net).slice(0, 3);
  for (const [id] of top) S.chosen.add(id);
  S.chosenOrder = [...S.chosen];
  S.series = [];
}

function setWindows(ws) {
  if (ws.join(",") === S.windows.join(",")) return;
  S.windows = ws;
  const tr = $("areas").tHead.rows[0];
  for (const th of [...tr.querySelectorAll("th.win")]) th.remove();
  ws.forEach((w) => {
    const th = document.createElement("th");
    th.className = "n win";
    th.textContent = "last " + (w / 1e9) + " s";
    th.title = "events, and net time below, in the last " + (w / 1e9) + " s";
    tr.appendChild(th);
  });
}

function drawTable() {
  const q = $("filter").value.trim().toLowerCase();
  const rows = [];
  for (const [id, r] of S.rows) {
    if (!inView(r)) continue;
    if (q && !(areaName(r) + " " + r.handle).toLowerCase().includes(q)) continue;
    rows.push([id, r]);
  }
  const k = S.sortKey, dir = S.sortDir;
  rows.sort((x, y) => {
    let a = k === "name" ? areaName(x[1]) : x[1][k];
    let b = k === "name" ? areaName(y[1]) : y[1][k];
    if (a === null || a === undefined) a = k === "name" || k === "context" ? "" : -1;
    if (b === null || b === undefined) b = k === "name" || k === "context" ? "" : -1;
    return (a < b ? -1 : a > b ? 1 : 0) * dir;
  });
  const frag = document.createDocumentFragment();
  for (const [id, r] of rows) {
    const tr = document.createElement("tr");
    tr.dataset.id = id;
    tr.dataset.name = areaName(r);
    const cb = document.createElement("input");
    cb.type = "checkbox";
    cb.checked = S.chosen.has(id);
    cb.addEventListener("change", () => choose(id, cb.checked));
    const c0 = td("");
    c0.appendChild(cb);
    tr.appendChild(c0);
    // a state row's name is "VARIABLE = VALUE NAME" (the server composes it)
    tr.appendChild(td(r.kind === "state" ? r.name : areaName(r), null, "name"));
    tr.appendChild(td(fmtInt(r.count), "n", "count"));
    for (const key of ["net", "gross", "call", "avg_net", "avg_gross", "avg_call", "max_net",
                       "p99_net"]) {
      const wide = key === "gross" || key === "call" || key === "avg_gross" || key === "avg_call";
      tr.appendChild(td(fmtNs(r[key]), wide ? "n wide" : "n", key));
    }
    S.windows.forEach((_, i) => { // count over net time, on two lines: narrow columns
      const w = r.w[i];
      const c = td("", "n win", "w" + i);
      if (w) {
        const a = document.createElement("div"), b = document.createElement("div");
        a.textContent = fmtInt(w[0]);
        b.textContent = r.kind === "data" ? "" : fmtNs(w[1]);
        c.append(a, b);
      }
      tr.appendChild(c);
    });
    frag.appendChild(tr);
  }
  $("areas").tBodies[0].replaceChildren(frag);
  $("rowcount").textContent = rows.length + " of " + S.rows.size + " rows";
}

function choose(id, on) {
  if (on) S.chosen.add(id); else S.chosen.delete(id);
  S.chosenOrder = [...S.chosen];
  S.series = []; // the columns changed: start the chart afresh
  drawChart();
}

function drawChart() {
  const labels = ["time"].concat(S.chosenOrder.map((id) => {
    const r = S.rows.get(id);
    return r ? areaName(r) : id;
  }));
  $("chart-hint").hidden = S.chosenOrder.length > 0;
  if (S.chosenOrder.length === 0 || S.series.length === 0) {
    if (S.chart) { S.chart.destroy(); S.chart = null; }
    return;
  }
  const opts = {
    labels: labels,
    ylabel: $("metric").value === "calls" ? "calls / s" : "net ms / s",
    legend: "always",
    labelsDiv: $("legend"), // under the chart, never over the curves
    xAxisHeight: 24,
    axes: { x: { axisLabelWidth: 70, pixelsPerLabel: 110, axisLabelFormatter: (d) => d.toTimeString().slice(0, 8),
                 valueFormatter: (ms) => new Date(ms).toTimeString().slice(0, 8) } },
    connectSeparatedPoints: false,
  };
  if (S.chart && S.chart.getLabels().length === labels.length) {
    S.chart.updateOptions(Object.assign({ file: S.series }, opts));
  } else {
    if (S.chart) S.chart.destroy();
    S.chart = new Dygraph($("chart"), S.series, opts);
  }
}

// ---- pages ----

function route() {
  const m = location.hash.match(/^#\/target\/(.+)$/);
  const page = m ? decodeURIComponent(m[1]) : null;
  if (page !== S.page) {
    S.page = page;
    S.rows.clear();
    S.prevRows.clear();
    S.chosen.clear();
    S.chosenOrder = [];
    S.series = [];
    S.ctx = null;
    S.contexts = [];
    S.autoChosen = false;
    drawChart();
  }
  $("overview").hidden = page !== null;
  $("target").hidden = page === null;
  $("tname").textContent = page || "";
  drawTable();
  subscribe();
}

for (const th of document.querySelectorAll("th[data-sort]")) {
  th.addEventListener("click", () => {
    const k = th.dataset.sort;
    S.sortDir = S.sortKey === k ? -S.sortDir : (k === "name" || k === "context" ? 1 : -1);
    S.sortKey = k;
    for (const o of document.querySelectorAll("th[data-sort]")) o.classList.remove("asc", "desc");
    th.classList.add(S.sortDir > 0 ? "asc" : "desc");
    drawTable();
  });
}
$("filter").addEventListener("input", drawTable);
$("ctx").addEventListener("change", () => {
  S.ctx = $("ctx").value;
  S.chosen.clear(); // the chart follows the context: its top areas there
  S.chosenOrder = [];
  S.autoChosen = false;
  autoChoose();
  drawChart();
  drawTable();
});
$("metric").addEventListener("change", () => { S.series = []; drawChart(); });
window.addEventListener("hashchange", route);
route();
connect();
