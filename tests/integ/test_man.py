"""tlcapd.ini(5) and tlcapd(8) as a user reads them (`man -l`), against the daemon itself:
- every [daemon] key of the settings table (read here from daemon/config/keys.c's rows, as
  the completion is) has an entry in both pages, and no entry names a key the table lacks;
- every default a page states is a value tlcapd accepts for that key (`--check-config`);
- the HTTP port's entry names the dashboard, /metrics and the health paths;
- groff finds nothing to warn about."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlctest as T  # noqa: E402

TLCAPD, MANDIR, SRC = sys.argv[1], sys.argv[2], sys.argv[3]


def table_keys():
    with open(os.path.join(SRC, "daemon/config/keys.c")) as f:
        text = f.read()
    return re.findall(r'^\s*\{ "([a-z0-9_]+)", K_[A-Z0-9]+,', text, re.M)


def render(page):
    env = dict(os.environ, MANWIDTH="200", MAN_KEEP_FORMATTING="0")
    p = subprocess.run(["man", "-l", os.path.join(MANDIR, page)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=60)
    T.eq(p.returncode, 0, "man -l " + page + ": " + p.stderr.decode()[:200])
    # no overstriking: plain text
    return re.sub(r".\x08", "", p.stdout.decode())


def entries(text, pat):
    """{key: its paragraph} of the entries whose head line matches pat (group 1: the key)."""
    out, cur = {}, None
    for line in text.split("\n"):
        m = re.match(pat, line)
        if m:
            cur = m.group(1)
            out[cur] = ""
        elif cur is not None:
            if line.strip() == "":
                cur = None
            else:
                out[cur] += " " + line.strip()
    return out


def test_every_key(d):
    keys = table_keys()
    T.check(len(keys) > 50, "the table's rows were found: %d" % len(keys))
    ini = entries(render("tlcapd.ini.5"), r"^\s{5}([a-z0-9_]+) = ")
    opt = entries(render("tlcapd.8"), r"^\s{5}--([a-z0-9-]+) ")
    for k in keys:
        T.check(k in ini, "tlcapd.ini(5) has no entry for %s" % k)
        T.check(k.replace("_", "-") in opt, "tlcapd(8) has no --%s" % k.replace("_", "-"))
    T.eq(sorted(set(ini) - set(keys)), [], "ini entries that are no key")
    for k, body in ini.items():
        m = re.search(r"Default: (\S+)\.(\s|$)", body)
        if m is None or m.group(1) == "none":
            continue
        p = subprocess.run([TLCAPD, "--check-config", "--no-store", "--serve", "",
                            "--http", "", "--" + k.replace("_", "-"), m.group(1)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        T.eq((p.returncode, k), (0, k), "the stated default %r of %s: %s"
             % (m.group(1), k, p.stdout.decode()[:200]))
    http = ini["http"]
    for w in ("dashboard", "/metrics", "/-/healthy", "/-/ready", "Default: 127.0.0.1:7480."):
        T.check(w in http, "the http entry says %r: %s" % (w, http))


def test_groff_quiet(d):
    if not shutil.which("groff"):
        print("SKIP: groff not installed")
        return
    for page in ("tlcapd.ini.5", "tlcapd.8"):
        p = subprocess.run(["groff", "-mdoc", "-ww", "-z", os.path.join(MANDIR, page)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        T.eq((p.returncode, p.stdout.decode()), (0, ""), "groff warnings on " + page)


if __name__ == "__main__":
    if not shutil.which("man"):
        print("SKIP: man not installed")
        sys.exit(77)
    T.main([test_every_key, test_groff_quiet])
