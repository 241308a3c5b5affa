"""Regenerates the seed corpora of fuzz_frame and fuzz_request (corpus/frame, corpus/request).

usage: python3 gen_proto_corpus.py   (needs protoc and python3-protobuf; writes next to itself)

fuzz_request inputs: first byte even = the subscriber starts authenticated (the fuzz build's
auth bypass), odd = it must send Hello first; then framed ClientMessages. fuzz_frame inputs:
first byte = chunk size - 1 for feeding the decoder; then framed messages of either direction.
"""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
proto = os.path.join(here, "..", "..", "proto")
tmp = tempfile.mkdtemp()
subprocess.check_call(["protoc", "--python_out=" + tmp, "-I" + proto,
                       os.path.join(proto, "tlcap.proto")])
sys.path.insert(0, tmp)
import tlcap_pb2 as pb  # noqa: E402
from google.protobuf.internal.encoder import _VarintBytes  # noqa: E402


def fr(m):
    b = m.SerializeToString()
    return _VarintBytes(len(b)) + b


def cm(request_id, **kw):
    return pb.ClientMessage(request_id=request_id, **kw)


def w(d, name, data):
    os.makedirs(os.path.join(here, "corpus", d), exist_ok=True)
    with open(os.path.join(here, "corpus", d, name), "wb") as f:
        f.write(data)


hello = cm(1, hello=pb.Hello(protocol_version=1, client_name="fuzz"))
hello_tok = cm(1, hello=pb.Hello(protocol_version=1, client_name="fuzz", token=b"secret"))
reqs = [
    cm(2, subscribe=pb.Subscribe(subscription_id=1, targets=["lab*"], areas=["ma*", "00000002"],
                                 handles=[1, 2], interval_ms=100, windows=True, quantiles=True,
                                 neutral=True, events=True, names=True)),
    cm(3, subscribe=pb.Subscribe(subscription_id=2, interval_ms=1, no_snapshots=True,
                                 events=True)),
    cm(4, unsubscribe=pb.Unsubscribe(subscription_id=1)),
    cm(5, list_targets=pb.ListTargets()),
    cm(6, get_stats=pb.GetStats(target="lab1", windows=True, quantiles=True, neutral=True,
                                names=True)),
    cm(7, get_stats=pb.GetStats(target="nope")),
    cm(8, rotate=pb.RotateTarget(target="lab1")),
    cm(9, load_mapping=pb.LoadMapping(target="lab1", mapping=b"INFO\nHANDLE(Functions)\n")),
    cm(10, load_mapping=pb.LoadMapping(target="lab1", mapping=b"xx")),
    cm(11, ping=pb.Ping(cookie=5)),
    # columnar rows: known, unknown and repeated column ids; Neutral rows only
    cm(12, subscribe=pb.Subscribe(subscription_id=3, interval_ms=50,
                                  columns=[6, 16, 17, 18, 20, 48, 128, 129, 138, 5, 99999, 6],
                                  neutral_only=True, areas=["0000000*"])),
    # statistics in parts (one row per part in the fuzz provider), twice: the second is refused
    # while the first is being answered
    cm(13, get_stats=pb.GetStats(target="lab1", windows=True, names=True, max_rows=1)),
    cm(14, get_stats=pb.GetStats(target="evl@127.0.0.1", max_rows=100000)),
    # history (SPEC 10): ranges on both clocks, open ends, since > until, an unknown target;
    # a Subscribe joining mid-stream (its live snapshots follow the history)
    cm(15, get_stats=pb.GetStats(target="lab1", names=True, windows=True, range=pb.TimeRange(
        clock=pb.TimeRange.TARGET, has_since=True, since=1000, has_until=True, until=5000))),
    cm(16, get_stats=pb.GetStats(target="lab1", range=pb.TimeRange(
        clock=pb.TimeRange.WALL, has_since=True, since=-7200 * 10**9))),
    cm(17, get_stats=pb.GetStats(target="lab1", range=pb.TimeRange(
        has_since=True, since=9, has_until=True, until=1))),
    cm(18, get_stats=pb.GetStats(target="nope", range=pb.TimeRange(has_until=True, until=5))),
    cm(19, subscribe=pb.Subscribe(subscription_id=4, interval_ms=50, names=True, neutral=True,
                                  history=pb.TimeRange(has_since=True, since=100))),
    cm(20, subscribe=pb.Subscribe(subscription_id=5, targets=["lab1"], interval_ms=50,
                                  columns=[6, 16], history=pb.TimeRange(
                                      clock=pb.TimeRange.WALL, has_since=True, since=1))),
]
unknown = b"\x05\x08\x07\x98\x06\x01"  # request_id 7 and unknown field 99
w("request", "all_authed", b"\0" + b"".join(fr(r) for r in reqs) + unknown)
w("request", "hello_then_all", b"\1" + fr(hello) + b"".join(fr(r) for r in reqs))
w("request", "unknown_first", b"\0" + unknown + fr(reqs[3]) + fr(reqs[9]))
w("request", "no_hello", b"\1" + fr(reqs[3]))
w("request", "parts_twice", b"\0" + fr(reqs[11]) + fr(reqs[11]) + fr(reqs[12]))
w("request", "history_busy", b"\0" + fr(reqs[13]) + fr(reqs[14]) + fr(reqs[17]) + fr(reqs[4]))
w("request", "history_join", b"\0" + fr(reqs[17]) + fr(reqs[0]) + fr(reqs[18]))
w("request", "history_unsubscribed", b"\0" + fr(reqs[18]) + fr(cm(21, unsubscribe=pb.Unsubscribe(
    subscription_id=5))))
