#!/usr/bin/env python3
"""Writes a tether partition table (src/services/persist.rs format) with N distinct nonzero keys
spread over the given clone ids: gen_partitions.py FILE N CLONE[,CLONE...]"""
import sys

path, n, clones = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
M = (1 << 64) - 1


def splitmix64(x):
    # A bijection on 64-bit integers: distinct inputs give distinct keys.
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


with open(path, "w") as f:
    f.write("# tether partition table v1\n")
    written = 0
    i = 0
    while written < n:
        i += 1
        k = splitmix64(i)
        if k == 0:
            continue
        f.write("%016x\t%s\n" % (k, clones[written % len(clones)]))
        written += 1
