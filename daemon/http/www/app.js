// tlcap dashboard. One WebSocket (/api/v1/live) brings the overview of every target and, on
// a target's page, its areas (the changed rows, a full table now and then); see docs/http.md.
// Rates (events/s, net time per second, calls per second, load) are differences of successive
// cumulative values; the chart's past comes from history (/stats?since=&until=) and an area's
// detail from /stats and /histogram. After a daemon restart the page reconnects with backoff
// and says so.
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
  prevTargets: new Map(), // name -> {t, events, bytes, busy, time}
  spark: new Map(), // name -> [events/s]
  rows: new Map(), // area id -> row
  prevRows: new Map(), // area id -> {t, net, count}
  chosen: new Set(), // area ids charted
  series: [], // [[Date, v1, v2, ...]] for the chart's columns (chartCols), past then live
  chosenOrder: [],
  sortKey: "net",
  sortDir: -1,
  chart: null,
  ctx: null, // the context shown (null: not chosen yet: Neutral, or the only one)
  contexts: [], // the target's contexts, as the select lists them
  autoChosen: false, // the top areas were ticked for this page and context
  windows: [], // the rolling windows' lengths (ns), one column each
  tokenRefused: false, // tlcapd refused the token the page sent
  sentToken: false, // this socket was sent a token
  pastFor: null, // the page whose past was asked for
  colKey: "", // the chart's columns, as drawn
  prevCtxNet: null, // each context's net time at the previous message (load)
  prevLast: 0, // the target time of the previous message (load)
  past: [], // the chart's past from history: [{t: Date, rows: Map id -> {net, count, value}
  //           | null (no stored records), span: target ns, ctxNet: Map context -> net ns}]
  livePoints: 0, // chart points from live messages since the page opened
  detail: null, // the area whose detail is open (its row id), or null
  detailDoc: null, // its row in the target's statistics document
  detailHist: null, // its histogram (/api/v1/targets/NAME/histogram)
  detailMoment: null, // the extreme whose `tlcap around` command it shows (its ref)
  stores: null, // tlcapd stores (history, rollups: trend and compare), as its messages say
  trendKey: null, // the trend drawn or loading: page, range and areas
  trend: null, // [{id, url, doc}]: each charted area's /trend document
  trendChart: null,
  viol: new Map(), // target -> {doc (its /violations document, or null), at, busy}
  noViolations: false, // this tlcapd has no /violations path (no budgets served)
};
const PAST_STEPS = 30; // the chart's past: 30 ranges of history ...
const PAST_STEP_S = 10; // ... of 10 s each (the last 5 minutes)

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
function fmtRate(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString("en-US");
  return a >= 0.001 ? String(Number(v.toPrecision(3))) : v.toExponential(1);
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

// With a token file tlcapd sends {"type": "auth"} until the socket's first "token TOKEN". The
// page asks in the header (a form, never a dialog that comes back by itself): a refused token
// is said so there and waits for the user to type another.
function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(proto + "//" + location.host + "/api/v1/live", "tlcap-live");
  S.ws = ws;
  S.startMs = null;
  S.sentToken = false;
  ws.onopen = () => {
    S.backoff = 500;
    const t = sessionStorage.getItem("tlcap-token"); // asked once, kept for the tab
    if (t) { ws.send("token " + t); S.sentToken = true; }
    subscribe();
  };
  ws.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (m.type === "auth") { // tlcapd has a token file (SPEC 8)
      if (!S.sentToken) askToken();
      return;
    }
    $("token-form").hidden = true;
    S.tokenRefused = false;
    onLive(m);
  };
  ws.onclose = (ev) => {
    S.ws = null;
    if (ev.code === 1008 && ev.reason === "bad token") { // say so; ask when the socket is back
      sessionStorage.removeItem("tlcap-token");
      $("token-input").value = "";
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

function askToken() {
  const f = $("token-form");
  $("token-msg").textContent = S.tokenRefused
    ? "tlcapd refused that token: check it and enter it again"
    : "tlcapd asks for its access token";
  $("token-msg").className = S.tokenRefused ? "bad" : "";
  setStatus("refused", S.tokenRefused ? "tlcapd refused the token" : "a token is needed");
  if (f.hidden) {
    f.hidden = false;
    $("token-input").value = "";
    $("token-input").focus();
  }
}

$("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const t = $("token-input").value.trim();
  if (!t) return;
  sessionStorage.setItem("tlcap-token", t); // sent now, or when the socket is back
  if (!S.ws || S.ws.readyState !== WebSocket.OPEN) return;
  S.ws.send("token " + t);
  S.sentToken = true;
  $("token-msg").textContent = "checking…";
  $("token-msg").className = "";
  subscribe();
});

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
    S.noViolations = false; // another tlcapd: it may serve budgets
    S.viol.clear();
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
  if (S.stores !== !!d.store) {
    S.stores = !!d.store;
    S.trendKey = null;
  }
  $("trend-box").hidden = $("compare").hidden = !S.stores; // both from the rollups
  if (S.page !== null && S.pastFor !== S.page) {
    S.pastFor = S.page;
    if (d.store) loadPast(S.page);
    else $("past-note").textContent = "no history: tlcapd does not store";
  }
  renderTargets(m.t, m.targets);
  if (m.areas && S.page !== null && m.areas.target === S.page) renderAreas(m.t, m.areas);
  if (S.page !== null) wantViolations(S.page, false);
  else for (const x of m.targets) wantViolations(x.name, false);
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
// (sealed and open segments: the same figures the header adds up), its rollups' rebuild from
// those segments, and a slot for its budgets that stays empty until the daemon reports some.
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

// Its rollups (`rollups` of the live message, as /api/v1/targets has it; docs/rollups.md
// "Rebuilt from the segments"), said as `tlcap targets` says them: "off" (tlcapd keeps no
// rollups), "-" (no rebuild since the target was created), "rebuilding 12/40" (segments read
// of those to read), "rebuilt 40 at 18:32" (red when a segment could not be read: 38/40).
function rollupsFig(rb) {
  let text = "off", title = "tlcapd keeps no rollups (storage off, or rollup_bytes = 0)";
  let bad = false;
  if (rb && rb.rebuild === "rebuilding") {
    text = "rebuilding " + fmtInt(rb.segments_read) + "/" + fmtInt(rb.segments);
    title = "rebuilding its rollups from its stored segments: " + fmtInt(rb.segments_read) +
            " of " + fmtInt(rb.segments) + " read, " + fmtInt(rb.samples) + " samples so far";
  } else if (rb && rb.rebuild === "done") {
    const at = new Date(rb.done_unix_ms);
    bad = rb.segments_read < rb.segments;
    text = "rebuilt " + fmtInt(rb.segments_read) + (bad ? "/" + fmtInt(rb.segments) : "") +
           " at " + at.toTimeString().slice(0, 5);
    title = "its rollups rebuilt from " + fmtInt(rb.segments_read) + " of " +
            fmtInt(rb.segments) + " stored segments, " + fmtInt(rb.samples) + " samples, at " +
            at.toLocaleString() + (bad ? " (the log says which segments could not be read)" : "");
  } else if (rb) {
    text = "-";
    title = "its rollups were on disk: no rebuild since the target was created";
  }
  const f = fig("rollups", text, "rollups", bad, title);
  f.classList.add("rollups");
  return f;
}

function targetCard(t, x) {
  const prev = S.prevTargets.get(x.name);
  let rate = 0, brate = 0;
  if (prev && t > prev.t) {
    rate = Math.max(0, (x.events - prev.events) * 1000 / (t - prev.t));
    brate = Math.max(0, (x.bytes - prev.bytes) * 1000 / (t - prev.t));
  }
  // load: its code areas' net time over the target time that passed (100 %: one context
  // busy all the time; two busy cores: 200 %), as long as the target's clock moves
  let load = null;
  if (prev && x.busy_ns !== null && prev.busy !== null && x.target_time > prev.time &&
      x.busy_ns >= prev.busy)
    load = (x.busy_ns - prev.busy) * 100 / (x.target_time - prev.time);
  S.prevTargets.set(x.name, { t: t, events: x.events, bytes: x.bytes, busy: x.busy_ns,
                              time: x.target_time });
  const sp = S.spark.get(x.name) || [];
  if (prev) sp.push(rate);
  while (sp.length > SPARK) sp.shift();
  S.spark.set(x.name, sp);

  const card = document.createElement("article");
  card.className = "card" + (x.state === "connected" ? "" : " down");
  card.dataset.target = x.name;
  card.dataset.busy = String(x.busy_ns);
  card.dataset.time = String(x.target_time);
  if (prev) card.dataset.busyBefore = String(prev.busy); // what the load is measured from
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
  const row = document.createElement("div");
  row.className = "load";
  row.title = "events per second, the last " + SPARK + " updates";
  const rv = document.createElement("span");
  rv.className = "rate";
  rv.dataset.k = "rate";
  rv.textContent = fmtInt(Math.round(rate));
  const unit = document.createElement("span");
  unit.className = "unit";
  unit.textContent = "events/s · " + fmtBytes(Math.round(brate)) + "/s";
  const lv = document.createElement("span");
  lv.className = "rate";
  lv.dataset.k = "load";
  lv.title = "its code areas' net time over the target time that passed";
  lv.textContent = load === null ? "–" : (load < 10 ? load.toFixed(1) : Math.round(load)) + " %";
  const lu = document.createElement("span");
  lu.className = "unit";
  lu.textContent = "load";
  row.append(lu, lv, sparkSvg(sp), rv, unit);

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
    fig("subscribers", fmtInt(x.subscribers), "subscribers"),
    rollupsFig(x.rollups));
  card.append(h, peer, row, figs);
  // budgets: "budgets: K, violations: N" once its /violations document says it has some
  const bd = document.createElement("div");
  bd.className = "budgets";
  bd.dataset.k = "budgets";
  bd.hidden = true;
  card.appendChild(bd);
  budgetLine(card, x.name);
  return card;
}