w("request", "token_hello", b"\1" + fr(hello_tok) + fr(reqs[4]))
around = [cm(30, around=pb.AroundRequest(target="lab1", ref="ns:1000", span="40us",
                                        export="json")),
          cm(31, around=pb.AroundRequest(target="lab1", ref="soon")),
          cm(32, around=pb.AroundRequest(target="nosuch", ref="2026-11-26T10:00:00Z",
                                         export="bin11")),
          cm(33, around=pb.AroundRequest(target="lab1", ref="ns:1", export="xml")),
          cm(34, around=pb.AroundRequest(target="lab1", ref="ns:1", span="forever"))]
w("request", "around", b"\0" + b"".join(fr(r) for r in around))
# a violation's REF (SPEC 13): kept, past the last, an unknown budget, a bad spelling, no watch
vref = [cm(50, around=pb.AroundRequest(target="lab1", ref="v:main_net:1", span="1us",
                                       export="bin11")),
        cm(51, around=pb.AroundRequest(target="lab1", ref="v:main_net:99")),
        cm(52, around=pb.AroundRequest(target="lab1", ref="v:nosuch:1", span="2ms")),
        cm(53, around=pb.AroundRequest(target="lab1", ref="v:main_net:18446744073709551616")),
        cm(54, around=pb.AroundRequest(target="nosuch", ref="v:main_net:1"))]
w("request", "around_violation", b"\0" + b"".join(fr(r) for r in vref))
# an extreme's REF (SPEC 13): no sample yet, by handle and context, an unknown context or
# area, a bad spelling, an unknown target
xref = [cm(60, around=pb.AroundRequest(target="lab1", ref="max:net:main", span="1us",
                                       export="bin11")),
        cm(61, around=pb.AroundRequest(target="lab1", ref="min:call:0x00000000@core0")),
        cm(62, around=pb.AroundRequest(target="lab1", ref="max:net:main@core9")),
        cm(63, around=pb.AroundRequest(target="lab1", ref="max:period:nosuch@0")),
        cm(64, around=pb.AroundRequest(target="lab1", ref="max:bogus:main")),
        cm(65, around=pb.AroundRequest(target="nosuch", ref="max:net:main"))]
w("request", "around_extreme", b"\0" + b"".join(fr(r) for r in xref))
viol = [cm(40, violations=pb.ViolationsRequest(target="lab1")),
        cm(41, violations=pb.ViolationsRequest(target="lab1", budget="main_net", max_recent=1)),
        cm(42, violations=pb.ViolationsRequest(target="evl@127.0.0.1")),
        cm(43, violations=pb.ViolationsRequest(target="nosuch", budget="x" * 70)),
        cm(44, violations=pb.ViolationsRequest(target="lab1", budget="none", max_recent=7))]
w("request", "violations", b"\0" + b"".join(fr(r) for r in viol))
w("request", "violations_subscribed", b"\0" + fr(cm(45, subscribe=pb.Subscribe(
    subscription_id=1, targets=["lab*"], no_snapshots=True))) + fr(viol[0]))
w("request", "around_busy", b"\0" + fr(around[0]) + fr(around[0]) + fr(reqs[13]))
for i, r in enumerate(reqs):
    w("request", "single_%d" % i, b"\0" + fr(r))
