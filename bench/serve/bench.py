#!/usr/bin/env python3
"""bee serve, measured side by side in one run (docs/benchmarks.md, "bee serve").

Needs root, Landlock and bubblewrap (`bwrap`). Usage:

    bench/serve/bench.py [BEE] [ROUNDS]

BEE defaults to target/release/bee. Prints, for `-- /usr/bin/true`: a plain spawn,
bubblewrap, `bee exec` in-process as root and `bee exec` as `nobody` through the service
(p50 and p99 over ROUNDS interleaved rounds); then, in rounds of their own, both `bee exec`
rows with the policy and one address grant, which the Landlock engine's network gate
decides (in-process: its programs loaded and attached to the scope's cgroup; the service
loads the gate once, at its start); the time from `bee repl`'s start to its
prompt, in a pseudo-terminal, in-process as root and as nobody through the service; then
100 concurrent clients making 10 scopes each (errors counted), and the service's resident
memory with 1,000 live scopes.
"""

import json
import os
import pty
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

BEE = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/bee")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 200
NOBODY = 65534

POLICY = """version = 1
[fs]
read = ["/usr/lib/**", "/etc/ld.so.cache", "{ws}/**"]
write = ["/dev/null", "{ws}/**"]
[exec]
allow = ["/usr/lib/x86_64-linux-gnu/**", "/usr/bin/true"]
"""

# One address: a rule only the network gate decides under the Landlock engine.
GATED = POLICY + """[[net.allow]]
addr = ["127.0.0.1/32"]
ports = [8000]
proto = "tcp"
"""


def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def read_frame(s):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    (n,) = struct.unpack(">I", exact(4))
    return json.loads(exact(n))


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(frame({"hello": {"version": 1}}))
    answer = read_frame(s)
    assert "welcome" in answer, answer
    return s


def timed(argv, **kw):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)
    return (time.perf_counter() - start) * 1000


class Nobody:
    """A process of this script's, running as nobody, that times the commands given to it.

    Python starts a command with `vfork` unless it is to change the command's user, when it
    forks: its own page tables copied, about 0.5 ms more at the median on this machine and
    2 ms under load. The rows that run as nobody are timed here instead, where no user
    changes, so that every row pays the same start.
    """

    def __init__(self):
        ask_r, ask_w = os.pipe()
        tell_r, tell_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(ask_w)
            os.close(tell_r)
            try:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                asked = os.fdopen(ask_r)
                told = os.fdopen(tell_w, "w")
                for line in asked:
                    argv, kw = json.loads(line)
                    told.write(f"{timed(argv, **kw)}\n")
                    told.flush()
            finally:
                os._exit(0)
        os.close(ask_r)
        os.close(tell_w)
        self.ask = os.fdopen(ask_w, "w")
        self.told = os.fdopen(tell_r)

    def timed(self, argv, **kw):
        self.ask.write(json.dumps([argv, kw]) + "\n")
        self.ask.flush()
        return float(self.told.readline())

    def close(self):
        self.ask.close()
        os.waitpid(self.pid, 0)


