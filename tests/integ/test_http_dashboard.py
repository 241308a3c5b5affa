"""The dashboard in headless Chromium, driven over the DevTools protocol (SPEC 9): the page
loads with no console error, lists the targets, shows an area's count equal to `tlcap stats`,
updates as events arrive, charts a chosen area with dygraphs, and after a daemon restart
reconnects and says so. Screenshots are kept as artefacts in SCREENSHOT_DIR (made if missing,
printed at the start): <build>/tests/integ/dashboard_screenshots under ctest.

usage: test_http_dashboard.py TLCAPD TLCAP SCREENSHOT_DIR"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402
import daemonlib as D  # noqa: E402
import tlctest as T  # noqa: E402


class Browser(cdp.Browser):
    """cdp.Browser with its profile in a directory of its own: Chromium's helper processes may
    still write there for a moment after it exits, which would fail the removal of the test's
    directory (a test failure that is not the page's)."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="tlc-chromium-")
        super().__init__(self.profile)

    def close(self):
        super().close()
        shutil.rmtree(self.profile, ignore_errors=True)


TLCAPD, TLCAP, SHOTS = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
os.makedirs(SHOTS, exist_ok=True)
print("screenshots in", SHOTS)


def stats_count(sport, target, handle, context):
    rc, out, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "stats", target,
                          "--export", "json"], timeout=30)
    T.eq(rc, 0, "tlcap stats: " + err)
    doc = json.loads(out)
    for r in doc["rows"]:
        if r["handle"] == handle and r.get("context") == context:
            return r["count"]
    raise T.Failure("no row %s/%s in tlcap stats: %r" % (handle, context, doc["rows"][:3]))


def wait_js(b, expr, what, timeout=15.0):
    def ok():
        b.pump()
        return b.eval(expr)
    return D.wait_until(ok, timeout, what, step=0.1)


def cell(b, sel, key):
    return b.eval("(() => { const r = document.querySelector(%s); if (!r) return null;"
                  " const c = r.querySelector('[data-k=\"%s\"]'); return c ? c.textContent"
                  " : null; })()" % (json.dumps(sel), key))


def no_overflow(b, what):
    """Nothing runs off the right edge: the page does not scroll sideways, and no element of
    the page (a table scrolls in its own box) ends past the window's width."""
    wide = b.eval("document.documentElement.scrollWidth - window.innerWidth")
    T.check(wide <= 0, "%s: the page scrolls sideways by %s px" % (what, wide))
    cut = b.eval("[...document.querySelectorAll('body *')].filter(e => e.offsetParent !== null"
                 " && !e.closest('.table-box') && e.getBoundingClientRect().right >"
                 " window.innerWidth + 0.5).map(e => e.tagName + '#' + e.id + '.' +"
                 " e.className).slice(0, 5)")
    T.eq(cut, [], "%s: elements cut at the right edge" % what)


def fmt_bytes(v):
    """The page's rule (docs/http.md): KiB, MiB, ... with one decimal, bytes as they are."""
    units, i, v = ["B", "KiB", "MiB", "GiB", "TiB"], 0, float(v)
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return ("%.1f" % v if i else "%d" % v) + " " + units[i]


def segment_bytes_on_disk(state, target):
    """The bytes of the target's segments on disk: every file of its directory but its
    checkpoint and mapping (data, compressed data, exports, manifests)."""
    d, total, names = os.path.join(state, target), 0, []
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        if not os.path.isfile(p) or n.startswith("target.") or n.startswith("mapping"):
            continue
        names.append(n)
        total += os.path.getsize(p)
    return total, names


def num(text):
    return int(text.replace(",", "")) if text not in (None, "") else None


