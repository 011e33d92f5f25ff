"""Seed lists for the scripts that sweep simulator seeds (incast_sweep.py, sim-seeds-ab.py)."""


def seeds_of(text):
    """The seeds a list such as "1-5,9" names, in order: [1, 2, 3, 4, 5, 9]."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out