def to_prompt(argv, cwd, env, uid=None):
    """Seconds from starting `bee repl` in a pseudo-terminal to its prompt; then ends it."""
    start = time.perf_counter()
    pid, master = pty.fork()
    if pid == 0:
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    seen = b""
    took = None
    while took is None:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            raise TimeoutError(f"no prompt: {seen[-500:]!r}")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: bee repl ended
            chunk = b""
        if not chunk:
            raise EOFError(f"no prompt: {seen[-500:]!r}")
        seen += chunk
        if "› ".encode() in seen:
            took = time.perf_counter() - start
    os.write(master, b"\x04")
    try:
        while os.read(master, 65536):
            pass
    except OSError:
        pass
    os.waitpid(pid, 0)
    os.close(master)
    return took * 1000


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    work = tempfile.mkdtemp()
    os.chmod(work, 0o755)
    ws = os.path.join(work, "ws")
    os.makedirs(os.path.join(work, "ceilings"))
    os.makedirs(ws)
    os.chmod(ws, 0o777)
    policy = os.path.join(ws, "p.toml")
    with open(policy, "w") as f:
        f.write(POLICY.format(ws=ws))
    gated = os.path.join(ws, "gated.toml")
    with open(gated, "w") as f:
        f.write(GATED.format(ws=ws))
    # The ceiling: the policy, and bee's own directory (a REPL's file tools run `bee`).
    bee_dir = os.path.dirname(BEE)
    with open(os.path.join(work, "ceilings", "default.toml"), "w") as f:
        f.write(
            GATED.format(ws=ws)
            .replace('read = [', f'read = ["{bee_dir}/**", "/proc/self/maps", ')
            .replace('allow = [', f'allow = ["{bee_dir}/**", ')
        )
    compiled = json.loads(
        subprocess.run(
            [BEE, "validate", "--policy", policy, "--emit", "compiled"],
            check=True,
            capture_output=True,
            cwd=ws,
        ).stdout
    )
    sock = os.path.join(work, "bee.sock")
    service = subprocess.Popen(
        [BEE, "serve", "--engine", "landlock", "--socket", sock, "--ceilings",
         os.path.join(work, "ceilings")],
        stderr=subprocess.DEVNULL,
    )
    try:
        while not os.path.exists(sock):
            time.sleep(0.01)
        time.sleep(0.2)
        idle = rss_kib(service.pid)
        env = dict(os.environ, BEE_SOCKET=sock)
        paths = {
            "plain spawn": (["/usr/bin/true"], {}),
            "bubblewrap": (
                ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all",
                 "--die-with-parent", "--", "/usr/bin/true"],
                {},
            ),
            "bee exec in-process (root)": (
                [BEE, "exec", "--service", "never", "--engine", "landlock", "--policy",
                 policy, "--", "/usr/bin/true"],
                {"cwd": ws},
            ),
            # Timed by the process that runs as nobody (`Nobody`).
            "bee exec through bee serve (nobody)": (
                [BEE, "exec", "--policy", policy, "--", "/usr/bin/true"],
                {"cwd": ws, "env": env, "nobody": True},
            ),
        }
        # In rounds of their own: what an in-process gated run leaves to the kernel after it
        # ends (its six programs freed) lands on the rows after it, and took the ungated
        # rows from 6–7 ms to 10–11 ms when they shared the rounds (docs/benchmarks.md).
        gated_paths = {
            "bee exec in-process (root), network gate": (
                [BEE, "exec", "--service", "never", "--engine", "landlock", "--policy",
                 gated, "--", "/usr/bin/true"],
                {"cwd": ws},
            ),
            # The service loaded the gate once, at its start.
            "bee exec through bee serve (nobody), network gate": (
                [BEE, "exec", "--policy", gated, "--", "/usr/bin/true"],
                {"cwd": ws, "env": env, "nobody": True},
            ),
        }
        nobody = Nobody()

        def run(argv, kw):
            kw = dict(kw)
            if kw.pop("nobody", False):
                return nobody.timed(argv, **kw)
            return timed(argv, **kw)

        def rounds(rows):
            times = {name: [] for name in rows}
            for name, (argv, kw) in rows.items():  # warm-up
                run(argv, kw)
            for _ in range(ROUNDS):
                for name, (argv, kw) in rows.items():
                    times[name].append(run(argv, kw))
            return times

        times = rounds(paths)
        gated_times = rounds(gated_paths)
        nobody.close()
        for title, table in (("", times), (", network gate", gated_times)):
            print(f"\n`-- /usr/bin/true`{title}, {ROUNDS} interleaved rounds ({BEE})")
            print("| path | p50 ms | p99 ms |")
            print("|---|---|---|")
            for name, values in table.items():
                print(f"| {name} | {pct(values, 50):.1f} | {pct(values, 99):.1f} |")

        # One records directory per row: root's metrics database is not nobody's to write.
        records = {}
        for who in ("root", "nobody"):
            records[who] = os.path.join(work, "records-" + who)
            os.makedirs(records[who])
            os.chmod(records[who], 0o777)
        with open(os.path.join(ws, "rec.jsonl"), "w") as f:
            f.write('{"text": "unused"}\n')
        with open(os.path.join(ws, "provider.toml"), "w") as f:
            f.write('kind = "replay"\nfile = "rec.jsonl"\nmodel = "m"\n')
        repl = [BEE, "repl", "--policy", policy, "--provider", "provider.toml",
                "--records-dir"]
        term = dict(env, TERM="xterm", NO_COLOR="1", COLUMNS="120", HOME=ws)
        term.pop("XDG_CONFIG_HOME", None)
        repls = {
            "bee repl in-process (root)": (
                repl[:2] + ["--service", "never", "--engine", "landlock"] + repl[2:]
                + [records["root"]],
                None,
            ),
            "bee repl through bee serve (nobody)": (repl + [records["nobody"]], NOBODY),
        }
        prompt = {name: [] for name in repls}
        for _ in range(ROUNDS // 10):
            for name, (argv, uid) in repls.items():
                prompt[name].append(to_prompt(argv, ws, term, uid))
        print(f"\n`bee repl`, start to prompt, {ROUNDS // 10} interleaved rounds")
        print("| path | p50 ms | p99 ms |")
        print("|---|---|---|")
        for name, values in prompt.items():
            print(f"| {name} | {pct(values, 50):.1f} | {pct(values, 99):.1f} |")

        errors = []

        def client():
            try:
                s = connect(sock)
                ids = []
                for _ in range(10):
                    s.sendall(frame({"create": {"policy": compiled, "origin": "p.toml"}}))
                    answer = read_frame(s)
                    if "created" not in answer:
                        errors.append(answer)
                        continue
                    ids.append(answer["created"]["scope"])
                s.sendall(frame("list"))
                listed = read_frame(s)
                if len(listed.get("scopes", [])) != len(ids):
                    errors.append(listed)
                s.close()
            except Exception as e:  # noqa: BLE001 - every failure counts
                errors.append(repr(e))

        start = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - start
        print(f"\n100 concurrent clients x 10 scopes: {len(errors)} errors, {took:.2f} s")

        base = rss_kib(service.pid)
        held = []
        for _ in range(1000 // 50):
            s = connect(sock)
            for _ in range(50):
                s.sendall(frame({"create": {"policy": compiled, "origin": "p.toml"}}))
                answer = read_frame(s)
                assert "created" in answer, answer
            held.append(s)
        time.sleep(0.5)
        live = rss_kib(service.pid)
        print(
            f"service RSS: {idle} KiB at start, {base} KiB after the runs above, "
            f"{live} KiB with 1,000 live scopes ({(live - base) / 1000:.1f} KiB per scope)"
        )
        for s in held:
            s.close()
    finally:
        service.terminate()
        service.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