def test_dashboard(d):
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    args = ["--listen", "in=bin11@127.0.0.1:%d" % port]
    dm = D.Daemon(TLCAPD, d, args, http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport)
    dm2 = None
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=board format=bin11\n")
        s.sendall(D.calls(120, t0=1000, step=1000, handle=0x00000007, core=0))
        dm.wait_stats(lambda st: D.by_name(st, "board")["events"] == 240, what="first batch")

        b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
        wait_js(b, "document.querySelector('.card[data-target=\"board\"]') !== null",
                "the overview lists the target")
        T.eq(num(cell(b, '[data-target="board"]', "events")), 240, "events in the overview")
        T.check(cell(b, '[data-target="board"]', "state").startswith("connected"),
                "state connected")

        # subscribers per target: a `tlcap watch board` counts for board, not for another
        o = D.connect(port)
        o.sendall(b"TLCAP/1 target=other format=bin11\n" + D.calls(3, handle=1))
        dm.wait_stats(lambda st: D.by_name(st, "other")["events"] == 6, what="other target")
        w = subprocess.Popen([TLCAP, "--connect", "127.0.0.1:%d" % sport, "watch", "board"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_js(b, "(() => { const c = (t) => { const r = document.querySelector("
                    "'[data-target=\"' + t + '\"] [data-k=\"subscribers\"]');"
                    " return r ? r.textContent : null; };"
                    " return c('board') === '1' && c('other') === '0'; })()",
                    "board has 1 subscriber, other 0")
        finally:
            w.terminate()
            w.wait(10)
        wait_js(b, "(() => { const r = document.querySelector('[data-target=\"board\"]"
                " [data-k=\"subscribers\"]'); return r && r.textContent === '0'; })()",
                "board's subscriber gone")
        o.close()

        # the target's page: the area's count equals tlcap stats
        b.call("Page.navigate", url="http://127.0.0.1:%d/#/target/board" % hport)
        row = 'tr[data-id="00000007/core0/0"]'
        wait_js(b, "document.querySelector(%s) !== null" % json.dumps(row), "area row")
        want = stats_count(sport, "board", "00000007", "core0")
        T.eq(want, 120, "tlcap stats count")
        T.eq(num(cell(b, row, "count")), want, "area count on the page = tlcap stats")

        # live: more events arrive, the page follows without a reload
        n0 = b.eval("Number(document.body.dataset.updates)")
        s.sendall(D.calls(80, t0=10 ** 7, step=1000, handle=0x00000007, core=0))
        wait_js(b, "(() => { const c = document.querySelector(%s + ' td[data-k=\"count\"]');"
                " return c && c.textContent.replace(/,/g, '') === '200'; })()" % json.dumps(row),
                "count updated live to 200")
        T.eq(stats_count(sport, "board", "00000007", "core0"), 200, "tlcap stats after")
        T.check(b.eval("Number(document.body.dataset.updates)") > n0, "live messages arrived")

        # sort, filter, chart
        b.eval("document.querySelector('th[data-sort=\"count\"]').click()")
        b.eval("(() => { const f = document.getElementById('filter'); f.value = 'zzz';"
               " f.dispatchEvent(new Event('input')); })()")
        T.eq(b.eval("document.querySelectorAll('#areas tbody tr').length"), 0, "filter hides")
        b.eval("(() => { const f = document.getElementById('filter'); f.value = '0000';"
               " f.dispatchEvent(new Event('input')); })()")
        # the page opened with the areas of most net time ticked: the chart has data at once
        T.check(b.eval("document.querySelector(%s + ' input[type=checkbox]').checked"
                       % json.dumps(row)), "the busiest area is charted without a tick")
        for k in range(3):  # keep the chart busy for a few updates
            s.sendall(D.calls(50, t0=10 ** 8 * (k + 1), step=1000, handle=0x00000007, core=0))
            n = b.eval("Number(document.body.dataset.updates)")
            wait_js(b, "Number(document.body.dataset.updates) > %d" % n, "next update")
        wait_js(b, "document.querySelector('#chart canvas') !== null", "dygraphs chart drawn")
        # a few seconds of live points: labels between seconds, none cut
        T.eq(axis_cut(b, "chart"), [], "the live chart's axis labels cut")
        b.screenshot(os.path.join(SHOTS, "target_live.png"))
        b.pump()
        # a 404 is what a tlcapd without budgets answers the page's /violations: not an error
        T.eq([e for e in b.errors if e[0] != "network" or "404" not in e[1]], [],
             "no console errors before the restart")

        # daemon restart: the page says it lost the daemon, reconnects, and says so
        s.close()
        rc, _ = dm.stop()
        T.eq(rc, 0, "first daemon's exit status")
        wait_js(b, "document.getElementById('status').dataset.state === 'reconnecting'",
                "page says reconnecting")
        # statistics survive restarts (docs/continuity.md): without its checkpoint the target
        # starts afresh, so the page must show the new daemon's count
        os.unlink(os.path.join(dm.state, "board", "target.checkpoint"))
        dm2 = D.Daemon(TLCAPD, d, args, http="127.0.0.1:%d" % hport,
                       serve="127.0.0.1:%d" % sport)
        wait_js(b, "document.getElementById('status').dataset.state === 'restarted' &&"
                " document.getElementById('status').dataset.restarts === '1'",
                "page reconnected and says the daemon restarted", timeout=20)
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=board format=bin11\n")
        s.sendall(D.calls(5, t0=1000, step=1000, handle=0x00000007, core=0))
        wait_js(b, "(() => { const c = document.querySelector(%s + ' td[data-k=\"count\"]');"
                " return c && c.textContent === '5'; })()" % json.dumps(row),
                "the new daemon's count shown")
        b.pump()
        # while the daemon was away Chromium logs the refused WebSocket connections (network
        # errors, expected); anything else is a page error
        others = [e for e in b.errors if e[0] != "network"]
        T.eq(others, [], "no page errors across the restart")
        s.close()
    finally:
        b.close()
        for x in (dm, dm2):
            if x is not None and x.p.poll() is None:
                x.stop()


def test_dashboard_token(d):
    """With a token file the page asks for the token in its header (a form, not a dialog),
    keeps it in the tab's session storage (a reload does not ask again) and then shows the
    targets. A wrong token is said so, and the page waits for another: it does not ask again
    and again by itself."""
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    tok = os.path.join(d, "token")
    with open(tok, "w") as f:
        f.write("page-token\n")
    os.chmod(tok, 0o600)
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--token-file", tok],
                  http="127.0.0.1:%d" % hport)

    def submit(token):
        b.eval("(() => { document.getElementById('token-input').value = %s;"
               " document.getElementById('token-form').requestSubmit(); })()"
               % json.dumps(token))

    def updates():
        return b.eval("Number(document.body.dataset.updates || 0)")

    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=guarded format=bin11\n" + D.calls(5))
        dm.wait_stats(lambda st: any(t["events"] == 10 for t in st["targets"]), what="events")
        b.viewport(1400, 900)
        b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
        wait_js(b, "document.getElementById('token-form') !== null &&"
                " !document.getElementById('token-form').hidden",
                "the page asks for the token")
        T.eq(b.eval("document.getElementById('token-msg').textContent"),
             "tlcapd asks for its access token", "why it asks")
        # a wrong token: said so, in the form, and nothing more until the user types again
        submit("wrong-token")
        wait_js(b, "document.getElementById('token-msg').textContent.includes('refused')",
                "the page says the token was refused", timeout=20)
        T.eq(b.eval("document.getElementById('status').dataset.state"), "refused", "status")
        T.eq(b.eval("sessionStorage.getItem('tlcap-token')"), None, "a refused token is dropped")
        # it stays so: the page does not send or ask anything by itself (no loop), nor shows
        # data; a live socket waits for the token
        end = time.monotonic() + 3
        while time.monotonic() < end:
            b.pump()
            time.sleep(0.2)
        T.check(b.eval("document.getElementById('token-msg').textContent.includes('refused')"),
                "still says refused")
        T.eq(updates(), 0, "no data without the token")
        T.eq(b.prompts, [], "no dialog")
        b.viewport(800, 600)
        no_overflow(b, "the token form at 800x600")
        b.screenshot(os.path.join(SHOTS, "token_refused_800x600.png"))
        submit("page-token")
        wait_js(b, "document.querySelector('.card[data-target=\"guarded\"]') !== null",
                "targets shown once the right token was given")
        T.check(b.eval("document.getElementById('token-form').hidden"), "the form goes")
        T.eq(b.eval("sessionStorage.getItem('tlcap-token')"), "page-token",
             "kept in the tab's session storage")
        b.call("Page.reload")
        wait_js(b, "document.querySelector('.card[data-target=\"guarded\"]') !== null",
                "targets shown after a reload")
        T.check(b.eval("document.getElementById('token-form').hidden"), "not asked again")
        T.eq(b.prompts, [], "no dialog")
        b.pump()
        T.eq([e for e in b.errors if e[0] != "network"], [], "no page errors")
        s.close()
    finally:
        b.close()
        dm.stop()


def test_dashboard_layout(d):
    """A user's first look at a two-core target, at 1400x900 and 800x600: the page never
    scrolls sideways, the target's page opens on a chart with data (its busiest areas
    ticked), one context at a time with a selector (Neutral first), a column per rolling
    window, and a filter. Screenshots of both sizes are kept in SCREENSHOT_DIR."""
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port],
                  http="127.0.0.1:%d" % hport)
    s = None
    try:
        s = D.connect(port)
        # core 0: main (long) and fast (short); core 1: isr; a data variable
        rec, t = b"", 1000
        for i in range(200):
            rec += (T.bin11(0, 3, 0, 0, t) + T.bin11(0, 0, 0, 0, t + 600) +
                    T.bin11(1, 3, 0, 0, t + 700) + T.bin11(1, 0, 0, 0, t + 720) +
                    T.bin11(2, 3, 1, 0, t + 100) + T.bin11(2, 0, 1, 0, t + 400) +
                    T.bin11(0x20000000, 4, 0, i, t + 800))
            t += 1000
        s.sendall(b"TLCAP/1 target=dual format=bin11\n" + rec)
        dm.wait_stats(lambda st: any(x["events"] == 1400 for x in st["targets"]), what="events")
        busy, t_last = 200 * (600 + 20 + 300), t - 1000 + 800
        for w, h in ((1400, 900), (800, 600)):
            b.viewport(w, h)
            # the overview: a card per target, its figures those of the API
            b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
            wait_js(b, "document.querySelector('.card[data-target=\"dual\"]') !== null",
                    "the overview's card")
            api = [x for x in api_targets(hport) if x["name"] == "dual"][0]
            card = '.card[data-target="dual"]'
            T.eq(num(cell(b, card, "events")), api["counters"]["events"], "card: events")
            T.eq(num(cell(b, card, "gaps")), api["gaps"], "card: gaps")
            T.eq(num(cell(b, card, "resets")), api["counters"]["clock_resets"], "card: resets")
            T.eq(cell(b, card, "state"), "connected", "card: state")
            T.eq(cell(b, card, "stored"), "off", "card: not stored (--no-store)")
            T.eq(api["rollups"], None, "API: no rollups (--no-store)")
            T.eq(cell(b, card, "rollups"), "off", "card: no rollups (--no-store)")
            T.check(b.eval("document.querySelector(%s + ' [data-k=\"budgets\"]').hidden"
                           % json.dumps(card)), "no budget: the slot shows nothing")
            T.check(b.eval("document.querySelector(%s + ' svg.spark') !== null"
                           % json.dumps(card)), "a rate sparkline")
            # load: the code areas' net time (the durations sent) over the target time
            T.eq(b.eval("document.querySelector(%s).dataset.busy" % json.dumps(card)),
                 str(busy), "card: busy time = the durations sent")
            T.eq(b.eval("document.querySelector(%s).dataset.time" % json.dumps(card)),
                 str(t_last), "card: target time = the last record's")
            no_overflow(b, "the overview at %dx%d" % (w, h))
            b.screenshot(os.path.join(SHOTS, "overview_%dx%d.png" % (w, h)))
            b.call("Page.navigate", url="http://127.0.0.1:%d/#/target/dual" % hport)
            wait_js(b, "document.querySelector('#areas tbody tr') !== null", "area rows")
            wait_js(b, "document.querySelector('#chart canvas') !== null &&"
                    " document.querySelectorAll('#legend span').length > 0",
                    "the chart drawn with a legend, without a tick (%dx%d)" % (w, h))
            opts = b.eval("[...document.querySelectorAll('#ctx option')].map(o => o.value)")
            T.eq(opts, ["Neutral", "core0", "core1"], "contexts, Neutral first")
            ticked = b.eval("[...document.querySelectorAll('#areas tbody tr')]"
                            ".filter(r => r.querySelector('input').checked)"
                            ".map(r => r.dataset.id)")
            T.eq(sorted(ticked), ["00000000/Neutral/0", "00000001/Neutral/0",
                                  "00000002/Neutral/0"], "the busiest areas ticked")
            heads = b.eval("[...document.querySelectorAll('#areas th.win')]"
                           ".map(h => h.textContent)")
            T.eq(heads, ["last 1 s", "last 10 s", "last 60 s"], "a column per window")
            wide = b.eval("document.documentElement.scrollWidth - window.innerWidth")
            T.check(wide <= 0, "the page scrolls sideways by %s px at %dx%d" % (wide, w, h))
            b.screenshot(os.path.join(SHOTS, "target_%dx%d.png" % (w, h)))
        # the overview's load while events arrive: 100 more rounds over 100 us of target time
        b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
        wait_js(b, "document.querySelector('.card[data-target=\"dual\"]') !== null", "card")
        rec = b""
        for i in range(100):
            rec += (T.bin11(0, 3, 0, 0, t) + T.bin11(0, 0, 0, 0, t + 600) +
                    T.bin11(1, 3, 0, 0, t + 700) + T.bin11(1, 0, 0, 0, t + 720) +
                    T.bin11(2, 3, 1, 0, t + 100) + T.bin11(2, 0, 1, 0, t + 400) +
                    T.bin11(0x20000000, 4, 0, i, t + 800))
            t += 1000
        s.sendall(rec)
        card = '.card[data-target="dual"]'
        wait_js(b, "document.querySelector(%s).dataset.busy === '%d'"
                % (json.dumps(card), busy + 100 * 920), "the card's busy time grew")
        got = b.eval("[document.querySelector(%s).dataset.busyBefore, document.querySelector(%s"
                     " + ' [data-k=\"load\"]').textContent]" % (json.dumps(card),
                                                                 json.dumps(card)))
        print("the card's load after 100 more rounds: %r (busy before: %s)" % (got[1], got[0]))
        if got[0] == str(busy):  # the 100 rounds in one update: 92,000 ns over 100,000 ns
            T.eq(got[1], "92 %", "the card's load")
        else:
            T.check(got[1].endswith(" %"), "the card shows a load: %r" % got)

        # one context at a time: core1 shows isr (and the data variable), not main
        b.call("Page.navigate", url="http://127.0.0.1:%d/#/target/dual" % hport)
        wait_js(b, "document.querySelector('#areas tbody tr') !== null", "area rows")
        b.eval("(() => { const c = document.getElementById('ctx'); c.value = 'core1';"
               " c.dispatchEvent(new Event('change')); })()")
        ids = b.eval("[...document.querySelectorAll('#areas tbody tr')].map(r => r.dataset.id)")
        T.eq(sorted(ids), ["00000002/core1/0", "20000000//0"], "core 1's view")
        T.check(b.eval("document.querySelector('tr[data-id=\"00000002/core1/0\"] input')"
                       ".checked"), "the chart follows the context")
        b.eval("(() => { const c = document.getElementById('ctx'); c.value = 'core0';"
               " c.dispatchEvent(new Event('change')); })()")
        b.eval("(() => { const f = document.getElementById('filter'); f.value = '00000001';"
               " f.dispatchEvent(new Event('input')); })()")
        ids = b.eval("[...document.querySelectorAll('#areas tbody tr')].map(r => r.dataset.id)")
        T.eq(ids, ["00000001/core0/0"], "filtered in core 0")
        b.pump()
        T.eq([e for e in b.errors if e[0] != "network"], [], "no page errors")
    finally:
        if s is not None:
            s.close()
        b.close()
        dm.stop()


