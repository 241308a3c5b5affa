#!/usr/bin/python3
"""The Debian packages: builds them with scripts/package into a scratch directory,
then checks what a sysadmin gets.

- the four packages exist with the version of CMakeLists.txt's project();
- their contents (the paths each must hold) and conffiles (/etc/tlcap/tlcapd.ini only);
- lintian: no error (warnings are printed; README.md explains the kept ones);
- extracted: `tlcapd --version`, `tlcap --version`; `tlcapd --check-config` on the shipped
  configuration (2 sources: the embedded default active) and on the same file with every
  commented-out option switched on (so each shown default is valid); every [daemon] key of
  docs/configuration.md is in the file;
- every man page renders with `man --warnings` and `groff -ww` without a warning;
- `systemd-analyze verify` and `security --offline=yes --threshold=20` (exposure <= 2.0) on the
  installed units (ExecStart= pointed at the extracted binary, which verify requires to exist);
- the packaged daemon runs; a program built against libtlcap-client-dev (pkg-config) connects
  to it and reads the Welcome's daemon_version ("tlcapd VERSION"); bash completion of tlcapd's
  options and of tlcap's target names from that daemon.

Takes about 2 minutes (the package build is most of it). Skips (77) without dpkg-buildpackage,
debhelper or lintian.

Usage: test_package.py SOURCE_DIR WORK_DIR"""
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import daemonlib as D
import tlctest as T

SRC, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
for tool in ("dpkg-buildpackage", "dh", "lintian", "fakeroot", "man", "groff", "pkg-config",
             "cc"):
    if shutil.which(tool) is None:
        print("SKIP: %s not installed (scripts/install-deps installs it)" % tool)
        sys.exit(77)

with open(os.path.join(SRC, "CMakeLists.txt")) as f:
    VERSION = re.search(r"project\(tlcap VERSION ([0-9.]+)", f.read()).group(1)
ARCH = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE,
                      universal_newlines=True).stdout.strip()
MULTIARCH = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], stdout=subprocess.PIPE,
                           universal_newlines=True).stdout.strip()
OUT = os.path.join(WORK, "deb")
ROOT = os.path.join(WORK, "root")
PKGS = ["tlcapd", "tlcap", "libtlcap-client0", "libtlcap-client-dev"]
LIB = "usr/lib/%s" % MULTIARCH
CONTENTS = {
    "tlcapd": ["usr/bin/tlcapd", "lib/systemd/system/tlcapd.service",
               "lib/systemd/system/tlcapd.socket", "etc/tlcap/tlcapd.ini",
               "usr/share/man/man8/tlcapd.8.gz", "usr/share/man/man5/tlcapd.ini.5.gz",
               "usr/share/bash-completion/completions/tlcapd",
               "usr/share/tlcapd/prometheus/tlcap.rules.yml", "usr/share/tlcapd/grafana/tlcap.json",
               "usr/share/doc/tlcapd/copyright"] +
              ["usr/share/doc/tlcapd/" + f for f in sorted(os.listdir(os.path.join(SRC, "docs")))
               if f.endswith(".md")],
    "tlcap": ["usr/bin/tlcap", "usr/share/man/man1/tlcap.1.gz",
              "usr/share/bash-completion/completions/tlcap"],
    "libtlcap-client0": [LIB + "/libtlcap-client.so.0", LIB + "/libtlcap-client.so." + VERSION],
    "libtlcap-client-dev": ["usr/include/tlcap/tlcap_client.h", "usr/include/tlcap/tlcap.pb-c.h",
                            "usr/include/tlcap/tlc_err.h", LIB + "/libtlcap-client.so",
                            LIB + "/pkgconfig/tlcap-client.pc"],
}


def deb(p):
    return os.path.join(OUT, "%s_%s_%s.deb" % (p, VERSION, ARCH))


