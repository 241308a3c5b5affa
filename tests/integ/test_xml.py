#!/usr/bin/python3
"""XML export end to end: every document tlcap writes validates against
formats/ProfilerExport.xsd (xmllint), and reads back (Python's ElementTree, i.e. expat) to the
same statistics as the JSON export of the same capture. Also: the .BIN sidecar, indent off,
and names with commas, quotes, <>&, non-ASCII and empty names.

Usage: test_xml.py TLCAPD XSD"""
import json
import os
import random
import shutil
import sys
import xml.etree.ElementTree as ET

import tlctest as T

TLCAPD, XSD = sys.argv[1], sys.argv[2]
NAMES = ["main", "a,b", '"quoted"', "<tag>&amp;", "caf\u00e9", "", "x y", "tab\there"]


def random_stream(seed, cores):
    """Nested calls per core (S/R as winIDEA sends them), lines, a variable and a state area."""
    r = random.Random(seed)
    out, t = [], 1000
    stacks = [[] for _ in range(cores)]
    for _ in range(600):
        c = r.randrange(cores)
        t += r.randrange(40)
        act = r.randrange(10)
        st = stacks[c]
        if act < 4 and len(st) < 20:
            f = r.randrange(len(NAMES))
            if st:
                out.append(T.bin11(st[-1], 1, c, 0, t))
            out.append(T.bin11(f, 3, c, 0, t))
            st.append(f)
        elif act < 7 and st:
            out.append(T.bin11(st.pop(), 0, c, 0, t))
            if st:
                out.append(T.bin11(st[-1], 2, c, 0, t))
        elif act < 8:
            out.append(T.bin11(0x20000000, 4, c, r.randrange(4), t))
        elif act < 9:
            out.append(T.bin11(0x30000001, 4, c, r.randrange(3), t))
        elif st:
            line = 0x10000000 | r.randrange(4)
            out.append(T.bin11(line, 3, c, 0, t))
            out.append(T.bin11(line, 0, c, 0, t + 3))
            t += 3
    return b"".join(out)


def mapping_text():
    lines = ["* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%,%FILE%"]
    for i, n in enumerate(NAMES):
        q = '"%s"' % n.replace('"', '""') if ("," in n or n.startswith('"')) else n
        lines.append("%08X,%s,,src/f%d.c" % (i, q, i % 2))
    for i in range(4):
        lines.append("%08X,x = %d;,%X,src/lines.c" % (0x10000000 | i, i, 10 + i))
    lines.append("")
    lines.append("* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%")
    lines.append("20000000,counter <&>,")
    lines.append("20000001,mode,")
    lines.append("30000001,,0")
    lines.append("30000001,,1")
    lines.append("30000001,,2")
    return ("\n".join(lines) + "\n").encode()


def xmllint(path):
    rc, out, err = T.run(["xmllint", "--noout", "--schema", XSD, path])
    T.check(rc == 0, "xmllint rejects %s: %s" % (path, err[-2000:]))


def export(d, args, name):
    outp = os.path.join(d, name)
    rc, out, err = T.run([TLCAPD, "replay"] + args + ["--output", outp])
    T.eq(rc, 0, "replay %r exit status (stderr %s)" % (args, err))
    return outp


def dist_of(el):
    if el is None:
        return None
    a = el.attrib
    return {"n": int(a["n"]), "sum": int(a["sum"]), "total": int(a["total"]) if "total" in a else None,
            "min": int(a["min"]) if "min" in a else None, "max": int(a["max"]) if "max" in a else None}


def json_dist(j):
    return {"n": j["n"], "sum": j["sum"], "total": j.get("total"), "min": j["min"], "max": j["max"]}


def compare(xml_path, json_path):
    doc = json.load(open(json_path))
    root = ET.parse(xml_path).getroot()  # expat underneath
    T.eq(root.tag, "ProfilerExport", "root element")
    T.eq(int(root.find("Info").attrib["totalTime"]), doc["total_time"], "totalTime")
    rows = {}
    for r in doc["rows"]:
        key = (r["handle"], r.get("context"), r.get("state"))
        rows[key] = r
    seen = 0
    for cs in root.find("Statistics").findall("ContextStatistics"):
        ctx = cs.attrib["context"]
        for code in cs.findall("Code"):
            r = rows[(code.attrib["handle"], ctx, None)]
            T.eq(int(code.attrib["count"]), r["count"], "count %s %s" % (code.attrib["handle"], ctx))
            T.eq(code.attrib.get("name"), r["name"] or None, "name of %s" % code.attrib["handle"])
            for k in ("net", "gross", "call", "period", "outside"):
                T.eq(dist_of(code.find(k.capitalize())), json_dist(r[k]),
                     "%s of %s in %s" % (k, code.attrib["handle"], ctx))
            seen += 1
    ds = root.find("Statistics").find("DataStatistics")
    for el in ds:
        st = int(el.attrib["value"], 16) if el.tag == "State" else None
        r = rows[(el.attrib["handle"], None, st)]
        T.eq(int(el.attrib["count"]), r["count"], "count of %s" % el.attrib["handle"])
        T.eq(dist_of(el.find("Period")), json_dist(r["period"]), "period of %s" % el.attrib["handle"])
        if el.tag == "Data" and r["value"] is not None:
            T.eq(int(el.attrib["value"], 16), r["value"], "value of %s" % el.attrib["handle"])
        seen += 1
    T.eq(seen, len(doc["rows"]), "every row appears once in the XML")