def api_targets(hport):
    with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/targets" % hport, timeout=10) as r:
        return json.loads(r.read())


def test_dashboard_stored(d):
    """What is stored, said once: the header's "stored" and each target's card agree with the
    bytes of its segments on disk, and still do after a restart (the sealed segments found on
    disk at start count, not only what this run wrote)."""
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    port, hport, sport = D.free_port(), D.free_port(), D.free_port()
    args = ["--listen", "in=bin11@127.0.0.1:%d" % port]
    dm = D.Daemon(TLCAPD, d, args, http="127.0.0.1:%d" % hport, serve="127.0.0.1:%d" % sport,
                  store=True)
    dm2 = None
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=board format=bin11\n")
        for k in range(3):  # three segments sealed by rotation, each of 2,000 records
            s.sendall(D.calls(1000, t0=10 ** 9 * (k + 1), step=1000, handle=7, core=0))
            dm.wait_stats(lambda st: D.by_name(st, "board")["events"] == 2000 * (k + 1),
                          what="batch %d" % k)
            dm.wait_stats(lambda st: st["store"]["records_written"] == 2000 * (k + 1),
                          what="batch %d written" % k)
            rc, _, err = T.run([TLCAP, "--connect", "127.0.0.1:%d" % sport, "rotate", "board"],
                               timeout=30)
            T.eq(rc, 0, "tlcap rotate: " + err)
        s.close()
        rc, _ = dm.stop()
        T.eq(rc, 0, "first daemon's exit status")
        disk, names = segment_bytes_on_disk(dm.state, "board")
        T.check(disk > 2000 * 3 * 24, "segments on disk: %d bytes in %r" % (disk, names))

        dm2 = D.Daemon(TLCAPD, d, args, http="127.0.0.1:%d" % hport,
                       serve="127.0.0.1:%d" % sport, store=True)
        dm2.wait_sealed()
        disk, names = segment_bytes_on_disk(dm.state, "board")
        tb = [x for x in api_targets(hport) if x["name"] == "board"]
        T.eq(len(tb), 1, "board listed after the restart")
        st = tb[0]["storage"]
        T.eq(st["disk_bytes"], disk, "/api/v1/targets: board's disk_bytes = the files %r" % names)
        T.check(st["disk_segments"] >= 3, "at least the 3 rotated segments: %r" % st)
        print("board on disk after the restart: %d bytes in %r" % (disk, names))

        b.viewport(1400, 900)
        b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
        want = fmt_bytes(disk)
        wait_js(b, "(() => { const c = document.querySelector('.card[data-target=\"board\"]"
                " [data-k=\"stored\"]'); return c !== null && c.textContent === %s; })()"
                % json.dumps(want), "the card says %s stored" % want)
        T.eq(num(cell(b, '.card[data-target="board"]', "segments")), st["disk_segments"],
             "the card's segments")
        head = b.eval("document.getElementById('daemon').textContent")
        T.check(("stored %s in %d segments" % (want, st["disk_segments"])) in head,
                "the header says what the card says: %r" % head)
        # live again: a new open segment counts as it grows, in the card and the header alike
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=board format=bin11\n")
        s.sendall(D.calls(1000, t0=10 ** 10, step=1000, handle=7, core=0))
        dm2.wait_stats(lambda st: st["store"]["records_written"] == 2000, what="written")
        disk2, names2 = segment_bytes_on_disk(dm.state, "board")
        st2 = [x for x in api_targets(hport) if x["name"] == "board"][0]["storage"]
        print("board on disk with an open segment: %d bytes in %r; API %r" % (disk2, names2, st2))
        T.eq(st2["disk_segments"], st["disk_segments"] + 1, "the open segment counted")
        T.eq(st2["disk_bytes"], disk2, "disk_bytes with the open segment = the files")
        want = fmt_bytes(disk2)
        wait_js(b, "(() => { const c = document.querySelector('.card[data-target=\"board\"]"
                " [data-k=\"stored\"]'); return c !== null && c.textContent === %s &&"
                " document.getElementById('daemon').textContent.includes('stored ' + %s +"
                " ' in %d segments'); })()" % (json.dumps(want), json.dumps(want),
                                               st2["disk_segments"]),
                "the card and the header say %s" % want)
        s.close()
        b.pump()
        T.eq([e for e in b.errors if e[0] != "network"], [], "no page errors")
    finally:
        b.close()
        for x in (dm, dm2):
            if x is not None and x.p.poll() is None:
                x.stop()


def wall(a):
    """The page's extreme wall clock: UTC time of day with ms, "-" when not known."""
    import datetime
    ms = a.get("wall_ms", 0)
    if not ms:
        return "-"
    t = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.timezone.utc)
    return t.strftime("%H:%M:%S") + ".%03dZ" % (ms % 1000)


def where(a):
    """The page's extreme location: SEG:OFF..SEG:OFF ("?" an end not known), "-"."""
    if not a.get("seg_first") and not a.get("seg_last"):
        return "-"

    def end(s, o):
        return "%d:%d" % (s, o) if s else "?"
    return end(a.get("seg_first"), a.get("off_first")) + ".." + \
        end(a.get("seg_last"), a.get("off_last"))


def fmt_ns(v):
    """The page's rule for times (docs/http.md)."""
    if v < 1e3:
        return "%d ns" % v
    if v < 1e6:
        return "%.2f µs" % (v / 1e3)
    if v < 1e9:
        return "%.2f ms" % (v / 1e6)
    return "%.3f s" % (v / 1e9)


def get_json(hport, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (hport, path), timeout=20) as r:
        return json.loads(r.read())


def set_value(b, el, value, event):
    b.eval("(() => { const e = document.getElementById(%s); e.value = %s;"
           " e.dispatchEvent(new Event(%s)); })()" % (json.dumps(el), json.dumps(value),
                                                      json.dumps(event)))


def shown_ids(b):
    return b.eval("[...document.querySelectorAll('#areas tbody tr')].map(r => r.dataset.id)")