def build():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    env = dict(os.environ, TLC_DEB_OUT=OUT, TLC_NO_LINTIAN="1")
    p = subprocess.run([os.path.join(SRC, "scripts", "package")], cwd=SRC, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    if p.returncode != 0:
        print(p.stdout.decode(errors="replace")[-6000:])
        print("FAIL scripts/package: status %d" % p.returncode)
        sys.exit(1)
    os.makedirs(ROOT)
    for pk in PKGS:
        if os.path.exists(deb(pk)):
            subprocess.run(["dpkg-deb", "-x", deb(pk), ROOT], check=True)


def test_packages_and_contents(d):
    for pk in PKGS:
        T.check(os.path.exists(deb(pk)), "%s missing (have %s)" % (deb(pk), os.listdir(OUT)))
        rc, out, err = T.run(["dpkg-deb", "-f", deb(pk), "Version"])
        T.eq(out.decode().strip(), VERSION, "%s version" % pk)
        rc, out, err = T.run(["dpkg-deb", "-c", deb(pk)])
        paths = {l.split()[5].lstrip("./") for l in out.decode().splitlines()}
        for want in CONTENTS[pk]:
            T.check(want in paths, "%s does not hold %s: %s" % (pk, want, sorted(paths)))
        rc, out, err = T.run(["dpkg-deb", "-I", deb(pk), "conffiles"])
        conf = out.decode().split() if rc == 0 else []
        T.eq(conf, ["/etc/tlcap/tlcapd.ini"] if pk == "tlcapd" else [], "%s conffiles" % pk)
    rc, out, err = T.run(["dpkg-deb", "-f", deb("libtlcap-client-dev"), "Depends"])
    T.check(("libtlcap-client0 (= %s)" % VERSION) in out.decode(), "-dev depends: %r" % out)


def test_lintian(d):
    changes = glob.glob(os.path.join(OUT, "*.changes"))
    T.eq(len(changes), 1, "one .changes file")
    rc, out, err = T.run(["lintian", "--fail-on", "error", changes[0]], timeout=300)
    text = out.decode(errors="replace")
    print(text.strip() or "lintian: no tags")
    T.check(rc == 0 and not re.search(r"^E: ", text, re.M), "lintian errors (%d):\n%s%s"
            % (rc, text, err))


def test_versions_and_shipped_config(d):
    tlcapd, tlcap = os.path.join(ROOT, "usr/bin/tlcapd"), os.path.join(ROOT, "usr/bin/tlcap")
    for prog, name in ((tlcapd, "tlcapd"), (tlcap, "tlcap")):
        for opt in ("--version", "-V"):
            rc, out, err = T.run([prog, opt])
            T.eq((rc, out.decode()), (0, "%s %s\n" % (name, VERSION)), "%s %s" % (name, opt))
    ini = os.path.join(ROOT, "etc/tlcap/tlcapd.ini")
    rc, out, err = T.run([tlcapd, "--config", ini, "--check-config"])
    T.eq((rc, out.decode()), (0, "configuration OK: 2 sources\n"), "check-config: " + err)
    with open(ini) as f:
        text = f.read()
    # every option shown commented out, switched on: still valid (4 sources with the examples)
    on = re.sub(r"^;(\[|[a-z_]+ = \S)", r"\1", text, flags=re.M)
    path = os.path.join(d, "all.ini")
    with open(path, "w") as f:
        f.write(on)
    rc, out, err = T.run([tlcapd, "--config", path, "--check-config"])
    T.eq((rc, out.decode()), (0, "configuration OK: 4 sources\n"), "every option on: " + err)
    # every [daemon] key of docs/configuration.md is in the file
    with open(os.path.join(SRC, "docs/configuration.md")) as f:
        doc = f.read()
    keys = set()
    part = doc[doc.index("### `[daemon]`"):doc.index("### `[listen NAME]`")]
    for cell in re.findall(r"^\| ([^|]*`[a-z_]+`[^|]*) \|", part, re.M):
        keys.update(re.findall(r"`([a-z_]+)`", cell))
    T.check(len(keys) >= 30, "keys found in docs/configuration.md: %r" % sorted(keys))
    missing = [k for k in sorted(keys) if not re.search(r"^;?%s =" % k, text, re.M)]
    T.eq(missing, [], "[daemon] keys of docs/configuration.md missing from tlcapd.ini")


def test_man_pages(d):
    pages = sorted(glob.glob(os.path.join(ROOT, "usr/share/man/man*/*")))
    T.eq([os.path.basename(p) for p in pages], ["tlcap.1.gz", "tlcapd.ini.5.gz", "tlcapd.8.gz"],
         "man pages")
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")
    for p in pages:
        rc, out, err = T.run(["man", "--warnings", "-l", p], env=env)
        T.check(rc == 0 and err.strip() == "" and b"SEE ALSO" in out,
                "man --warnings %s: %d %r" % (p, rc, err))
        src = subprocess.run(["zcat", p], stdout=subprocess.PIPE, check=True).stdout
        r = subprocess.run(["groff", "-ww", "-mandoc", "-z"], input=src, stderr=subprocess.PIPE,
                           env=env)
        T.check(r.returncode == 0 and r.stderr == b"", "groff -ww %s: %r" % (p, r.stderr))


def test_systemd_units(d):
    sa = shutil.which("systemd-analyze")
    if sa is None:
        print("(systemd-analyze not installed: unit checks left out)")
        return
    units = os.path.join(ROOT, "lib/systemd/system")
    with open(os.path.join(units, "tlcapd.service")) as f:
        svc = f.read()
    T.check("ExecStart=/usr/bin/tlcapd --config /etc/tlcap/tlcapd.ini" in svc, "ExecStart")
    # every Documentation=file:// page is in the package, as that file
    docs = re.findall(r"file://(/\S+)", re.search(r"^Documentation=(.*)$", svc, re.M).group(1))
    T.check(docs != [], "Documentation= names a file")
    for f in docs:
        T.check(os.path.isfile(os.path.join(ROOT, f.lstrip("/"))), "Documentation=file://" + f)
    with open(os.path.join(d, "tlcapd.service"), "w") as f:
        f.write(svc.replace("/usr/bin/tlcapd", os.path.join(ROOT, "usr/bin/tlcapd")))
    shutil.copy(os.path.join(units, "tlcapd.socket"), d)
    # verify also runs `man` for every Documentation=man:... : the packaged pages must be found
    p = subprocess.run([sa, "verify", "tlcapd.service", "tlcapd.socket"], cwd=d,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                       env=dict(os.environ, MANPATH=os.path.join(ROOT, "usr/share/man")))
    out = p.stdout.decode(errors="replace")
    T.check(p.returncode == 0 and out.strip() == "", "systemd-analyze verify: %s" % out)
    p = subprocess.run([sa, "security", "--offline=yes", "--threshold=20",
                        os.path.join(units, "tlcapd.service")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    T.check(p.returncode == 0, "security gate: %s" % out[-2000:])
    print([l.strip() for l in out.splitlines() if "Overall exposure" in l])


CLIENT_C = r"""
#include <tlcap_client.h>
#include <stdio.h>
int main(int argc, char **argv) {
  tlc_client_t *c;
  char err[256];
  if (tlc_client_connect(argv[1], NULL, &c, err, sizeof err) < 0) {
    fprintf(stderr, "%s (%s)\n", err, tlc_strerror(TLC_EIO));
    return 1;
  }
  printf("%s\n", tlc_client_welcome(c)->daemon_version);
  tlc_client_free(c);
  return argc == 2 ? 0 : 2;
}
"""


def complete(d, script, line, env):
    """Runs a completion function on a command line typed up to its end, with COMP_WORDS as
    bash splits them (at spaces and at the COMP_WORDBREAKS characters ':' and '=');
    returns COMPREPLY."""
    words = [w for w in re.split(r"( |:|=)", line) if w not in ("", " ")]
    if line.endswith(" "):
        words.append("")  # a new word begun: complete it from nothing
    sh = os.path.join(d, "complete.sh")
    with open(sh, "w") as f:
        f.write("source /usr/share/bash-completion/bash_completion\n"
                "source %s\n" % script +
                "COMP_WORDS=(%s)\nCOMP_CWORD=%d\n" % (" ".join("'%s'" % w for w in words),
                                                     len(words) - 1) +
                "COMP_LINE='%s'\nCOMP_POINT=${#COMP_LINE}\n" % line +
                "_%s\nprintf '%%s\\n' \"${COMPREPLY[@]}\"\n" % words[0])
    rc, out, err = T.run(["bash", sh], env=env, timeout=30)
    T.check(rc == 0, "completion script: %s" % err)
    return out.decode().split()


def test_daemon_client_library_completion(d):
    if not os.path.exists("/usr/share/bash-completion/bash_completion"):
        raise T.Failure("bash-completion is not installed")
    root_bin = os.path.join(ROOT, "usr/bin")
    ing, sub = D.free_port(), D.free_port()
    dm = D.Daemon(os.path.join(root_bin, "tlcapd"), d,
                  ["--listen", "sim=bin11@127.0.0.1:%d" % ing], serve="127.0.0.1:%d" % sub)
    try:
        c = D.connect(ing)
        c.sendall(b"TLCAP/1 target=pkgsim format=bin11\n" + D.calls(10))
        dm.target("pkgsim")
        # a client of the -dev package, built with pkg-config against the extracted tree
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(ROOT, LIB, "pkgconfig"),
                   PKG_CONFIG_SYSROOT_DIR=ROOT)
        rc, flags, err = T.run(["pkg-config", "--cflags", "--libs", "tlcap-client"], env=env)
        T.check(rc == 0, "pkg-config tlcap-client: " + err)
        src, exe = os.path.join(d, "client.c"), os.path.join(d, "client")
        with open(src, "w") as f:
            f.write(CLIENT_C)
        rc, out, err = T.run(["cc", "-o", exe, src] + flags.decode().split(), env=env)
        T.check(rc == 0, "building against libtlcap-client-dev: " + err)
        rc, out, err = T.run([exe, "127.0.0.1:%d" % sub],
                             env=dict(os.environ, LD_LIBRARY_PATH=os.path.join(ROOT, LIB)))
        T.eq((rc, out.decode()), (0, "tlcapd %s\n" % VERSION), "Welcome daemon_version " + err)
        # completion: tlcapd's long options (the [daemon] key table), tlcap's target names
        env = dict(os.environ, PATH=root_bin + ":" + os.environ["PATH"])
        comp = os.path.join(ROOT, "usr/share/bash-completion/completions")
        got = complete(d, os.path.join(comp, "tlcapd"), "tlcapd --max-conn", env)
        T.eq(got, ["--max-connections"], "tlcapd --max-conn<TAB>")
        got = complete(d, os.path.join(comp, "tlcapd"), "tlcapd --sync p", env)
        T.eq(got, ["periodic"], "tlcapd --sync p<TAB>")
        got = complete(d, os.path.join(comp, "tlcap"),
                       "tlcap --connect 127.0.0.1:%d stats pk" % sub, env)
        T.eq(got, ["pkgsim"], "tlcap --connect ADDR stats pk<TAB>")
        got = complete(d, os.path.join(comp, "tlcap"), "tlcap wa", env)
        T.eq(got, ["watch"], "tlcap wa<TAB>")
        # every command of `tlcap help`, and only target names (not the table's memory: line)
        got = complete(d, os.path.join(comp, "tlcap"), "tlcap seg", env)
        T.eq(got, ["segments"], "tlcap seg<TAB>")
        for cmd in ("stats", "segments"):
            got = complete(d, os.path.join(comp, "tlcap"),
                           "tlcap --connect 127.0.0.1:%d %s " % (sub, cmd), env)
            T.eq(got, ["pkgsim"], "tlcap --connect ADDR %s <TAB>" % cmd)
        c.close()
    finally:
        rc, _ = dm.stop()
    T.eq(rc, 0, "packaged tlcapd exit status")


build()
T.main([test_packages_and_contents, test_lintian, test_versions_and_shipped_config,
        test_man_pages, test_systemd_units, test_daemon_client_library_completion])
