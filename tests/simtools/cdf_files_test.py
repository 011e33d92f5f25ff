#!/usr/bin/python3
"""Validates the flow-size distributions in scenarios/data/*.cdf.

Each file must name its published source in '#' comments and then hold `size_bytes cum_prob`
lines: sizes non-negative integers, strictly increasing; cum_prob in [0, 1], non-decreasing,
the last exactly 1. Prints each file's point count and mean flow size (the CDF is linear
between points, see the files' headers). Also feeds the checker broken files, so it is
known to fail when a rule is broken.

usage: cdf_files_test.py DATA_DIR
"""
import os
import sys
import tempfile


def check_cdf(path):
    """Returns (points, mean_bytes) or raises ValueError with a one-line reason."""
    points, comments = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            if text.startswith("#"):
                comments.append(text)
                continue
            fields = text.split()
            if len(fields) != 2:
                raise ValueError(f"{path}:{n}: expected 'size_bytes cum_prob', got {text!r}")
            try:
                size, prob = int(fields[0]), float(fields[1])
            except ValueError:
                raise ValueError(f"{path}:{n}: not numbers: {text!r}") from None
            if size < 0 or not 0.0 <= prob <= 1.0:
                raise ValueError(f"{path}:{n}: size must be >= 0 and cum_prob in [0, 1]")
            if points and size <= points[-1][0]:
                raise ValueError(f"{path}:{n}: size {size} does not increase")
            if points and prob < points[-1][1]:
                raise ValueError(f"{path}:{n}: cum_prob {prob} decreases")
            points.append((size, prob))
    if not comments or not any("SIGCOMM" in c for c in comments):
        raise ValueError(f"{path}: no '#' comment naming the published source")
    if len(points) < 2:
        raise ValueError(f"{path}: fewer than 2 points")
    if points[-1][1] != 1.0:
        raise ValueError(f"{path}: last cum_prob is {points[-1][1]}, not 1")
    mean = sum((points[i - 1][0] + points[i][0]) / 2 * (points[i][1] - points[i - 1][1])
               for i in range(1, len(points)))
    return points, mean


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: cdf_files_test.py DATA_DIR (a directory)")
    data = sys.argv[1]
    failures = 0
    for name in ("websearch.cdf", "hadoop.cdf"):
        try:
            points, mean = check_cdf(os.path.join(data, name))
            print(f"{name}: {len(points)} points, mean flow size {mean:,.0f} bytes")
        except (OSError, ValueError) as e:
            print(f"FAIL {e}")
            failures += 1

    # The checker rejects each broken rule.
    source = "# from Someone et al., SIGCOMM 2000\n"
    broken = {
        "decreasing": source + "0 0\n100 0.5\n200 0.4\n300 1\n",
        "not-one": source + "0 0\n100 0.5\n200 0.9\n",
        "percent": source + "0 0\n100 50\n200 100\n",
        "sizes": source + "0 0\n100 0.5\n100 1\n",
        "no-source": "0 0\n100 1\n",
        "garbage": source + "0 0\n100 half\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        for label, text in broken.items():
            path = os.path.join(tmp, label + ".cdf")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            try:
                check_cdf(path)
                print(f"FAIL the checker accepted a broken file ({label})")
                failures += 1
            except ValueError:
                pass
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