def test_dashboard_user(d):
    """A user's session on a stored two-core target, each step checked on the page against
    the API's numbers and the durations sent (the brute-force oracle): open the target, see
    the chart with data at once (its past filled from history), switch context, filter, open
    an area's detail and its histogram; at 1,400x900 and 800x600, nothing past the right
    edge. Screenshots of each step are kept in SCREENSHOT_DIR."""
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port],
                  http="127.0.0.1:%d" % hport, store=True)
    s = None
    try:
        s = D.connect(port)
        # core 0: main (handle 0, 300..1199 ns) and fast (handle 1, 20 ns); core 1: isr
        # (handle 2, 100..299 ns); a data variable
        durs = {0: [], 1: [], 2: []}
        rec, t = b"", 1000
        for i in range(400):
            dm_, di = 300 + (i * 97) % 900, 100 + (i * 13) % 200
            rec += (T.bin11(0, 3, 0, 0, t) + T.bin11(0, 0, 0, 0, t + dm_) +
                    T.bin11(1, 3, 0, 0, t + 1300) + T.bin11(1, 0, 0, 0, t + 1320) +
                    T.bin11(2, 3, 1, 0, t + 100) + T.bin11(2, 0, 1, 0, t + 100 + di) +
                    T.bin11(0x20000000, 4, 0, i, t + 1500))
            durs[0].append(dm_)
            durs[1].append(20)
            durs[2].append(di)
            t += 2000
        s.sendall(b"TLCAP/1 target=dual format=bin11\n" + rec)
        dm.wait_stats(lambda st: any(x["events"] == 2800 for x in st["targets"]), what="events")
        dm.wait_stats(lambda st: st["store"]["records_written"] == 2800, what="stored")

        api = get_json(hport, "/api/v1/targets/dual/stats")
        rows = {(r["handle"], r.get("context", ""), r.get("state", 0)): r for r in api["rows"]}
        main_n = rows[("00000000", "Neutral", 0)]
        T.eq(main_n["count"], 400, "API: main's count")

        for w, h in ((1400, 900), (800, 600)):
            b.viewport(w, h)
            b.call("Page.navigate", url="http://127.0.0.1:%d/#/target/dual" % hport)
            # 1. the chart has data at once: the busiest areas ticked, the past from history
            wait_js(b, "document.body !== null && document.body.dataset.past !== undefined &&"
                    " Number(document.body.dataset.past) > 0", "the chart's past loaded",
                    timeout=60)
            wait_js(b, "document.querySelector('#chart canvas') !== null", "chart drawn")
            labels = b.eval("S.chart.getLabels().slice(1)")
            T.eq(labels, ["00000000", "00000002", "00000001"], "the top areas by net time")
            # what the past says of main equals what the API counts of it
            past = b.eval("S.past.reduce((a, p) => a + (p.rows && p.rows.get("
                          "'00000000/Neutral/0') ? p.rows.get('00000000/Neutral/0').count"
                          " : 0), 0)")
            T.eq(past, main_n["count"], "main's calls in the chart's past")
            top = b.eval("Math.max(...S.series.map(p => p[1] || 0))")
            T.check(top > 0, "main's curve has data: %r" % top)
            legend = b.eval("(() => { const l = document.getElementById('legend')"
                            ".getBoundingClientRect(), c = document.getElementById('chart')"
                            ".getBoundingClientRect(); return l.top >= c.bottom - 0.5; })()")
            T.check(legend, "the legend is under the chart, not on the curves")
            cut = b.eval("(() => { const c = document.getElementById('chart')"
                         ".getBoundingClientRect(); return [...document.querySelectorAll("
                         "'#chart .dygraph-axis-label')].filter(e => { const r ="
                         " e.getBoundingClientRect(); return r.left < c.left - 0.5 ||"
                         " r.right > c.right + 0.5 || r.bottom > c.bottom + 0.5 ||"
                         " e.scrollWidth > e.clientWidth + 1 || r.height > 20; })"
                         ".map(e => { const r = e.getBoundingClientRect(); return e.textContent"
                         " + ' at ' + [r.left, r.right, r.bottom, r.height, e.scrollWidth,"
                         " e.clientWidth].map(Math.round).join(',') + ' in ' + [c.left, c.right,"
                         " c.bottom].map(Math.round).join(','); }); })()")
            T.eq(cut, [], "axis labels cut or wrapped")
            no_overflow(b, "the target page at %dx%d" % (w, h))
            b.screenshot(os.path.join(SHOTS, "user_chart_%dx%d.png" % (w, h)))

            # 2. one context at a time: core1 shows isr and the data variable
            set_value(b, "ctx", "core1", "change")
            want = sorted("%s/%s/%d" % k for k in rows
                          if k[1] in ("core1", ""))
            T.eq(sorted(shown_ids(b)), want, "core 1's view: its rows in the API")
            T.eq(b.eval("S.chart.getLabels().slice(1)"), ["00000002"], "the chart follows")

            # 3. filter: in core 0, the rows whose handle has "0001"
            set_value(b, "ctx", "core0", "change")
            set_value(b, "filter", "0001", "input")
            T.eq(shown_ids(b), ["00000001/core0/0"], "filtered in core 0")
            set_value(b, "filter", "", "input")

            # 4. main's detail on core 0: its figures, windows and histogram
            b.eval("document.querySelector('tr[data-id=\"00000000/core0/0\"] button.area')"
                   ".click()")
            wait_js(b, "document.getElementById('detail').dataset.ready === '1'",
                    "the detail panel filled")
            r0 = rows[("00000000", "core0", 0)]
            for k in ("p50", "p99", "p999", "min", "max"):
                T.eq(cell(b, "#detail", "net-" + k), fmt_ns(r0["net"][k]), "detail: net " + k)
            T.eq(cell(b, "#detail", "net-n"), "400", "detail: net samples")
            T.eq(r0["net"]["min"], min(durs[0]), "API min = the oracle's")
            T.eq(r0["net"]["max"], max(durs[0]), "API max = the oracle's")
            wins = b.eval("[...document.querySelectorAll('#d-windows tbody tr')]"
                          ".map(r => r.cells[0].textContent)")
            T.eq(wins, ["last %g s" % (x["window_ns"] / 1e9) for x in r0["windows"]],
                 "a line per window")
            hist = get_json(hport, "/api/v1/targets/dual/histogram?area=00000000&context=%d"
                            "&kind=net" % b.eval("S.rows.get('00000000/core0/0').ctx"))
            T.eq(hist["samples"], 400, "histogram: samples")
            for gt, le, n in hist["buckets"]:  # the oracle: the durations sent
                T.eq(n, sum(1 for x in durs[0] if gt < x <= le), "bucket (%d, %d]" % (gt, le))
            T.check(len(hist["buckets"]) > 50, "1 %% buckets: %d" % len(hist["buckets"]))
            T.eq(b.eval("Number(document.getElementById('d-hist').dataset.samples)"), 400,
                 "the histogram drawn holds every sample")
            T.eq(b.eval("[...document.querySelectorAll('#d-hist rect')]"
                        ".reduce((a, r) => a + Number(r.dataset.count), 0)"), 400, "bars")
            T.eq(b.eval("document.querySelectorAll('#d-hist line.q').length"), 4,
                 "p50, p90, p99, p99.9 marked")
            no_overflow(b, "the detail at %dx%d" % (w, h))
            b.screenshot(os.path.join(SHOTS, "user_detail_%dx%d.png" % (w, h)))
            b.eval("document.getElementById('d-close').click()")
            set_value(b, "ctx", "Neutral", "change")

            # 5. load per core: each core's areas' net time over the target time that passed
            set_value(b, "metric", "load", "change")
            T.eq(b.eval("S.chart.getLabels().slice(1)"), ["core0", "core1"], "a curve per core")
            busy = {"core0": sum(durs[0]) + sum(durs[1]), "core1": sum(durs[2])}
            for c in ("core0", "core1"):
                got = b.eval("S.past.reduce((a, p) => a + (p.rows ? p.ctxNet.get(%s) || 0 : 0),"
                             " 0)" % json.dumps(c))
                T.eq(got, busy[c], "%s's net time in the chart's past = the durations sent" % c)
            pts = b.eval("S.past.filter(p => p.rows && p.span > 0).map(p => p.span)")
            if len(pts) == 1:  # the burst in one range: its span is the records' (first to last)
                T.eq(pts[0], (1000 + 399 * 2000 + 1500) - 1000, "the range's target time")
                vals = b.eval("pastSeries().filter(p => p[1] !== null && p[1] > 0)"
                              ".map(p => p.slice(1))")
                T.eq(len(vals), 1, "one past point with load")
                for i, c in enumerate(("core0", "core1")):
                    T.check(abs(vals[0][i] - busy[c] * 100.0 / pts[0]) < 1e-9,
                            "%s's load %r%%" % (c, vals[0][i]))
            b.screenshot(os.path.join(SHOTS, "user_load_%dx%d.png" % (w, h)))

            # 6. a data variable's values over time: the last written, as the API says
            T.eq(rows[("20000000", "", 0)]["value"], 399, "API: the variable's last value")
            set_value(b, "metric", "values", "change")
            T.eq(b.eval("S.chart.getLabels().slice(1)"), ["20000000"], "the variable charted")
            last = b.eval("S.past.filter(p => p.rows && p.rows.has('20000000//0'))"
                          ".map(p => p.rows.get('20000000//0').value).pop()")
            T.eq(last, 399, "the past's last value")
            n = b.eval("Number(document.body.dataset.updates)")
            wait_js(b, "Number(document.body.dataset.updates) > %d" % n, "a live update")
            T.eq(b.eval("S.series[S.series.length - 1][1]"), 399, "the live value")
            set_value(b, "metric", "net", "change")
        b.pump()
        T.eq([e for e in b.errors if e[0] != "network"], [], "no page errors")
    finally:
        if s is not None:
            s.close()
        b.close()
        dm.stop()


MIN = 60 * 10**9


