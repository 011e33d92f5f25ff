#!/usr/bin/python3
"""deploy_doc_test.py — docs/deploy.md says only what is true of this tree:

- its Prometheus configuration block is valid (`promtool check config`, Debian's
  prometheus package) and scrapes a job named mroce;
- its systemd unit is valid (`systemd-analyze verify`, the program path replaced by one
  that exists) and sets the stat directory it names;
- every MROCE_* variable it names is read by the code (getenv in api/, obs/, verbs/,
  tools/), every `mroce perf` / `mroce stat` / `mroce sim` flag it shows is in that
  command's --help, every sysctl exists under /proc/sys, and every Prometheus metric name
  it uses is one the exporter emits (docs/observability.md's tables);
- the UDP port and stat directories match the code's defaults.

A missing promtool or systemd-analyze skips that check with a note; the rest always runs.

usage: deploy_doc_test.py PATH/TO/mroce SOURCE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MROCE, SRC = sys.argv[1], sys.argv[2]
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def read(*parts):
    with open(os.path.join(SRC, *parts)) as f:
        return f.read()


DOC = read("docs", "deploy.md")


def blocks(lang):
    return re.findall(r"```" + lang + r"\n(.*?)```", DOC, re.S)


def dedent(text):
    lines = text.splitlines()
    pad = min(len(l) - len(l.lstrip()) for l in lines if l.strip())
    return "\n".join(l[pad:] for l in lines) + "\n"


def test_prometheus_config():
    ymls = blocks(r"[ ]*yaml")
    check(len(ymls) == 1, f"{len(ymls)} yaml blocks in deploy.md")
    if not ymls:
        return
    text = dedent(ymls[0])
    check("job_name: mroce" in text, "the scrape config has no mroce job")
    promtool = shutil.which("promtool")
    if not promtool:
        print("note: promtool not installed, the scrape config is not validated")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write(text)
    try:
        p = subprocess.run([promtool, "check", "config", f.name], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"promtool check config: {p.stdout} {p.stderr}")
    finally:
        os.unlink(f.name)
    print("ok: prometheus config")


def test_unit():
    units = blocks("ini")
    check(len(units) == 1, f"{len(units)} ini blocks (systemd units) in deploy.md")
    if not units:
        return
    unit = units[0]
    check("RuntimeDirectory=mroce" in unit and "MROCE_STAT_DIR=/run/mroce" in unit,
          "the unit does not set the stat directory it describes")
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("note: systemd-analyze not installed, the unit is not validated")
        return
    with tempfile.TemporaryDirectory() as d:
        # The program is the reader's own: verify the unit with one that exists.
        text = re.sub(r"^ExecStart=\S+", "ExecStart=" + os.path.abspath(MROCE), unit, flags=re.M)
        path = os.path.join(d, "mroce-worker.service")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([analyze, "verify", "--man=no", path], capture_output=True, text=True, timeout=60)
        # Lines about the unit's own file are what counts (verify also loads the host's
        # default units, which may be absent in a container).
        mine = [l for l in (p.stdout + p.stderr).splitlines() if "mroce-worker.service" in l]
        check(not mine, "systemd-analyze verify:\n  " + "\n  ".join(mine))
    print("ok: systemd unit")


def test_variables():
    code = ""
    for top in ("api", "obs", "verbs", "tools"):
        for root, _, files in os.walk(os.path.join(SRC, top)):
            for f in files:
                if f.endswith((".cc", ".h")):
                    code += open(os.path.join(root, f)).read()
    read_vars = set(re.findall(r'getenv\("(MROCE_[A-Z_]+)"\)', code))
    named = set(re.findall(r"\b(MROCE_[A-Z_]+)\b", DOC))
    check(named, "deploy.md names no MROCE_ variable")
    for v in sorted(named):
        check(v in read_vars, f"deploy.md names {v}, which no code reads")
    print("ok: variables", sorted(named))


def test_flags():
    for sub in ("perf", "stat", "sim"):
        help_text = subprocess.run([MROCE, sub, "--help"], capture_output=True, text=True, timeout=30).stdout
        used = set()
        for cmd in re.findall(r"`mroce " + sub + r"([^`]*)`", DOC):
            used |= set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", cmd))
        for flag in sorted(used):
            check(re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", help_text) is not None,
                  f"deploy.md shows `mroce {sub} {flag}`, not in its --help")
        print(f"ok: mroce {sub} flags", sorted(used))


def test_sysctls_and_metrics():
    for name in set(re.findall(r"\b(net\.core\.[a-z_]+)\b", DOC)):
        check(os.path.exists("/proc/sys/" + name.replace(".", "/")), f"no sysctl {name}")
    obs_doc = read("docs", "observability.md")
    exported = set(re.findall(r"`(mroce_[a-z0-9_]+)`", obs_doc))
    for m in sorted(set(re.findall(r"\b(mroce_[a-z0-9_]+)\b", DOC))):
        check(m in exported, f"deploy.md queries {m}, which docs/observability.md does not list")
    print("ok: sysctls and metric names")


def test_defaults():
    check("UDP **4797**" in DOC and "kDefaultPort = 4797;" in read("wire", "header.h"),
          "the UDP port in deploy.md is not the default")
    server = read("obs", "server.cc")
    for d in ('"/run/mroce"', '"/tmp/mroce-"'):
        check(d in server, f"obs/server.cc has no stat directory {d}")
    check("`/run/mroce` for root" in DOC and "`/tmp/mroce-<uid>`" in DOC, "deploy.md's stat directories")
    check("::chmod(path.c_str(), 0600)" in server and "mode 0600" in DOC, "the stat socket's mode")
    print("ok: defaults")


test_prometheus_config()
test_unit()
test_variables()
test_flags()
test_sysctls_and_metrics()
test_defaults()
if FAILURES:
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1)
print("all ok")