w("request", "oversize", b"\1" + b"\x81\x08" + b"A" * 20)
w("request", "zero_len", b"\0\0")
w("request", "long_varint", b"\0" + b"\x80" * 11)
w("request", "max_spec", b"\0" + fr(cm(1, subscribe=pb.Subscribe(
    subscription_id=1, targets=["*" * 256] * 64, areas=["a" * 256] * 64,
    handles=list(range(0, 4096 * 3, 3)), interval_ms=60000, names=True))))

s = pb.Snapshot(target="lab1", seq=5, full=True, window_ns=[1000],
                counters=pb.Counters(events=3), contexts=[pb.Context(kind=0)],
                rows=[pb.Row(handle=1, context=0, totals=[1, 2, 3, 4, 5],
                             dists=[pb.Dist(n=1, sum=3, min=3, max=3,
                                            quantiles=[3, 3, 3, 3])] * 5,
                             windows=[pb.WindowStat(count=1, kinds=[pb.WindowDist(n=1)] * 5)])],
                mapping=pb.Mapping(areas=[pb.MapArea(handle=1, name="main")]))
w("frame", "snapshot", b"\x03" + fr(pb.ServerMessage(snapshot=s)))
sc = pb.Snapshot(target="lab1", seq=6, base_seq=5, window_ns=[1000], contexts=[pb.Context()],
                 columns=[1, 2, 3, 4, 6, 16, 128], cells=[1, 0, 0, 0, 7, 100, 2] * 3)
w("frame", "snapshot_columns", b"\x02" + fr(pb.ServerMessage(snapshot=sc)))
w("frame", "stats", b"\x05" + fr(pb.ServerMessage(request_id=2, stats=pb.Stats(snapshot=s))))
w("frame", "requests", b"\x00" + fr(hello) + b"".join(fr(r) for r in reqs))
w("frame", "events", b"\x10" + fr(pb.ServerMessage(events=pb.EventBatch(
    target="a", seq=1, events=[pb.Event(time_ns=5, handle=3, type=3)] * 3))))
vio = pb.Violation(budget="isr_tick", stat="period", handle=3, area="SysTick_Handler",
                   context="core0", over=True, value=1200000, limit=1050000, start_ns=5000,
                   end_ns=1205000, epoch=1, wall_ms=1700000000000, seq_start=10, seq_end=12,
                   number=4, seg_first=2, off_first=4096, seg_last=2, off_last=4160)
w("frame", "violation_event", b"\x07" + fr(pb.ServerMessage(target_event=pb.TargetEvent(
    target="lab1", kind=pb.TE_VIOLATION, violation=vio, suppressed=17, seq=3))))
w("frame", "violations_reply", b"\x00" + fr(pb.ServerMessage(request_id=40,
    violations=pb.ViolationsReply(target="lab1", total=5, dropped_keys=1, budgets=[
        pb.BudgetViolations(name="isr_tick", area="SysTick_Handler", stat="period",
                            has_max=True, max=1050000, total=5, worst=vio, recent=[vio, vio],
                            counts=[pb.ViolationCount(handle=3, area="SysTick_Handler",
                                                      context="core0", count=5)],
                            origin="b.ini:1")]))))
w("frame", "bad", b"\x01" + b"\x80" * 10 + b"\x01")
# a target list with its rollups' rebuilds (docs/rollups.md "Rebuilt from the segments"): one
# running, one done, one target without rollups
w("frame", "target_list_rollups", b"\x04" + fr(pb.ServerMessage(request_id=5, targets=pb.TargetList(
    instance_id=1, targets=[
        pb.TargetInfo(name="lab1", connected=True, rollups=pb.RollupRebuild(
            state=pb.RollupRebuild.REBUILDING, segments_read=3, segments=7, samples=1000)),
        pb.TargetInfo(name="lab2", rollups=pb.RollupRebuild(
            state=pb.RollupRebuild.DONE, segments_read=7, segments=7, samples=5000,
            done_unix_ms=1700000000000)),
        pb.TargetInfo(name="lab3")]))))
# trend and diff (docs/rollups.md): the query strings the rollup hook parses
w("request", "trend_diff", b"\x00" + fr(cm(7, trend=pb.TrendRequest(
    target="lab1", query="area=0x1001&since=ns:0&until=-1h&step=1h&kind=gross", text=True))) +
  fr(cm(8, diff=pb.DiffRequest(target="lab1", query="a=ns:0..ns:5&b=..&b_target=x,y"))) +
  fr(cm(9, trend=pb.TrendRequest(target="", query="area=&&since=%zz"))))
print("corpora written")