def minutes_stream(areas, minutes, per_min, slow, seed=1, calls=None):
    """Calls of `areas` functions (handles 0x1000 + i) on core 0, `per_min` per area in each of
    `minutes` minutes of target time, durations 1-5 us; slow = (area, factor, first minute):
    that area's durations times factor from that minute on. Returns (bytes, {(area, minute):
    [durations]}), minute the one the call's exit fell in (the rollup's); `calls`, a dict if
    given, gets {area: [(entry time, duration)]} in the order sent."""
    rnd = random.Random(seed)
    out, got = [], {}
    for m in range(minutes):
        t = m * MIN + 1000
        gap = (MIN - 2000) // (areas * per_min)
        for _ in range(per_min):
            for a in range(areas):
                dur = 1000 + rnd.randrange(0, 4000)
                if a == slow[0] and m >= slow[2]:
                    dur *= slow[1]
                out.append(T.bin11(0x1000 + a, 3, 0, 0, t))
                out.append(T.bin11(0x1000 + a, 0, 0, 0, t + dur))
                got.setdefault((a, (t + dur) // MIN), []).append(dur)
                if calls is not None:
                    calls.setdefault(a, []).append((t, dur))
                t += gap
    return b"".join(out), got


def chart_rows(b, chart):
    """The rows a dygraphs chart draws: [[ms, v1, v2, ...]]."""
    return b.eval("(() => { const g = %s; const out = [];"
                  " for (let i = 0; i < g.numRows(); i++) { const r = [];"
                  " for (let j = 0; j < g.numColumns(); j++) r.push(g.getValue(i, j));"
                  " out.push(r); } return out; })()" % chart)


def axis_cut(b, box):
    return b.eval("(() => { const c = document.getElementById(%s).getBoundingClientRect();"
                  " return [...document.querySelectorAll('#' + %s + ' .dygraph-axis-label')]"
                  ".filter(e => { const r = e.getBoundingClientRect(); return r.left <"
                  " c.left - 0.5 || r.right > c.right + 0.5 || r.bottom > c.bottom + 0.5 ||"
                  " e.scrollWidth > e.clientWidth + 1 || r.height > 20; })"
                  ".map(e => e.textContent); })()" % (json.dumps(box), json.dumps(box)))


def test_dashboard_history(d):
    """A target's trend and two of its ranges compared (SPEC 14, from the rollups), checked
    against the API's answers and the durations sent: ten minutes of target time of six areas,
    area 0x1003 three times slower from minute 5. The trend of the ticked (busiest) areas is
    there on arrival; its points are the API's per-step means, then maxima, over an hour and a
    week; the compare view lists the API's rows in its order (the slowed area first, with its
    factor) for two target-time ranges typed in its pickers. At 1,400x900 and 800x600, nothing
    past the right edge, no axis label cut."""
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port],
                  http="127.0.0.1:%d" % hport, store=True)
    s = None
    areas, slowed, factor = 6, 3, 3
    data, got = minutes_stream(areas, 10, 30, (slowed, factor, 5), seed=7)
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=hist format=bin11\n" + data)
        n = areas * 10 * 30 * 2
        dm.wait_stats(lambda st: any(x["events"] == n for x in st["targets"]), what="events")
        durs = {a: [x for (h, _), v in got.items() if h == a for x in v] for a in range(areas)}
        api = get_json(hport, "/api/v1/targets/hist/stats")
        nets = sorted(((r["net"]["total"], r["handle"]) for r in api["rows"]
                       if r.get("context") == "core0"), reverse=True)
        top = [h for _, h in nets[:3]]
        T.eq(top[0], "%08x" % (0x1000 + slowed), "the slowed area has the most net time")
        ra, rb = "ns:0..ns:%d" % (5 * MIN), "ns:%d..ns:%d" % (5 * MIN, 11 * MIN)
        for w, h in ((1400, 900), (800, 600)):
            b.viewport(w, h)
            b.call("Page.navigate", url="about:blank")  # a new page, not a hash change
            b.call("Page.navigate", url="http://127.0.0.1:%d/#/target/hist" % hport)
            # 1. the trend of the busiest areas, on arrival: the API's mean per step
            wait_js(b, "typeof S !== 'undefined' && S.trend !== null &&"
                    " document.getElementById('trend-box').dataset.ready === '1' &&"
                    " S.trendChart !== null", "the trend drawn on arrival", timeout=60)
            # one core: its context is the view (no Neutral rows), each trend of that context
            T.eq(b.eval("S.trend.map(x => x.id)"), ["%s/core0/0" % x for x in top],
                 "the trend charts the ticked areas")
            ctx = b.eval("S.rows.get('%s/core0/0').ctx" % top[0])
            for rng, step in (("1h", "1m"), ("7d", "2h")):
                if rng != "1h":
                    set_value(b, "t-range", rng, "change")
                    wait_js(b, "document.getElementById('trend-box').dataset.ready === '1' &&"
                            " S.trendKey.includes('|%s|')" % rng, "the trend over " + rng,
                            timeout=60)
                docs = [get_json(hport, "/api/v1/targets/hist/trend?area=0x%s&since=-%s&step=%s"
                                 "&context=%d" % (x, rng, step, ctx)) for x in top]
                for stat in ("mean", "max", "count"):
                    set_value(b, "t-stat", stat, "change")
                    rows = chart_rows(b, "S.trendChart")
                    want = {}
                    for i, doc in enumerate(docs):
                        for st in doc["steps"]:
                            want.setdefault(st["start"] // 10**6, [None] * len(docs))[i] = st[stat]
                    T.eq(rows, [[k] + want[k] for k in sorted(want)],
                         "the trend's %s per step over %s = the API's" % (stat, rng))
                    T.eq(b.eval("S.trendChart.getLabels().slice(1)"), top, "the trend's areas")
                # the oracle: every sample of each area is in some step, the maxima are the
                # durations sent
                for i, x in enumerate(top):
                    a = int(x, 16) - 0x1000
                    T.eq(sum(st["count"] for st in docs[i]["steps"]), len(durs[a]),
                         "%s's samples over %s" % (x, rng))
                    T.eq(max(st["max"] for st in docs[i]["steps"]), max(durs[a]),
                         "%s's max over %s" % (x, rng))
                T.eq(axis_cut(b, "trend"), [], "trend axis labels cut (%s, %dx%d)" % (rng, w, h))
                no_overflow(b, "the trend over %s at %dx%d" % (rng, w, h))
            set_value(b, "t-stat", "mean", "change")
            b.screenshot(os.path.join(SHOTS, "history_trend_%dx%d.png" % (w, h)))
            # the trend follows the ticks: one more area, one more curve, the API's means
            extra = [x for _, x in nets if x not in top][0]
            b.eval("document.querySelector('tr[data-id=\"%s/core0/0\"] input').click()" % extra)
            wait_js(b, "document.getElementById('trend-box').dataset.ready === '1' &&"
                    " S.trend !== null && S.trend.length === 4", "the trend of 4 areas",
                    timeout=60)
            doc = get_json(hport, "/api/v1/targets/hist/trend?area=0x%s&since=-7d&step=2h"
                           "&context=%d" % (extra, ctx))
            got_col = [r[4] for r in chart_rows(b, "S.trendChart") if r[4] is not None]
            T.eq(got_col, [st["mean"] for st in doc["steps"]], "the ticked area's means")
            T.eq(b.eval("S.trendChart.getLabels()[4]"), extra, "its curve's name")

            # 2. two ranges compared: the API's rows in its order, the slowed area first
            set_value(b, "cmp-a", ra, "input")
            set_value(b, "cmp-b", rb, "input")
            b.eval("document.getElementById('cmp-form').requestSubmit()")
            wait_js(b, "document.getElementById('compare').dataset.ready === '1' &&"
                    " (document.getElementById('compare').dataset.url || '').includes(%s)"
                    % json.dumps(urllib.parse.quote(rb, safe="")), "the compare view", timeout=60)
            doc = get_json(hport, "/api/v1/targets/hist/diff?a=%s&b=%s&context=%d"
                           % (ra, rb, ctx))
            shown = b.eval("[...document.querySelectorAll('#cmp-table tbody tr')].map(r =>"
                           " [r.dataset.area, ...[...r.cells].map(c => c.textContent)])")
            T.eq([x[0] for x in shown], ["%08x" % x["area"] for x in doc["areas"]],
                 "the areas in the API's order")
            T.eq(shown[0][0], "%08x" % (0x1000 + slowed), "the slowed area first")
            for x, row in zip(doc["areas"], shown):
                T.eq(row[2:4], [fmt_int(x["a"]["count"]), fmt_int(x["b"]["count"])], "counts")
                T.eq(row[4:6], [fmt_ns(round(x["a"]["mean"])), fmt_ns(round(x["b"]["mean"]))],
                     "means")
                T.eq(row[6], "×%.3f" % x["factor"], "the change of %08x" % x["area"])
                T.eq(row[8:10], [fmt_ns(x["a"]["p99"]), fmt_ns(x["b"]["p99"])], "p99")
                T.eq(row[11].startswith("yes"), x["significant"], "significant")
                # the oracle: the ratio of the means of the durations sent
                a = x["area"] - 0x1000
                va = [v for (k, m), vs in got.items() if k == a and m < 5 for v in vs]
                vb = [v for (k, m), vs in got.items() if k == a and m >= 5 for v in vs]
                want = (sum(vb) / len(vb)) / (sum(va) / len(va))
                T.check(abs(x["factor"] - want) < 1e-6 * want, "factor of %d" % a)
                T.eq(x["significant"], a == slowed, "only the slowed area is significant")
            no_overflow(b, "the compare view at %dx%d" % (w, h))
            b.eval("document.getElementById('compare').scrollIntoView()")
            b.screenshot(os.path.join(SHOTS, "history_compare_%dx%d.png" % (w, h)))
            # budgets: this daemon has none; the page shows no budget anywhere
            wait_js(b, "document.body.dataset.budgets !== undefined", "violations asked")
            T.check(b.eval("document.getElementById('budgets-box').hidden"), "no budgets box")
            T.check(b.eval("[...document.querySelectorAll('.budget-col')].every(e => e.hidden)"),
                    "no budget column")
        b.pump()
        T.eq([e for e in b.errors if e[0] != "network"], [], "no page errors")
    finally:
        if s is not None:
            s.close()
        b.close()
        dm.stop()


def fmt_int(v):
    return "{:,}".format(v)


def test_dashboard_budgets(d):
    """Budgets on the page (SPEC 13), against /api/v1/targets/NAME/violations and the durations
    sent: tlcapd runs with a budget of 8 us of net time on area 0x1003, which a slowed stream
    breaks. The overview's card says "budgets: 1, violations: N" in red, N the API's and the
    count of durations over 8 us; the areas table has a budget column with the violations of
    that area's row (red); the violations list shows the kept violations newest first (value
    against limit) and the worst, and "show the moment" gives the `tlcap around` command of the
    violation's reference. Skipped, saying so, while tlcapd has no /violations path (budgets
    served over HTTP come with the budgets branch). Run alone: TLC_ONLY=test_dashboard_budgets
    (ctest test_http_dashboard_budgets), so that its skip is ctest's."""
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    bud = os.path.join(d, "budgets.ini")
    limit = 8000
    with open(bud, "w") as f:
        f.write("[budget slow_net]\narea = 00001003\nstat = net\nmax = 8us\n")
    port, hport = D.free_port(), D.free_port()
    dm = D.Daemon(TLCAPD, d, ["--listen", "in=bin11@127.0.0.1:%d" % port, "--budgets", bud],
                  http="127.0.0.1:%d" % hport, store=True)
    s = s2 = None
    calls, calls2 = {}, {}
    data, got = minutes_stream(6, 10, 30, (3, 3, 5), seed=7, calls=calls)
    over = [v for (a, _), vs in got.items() if a == 3 for v in vs if v > limit]
    # a second board, none slowed: range B of the compare view taken from it (b_target)
    data2, _ = minutes_stream(6, 10, 30, (3, 1, 10), seed=11, calls=calls2)
    try:
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=hist format=bin11\n" + data)
        s2 = D.connect(port)
        s2.sendall(b"TLCAP/1 target=other format=bin11\n" + data2)
        dm.wait_stats(lambda st: sorted(x["events"] for x in st["targets"]) == [3600, 3600],
                      what="events")
        try:
            doc = get_json(hport, "/api/v1/targets/hist/violations")
        except urllib.error.HTTPError as e:
            body = json.loads(e.read() or b"{}")
            msg = (body.get("error") or {}).get("message", "")
            if e.code == 404 and msg.startswith("no such path"):
                print("SKIP: this tlcapd has no /api/v1/targets/NAME/violations (%r): the"
                      " budgets part of the dashboard is tested once it serves them" % msg)
                sys.exit(T.SKIP)
            raise
        T.check(len(over) > 0, "the stream breaks the budget")
        T.eq(doc["violations"], len(over), "API: violations = the durations over 8 us")
        T.eq([x["name"] for x in doc["budgets"]], ["slow_net"], "API: the budget")
        kept, worst = doc["violations_kept"], doc["worst"]
        T.eq(worst[0]["value"], max(over), "API: the worst = the longest duration sent")
        for w, h in ((1400, 900), (800, 600)):
            b.viewport(w, h)
            b.call("Page.navigate", url="about:blank")
            b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
            card = '.card[data-target="hist"] [data-k="budgets"]'
            want = "budgets: 1, violations: %s" % fmt_int(len(over))
            wait_js(b, "(() => { const e = document.querySelector(%s); return e !== null &&"
                    " !e.hidden && e.textContent === %s; })()" % (json.dumps(card),
                                                                  json.dumps(want)),
                    "the card says " + want)
            T.check(b.eval("document.querySelector(%s).classList.contains('bad')"
                           % json.dumps(card)), "the card's budget line is red")
            no_overflow(b, "the overview with budgets at %dx%d" % (w, h))
            b.screenshot(os.path.join(SHOTS, "budgets_overview_%dx%d.png" % (w, h)))

            b.call("Page.navigate", url="http://127.0.0.1:%d/#/target/hist" % hport)
            row = 'tr[data-id="00001003/core0/0"]'
            wait_js(b, "(() => { const c = document.querySelector(%s + ' [data-k=\"budget\"]');"
                    " return c !== null && !document.getElementById('budgets-box').hidden; })()"
                    % json.dumps(row), "the budget column and the violations list")
            per = sum(c["violations"] for c in doc["counts"]
                      if c["handle"] == "00001003" and c["context"] == "core0")
            T.eq(per, len(over), "API: the counts of 0x1003 on core 0")
            T.eq(cell(b, row, "budget"), fmt_int(per) + " violations", "the row's violations")
            T.check(b.eval("document.querySelector(%s).classList.contains('violated')"
                           % json.dumps(row)), "the row is red")
            T.eq(cell(b, 'tr[data-id="00001000/core0/0"]', "budget"), "",
                 "an area without budget: nothing")
            T.check(not b.eval("document.querySelector('tr[data-id=\"00001000/core0/0\"]')"
                               ".classList.contains('violated')"), "not red")
            shown = b.eval("[...document.querySelectorAll('#violations tbody tr')].map(r =>"
                           " [r.dataset.ref, ...[...r.cells].map(c => c.textContent)])")
            newest = list(reversed(kept))[:100]
            T.eq([x[0] for x in shown], [v["ref"] for v in newest], "the kept ones, newest first")
            for v, x in zip(newest, shown):
                T.eq(x[1:6], [v["budget"], v["area"], v["context"] or "", fmt_ns(v["value"]),
                              "max " + fmt_ns(v["limit"])], "violation " + v["ref"])
            b.eval("document.querySelector('#violations tbody tr button').click()")
            T.eq(b.eval("document.getElementById('moment-cmd').textContent"),
                 "tlcap around hist " + newest[0]["ref"], "the moment's command")
            no_overflow(b, "the violations at %dx%d" % (w, h))
            b.eval("document.getElementById('budgets-box').scrollIntoView()")
            b.screenshot(os.path.join(SHOTS, "budgets_target_%dx%d.png" % (w, h)))
            set_value(b, "v-which", "worst", "change")
            T.eq(b.eval("[...document.querySelectorAll('#violations tbody tr')]"
                        ".map(r => r.dataset.ref)"), [v["ref"] for v in reversed(worst)],
                 "the worst of each budget")
            set_value(b, "v-which", "kept", "change")
            check_trend_violations(b, hport, len(over))
            check_extremes(b, hport, calls[3], w, h)
            check_compare_other(b, hport, calls, calls2, w, h)
        b.pump()
        T.eq([e for e in b.errors if e[0] != "network"], [], "no page errors")
    finally:
        for c in (s, s2):
            if c is not None:
                c.close()
        b.close()
        dm.stop()


ROLLUPS_SEEN_JS = """(() => {
  window.rollupsSeen = [];
  new MutationObserver(() => {
    const c = document.querySelector('.card[data-target="board"] [data-k="rollups"]');
    const seen = window.rollupsSeen;
    if (c && seen[seen.length - 1] !== c.textContent) seen.push(c.textContent);
  }).observe(document.getElementById('cards'), {childList: true, subtree: true});
})()"""


def rollups_cell(b, name):
    """The card's rollups cell: [text, title, red, lines it takes]."""
    return b.eval("(() => { const c = document.querySelector('.card[data-target=\"%s\"]"
                  " [data-k=\"rollups\"]'); if (!c) return null; return [c.textContent,"
                  " c.parentNode.title, c.parentNode.classList.contains('bad'),"
                  " c.getClientRects().length]; })()" % name)


# Each segment a rollup rebuild reads made to take this much longer (tlcapd-test's
# TLCAP_TEST_REBUILD_SEGMENT_MS, daemon/rolld.c): 40 segments, a rebuild of 12 s, longer than the
# page takes to find the restarted daemon (its backoff waits up to 5 s) and to be sent the next
# live message (1 s), so that the page is seen showing it running.
REBUILD_SEGMENT_MS = 300


def rebuild_shown(b):
    """What the card's rollups cell says of the rebuild: (K, N, samples) while it says
    "rebuilding K/N" (its title: "... K of N read, S samples so far"), "done" once it says
    "rebuilt ...", else None."""
    b.pump()
    c = rollups_cell(b, "board")
    if c is None:
        return None
    m = re.fullmatch(r"rebuilding ([\d,]+)/([\d,]+)", c[0])
    if m is None:
        return "done" if c[0].startswith("rebuilt ") else None
    t = re.search(r": ([\d,]+) of ([\d,]+) read, ([\d,]+) samples so far$", c[1])
    T.check(t is not None and t.group(1, 2) == m.group(1, 2),
            "the title of %r: %r" % (c[0], c[1]))
    return tuple(int(x.replace(",", "")) for x in (m.group(1), m.group(2), t.group(3)))


def api_rollups(hport):
    return [x["rollups"] for x in api_targets(hport) if x["name"] == "board"][0]


def check_rebuilding(b, hport, segs):
    """The card, on the page that reconnected by itself to the restarted daemon, says
    "rebuilding K/N" while the rebuild runs, as /api/v1/targets says it about the same moment:
    the page polled until it shows the rebuild running (it fails if the page only ever shows
    its end, or nothing); then, between two reads of the API, the card's K (and its samples)
    caught up with the first read's and not past the second's, N the segments on disk."""
    first = D.wait_until(lambda: rebuild_shown(b), timeout=30, step=0.05,
                         what="the card saying the rollups are being rebuilt")
    T.check(first != "done", "the card showed the rebuild running before it ended, not only "
            "its end (a rebuild too quick to be seen: TLCAP_TEST_REBUILD_SEGMENT_MS, tlcapd-test)")
    T.eq(first[1], segs, "the card's first rebuilding K/N (%r): N the segments on disk" % (first,))
    T.check(first[0] <= segs, "the card's first K/N: K within N: %r" % (first,))
    before = api_rollups(hport)
    T.eq((before["rebuild"], before["segments"]), ("rebuilding", segs),
         "/api/v1/targets while the card says rebuilding: %r" % before)
    T.check(first[0] <= before["segments_read"], "the card's K (%d) not past the API's read "
            "after it: %r" % (first[0], before))

    def caught_up():
        x = rebuild_shown(b)
        return x if x == "done" or (x is not None and x[0] >= before["segments_read"]) else None
    page = D.wait_until(caught_up, timeout=10, step=0.05,
                        what="the card at the API's %d segments read" % before["segments_read"])
    after = api_rollups(hport)
    T.check(page != "done", "the card still says rebuilding when it reaches the API's %r"
            % before)
    T.eq((page[1], after["segments"]), (segs, segs), "N of the card and the API: the segments "
         "on disk (%r, %r)" % (page, after))
    T.check(before["segments_read"] <= page[0] <= after["segments_read"] <= segs,
            "the card's K between the API's read before and after: %d <= %d <= %d <= %d"
            % (before["segments_read"], page[0], after["segments_read"], segs))
    T.check(page[2] <= after["samples"], "the card's samples (%d) not past the API's read after "
            "it (%d)" % (page[2], after["samples"]))
    text, _, red, lines = rollups_cell(b, "board")
    T.check(not red and lines == 1, "%r: not red, on one line" % text)
    b.screenshot(os.path.join(SHOTS, "rollups_rebuilding_overview.png"))
    print("the card: %r first, %r between the API's %r and %r" % (first, page, before, after))


def test_dashboard_rollups(d):
    """The overview's card shows the target's rollups as /api/v1/targets has them (docs/rollups.md
    "Rebuilt from the segments"): "off" on a tlcapd without storage (rollups null); "-" on a
    tlcapd that stores, its rollups on disk (no rebuild); and, once its rollup directory was
    deleted and it restarted, the rebuild from the segments: "rebuilt N at HH:MM" with N the
    API's segments read (every segment on disk: a manifest each) and HH:MM the API's end time,
    on one line, its title with the API's samples. On the way, with each segment's reading
    slowed (tlcapd-test's TLCAP_TEST_REBUILD_SEGMENT_MS), the page that reconnected by itself is
    seen showing "rebuilding K/N" as the API says it at the same moment (check_rebuilding), and
    everything it showed was "rebuilding K/N" with N the same segments and K growing. Run alone:
    TLC_ONLY=test_dashboard_rollups (ctest test_http_dashboard_rollups, with tlcapd-test)."""
    try:
        b = Browser()
    except FileNotFoundError:
        print("SKIP: chromium not installed (apt-get install chromium)")
        sys.exit(T.SKIP)
    port, hport = D.free_port(), D.free_port()
    listen = ["--listen", "in=bin11@127.0.0.1:%d" % port]
    dm = None
    try:
        # no storage: no rollups
        off = os.path.join(d, "off")
        os.mkdir(off)
        dm = D.Daemon(TLCAPD, off, listen, http="127.0.0.1:%d" % hport)
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=board format=bin11\n" + D.calls(5, handle=7))
        dm.wait_stats(lambda st: D.by_name(st, "board")["events"] == 10, what="events")
        T.eq([x["rollups"] for x in api_targets(hport) if x["name"] == "board"], [None],
             "/api/v1/targets without storage: rollups null")
        b.viewport(1400, 900)
        b.call("Page.navigate", url="http://127.0.0.1:%d/" % hport)
        wait_js(b, "document.querySelector('.card[data-target=\"board\"]') !== null", "card")
        T.eq(rollups_cell(b, "board")[0], "off", "the card without rollups")
        s.close()
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status without storage")

        # storage: many segments by rotation; the rollups on disk, nothing rebuilt
        on = os.path.join(d, "on")
        os.mkdir(on)
        args = listen + ["--rotate-bytes", "%d" % (24 * 2000), "--sync", "never"]
        dm = D.Daemon(TLCAPD, on, args, http="127.0.0.1:%d" % hport, store=True)
        s = D.connect(port)
        s.sendall(b"TLCAP/1 target=board format=bin11\n" +
                  D.calls(40000, t0=1000, step=1000, handle=7))
        s.shutdown(1)
        D.wait_eof(s, timeout=60)
        s.close()
        dm.wait_stats(lambda st: st["store"]["queue_bytes"] == 0 and
                      D.by_name(st, "board")["events"] == 80000, what="the records written")
        rb = [x["rollups"] for x in api_targets(hport) if x["name"] == "board"][0]
        T.eq(rb["rebuild"], "none", "/api/v1/targets: no rebuild: %r" % rb)
        wait_js(b, "(() => { const c = document.querySelector('.card[data-target=\"board\"]"
                " [data-k=\"rollups\"]'); return c !== null && c.textContent === '-'; })()",
                "the card says no rebuild (the page reconnected to the daemon that stores)",
                timeout=20)
        # what the card shows from now on, across the restart and the rebuild
        b.eval(ROLLUPS_SEEN_JS)
        rc, _ = dm.stop()
        T.eq(rc, 0, "exit status")
        segs = len([f for f in os.listdir(os.path.join(dm.state, "board"))
                    if f.endswith(".manifest")])
        T.check(segs >= 30, "many segments stored: %d" % segs)

        # the rollups deleted: the restarted daemon rebuilds them from the segments, slowly
        shutil.rmtree(os.path.join(dm.state, ".rollup"))
        dm = D.Daemon(TLCAPD, on, args, http="127.0.0.1:%d" % hport, store=True,
                      env={"TLCAP_TEST_REBUILD_SEGMENT_MS": str(REBUILD_SEGMENT_MS)})
        check_rebuilding(b, hport, segs)
        dm.wait_stats(lambda st: st["rollup"]["rebuilds_done"] == 1, timeout=60,
                      what="the rollups rebuilt")
        rb = [x["rollups"] for x in api_targets(hport) if x["name"] == "board"][0]
        T.eq((rb["rebuild"], rb["segments_read"], rb["segments"]), ("done", segs, segs),
             "/api/v1/targets: done, every segment on disk read: %r" % rb)
        T.check(rb["samples"] > 0 and rb["done_unix_ms"] > 0, "samples and time: %r" % rb)
        want = "rebuilt %s at %s" % (fmt_int(rb["segments_read"]),
                                     time.strftime("%H:%M", time.localtime(
                                         rb["done_unix_ms"] / 1000)))
        for w, h in ((1400, 900), (800, 600)):
            b.viewport(w, h)
            wait_js(b, "(() => { const c = document.querySelector('.card[data-target=\"board\"]"
                    " [data-k=\"rollups\"]'); return c !== null && c.textContent === %s; })()"
                    % json.dumps(want), "the card says %s (%dx%d)" % (want, w, h), timeout=20)
            text, title, red, lines = rollups_cell(b, "board")
            T.check(not red, "every segment read: not red")
            T.eq(lines, 1, "%r on one line at %dx%d" % (text, w, h))
            T.check(("from %s of %s stored segments, %s samples, at " %
                     (fmt_int(segs), fmt_int(segs), fmt_int(rb["samples"]))) in title,
                    "the title: %r" % title)
            no_overflow(b, "the overview with rollups at %dx%d" % (w, h))
            b.screenshot(os.path.join(SHOTS, "rollups_overview_%dx%d.png" % (w, h)))
        seen = b.eval("window.rollupsSeen")
        print("the card's rollups across the restart: %r" % seen)
        while seen and seen[0] == "-":  # the first daemon's, until the page reconnected
            seen.pop(0)
        T.eq(seen[-1:], [want], "the card ends on the rebuild done")
        T.check(len(seen) > 1, "the card said rebuilding before it said %r: %r" % (want, seen))
        read = []
        for x in seen[:-1]:
            T.check(x.startswith("rebuilding ") and x.endswith("/" + fmt_int(segs)),
                    "on the way: rebuilding K/%d, not %r" % (segs, x))
            read.append(int(x[len("rebuilding "):].split("/")[0].replace(",", "")))
        T.check(read == sorted(read) and all(k <= segs for k in read),
                "the segments read only grow: %r" % read)
        b.pump()
        T.eq([e for e in b.errors if e[0] != "network"], [], "no page errors")
    finally:
        b.close()
        if dm is not None and dm.p.poll() is None:
            dm.stop()


def check_trend_violations(b, hport, n_over):
    """The trend marks the steps in which 0x1003 broke its budget: a row per step in the
    table under the chart (newest first) with the API's count, a red ring per step; the counts
    over the steps add up to the durations sent over the limit."""
    wait_js(b, "typeof S !== 'undefined' && S.trend !== null && S.trendChart !== null &&"
            " document.getElementById('trend-box').dataset.ready === '1'",
            "the trend drawn", timeout=60)
    row = "00001003/core0/0"
    if row not in b.eval("S.trend.map(x => x.id)"):
        b.eval("document.querySelector('tr[data-id=\"%s\"] input').click()" % row)
        wait_js(b, "S.trend !== null && S.trend.some(x => x.id === '%s') &&"
                " document.getElementById('trend-box').dataset.ready === '1'" % row,
                "the trend of 0x1003", timeout=60)
    ctx = b.eval("S.rows.get('%s').ctx" % row)
    want = []
    for x in b.eval("S.trend.map(x => x.id)"):
        doc = get_json(hport, "/api/v1/targets/hist/trend?area=0x%s&since=-1h&step=1m"
                       "&context=%d" % (x.split("/")[0], ctx))
        for st in doc["steps"]:
            if st.get("violations", 0) > 0:
                want.append((st["start"], x, st["violations"]))
    want.sort(key=lambda v: -v[0])
    T.eq(sum(v[2] for v in want), n_over, "API: the steps' violations = the durations over")
    T.check(all(v[1] == row for v in want), "only 0x1003 breaks its budget")
    shown = b.eval("[...document.querySelectorAll('#trend-viol tbody tr')].map(r =>"
                   " [Math.round(Number(r.dataset.start) / 1e6), r.dataset.row,"
                   " r.cells[2].textContent])")
    T.eq(shown, [[v[0] // 10**6, v[1], fmt_int(v[2])] for v in want][:50],
         "the violating steps (their start in ms: ns are beyond a double's integers)")
    T.check(not b.eval("document.getElementById('trend-viol').hidden"), "the table shown")
    T.eq(b.eval("Number(document.getElementById('trend').dataset.marks)"), len(want),
         "a red ring per violating step")
    T.check(b.eval("document.getElementById('trend-viol').caption.textContent")
            .startswith("budget violations per step (red points on the chart): %s in %d step"
                        % (fmt_int(n_over), len(want))), "the table's caption")


def check_extremes(b, hport, calls3, w, h):
    """0x1003's detail: when its net min and max were taken (the API's min_at / max_at, the
    first call sent with that duration), and the `tlcap around` command of that moment."""
    b.eval("document.querySelector('tr[data-id=\"00001003/core0/0\"] button.area').click()")
    wait_js(b, "document.getElementById('detail').dataset.ready === '1' &&"
            " document.getElementById('detail').dataset.id === '00001003/core0/0'",
            "the detail of 0x1003")
    api = get_json(hport, "/api/v1/targets/hist/stats")
    r = [x for x in api["rows"] if x["handle"] == "00001003" and x.get("context") == "core0"][0]
    for e, pick in (("max", max), ("min", min)):
        v = pick(d for _, d in calls3)
        t0 = [t for t, d in calls3 if d == v][0]  # the oracle: the first call with it
        at = r["net"][e + "_at"]
        T.eq((r["net"][e], at["start_ns"], at["end_ns"]), (v, t0, t0 + v),
             "API: net %s and its time = the oracle's" % e)
        for k in ("net", "gross", "call"):
            d = r.get(k) or {}
            a = d.get(e + "_at")
            sel = '#d-at tr[data-k="%s-%s"]' % (k, e)
            if not a or d.get(e) is None:
                T.eq(b.eval("document.querySelector(%s)" % json.dumps(sel)), None,
                     "no %s %s time" % (k, e))
                continue
            ref = "epoch:%d:%d" % (a["epoch"], a["start_ns"])
            got = b.eval("(() => { const r = document.querySelector(%s); return r &&"
                         " [r.dataset.ref, ...[...r.cells].map(c => c.textContent)]; })()"
                         % json.dumps(sel))
            T.eq(got, [ref, "%s %s" % (e, k), fmt_ns(d[e]),
                       "at ns:%d (epoch %d)" % (a["start_ns"], a["epoch"]),
                       wall(a) + " " + where(a), "show the moment"],
                 "%s %s and when" % (k, e))
            b.eval("document.querySelector(%s + ' button').click()" % json.dumps(sel))
            T.eq(b.eval("document.getElementById('d-moment-cmd').textContent"),
                 "tlcap around hist " + ref, "the moment of %s %s" % (k, e))
    T.check(not b.eval("document.getElementById('d-moment').hidden"), "the command shown")
    last = b.eval("document.getElementById('d-moment-cmd').textContent")
    # redrawn as with every full update: the command asked for stays
    b.eval("document.getElementById('detail').dataset.ready = '0'; drawDetail(); 0")
    wait_js(b, "document.getElementById('detail').dataset.ready === '1'", "the detail redrawn")
    T.check(not b.eval("document.getElementById('d-moment').hidden"), "the command stays")
    T.eq(b.eval("document.getElementById('d-moment-cmd').textContent"), last, "the same one")
    # a target time past 2^53 ns (about 104 days) keeps its digits for the command
    T.eq(b.eval("exactNs(JSON.parse('{\"start_ns\": 9007199254740993123}', keepNs),"
                " 'start_ns')"), "9007199254740993123", "ns beyond a double's integers")
    no_overflow(b, "the extremes' times at %dx%d" % (w, h))
    b.eval("document.getElementById('d-at').scrollIntoView()")
    b.screenshot(os.path.join(SHOTS, "budgets_detail_%dx%d.png" % (w, h)))
    b.eval("document.getElementById('d-close').click()")


def check_compare_other(b, hport, calls, calls2, w, h):
    """Range B of another target (b_target): the picker lists the other board; the table is
    the API's diff of hist's range A with other's range B, whose counts and means are those
    of the calls sent to each."""
    T.eq(b.eval("[...document.getElementById('cmp-bt').options].map(o => o.value)"),
         ["", "other"], "the targets range B can come from")
    rng = "ns:0..ns:%d" % (11 * MIN)
    set_value(b, "cmp-a", rng, "input")
    set_value(b, "cmp-b", rng, "input")
    set_value(b, "cmp-bt", "other", "change")
    b.eval("document.getElementById('cmp-form').requestSubmit()")
    wait_js(b, "document.getElementById('compare').dataset.ready === '1' &&"
            " (document.getElementById('compare').dataset.url || '').includes('b_target=other')",
            "the compare view with other's range", timeout=60)
    ctx = b.eval("S.rows.get('00001003/core0/0').ctx")
    doc = get_json(hport, "/api/v1/targets/hist/diff?a=%s&b=%s&b_target=other&context=%d"
                   % (rng, rng, ctx))
    shown = b.eval("[...document.querySelectorAll('#cmp-table tbody tr')].map(r =>"
                   " [r.dataset.area, ...[...r.cells].map(c => c.textContent)])")
    T.eq([x[0] for x in shown], ["%08x" % x["area"] for x in doc["areas"]],
         "the areas in the API's order")
    T.eq(len(shown), 6, "six areas")
    T.eq(shown[0][0], "00001003", "the area slowed on hist only first")
    for x, row in zip(doc["areas"], shown):
        a = x["area"] - 0x1000
        da, db = [d for _, d in calls[a]], [d for _, d in calls2[a]]
        T.eq((x["a"]["count"], x["b"]["count"]), (len(da), len(db)), "API: counts, oracle")
        T.check(abs(x["b"]["mean"] - sum(db) / len(db)) < 1e-6 * x["b"]["mean"],
                "API: other's mean of %d, oracle" % a)
        T.eq(row[2:6], [fmt_int(x["a"]["count"]), fmt_int(x["b"]["count"]),
                        fmt_ns(round(x["a"]["mean"])), fmt_ns(round(x["b"]["mean"]))],
             "counts and means of %d" % a)
    T.check(b.eval("document.getElementById('cmp-note').textContent").startswith("b of other: "),
            "the note says whose range B is")
    no_overflow(b, "the compare view of two targets at %dx%d" % (w, h))
    b.eval("document.getElementById('compare').scrollIntoView()")
    b.screenshot(os.path.join(SHOTS, "budgets_compare_%dx%d.png" % (w, h)))
    set_value(b, "cmp-bt", "", "change")


ALL = [test_dashboard, test_dashboard_token, test_dashboard_layout, test_dashboard_stored,
       test_dashboard_user, test_dashboard_history]
ONLY = os.environ.get("TLC_ONLY")  # a developer's shortcut: TLC_ONLY=test_a,test_b
# test_dashboard_budgets runs alone (ctest test_http_dashboard_budgets): it skips while
# tlcapd has no /violations path, and a skip ends the run; test_dashboard_rollups too (ctest
# test_http_dashboard_rollups), with its rebuild of many segments
T.main([t for t in ALL + [test_dashboard_budgets, test_dashboard_rollups]
        if t.__name__ in ONLY.split(",")] if ONLY
       else ALL)
