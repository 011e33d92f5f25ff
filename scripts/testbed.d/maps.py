#!/usr/bin/python3
"""maps.py — read and write the pinned maps of the testbed's tc program (testbed.bpf.c).

scripts/testbed calls this; people use `scripts/testbed status`. One element (a plane or the
bottleneck in front of a host) is one directory of pinned maps: config, counters, vqueue.

Usage:
  maps.py set DIR FIELD=VALUE...   read-modify-write the element's config
  maps.py show [--json] [--tc PREFIX] DIR...
                                   counters, config and virtual-queue state of each element;
                                   with --tc, also each plane's rate cap (`testbed rate`), read
                                   from the tbf qdiscs in the namespaces PREFIX-pJ
"""
import json
import pathlib
import re
import struct
import subprocess
import sys

# struct tb_config in testbed.bpf.c, in order; every field is a u64.
CONFIG_FIELDS = ["loss_ppm", "blackhole", "rate_Bps", "kmin", "kmax", "pmax_ppm", "limit",
                 "corrupt_ppm"]
# The counter indices of testbed.bpf.c, in order.
COUNTER_NAMES = ["pkts", "bytes", "loss_drops", "blackhole_drops", "queue_drops",
                 "ce_marks", "notect_drops", "corrupted"]
KEY_ZERO = ["0", "0", "0", "0"]


class MapError(Exception):
    pass


def bpftool(*args):
    """Runs bpftool with JSON output and returns the parsed answer."""
    result = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True)
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise MapError(f"bpftool {' '.join(args)}: {message[-1] if message else 'failed'}")
    return json.loads(result.stdout) if result.stdout.strip() else None


def read_config(element):
    entry = bpftool("map", "lookup", "pinned", str(element / "config"), "key", *KEY_ZERO)
    formatted = entry["formatted"]["value"]
    return {name: int(formatted[name]) for name in CONFIG_FIELDS}


def write_config(element, config):
    raw = struct.pack("<%dQ" % len(CONFIG_FIELDS), *(config[name] for name in CONFIG_FIELDS))
    bpftool("map", "update", "pinned", str(element / "config"), "key", *KEY_ZERO,
            "value", *(str(byte) for byte in raw))


def read_counters(element):
    entries = bpftool("map", "dump", "pinned", str(element / "counters"))
    totals = {name: 0 for name in COUNTER_NAMES}
    for entry in entries:
        index = int(entry["formatted"]["key"])
        if index < len(COUNTER_NAMES):
            totals[COUNTER_NAMES[index]] = sum(int(cpu["value"])
                                               for cpu in entry["formatted"]["values"])
    return totals


def read_vqueue(element):
    # One queue per receiving host (testbed.bpf.c); report the fullest.
    entries = bpftool("map", "dump", "pinned", str(element / "vqueue"))
    values = [entry["formatted"]["value"] for entry in entries]
    return {"backlog": max((int(v["backlog"]) for v in values), default=0),
            "peak": max((int(v["peak"]) for v in values), default=0)}


def command_set(element, assignments):
    config = read_config(element)
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep or name not in CONFIG_FIELDS or not value.isdigit():
            raise MapError(f"bad config assignment '{assignment}' "
                           f"(want FIELD=INTEGER, FIELD one of {', '.join(CONFIG_FIELDS)})")
        config[name] = int(value)
    write_config(element, config)


def read_plane_rate(prefix, element):
    """The rate cap of plane element `pJ`: the tbf rates (bit/s) at the egress of the plane
    router's l<i> interfaces, one per receiving host; 0 where there is none."""
    netns = f"/run/netns/{prefix}-{element.name}"
    links = subprocess.run(["nsenter", f"--net={netns}", "ip", "-j", "link", "show"],
                           capture_output=True, text=True)
    if links.returncode != 0:
        raise MapError(f"cannot list the links of {netns}: {links.stderr.strip()}")
    rates = []
    for name in sorted((link["ifname"] for link in json.loads(links.stdout)
                        if re.fullmatch(r"l[0-9]+", link["ifname"])), key=lambda n: int(n[1:])):
        qdiscs = subprocess.run(["nsenter", f"--net={netns}", "tc", "-j", "qdisc", "show",
                                 "dev", name], capture_output=True, text=True)
        if qdiscs.returncode != 0:
            raise MapError(f"cannot read the qdiscs of {name} in {netns}")
        tbf = [q for q in json.loads(qdiscs.stdout) if q.get("kind") == "tbf" and q.get("root")]
        rates.append(8 * int(tbf[0]["options"]["rate"]) if tbf else 0)
    return rates


def command_show(elements, as_json, tc_prefix=None):
    report = {}
    for element in elements:
        report[element.name] = {"counters": read_counters(element),
                                "config": read_config(element),
                                "vqueue": read_vqueue(element)}
        if tc_prefix and element.name.startswith("p"):
            report[element.name]["rate_bps"] = read_plane_rate(tc_prefix, element)
    if as_json:
        json.dump(report, sys.stdout, indent=1, sort_keys=True)
        print()
        return
    columns = COUNTER_NAMES + ["peak_q"]
    rows = [[name] + [str(data["counters"][c]) for c in COUNTER_NAMES]
            + [str(data["vqueue"]["peak"])] for name, data in report.items()]
    widths = [max(len(cell) for cell in column) for column in zip(["element"] + columns, *rows)]
    print("  ".join(h.rjust(w) if i else h.ljust(w)
                    for i, (h, w) in enumerate(zip(["element"] + columns, widths)))
          + "  config (non-zero)")
    for row, data in zip(rows, report.values()):
        config = " ".join(f"{k}={v}" for k, v in data["config"].items() if v)
        rates = data.get("rate_bps", [])
        if any(rates):
            # One cap per receiving host; `testbed rate` sets them all alike.
            shown = sorted(set(rates))
            config += " rate=" + "/".join(f"{r / 1e6:g}mbit" if r else "none" for r in shown)
        config = config.strip() or "-"
        print("  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths))) + "  " + config)


def main(argv):
    if len(argv) < 2 or argv[0] not in ("set", "show"):
        print("maps.py: usage: maps.py set DIR FIELD=VALUE... | show [--json] DIR...",
              file=sys.stderr)
        return 2
    try:
        if argv[0] == "set":
            command_set(pathlib.Path(argv[1]), argv[2:])
        else:
            args = argv[1:]
            as_json = bool(args) and args[0] == "--json"
            args = args[as_json:]
            tc_prefix = None
            if len(args) >= 2 and args[0] == "--tc":
                tc_prefix, args = args[1], args[2:]
            command_show([pathlib.Path(p) for p in args], as_json, tc_prefix)
    except MapError as error:
        print(f"maps.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
