#!/usr/bin/env python3
"""The instructions a kernel's warps stall at most, from Nsight Compute's source page.

Usage: ncu -k regex:NAME -c 1 --section SourceCounters --page source --print-source sass --csv
       BINARY > page.csv; python3 tests/device/ncu_top_stalls.py page.csv [N]
Prints each of the N (default 30) instructions with the most warp-stall samples, with its share
of all samples, its address and its SASS.
"""
import csv
import sys


def main() -> None:
    rows = list(csv.reader(open(sys.argv[1])))
    head = next(i for i, r in enumerate(rows) if any(c.startswith("Warp Stall Sampling (All") for c in r))
    names = rows[head]
    samples = next(i for i, c in enumerate(names) if c.startswith("Warp Stall Sampling (All"))
    source = names.index("Source")
    found = []
    for r in rows[head + 1:]:
        try:
            found.append((float(r[samples].replace(",", "")), r[0], r[source]))
        except (IndexError, ValueError):
            continue
    total = sum(v for v, _, _ in found) or 1.0
    print(f"{total:.0f} samples")
    for v, addr, sass in sorted(found, reverse=True)[: int(sys.argv[2]) if len(sys.argv) > 2 else 30]:
        print(f"{100 * v / total:5.1f}%  {addr:>8}  {sass[:100]}")


if __name__ == "__main__":
    main()