def test_random_captures_validate_and_match_json(d):
    mp = os.path.join(d, "map.txt")
    open(mp, "wb").write(mapping_text())
    for seed in range(8):
        p = os.path.join(d, "c%d.bin" % seed)
        open(p, "wb").write(random_stream(seed, 1 + seed % 3))
        common = [p, "--format", "bin11", "--mapping", mp]
        x = export(d, common + ["--export", "xml"], "c%d.xml" % seed)
        j = export(d, common + ["--export", "json"], "c%d.json" % seed)
        xmllint(x)
        compare(x, j)
        # the timeline inline holds every record, in order
        root = ET.parse(x).getroot()
        evs = root.find("Timeline").findall("Event")
        T.eq(len(evs), os.path.getsize(p) // 24, "timeline events")
        # names survive (ElementTree unescapes what the writer escaped)
        names = {a.attrib["handle"]: a.attrib.get("name") for a in root.find("Mapping").findall("Area")}
        for i, n in enumerate(NAMES):
            T.eq(names.get("%08X" % i), n, "name of %08X" % i)
        T.eq(names.get("20000000"), "counter <&>", "data name")


def test_sidecar_and_no_indent(d):
    p = os.path.join(d, "c.bin")
    raw = random_stream(42, 2)
    open(p, "wb").write(raw)
    x = export(d, [p, "--format", "bin11", "--export", "xml", "--xml-timeline", "bin11"], "side.xml")
    xmllint(x)
    T.eq(open(x + ".BIN", "rb").read(), raw, "the .BIN sidecar holds the records byte for byte")
    tl = ET.parse(x).getroot().find("Timeline")
    T.eq((tl.attrib["binary"], tl.attrib["binaryVersion"], int(tl.attrib["events"])),
         ("side.xml.BIN", "1.1", len(raw) // 24), "Timeline sidecar attributes")
    x10 = export(d, [p, "--format", "bin11", "--export", "xml", "--xml-timeline", "bin10"], "s10.xml")
    xmllint(x10)
    T.eq(len(open(x10 + ".BIN", "rb").read()), len(raw), "bin 1.0 sidecar size")
    ind = export(d, [p, "--format", "bin11", "--export", "xml"], "ind.xml")
    flat = export(d, [p, "--format", "bin11", "--export", "xml", "--no-indent"], "flat.xml")
    xmllint(flat)
    T.check(os.path.getsize(flat) < os.path.getsize(ind) * 0.9, "indent off is smaller")
    T.eq(ET.tostring(ET.parse(flat).getroot()).replace(b"\n", b"").replace(b" ", b""),
         ET.tostring(ET.parse(ind).getroot()).replace(b"\n", b"").replace(b" ", b""),
         "same content with and without indent")
    rc, out, err = T.run([TLCAPD, "replay", p, "--export", "xml", "--xml-timeline", "bin11"])
    T.eq(rc, 2, "a sidecar needs --output")


def test_evlog_xml(d):
    items = [T.evlog_item(1.0, 7, "+main"), T.evlog_item(1.5, 7, ">busy"),
             T.evlog_item(1.6, 9, "*CPUFREQ 1", "2400"), T.evlog_item(2.0, 7, "<busy"),
             T.evlog_item(2.5, 7, "-main")]
    p = os.path.join(d, "e.log")
    open(p, "wb").write(T.evlog_block(items))
    x = export(d, [p, "--export", "xml"], "e.xml")
    xmllint(x)
    root = ET.parse(x).getroot()
    evs = root.find("Timeline").findall("Event")
    T.eq([e.attrib["type"] for e in evs], ["E", "W", "W", "X", "X"], "evlog events mapped")
    T.eq(evs[0].attrib["context"], "thread7", "thread context")


if shutil.which("xmllint") is None:
    print("SKIP: xmllint not installed (apt-get install libxml2-utils)")
    sys.exit(T.SKIP)
T.main([test_random_captures_validate_and_match_json, test_sidecar_and_no_indent, test_evlog_xml])
