#!/usr/bin/env python3
"""What walking a name pattern's root costs each call under the Landlock engine, side by
side in one run (docs/benchmarks.md, "Name patterns under the Landlock engine").

Needs root and Landlock. Usage:

    bench/landlock/walk.py [BEE] [ROUNDS] [ROOT]

BEE defaults to target/release/bee, ROUNDS to 30, ROOT to /usr/share. Times `bee exec
--engine landlock -- /usr/bin/true` with three policies, interleaved round by round: a tree
grant of ROOT, a suffix pattern below ROOT (`ROOT/**/*.txt`), and that with a name pattern
(`ROOT/**/README`); each call walks ROOT once per pattern. Prints the entries below ROOT,
each variant's p50 and p90 and its ratio to the tree grant's p50.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

BEE = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/bee")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 30
ROOT = sys.argv[3] if len(sys.argv) > 3 else "/usr/share"

POLICY = """version = 1
[fs]
read = ["/usr/lib/**", "/etc/ld.so.cache", {grants}]
write = ["/dev/null"]
[exec]
allow = ["/usr/lib/x86_64-linux-gnu/**", "/usr/bin/true"]
"""

VARIANTS = {
    "tree": [f"{ROOT}/**"],
    "suffix": [f"{ROOT}/**/*.txt"],
    "suffix+name": [f"{ROOT}/**/*.txt", f"{ROOT}/**/README"],
}


def main():
    entries = sum(len(dirs) + len(files) for _, dirs, files in os.walk(ROOT))
    print(f"entries below {ROOT}: {entries}")
    with tempfile.TemporaryDirectory() as work:
        argv = {}
        for name, grants in VARIANTS.items():
            path = os.path.join(work, f"{name}.toml")
            with open(path, "w") as f:
                f.write(POLICY.format(grants=", ".join(f'"{g}"' for g in grants)))
            argv[name] = [BEE, "exec", "--engine", "landlock", "--policy", path, "--", "/usr/bin/true"]
        times = {name: [] for name in VARIANTS}
        for warm in range(3):
            for name in VARIANTS:
                subprocess.run(argv[name], check=True, stderr=subprocess.DEVNULL)
        for _ in range(ROUNDS):
            for name in VARIANTS:
                start = time.perf_counter()
                subprocess.run(argv[name], check=True, stderr=subprocess.DEVNULL)
                times[name].append((time.perf_counter() - start) * 1000)
        base = statistics.median(times["tree"])
        print("| variant | p50 | p90 | ratio to tree (p50) |")
        print("|---|---|---|---|")
        for name, t in times.items():
            t.sort()
            p50 = statistics.median(t)
            p90 = t[int(len(t) * 0.9) - 1]
            print(f"| {name} | {p50:.1f} ms | {p90:.1f} ms | {p50 / base:.2f}x |")


main()
