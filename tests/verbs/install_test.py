#!/usr/bin/python3
"""install_test.py — `cmake --install` of the Verbs library into a scratch prefix, then a
program built with the installed pkg-config file runs on it without LD_LIBRARY_PATH,
while rdma-core's own libibverbs stays where it is.

usage: install_test.py BUILD_DIR
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

PROBE = r"""
#include <infiniband/verbs.h>
#include <stdio.h>
int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) { puts("no devices"); return 1; }
    printf("%s\n", ibv_get_device_name(list[0]));
    ibv_free_device_list(list);
    return 0;
}
"""


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    if not shutil.which("pkg-config") or not shutil.which("cc"):
        print("SKIP: pkg-config or cc not installed")
        return 77
    prefix = tempfile.mkdtemp(prefix="mroce-install-")
    try:
        subprocess.run(["cmake", "--install", build, "--prefix", prefix, "--component", "verbs"],
                       check=True, capture_output=True, text=True)
        libs = glob.glob(f"{prefix}/**/mroce/libibverbs.so.1", recursive=True)
        pcs = glob.glob(f"{prefix}/**/pkgconfig/mroce-verbs.pc", recursive=True)
        assert len(libs) == 1 and len(pcs) == 1, f"installed: {libs} {pcs}"
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
        env.pop("LD_LIBRARY_PATH", None)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "mroce-verbs"], env=env,
                               check=True, capture_output=True, text=True).stdout.split()
        src = os.path.join(prefix, "probe.c")
        exe = os.path.join(prefix, "probe")
        with open(src, "w") as f:
            f.write(PROBE)
        subprocess.run(["cc", src, "-o", exe] + flags, check=True, capture_output=True, text=True)
        ldd = subprocess.run(["ldd", exe], env=env, capture_output=True, text=True).stdout
        line = next(l for l in ldd.splitlines() if "libibverbs.so.1" in l)
        assert os.path.realpath(line.split("=>")[1].split()[0]) == os.path.realpath(libs[0]), ldd
        run = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=30)
        assert run.returncode == 0 and run.stdout.strip() == "mroce0", f"{run.returncode} {run.stdout} {run.stderr}"
        print(f"ok: {exe} runs on {libs[0]} without LD_LIBRARY_PATH")
        return 0
    except (AssertionError, subprocess.CalledProcessError, StopIteration) as e:
        detail = getattr(e, "stderr", "") or ""
        print(f"FAIL: {e} {detail}")
        return 1
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
