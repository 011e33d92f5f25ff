#!/usr/bin/python3
"""selftest.py — checks that check_layering.py catches a planted violation.

Builds a small tree in a temporary directory: allowed includes only (must pass), then the
same tree plus forbidden ones (must fail, naming exactly those). Exits 1 on any mismatch.
"""

import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).resolve().with_name("check_layering.py")

CLEAN = {
    "util/time.h": "#pragma once\n#include <chrono>\n",
    "wire/ack.h": '#include "util/time.h"\n#include "wire/header.h"\n',
    "core/conn.cc": '#include "core/conn.h"\n#include "wire/ack.h"\n#include "cc/aimd.h"\n',
    "datapath/udp/udp.cc": '#include "datapath/datapath.h"\n#include "util/time.h"\n',
    "verbs/verbs.cc": '#include "api/device.h"\n#include <gtest/gtest.h>\n',
    "tools/main.cc": '#include "datapath/udp/udp.h"\n#include "sim/sim.h"\n',
    "docs/not_a_module.cc": '#include "datapath/udp.h"\n',
    "conform/peer.cc": '#include "conform/peer.h"\n#include "wire/ack.h"\n',
    "conform/agent/agent.cc": '#include "conform/agent/agent.h"\n#include "api/device.h"\n',
}
PLANTED = {
    "core/bad.cc": '#include "wire/ack.h"\n\n  #  include "datapath/udp.h"\n',
    "cc/aimd.h": "#pragma once\n#include <core/engine.h>\n",
    "verbs/qp.cc": '// verbs only sees api\n#include "core/conn.h"\n',
    # The suite may not reach the engine, nor the API through its agent's directory.
    "conform/suite.cc": '#include "core/endpoint.h"\n#include "conform/agent/agent.h"\n',
    "conform/agent/server.cc": '#include "conform/peer.h"\n',
}
EXPECTED = {
    "cc/aimd.h:2: module 'cc' may not include 'core/engine.h'",
    "core/bad.cc:3: module 'core' may not include 'datapath/udp.h'",
    "verbs/qp.cc:2: module 'verbs' may not include 'core/conn.h'",
    "conform/suite.cc:1: module 'conform' may not include 'core/endpoint.h'",
    "conform/suite.cc:2: module 'conform' may not include 'conform/agent/agent.h'",
    "conform/agent/server.cc:1: module 'conform/agent' may not include 'conform/peer.h'",
}


def write_tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run_checker(root):
    result = subprocess.run([sys.executable, str(CHECKER), "--root", str(root)],
                            capture_output=True, text=True, check=False)
    return result.returncode, set(result.stdout.splitlines())


def main():
    failures = []
    with tempfile.TemporaryDirectory(prefix="mroce-layering-") as tmp:
        root = pathlib.Path(tmp)
        write_tree(root, CLEAN)
        code, lines = run_checker(root)
        if code != 0:
            failures.append(f"clean tree: exit {code}, output {sorted(lines)}")

        write_tree(root, PLANTED)
        code, lines = run_checker(root)
        if code != 1:
            failures.append(f"planted violations: exit {code}, want 1")
        if lines != EXPECTED:
            failures.append(f"planted violations: got {sorted(lines)}, want {sorted(EXPECTED)}")

    for failure in failures:
        print(f"selftest: FAIL {failure}")
    print(f"selftest: {'FAILED' if failures else 'OK'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
