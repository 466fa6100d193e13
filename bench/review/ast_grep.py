#!/usr/bin/env python3
"""ast_grep against the ast-grep CLI on the same trees: files per second and peak memory.

    bench/review/ast_grep.py --bee BEE --sg SG [--runs 5] [--pattern P] DIR...

BEE is a bee built with `--features astgrep,astgrep-rust`; its `ast_grep` is run as the tool
runner runs it in a scope (`bee __tool ast_grep`, one JSON request on standard input), here
without a scope, so the figure is the search alone. SG is the `ast-grep` binary of the crate
`ast-grep` (`cargo install ast-grep --root DIR`), run with one thread (`-j 1`, as bee searches)
and with its default threads. Runs alternate between the tools; the median wall time and the
largest peak resident set size (`/usr/bin/time -f %M`) of each are reported, with the number
of matches each found, which must agree.
"""
import argparse
import json
import os
import re
import statistics
import subprocess


def timed(argv, stdin=None):
    """Runs argv under /usr/bin/time; returns (stdout, stderr, seconds, peak KiB)."""
    p = subprocess.run(
        ["/usr/bin/time", "-f", "BENCH %e %M", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    line = [l for l in p.stderr.splitlines() if l.startswith("BENCH ")][-1]
    _, secs, kib = line.split()
    return p.stdout, p.stderr, float(secs), int(kib)


def bee_run(bee, root, pattern):
    request = {
        "workspace": os.path.abspath(root),
        "output_cap": 1 << 20,
        "args": {"pattern": pattern, "language": "rust", "max_results": 1},
    }
    out, _, secs, kib = timed([bee, "__tool", "ast_grep"], json.dumps(request))
    answer = json.loads(out)
    m = re.match(r"(\d+) match\(es\) .* in \d+ of (\d+) file\(s\) searched", answer["content"])
    if answer["state"] != "completed" or not m:
        raise SystemExit(f"bee: {answer}")
    return int(m.group(1)), int(m.group(2)), secs, kib


def sg_run(sg, root, pattern, threads):
    out, err, secs, kib = timed(
        [sg, "run", "--lang", "rust", "--pattern", pattern, "--json=stream",
         "--threads", str(threads), "--inspect", "summary", root]
    )
    files = re.search(r"scannedFileCount=(\d+)", err)
    return len(out.splitlines()), int(files.group(1)) if files else -1, secs, kib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bee", required=True)
    ap.add_argument("--sg", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pattern", default="$X.unwrap()")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    print(f"pattern `{a.pattern}`, {a.runs} runs each, alternating; load {os.getloadavg()[0]:.1f}")
    print("| tree | tool | files | matches | median s | files/s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for d in a.dirs:
        results = {"bee ast_grep": [], "ast-grep -j 1": [], "ast-grep (2 threads)": []}
        for _ in range(a.runs):
            results["bee ast_grep"].append(bee_run(a.bee, d, a.pattern))
            results["ast-grep -j 1"].append(sg_run(a.sg, d, a.pattern, 1))
            results["ast-grep (2 threads)"].append(sg_run(a.sg, d, a.pattern, 0))
        for tool, rs in results.items():
            matches, files = rs[0][0], rs[0][1]
            secs = statistics.median(r[2] for r in rs)
            kib = max(r[3] for r in rs)
            rate = files / secs if secs > 0 and files > 0 else float("nan")
            print(f"| {os.path.basename(os.path.normpath(d))} | {tool} | {files} | {matches} "
                  f"| {secs:.2f} | {rate:.0f} | {kib / 1024:.1f} |")


main()