function renderTargets(t, targets) {
  const frag = document.createDocumentFragment();
  for (const x of targets) frag.appendChild(targetCard(t, x));
  $("cards").replaceChildren(frag);
  $("no-targets").hidden = targets.length > 0;
  compareTargets(targets.map((x) => x.name));
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
  if (!S.autoChosen && a.full && S.rows.size > 0) {
    autoChoose();
    loadTrend();
    if (S.stores && $("compare").dataset.ready === undefined) loadCompare();
  }
  // chart: a point per message, for every charted area or context (rates from cumulative
  // values; a context's load from its areas' net time over the target time that passed)
  const cols = chartCols(), load = $("metric").value === "load";
  if (cols.join("\n") !== S.colKey) { // other columns: the past again, then live
    S.colKey = cols.join("\n");
    S.series = pastSeries();
    S.livePoints = 0;
  }
  const point = [new Date(t)];
  const ctxNet = contextNet(S.rows.values());
  for (const id of cols) {
    let v = null;
    if (load) {
      const dt = a.last_time - S.prevLast;
      if (S.prevCtxNet !== null && dt > 0 && S.prevCtxNet.has(id))
        v = (ctxNet.get(id) - S.prevCtxNet.get(id)) * 100 / dt;
    } else if ($("metric").value === "values") {
      const r = S.rows.get(id);
      v = r && r.value !== null && r.value !== undefined ? r.value : null;
    } else {
      const r = S.rows.get(id), prev = S.prevRows.get(id);
      if (r && prev && t > prev.t)
        v = $("metric").value === "calls"
          ? (r.count - prev.count) * 1000 / (t - prev.t)
          : ((r.net || 0) - (prev.net || 0)) / 1e6 * 1000 / (t - prev.t);
    }
    point.push(v !== null && v >= 0 ? v : null);
  }
  for (const [id, r] of S.rows) S.prevRows.set(id, { t: t, net: r.net, count: r.count });
  S.prevCtxNet = ctxNet;
  S.prevLast = a.last_time;
  if (cols.length > 0) {
    S.series.push(point);
    S.livePoints++;
    while (S.series.length > HISTORY + PAST_STEPS) S.series.shift();
    drawChart();
  }
  setWindows(a.windows_ns || []);
  drawTable();
  if (S.detail !== null && a.full && $("detail").dataset.ready === "1") drawDetail();
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
  S.series = pastSeries();
  S.livePoints = 0;
  S.colKey = chartCols().join("\n");
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
    const val = (r) => k === "name" ? areaName(r)
      : k === "violations" ? (rowBudgets(r) || { n: 0 }).n : r[k];
    let a = val(x[1]), b = val(y[1]);
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
    // a state row's name is "VARIABLE = VALUE NAME" (the server composes it); the name
    // opens the area's detail (its figures, windows and histogram)
    const nc = td("", null, "name");
    const nb = document.createElement("button");
    nb.type = "button";
    nb.className = "area";
    nb.textContent = r.kind === "state" ? r.name : areaName(r);
    nb.title = "details of " + nb.textContent;
    nb.addEventListener("click", () => openDetail(id));
    nc.appendChild(nb);
    tr.appendChild(nc);
    tr.appendChild(td(fmtInt(r.count), "n", "count"));
    for (const key of ["net", "gross", "call", "avg_net", "avg_gross", "avg_call", "max_net",
                       "p99_net"]) {
      const wide = key === "gross" || key === "call" || key === "avg_gross" || key === "avg_call";
      const c = td(fmtNs(r[key]), wide ? "n wide" : "n", key);
      if (key === "max_net" && r.max_net_at) // when the longest sample ran (target time)
        c.title = "max at " + r.max_net_at[0] + ".." + r.max_net_at[1] + " ns, clock epoch " +
          r.max_net_at[2];
      tr.appendChild(c);
    }
    const bv = rowBudgets(r); // the budgets watching the area, red with violations
    if (bv !== null) {
      const c = td(bv.names.length === 0 ? "" : bv.n > 0 ? fmtInt(bv.n) + " violations" : "ok",
                   "n" + (bv.n > 0 ? " bad" : ""), "budget");
      c.title = bv.names.join(", ");
      tr.appendChild(c);
      if (bv.n > 0) tr.classList.add("violated");
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
  S.series = pastSeries(); // the columns changed: the past from history, then live again
  S.livePoints = 0;
  S.colKey = chartCols().join("\n");
  drawChart();
  loadTrend();
}

// The chart's columns: the ticked areas, or (load) each core, task or thread.
// The chart's columns: the ticked areas; (load) each core, task or thread; (values) the
// ticked data variables, else the three written most.
function chartCols() {
  const m = $("metric").value;
  if (m === "load") return S.contexts.filter((c) => c !== "Neutral");
  if (m !== "values") return S.chosenOrder;
  const ticked = S.chosenOrder.filter((id) => (S.rows.get(id) || {}).kind === "data");
  if (ticked.length > 0) return ticked;
  return [...S.rows].filter(([, r]) => r.kind === "data").sort((x, y) => y[1].count - x[1].count)
    .slice(0, 3).map(([id]) => id);
}
// Net time (ns) of each context's code areas: the time the context was busy in them.
function contextNet(rows) {
  const m = new Map();
  for (const r of rows)
    if (r.kind === "code" && r.context !== "Neutral" && r.net !== null && r.net !== undefined)
      m.set(r.context, (m.get(r.context) || 0) + r.net);
  return m;
}

function drawChart() {
  const cols = chartCols(), load = $("metric").value === "load";
  const labels = ["time"].concat(cols.map((id) => {
    const r = S.rows.get(id);
    return load ? id : r ? areaName(r) : id;
  }));
  $("chart-hint").hidden = cols.length > 0;
  if (cols.length === 0 || S.series.length === 0) {
    if (S.chart) { S.chart.destroy(); S.chart = null; }
    return;
  }
  const opts = {
    labels: labels,
    ylabel: { load: "load %", calls: "calls / s", values: "value", net: "net ms / s" }[
      $("metric").value],
    legend: "always",
    labelsDiv: $("legend"), // under the chart, never over the curves
    xAxisHeight: 24,
    axes: {
      // a label between two seconds has its milliseconds (else the same second twice)
      x: { axisLabelWidth: 90, pixelsPerLabel: 110,
           axisLabelFormatter: (d) => d.toTimeString().slice(0, 8) + (d.getMilliseconds()
             ? (d.getMilliseconds() / 1000).toFixed(3).slice(1).replace(/0+$/, "") : ""),
           valueFormatter: (ms) => new Date(ms).toTimeString().slice(0, 8) },
      // three significant digits, never an exponent cut in two by the axis's width
      y: { axisLabelWidth: 64, axisLabelFormatter: fmtRate, valueFormatter: fmtRate },
    },
    rightGap: 24, // the last time label whole
    drawPoints: true, // a past range between gaps is a point
    connectSeparatedPoints: false,
  };
  if (S.chart && S.chart.getLabels().length === labels.length) {
    S.chart.updateOptions(Object.assign({ file: S.series }, opts));
  } else {
    if (S.chart) S.chart.destroy();
    S.chart = new Dygraph($("chart"), S.series, opts);
  }
}

// ---- the API over HTTP (with the tab's token when tlcapd has one) ----

// Target times beyond a double's integers (2^53 ns, about 104 days) keep their exact digits
// beside them, as NAME_exact, for the references given to `tlcap around`.
function keepNs(k, v, ctx) {
  if (typeof v === "number" && /_ns$/.test(k) && !Number.isSafeInteger(v) && ctx && ctx.source)
    this[k + "_exact"] = ctx.source;
  return v;
}
function exactNs(o, k) {
  return o[k + "_exact"] !== undefined ? o[k + "_exact"] : String(o[k]);
}

async function getJson(path) {
  const h = {};
  const t = sessionStorage.getItem("tlcap-token");
  if (t) h.Authorization = "Bearer " + t;
  try {
    const r = await fetch(path, { headers: h, cache: "no-store" });
    let doc = null;
    try { doc = JSON.parse(await r.text(), keepNs); } catch (e) { doc = null; }
    return { ok: r.ok, status: r.status, doc: doc };
  } catch (e) {
    return { ok: false, status: 0, doc: null };
  }
}
// The same, asked again a few times while tlcapd answers 503 (busy, or short of memory)
// and the page is still the one that asked.
async function getJsonAgain(path, page) {
  let r = await getJson(path);
  for (let k = 0; r.status === 503 && k < 5 && S.page === page; k++) {
    await new Promise((res) => setTimeout(res, 300 * (k + 1)));
    r = await getJson(path);
  }
  return r;
}
function targetPath(name) {
  return "/api/v1/targets/" + encodeURIComponent(name).replace(/%2F/g, "/");
}
// A row of the statistics document (`tlcap stats --export json`) named as the live rows are.
function docRowId(x) {
  return x.handle + "/" + (x.context === undefined ? "" : x.context) + "/" + (x.state || 0);
}

// ---- the chart's past, from history (stored segments; docs/http.md) ----

// The statistics of each of the last PAST_STEPS ranges of PAST_STEP_S seconds, one range
// query each (/stats?since=-Ns&until=-Ms), oldest first; a range without stored records is a
// gap in the chart. Without storage (501) the chart starts with the live points.
async function loadPast(page) {
  const t0 = Date.now(), past = [];
  $("past-note").textContent = "loading the last " + (PAST_STEPS * PAST_STEP_S / 60) +
                               " min from history…";
  for (let i = PAST_STEPS; i >= 1; i--) {
    const url = targetPath(page) + "/stats?since=-" + i * PAST_STEP_S + "s&until=-" +
                (i - 1) * PAST_STEP_S + "s";
    let r = await getJson(url);
    // 503: as many range queries as tlcapd runs at once are running (another page, a
    // `tlcap stats --since`): wait a little and ask again
    for (let k = 0; r.status === 503 && k < 10 && S.page === page; k++) {
      await new Promise((res) => setTimeout(res, 300 * (k + 1)));
      r = await getJson(url);
    }
    if (S.page !== page) return;
    if (!r.ok && r.status !== 404) {
      $("past-note").textContent = r.status === 501 ? "no history: tlcapd does not store" :
        "no history: " + (r.doc && r.doc.error ? r.doc.error.message : "HTTP " + r.status);
      return;
    }
    const pt = { t: new Date(t0 - (i - 0.5) * PAST_STEP_S * 1000), rows: null };
    if (r.ok && r.doc) {
      pt.rows = new Map();
      for (const x of r.doc.rows)
        pt.rows.set(docRowId(x), { net: x.net ? x.net.total : 0, count: x.count,
                                   value: x.value === undefined ? null : x.value });
      // a context's load in the range: its areas' net time over the target time it spans
      pt.span = r.doc.last_time - r.doc.first_time;
      pt.ctxNet = contextNet(r.doc.rows.filter((x) => x.context !== undefined).map((x) =>
        ({ kind: "code", context: x.context, net: x.net ? x.net.total : null })));
    }
    past.push(pt);
  }
  S.past = past;
  $("past-note").textContent = "";
  document.body.dataset.past = String(past.filter((p) => p.rows !== null).length);
  // the past goes before the live points already drawn (same columns)
  S.series = pastSeries().concat(S.livePoints > 0 ? S.series.slice(-S.livePoints) : []);
  drawChart();
}

// The chart's points from the past, for the charted areas and the chosen metric: the mean
// rate over each range (net ms per s, or calls per s).
function pastSeries() {
  const calls = $("metric").value === "calls", load = $("metric").value === "load";
  return S.past.map((p) => [p.t].concat(chartCols().map((id) => {
    if (p.rows === null) return null;
    if (load) return p.span > 0 ? (p.ctxNet.get(id) || 0) * 100 / p.span : null;
    const x = p.rows.get(id);
    if ($("metric").value === "values") return x ? x.value : null;
    if (!x) return 0;
    return calls ? x.count / PAST_STEP_S : x.net / 1e6 / PAST_STEP_S;
  })));
}

// ---- an area's detail: its figures, rolling windows and histogram ----

const QKEYS = [["p50", "p50"], ["p90", "p90"], ["p99", "p99"], ["p999", "p99.9"]];

function openDetail(id) {
  S.detail = id;
  S.detailMoment = null;
  S.detailDoc = null;
  S.detailHist = null;
  $("detail").hidden = false;
  $("detail").dataset.id = id;
  $("detail").dataset.ready = "0";
  drawDetail();
  $("detail").scrollIntoView({ block: "nearest" });
}
function closeDetail() {
  S.detail = null;
  $("detail").hidden = true;
  delete $("detail").dataset.id;
}

// Fetches the area's row of the statistics document and its histogram, then draws them.
async function drawDetail() {
  const id = S.detail, page = S.page, r = S.rows.get(id);
  if (!id || !r) return;
  const kind = $("d-kind").value;
  const nm = r.kind === "state" ? r.name : areaName(r);
  $("d-title").textContent = nm + " · " + (r.kind === "code" ? r.context : r.kind) +
    (nm !== r.handle ? " · " + r.handle : "");
  $("detail").dataset.ready = "0";
  const st = await getJson(targetPath(page) + "/stats");
  let h = null;
  if (r.kind === "code" && r.ctx !== undefined)
    h = await getJson(targetPath(page) + "/histogram?area=" + r.handle + "&context=" +
                      (r.context === "Neutral" ? "neutral" : r.ctx) + "&kind=" + kind);
  if (S.detail !== id || S.page !== page) return;
  S.detailDoc = st.ok ? st.doc.rows.find((x) => docRowId(x) === id) || null : null;
  S.detailHist = h && h.ok ? h.doc : null;
  detailStats(S.detailDoc);
  detailAt(S.detailDoc);
  detailWindows(S.detailDoc);
  detailHist(S.detailHist, S.detailDoc, kind, h);
  $("detail").dataset.ready = "1";
}

function detailStats(x) {
  const body = $("d-stats").tBodies[0];
  const lines = [["samples", "n", fmtInt], ["total", "total", fmtNs], ["min", "min", fmtNs],
                 ["avg", "avg", fmtNs], ["max", "max", fmtNs], ["σ", "stddev", fmtSd]]
    .concat(QKEYS.map(([k, label]) => [label, k, fmtNs]));
  const frag = document.createDocumentFragment();
  if (x) {
    const c = document.createElement("tr");
    c.append(td("count"), td(fmtInt(x.count), "n", "count"), td(""), td(""));
    frag.appendChild(c);
  }
  for (const [label, key, f] of lines) {
    const tr = document.createElement("tr");
    tr.appendChild(td(label));
    for (const k of ["net", "gross", "call"]) {
      const d = x && x[k];
      tr.appendChild(td(d && d[key] !== undefined && d[key] !== null ? f(d[key]) : "",
                        "n", k + "-" + key));
    }
    frag.appendChild(tr);
  }
  body.replaceChildren(frag);
}
// An extreme's wall clock (the batch it arrived in: min_at.wall_ms), UTC time of day (the row's
// title has the date), "-" when not known.
function atWall(at) {
  return at.wall_ms ? new Date(at.wall_ms).toISOString().slice(11) : "-";
}
// Where its records are stored: "SEG:OFF..SEG:OFF" (first and closing record; "?" for an end
// not known), "-" when neither is (not stored, or not counted: docs/budgets.md).
function atWhere(at) {
  if (!at.seg_first && !at.seg_last) return "-";
  const end = (s, o) => s ? s + ":" + o : "?";
  return end(at.seg_first, at.off_first) + ".." + end(at.seg_last, at.off_last);
}
// When each extreme's sample was taken (SPEC 13: min_at, max_at of the row's dists), with the
// `tlcap around` command that writes the stored events of that moment.
function detailAt(x) {
  const frag = document.createDocumentFragment(), refs = [];
  for (const k of ["net", "gross", "call"]) {
    const d = x && x[k];
    for (const e of ["max", "min"]) {
      const at = d && d[e + "_at"];
      if (!at || d[e] === null || d[e] === undefined) continue;
      const tr = document.createElement("tr");
      tr.dataset.k = k + "-" + e;
      const ref = "epoch:" + at.epoch + ":" + exactNs(at, "start_ns");
      tr.dataset.ref = ref;
      refs.push(ref);
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "area";
      btn.textContent = "show the moment";
      btn.addEventListener("click", () => {
        S.detailMoment = ref;
        $("d-moment").hidden = false;
        $("d-moment-cmd").textContent = "tlcap around " + shq(S.page) + " " + ref;
      });
      const c = td("");
      c.appendChild(btn);
      tr.append(td(e + " " + k, null, "extreme"), td(fmtNs(d[e]), "n", "value"),
                td("at ns:" + exactNs(at, "start_ns") + " (epoch " + at.epoch + ")", null, "at"),
                td(atWall(at) + " " + atWhere(at), null, "where"), c);
      tr.title = e + " " + fmtNs(d[e]) + " at ns:" + exactNs(at, "start_ns") + " (epoch " +
                 at.epoch + "), closed at ns:" + exactNs(at, "end_ns") +
                 (at.wall_ms ? ", arrived " + new Date(at.wall_ms).toISOString() : "") +
                 ", stored at " + atWhere(at) + " (segment:byte offset of first..closing record)";
      frag.appendChild(tr);
    }
  }
  // the command asked for stays while its extreme does (the panel follows the live table)
  if (!refs.includes(S.detailMoment)) S.detailMoment = null;
  $("d-moment").hidden = S.detailMoment === null;
  $("d-at").hidden = !frag.hasChildNodes();
  $("d-at").tBodies[0].replaceChildren(frag);
}

function fmtSd(v) {
  return fmtNs(Math.round(Number(v)));
}

function detailWindows(x) {
  const frag = document.createDocumentFragment();
  for (const w of (x && x.windows) || []) {
    const tr = document.createElement("tr");
    const n = w.net || {};
    tr.append(td("last " + w.window_ns / 1e9 + " s"), td(fmtInt(w.count), "n", "count"),
              td(n.sum !== undefined ? fmtNs(n.sum) : "", "n", "net"),
              td(fmtNs(n.min), "n", "min"), td(fmtNs(n.avg), "n", "avg"),
              td(fmtNs(n.max), "n", "max"));
    frag.appendChild(tr);
  }
  $("d-windows").tBodies[0].replaceChildren(frag);
}

// The engine's buckets (1 %) drawn on a log scale, merged into at most BARS bars, with the
// quantiles marked.
const BARS = 60;
function detailHist(h, x, kind, resp) {
  const svg = $("d-hist"), ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  $("d-hist-axis").replaceChildren();
  svg.dataset.samples = "0";
  if (!h || h.buckets.length === 0) {
    const kind = (S.rows.get(S.detail) || {}).kind;
    $("d-hist-note").textContent = !resp ? "no histogram for a " + kind + " area"
      : resp.ok ? "no samples yet"
      : resp.doc && resp.doc.error ? resp.doc.error.message : "HTTP " + resp.status;
    return;
  }
  const lo = Math.max(1, h.buckets[0][1]);
  const hi = Math.max(lo + 1, h.buckets[h.buckets.length - 1][1]);
  const L = (v) => Math.log(Math.max(1, v));
  const span = L(hi) - L(lo) || 1;
  const bin = (v) => Math.min(BARS - 1, Math.floor((L(v) - L(lo)) / span * BARS));
  const counts = new Array(BARS).fill(0);
  let total = 0;
  for (const [, le, n] of h.buckets) { counts[bin(le)] += n; total += n; }
  const max = Math.max(...counts);
  const W = 600, H = 180, bw = W / BARS;
  counts.forEach((n, i) => {
    if (n === 0) return;
    const r = document.createElementNS(ns, "rect");
    const bh = Math.max(1, (H - 14) * n / max);
    r.setAttribute("x", (i * bw + 0.5).toFixed(1));
    r.setAttribute("width", Math.max(1, bw - 1).toFixed(1));
    r.setAttribute("y", (H - bh).toFixed(1));
    r.setAttribute("height", bh.toFixed(1));
    r.setAttribute("class", "bar");
    r.dataset.count = String(n);
    const t = document.createElementNS(ns, "title");
    t.textContent = fmtInt(n) + " samples";
    r.appendChild(t);
    svg.appendChild(r);
  });
  const d = x && x[kind];
  for (const [k, label] of QKEYS) {
    if (!d || d[k] === null || d[k] === undefined) continue;
    const px = ((L(d[k]) - L(lo)) / span * (W - bw) + bw / 2);
    const l = document.createElementNS(ns, "line");
    l.setAttribute("x1", px.toFixed(1));
    l.setAttribute("x2", px.toFixed(1));
    l.setAttribute("y1", "0");
    l.setAttribute("y2", String(H));
    l.setAttribute("class", "q q-" + k);
    const t = document.createElementNS(ns, "title");
    t.textContent = label + " " + fmtNs(d[k]);
    l.appendChild(t);
    svg.appendChild(l);
  }
  svg.dataset.samples = String(total);
  $("d-hist-note").textContent = fmtInt(total) + " samples in " + h.buckets.length +
    " buckets of 1 % · quantiles marked: " +
    QKEYS.filter(([k]) => d && d[k] !== null && d[k] !== undefined)
      .map(([k, label]) => label + " " + fmtNs(d[k])).join(", ");
  const ax = $("d-hist-axis");
  for (const v of [lo, Math.round(Math.exp((L(lo) + L(hi)) / 2)), hi]) {
    const sp = document.createElement("span");
    sp.textContent = fmtNs(v);
    ax.appendChild(sp);
  }
}

// ---- the trend of the ticked areas over a picked range (rollups: docs/rollups.md) ----

// The range picked, as the trend's since and the step that gives it about 24 to 170 points.
const TREND_STEP = { "1h": "1m", "1d": "15m", "7d": "2h", "365d": "1d" };
// The ticked code areas the trend draws, with the query parameters that name each: its
// handle, and its context's number unless the view is Neutral (all contexts merged).
function trendAreas() {
  return S.chosenOrder.map((id) => [id, S.rows.get(id)])
    .filter(([, r]) => r && r.kind === "code");
}
function trendUrl(page, r, range) {
  let u = targetPath(page) + "/trend?area=0x" + r.handle + "&since=-" + range + "&step=" +
          TREND_STEP[range];
  if (r.context !== "Neutral" && r.ctx !== undefined) u += "&context=" + r.ctx;
  return u;
}

// One query per area (each built off tlcapd's loop from the rollups, so a year answers as
// fast as an hour), then one chart: a column per area, a row per step start (Unix time).
async function loadTrend() {
  const page = S.page, range = $("t-range").value, areas = trendAreas();
  const key = page + "|" + range + "|" + areas.map(([id]) => id).join(",");
  if (!S.stores || page === null) {
    $("trend-note").textContent = S.stores === false
      ? "no trend: tlcapd does not store (rollups are kept with storage)" : "";
    return;
  }
  if (key === S.trendKey) return;
  S.trendKey = key;
  $("trend-box").dataset.ready = "0";
  if (areas.length === 0) {
    S.trend = null;
    drawTrend();
    $("trend-note").textContent = "tick areas in the table to see their trend";
    $("trend-box").dataset.ready = "1";
    return;
  }
  $("trend-note").textContent = "loading…";
  const docs = [];
  for (const [id, r] of areas) {
    const g = await getJsonAgain(trendUrl(page, r, range), page);
    if (S.trendKey !== key) return; // another range or other areas meanwhile
    if (!g.ok) {
      S.trend = null;
      drawTrend();
      $("trend-note").textContent = "no trend: " +
        (g.doc && g.doc.error ? g.doc.error.message : "HTTP " + g.status);
      $("trend-box").dataset.ready = "1";
      return;
    }
    docs.push({ id: id, url: trendUrl(page, r, range), doc: g.doc });
  }
  S.trend = docs;
  const steps = docs.reduce((a, d) => a + d.doc.steps.length, 0);
  $("trend-note").textContent = steps === 0 ? "no samples in the range" :
    "step " + TREND_STEP[range] + ", from the rollups";
  drawTrend();
  $("trend-box").dataset.ready = "1";
}

// The chart's rows: every step start any area has, in order; an area without samples in a
// step is a gap there.
function trendSeries() {
  const stat = $("t-stat").value, at = new Map();
  S.trend.forEach((d, i) => {
    for (const s of d.doc.steps) {
      if (!at.has(s.start)) at.set(s.start, new Array(S.trend.length).fill(null));
      at.get(s.start)[i] = s[stat];
    }
  });
  return [...at.keys()].sort((x, y) => x - y)
    .map((k) => [new Date(k / 1e6)].concat(at.get(k)));
}

// The steps in which an area broke a budget (docs/rollups.md "Budget violations per step"):
// {column (1 = the first area), start (ns), n}, the newest first.
function trendViolations() {
  const out = [];
  (S.trend || []).forEach((d, i) => {
    for (const s of d.doc.steps)
      if (Number(s.violations || 0) > 0) out.push({ col: i + 1, start: s.start, n: s.violations });
  });
  return out.sort((x, y) => y.start - x.start || x.col - y.col);
}

// The small table under the chart: a row per step with violations, newest first.
function drawTrendViolations(marks, when) {
  const frag = document.createDocumentFragment();
  for (const m of marks.slice(0, 50)) {
    const d = S.trend[m.col - 1], r = S.rows.get(d.id);
    const tr = document.createElement("tr");
    tr.dataset.row = d.id; // not data-id: that names the areas table's rows
    tr.dataset.start = String(m.start);
    tr.append(td(when(new Date(m.start / 1e6)), null, "step"), td(r ? areaName(r) : d.id,
              null, "area"), td(fmtInt(m.n), "n", "violations"));
    frag.appendChild(tr);
  }
  $("trend-viol").tBodies[0].replaceChildren(frag);
  $("trend-viol").hidden = marks.length === 0;
  const total = marks.reduce((a, m) => a + Number(m.n), 0);
  $("trend-viol").caption.textContent = "budget violations per step (red points on the chart): " +
    fmtInt(total) + " in " + marks.length + (marks.length === 1 ? " step" : " steps") +
    (marks.length > 50 ? ", the newest 50 listed" : "");
}

function drawTrend() {
  const box = $("trend"), data = S.trend ? trendSeries() : [], stat = $("t-stat").value;
  if (S.trendChart) { S.trendChart.destroy(); S.trendChart = null; }
  box.hidden = data.length === 0; // shown before it is drawn: dygraphs takes its size
  const marks = trendViolations();
  if (data.length === 0) {
    drawTrendViolations([], (d) => d.toLocaleString());
    return;
  }
  // the whole range picked (since, now), and the last step whole
  const RANGE_MS = { "1h": 3600e3, "1d": 86400e3, "7d": 7 * 86400e3, "365d": 365 * 86400e3 };
  const step = S.trend[0].doc.step_min * 60e3, now = Date.now();
  const win = [Math.min(now - RANGE_MS[$("t-range").value], data[0][0].getTime()),
               Math.max(now, data[data.length - 1][0].getTime() + step)];
  const long = $("t-range").value !== "1h" && $("t-range").value !== "1d";
  const when = (d) => long ? d.toISOString().slice(5, 10) + " " + d.toTimeString().slice(0, 5)
                           : d.toTimeString().slice(0, 5);
  const fmt = stat === "count" ? fmtInt : (v) => fmtNs(Math.round(v));
  drawTrendViolations(marks, (d) => long ? when(d) : d.toLocaleString());
  // a step with violations: a red ring around its point (column, step start in ms)
  const marked = new Set(marks.map((m) => m.col + "|" + m.start / 1e6));
  box.dataset.marks = String(marks.length);
  const opts = {
    labels: ["time"].concat(S.trend.map((d) => {
      const r = S.rows.get(d.id);
      return r ? areaName(r) : d.id;
    })),
    ylabel: stat === "count" ? "samples per step" : stat + " net time",
    legend: "always",
    labelsDiv: $("trend-legend"),
    xAxisHeight: 24,
    axes: {
      // no time label at the left edge, where it would sit on the lowest value's label
      x: { axisLabelWidth: long ? 90 : 60, pixelsPerLabel: long ? 130 : 90,
           ticker: (a, b, px, o, g, v) => Dygraph.dateTicker(a, b, px, o, g, v)
             .filter((k) => k.v === undefined || (k.v - a) / (b - a) * px > (long ? 48 : 34)),
           axisLabelFormatter: when, valueFormatter: (ms) => new Date(ms).toLocaleString() },
      y: { axisLabelWidth: 72, axisLabelFormatter: fmt, valueFormatter: fmt },
    },
    rightGap: 24,
    drawPoints: true, // a step alone between gaps is a point
    drawPointCallback: (g, name, ctx, cx, cy, color, size, row) => {
      ctx.beginPath();
      ctx.fillStyle = color;
      ctx.arc(cx, cy, size, 0, 2 * Math.PI);
      ctx.fill();
      if (!marked.has(g.indexFromSetName(name) + "|" + g.getValue(row, 0))) return;
      ctx.beginPath();
      ctx.strokeStyle = "#c62828";
      ctx.lineWidth = 2;
      ctx.arc(cx, cy, size + 3, 0, 2 * Math.PI);
      ctx.stroke();
    },
    connectSeparatedPoints: false,
    includeZero: true,
    dateWindow: win,
  };
  S.trendChart = new Dygraph(box, data, opts);
}

// ---- two ranges compared (docs/rollups.md "Diff") ----

// The targets range B can be taken from (`b_target`): this page's, or another target's (two
// boards, two firmware builds side by side). Rebuilt only when the names change, keeping the
// choice.
function compareTargets(names) {
  const sel = $("cmp-bt"), others = names.filter((n) => n !== S.page);
  const key = S.page + "|" + others.join("|");
  if (sel.dataset.key === key) return;
  sel.dataset.key = key;
  const was = sel.value;
  const opts = [new Option("this target", "")].concat(others.map((n) => new Option(n, n)));
  sel.replaceChildren(...opts);
  sel.value = others.includes(was) ? was : "";
}

async function loadCompare() {
  const page = S.page, a = $("cmp-a").value.trim(), b = $("cmp-b").value.trim();
  if (page === null || !a || !b) return;
  const bt = $("cmp-bt").value;
  let url = targetPath(page) + "/diff?a=" + encodeURIComponent(a) + "&b=" +
            encodeURIComponent(b);
  if (bt !== "" && bt !== page) url += "&b_target=" + encodeURIComponent(bt);
  const r = [...S.rows.values()].find((x) => x.kind === "code" && x.context === S.ctx);
  if (S.ctx !== null && S.ctx !== "Neutral" && r && r.ctx !== undefined)
    url += "&context=" + r.ctx;
  $("compare").dataset.ready = "0";
  $("cmp-note").textContent = "comparing…";
  const g = await getJsonAgain(url, page);
  if (S.page !== page) return;
  $("compare").dataset.url = url;
  if (!g.ok) {
    $("cmp-table").hidden = true;
    $("cmp-note").textContent = (g.doc && g.doc.error ? g.doc.error.message :
                                 "HTTP " + g.status);
    $("compare").dataset.ready = "1";
    return;
  }
  drawCompare(g.doc);
  $("compare").dataset.ready = "1";
}

// A row per area in the API's order (by significance: one-sided first, then |t|); the
// change is mean b over mean a; significant rows in bold.
function drawCompare(doc) {
  const frag = document.createDocumentFragment();
  for (const x of doc.areas) {
    const hex = x.area.toString(16).padStart(8, "0");
    const r = S.rows.get(hex + "/" + (S.ctx || "Neutral") + "/0") ||
              S.rows.get(hex + "/Neutral/0");
    const tr = document.createElement("tr");
    tr.dataset.area = hex;
    if (x.significant) tr.className = "sig";
    const fx = (v) => v === undefined || v === null ? "" : "×" + Number(v).toFixed(3);
    tr.append(td(r ? areaName(r) : hex, null, "name"),
              td(fmtInt(x.a.count), "n", "a-count"), td(fmtInt(x.b.count), "n", "b-count"),
              td(x.a.count ? fmtNs(Math.round(x.a.mean)) : "", "n", "a-mean"),
              td(x.b.count ? fmtNs(Math.round(x.b.mean)) : "", "n", "b-mean"),
              td(x.only_in ? "only in " + x.only_in : fx(x.factor), "n", "factor"),
              td(x.t === undefined ? "" : Math.abs(x.t) >= 1e300 ? "∞" : x.t.toFixed(2),
                 "n wide", "t"),
              td(x.a.count ? fmtNs(x.a.p99) : "", "n", "a-p99"),
              td(x.b.count ? fmtNs(x.b.p99) : "", "n", "b-p99"),
              td(fx(x.p99_factor), "n wide", "p99-factor"),
              td(x.significant ? (x.p99_beyond_error ? "yes (p99 moved)" : "yes") : "no", null,
                 "significant"));
    frag.appendChild(tr);
  }
  $("cmp-table").tBodies[0].replaceChildren(frag);
  $("cmp-table").hidden = false;
  const n = doc.areas.filter((x) => x.significant).length;
  const bt = $("cmp-bt").value;
  $("cmp-note").textContent = (bt !== "" && bt !== S.page ? "b of " + bt + ": " : "") +
    (doc.areas.length === 0 ? "no samples in either range" :
     doc.areas.length + " areas, " + n + " changed significantly (|t| ≥ " + doc.t_threshold +
    " or in one range only)");
}

// ---- budgets and their violations (docs/budgets.md; /api/v1/targets/NAME/violations) ----

// The document of each target (null: none, or no budget applies), fetched now and then. A
// daemon without the path (404 "no such path") is asked no more until it restarts.
const VIOL_EVERY_MS = 5000;
function wantViolations(name, force) {
  if (S.noViolations) return;
  const v = S.viol.get(name);
  if (v && (v.busy || (!force && Date.now() - v.at < VIOL_EVERY_MS))) return;
  loadViolations(name);
}
async function loadViolations(name) {
  const v = S.viol.get(name) || { doc: null };
  v.busy = true;
  v.at = Date.now();
  S.viol.set(name, v);
  const g = await getJson(targetPath(name) + "/violations");
  v.busy = false;
  if (g.status === 404 && g.doc && g.doc.error &&
      /^no such path/.test(g.doc.error.message || "")) {
    S.noViolations = true; // this tlcapd does not serve budgets: the page shows none
    document.body.dataset.budgets = "none";
    return;
  }
  v.doc = g.ok && g.doc && Array.isArray(g.doc.budgets) && g.doc.budgets.length > 0
    ? g.doc : null;
  document.body.dataset.budgets = "served";
  const card = document.querySelector('.card[data-target="' + CSS.escape(name) + '"]');
  if (card) budgetLine(card, name);
  if (S.page === name) { drawViolations(); drawTable(); }
}

// "budgets: K, violations: N" on a target's card, red when N > 0; hidden without budgets.
function budgetLine(card, name) {
  const bd = card.querySelector('[data-k="budgets"]');
  const v = S.viol.get(name), doc = v ? v.doc : null;
  bd.hidden = doc === null;
  if (doc === null) { bd.replaceChildren(); return; }
  const n = Number(doc.violations || 0);
  bd.className = "budgets" + (n > 0 ? " bad" : "");
  bd.textContent = "budgets: " + doc.budgets.length + ", violations: " + fmtInt(n);
  bd.title = doc.budgets.map((b) => b.name + " " + fmtInt(b.violations)).join(", ");
}

// The violations of an area's row, from the counts per (budget, area, context): its own
// context's, or every context's in the Neutral view; with the budgets' names.
function rowBudgets(r) {
  const v = S.viol.get(S.page), doc = v ? v.doc : null;
  if (!doc || !Array.isArray(doc.counts)) return null;
  let n = 0;
  const names = new Set();
  for (const c of doc.counts) {
    if (String(c.handle).replace(/^0x/, "").padStart(8, "0").toLowerCase() !==
        r.handle.toLowerCase())
      continue;
    const cx = c.context === null || c.context === undefined ? "" : c.context;
    if (r.kind === "code" && r.context !== "Neutral" && cx !== r.context) continue;
    names.add(c.budget);
    n += Number(c.violations || 0);
  }
  for (const b of doc.budgets) if (budgetWatches(b, r)) names.add(b.name);
  return { n: n, names: [...names] };
}

// Whether budget b watches the area of row r (docs/budgets.md "area", "context"): a glob on
// its name, 8 hex digits (0x optional) its handle, else its name exactly; "any" context or
// the row's (every context in the Neutral view).
function budgetWatches(b, r) {
  const a = String(b.area || ""), name = r.name || "";
  let hit;
  if (/[*?[]/.test(a)) {
    const re = a.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
    try { hit = new RegExp("^" + re + "$").test(name); } catch (e) { hit = false; }
  } else if (/^(0x)?[0-9a-fA-F]{8}$/.test(a)) {
    hit = a.replace(/^0x/, "").toLowerCase() === r.handle.toLowerCase();
  } else {
    hit = a === name;
  }
  const c = b.context || "any";
  return hit && (c === "any" || r.kind !== "code" || r.context === "Neutral" || c === r.context);
}

function fmtLimit(stat, v) {
  return stat === "rate" ? fmtInt(v) + " events" : fmtNs(v);
}

function drawViolations() {
  const v = S.viol.get(S.page), doc = v ? v.doc : null;
  $("budgets-box").hidden = doc === null;
  for (const th of document.querySelectorAll(".budget-col")) th.hidden = doc === null;
  if (doc === null) return;
  $("b-title").textContent = "budgets: " + doc.budgets.length + ", violations: " +
                             fmtInt(doc.violations);
  $("b-title").className = doc.violations > 0 ? "bad" : "";
  const list = ($("v-which").value === "worst" ? doc.worst : doc.violations_kept) || [];
  const frag = document.createDocumentFragment();
  for (const x of list.slice().reverse().slice(0, 100)) { // the newest first
    const tr = document.createElement("tr");
    tr.dataset.ref = x.ref || "";
    const when = x.wall_ms !== undefined ? new Date(x.wall_ms).toLocaleString()
      : "ns:" + x.start_ns + (x.epoch ? " (epoch " + x.epoch + ")" : "");
    const a = document.createElement("button");
    a.type = "button";
    a.className = "area";
    a.textContent = "show the moment";
    a.addEventListener("click", () => showMoment(x));
    const c = td("");
    c.appendChild(a);
    tr.append(td(x.budget, null, "budget"), td(x.area, null, "area"),
              td(x.context || "", null, "context"),
              td(fmtLimit(x.stat, x.value), "n bad", "value"),
              td((x.limit_kind === "min" ? "min " : "max ") + fmtLimit(x.stat, x.limit), "n",
                 "limit"),
              td(when, null, "time"), c);
    frag.appendChild(tr);
  }
  $("violations").tBodies[0].replaceChildren(frag);
  $("v-note").textContent = list.length === 0 ? "none" : list.length > 100 ?
    "the newest 100 of " + list.length + " kept" : list.length + " kept";
}

// The stored events around a violation: tlcapd serves them to `tlcap around` (no HTTP path
// yet), so the page gives the command, ready to copy.
function shq(s) {
  return /^[A-Za-z0-9_@.:\/-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'";
}
function showMoment(x) {
  const cmd = "tlcap around " + shq(S.page) + " " + x.ref;
  $("moment").hidden = false;
  $("moment-cmd").textContent = cmd;
  $("moment-note").textContent = "";
  if (navigator.clipboard && window.isSecureContext)
    navigator.clipboard.writeText(cmd).then(() => { $("moment-note").textContent = "copied"; },
                                            () => {});
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
    S.past = [];
    S.livePoints = 0;
    S.colKey = "";
    S.prevCtxNet = null;
    S.pastFor = null; // the first live message says whether tlcapd stores (then: history)
    S.trendKey = null;
    S.trend = null;
    delete $("compare").dataset.ready;
    $("cmp-table").hidden = true;
    $("moment").hidden = true;
    closeDetail();
    drawChart();
    drawTrend();
    drawViolations();
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
  loadTrend();
});
$("metric").addEventListener("change", () => {
  S.series = pastSeries();
  S.livePoints = 0;
  S.colKey = chartCols().join("\n");
  drawChart();
});
$("d-close").addEventListener("click", closeDetail);
$("t-range").addEventListener("change", loadTrend);
$("t-stat").addEventListener("change", drawTrend);
$("cmp-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadCompare(); });
$("v-which").addEventListener("change", drawViolations);
$("d-kind").addEventListener("change", () => { if (S.detail) drawDetail(); });
// dygraphs sizes a chart when it draws it: a box that narrows later (a scrollbar appears as the
// page grows, the window is resized) would cut its right edge, so each chart follows its box
if (window.ResizeObserver) {
  const ro = new ResizeObserver(() => {
    if (S.chart) S.chart.resize();
    if (S.trendChart) S.trendChart.resize();
  });
  ro.observe($("chart"));
  ro.observe($("trend"));
}
window.addEventListener("hashchange", route);
route();
connect();
