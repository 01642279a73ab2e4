#!/usr/bin/env python3
"""Sums Nsight Compute's gpu__time_duration per kernel: reads the CSV rows of `ncu --csv --metrics
gpu__time_duration.sum` from a log (other lines are skipped) and prints each kernel's total time, its share, how many
launches it took and its name without namespaces or arguments, the largest first, then the total.

Usage: ncu-kernel-times.py NCU_LOG"""
import csv
import sys

UNIT_SECONDS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
                "s": 1.0, "second": 1.0}


def short_name(name):
    """A kernel's name without `void`, namespaces or argument list: `dkdv_kernel<128, true>`."""
    for anonymous in ("(anonymous namespace)::", "unnamed>::"):
        name = name.replace(anonymous, "")
    name = name.removeprefix("void ")
    depth = 0
    last_scope = 0
    for i, character in enumerate(name):
        if character == "<":
            depth += 1
        elif character == ">":
            depth -= 1
        elif depth == 0 and character == "(":
            return name[last_scope:i]
        elif depth == 0 and name.startswith("::", i):
            last_scope = i + 2
    return name[last_scope:]


def kernel_times(lines):
    """{short name: [seconds, launches]} from ncu's CSV rows among `lines`."""
    rows = csv.reader(line for line in lines if line.startswith('"'))
    header = next(rows, None)
    if header is None:
        raise ValueError("no ncu CSV rows")
    column = {title: index for index, title in enumerate(header)}
    missing = {"Kernel Name", "Metric Name", "Metric Unit", "Metric Value"} - set(column)
    if missing:
        raise ValueError(f"ncu CSV header lacks {', '.join(sorted(missing))}")
    times = {}
    for row in rows:
        if row[column["Metric Name"]] != "gpu__time_duration.sum":
            continue
        unit = row[column["Metric Unit"]]
        if unit not in UNIT_SECONDS:
            raise ValueError(f"unknown time unit {unit!r}")
        seconds = float(row[column["Metric Value"]].replace(",", "")) * UNIT_SECONDS[unit]
        entry = times.setdefault(short_name(row[column["Kernel Name"]]), [0.0, 0])
        entry[0] += seconds
        entry[1] += 1
    return times


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("Usage: ")[1], file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as log:
            times = kernel_times(log)
    except (OSError, ValueError) as error:
        print(f"ncu-kernel-times: {sys.argv[1]}: {error}", file=sys.stderr)
        return 2
    total = sum(seconds for seconds, _ in times.values())
    for name, (seconds, launches) in sorted(times.items(), key=lambda item: (-item[1][0], item[0])):
        print(f"{seconds * 1e3:10.3f} ms {100 * seconds / total:6.1f}% {launches:5d}x  {name}")
    print(f"{total * 1e3:10.3f} ms total, {sum(launches for _, launches in times.values())} launches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
