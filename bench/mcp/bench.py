"""A `shell` call running `true`, three ways, side by side in one run on this host:

- `spawn`: `/bin/sh -c true` started by this script (no bee at all);
- `bee run`: the tool path of an episode (`bee run` replaying a recording of N such calls;
  one scope for the episode, a new child in it per call), each call's `duration_ms` from the
  transcript;
- `bee mcp`: `tools/call` through the official MCP Python SDK's client (a scope of its own
  per call), timed by the client (round trip) and by bee (`duration_ms` in `mcp.jsonl`).

Usage: PYTHON_WITH_MCP bench.py BEE N (a Python with the `mcp` package: tests/mcp_sdk.rs
installs one under the target directory)
(`BEE` built with feature `mcp`; the engine is `auto`: Landlock on a kernel without BPF LSM.)
Prints one table in milliseconds; docs/benchmarks.md ("bee mcp") records it.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BEE, N = sys.argv[1], int(sys.argv[2])

POLICY = """version = 1
[fs]
read = ["/usr/lib/**", "/etc/ld.so.cache", WS]
write = ["/dev/null", WS]
[exec]
allow = ["/usr/lib/x86_64-linux-gnu/**", "/usr/bin/dash"]
"""


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name, values):
    return f"| {name} | {len(values)} | {pct(values, 0.5):.2f} | {pct(values, 0.99):.2f} | {statistics.mean(values):.2f} |"


def durations(transcript):
    """Every `tool_result` event's `duration_ms` in the transcript."""
    with open(transcript) as f:
        events = [json.loads(line) for line in f]
    return [float(e["duration_ms"]) for e in events if e.get("event") == "tool_result"]


def find(root, name):
    for dirpath, _, files in os.walk(root):
        if name in files:
            return os.path.join(dirpath, name)
    raise SystemExit(f"no {name} under {root}")


def spawn():
    times = []
    for _ in range(N):
        t = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
        times.append((time.perf_counter() - t) * 1000)
    return times


def bee_run(tmp, policy, records):
    call = {"tool_calls": [{"id": "c", "name": "shell", "arguments": {"command": "true"}}],
            "usage": {"input_tokens": 1, "output_tokens": 1}}
    with open(f"{tmp}/rec.jsonl", "w") as f:
        for i in range(N):
            call["tool_calls"][0]["id"] = f"c{i}"
            f.write(json.dumps(call) + "\n")
        f.write(json.dumps({"text": "done", "usage": {"input_tokens": 1, "output_tokens": 1}}))
    with open(f"{tmp}/provider.toml", "w") as f:
        f.write('kind = "replay"\nfile = "rec.jsonl"\nmodel = "m"\n[prices]\ninput = 0.0\noutput = 0.0\n')
    with open(f"{tmp}/scenario.toml", "w") as f:
        f.write(f'name = "bench"\nprompt = "p"\nworkspace = "ws"\nworkspace_mode = "in-place"\n'
                f'policy = "{policy}"\n[limits]\nturns = {N + 5}\n')
    subprocess.run([BEE, "run", "--scenario", "scenario.toml", "--provider", "provider.toml",
                    "--records-dir", records], cwd=tmp, check=True,
                   stdout=subprocess.DEVNULL)
    return durations(find(records, "bench.jsonl"))


async def mcp_calls(tmp, policy, records):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=BEE,
        args=["mcp", "--policy", policy, "--workspace", f"{tmp}/ws",
              "--records-dir", records],
        cwd=f"{tmp}/ws", env={"HOME": tmp})
    times = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            for _ in range(N):
                t = time.perf_counter()
                r = await s.call_tool("shell", {"command": "true"})
                times.append((time.perf_counter() - t) * 1000)
                if r.is_error:
                    raise SystemExit(f"the call failed: {r.content}")
    return times, durations(find(records, "mcp.jsonl"))


def main():
    import anyio

    tmp = tempfile.mkdtemp(prefix="bee-mcp-bench-")
    os.makedirs(f"{tmp}/ws")
    policy = f"{tmp}/policy.toml"
    with open(policy, "w") as f:
        f.write(POLICY.replace("WS", json.dumps(f"{tmp}/ws/**")))
    # Interleaved rounds, so that the machine's load falls on every column alike.
    spawned, run, client, server = [], [], [], []
    global N
    total, N = N, max(1, N // 4)
    for round_ in range(4):
        spawned += spawn()
        run += bee_run(tmp, policy, f"{tmp}/run-records-{round_}")
        c, s = anyio.run(mcp_calls, tmp, policy, f"{tmp}/mcp-records-{round_}")
        client, server = client + c, server + s
    N = total
    print("| path | calls | p50 ms | p99 ms | mean ms |")
    print("|---|---|---|---|---|")
    print(row("spawn `/bin/sh -c true`", spawned))
    print(row("`bee run` tool path (bee's duration)", run))
    print(row("`bee mcp` tools/call (bee's duration)", server))
    print(row("`bee mcp` tools/call (client round trip)", client))


main()
