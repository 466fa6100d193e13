"""Drives `bee mcp` with the official MCP Python SDK's client and prints what it saw.

Usage: client.py BEE POLICY WORKSPACE SECRET RECORDS_DIR

Prints one JSON object on standard output; `tests/mcp_sdk.rs` asserts on it. The script
itself asserts nothing, so that every observation reaches the test even when one is wrong.
"""

import json
import os
import sys

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

BEE, POLICY, WORKSPACE, SECRET, RECORDS = sys.argv[1:6]

# The long call's command, unique enough to find its process in /proc.
SLEEP = "sleep 31.4159"


def processes(needle):
    """The pids of processes whose command line contains `needle` (this script's excluded)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline and "client.py" not in cmdline:
            found.append(int(pid))
    return found


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def server():
    return StdioServerParameters(
        command=BEE,
        args=["mcp", "--policy", POLICY, "--workspace", WORKSPACE, "--records-dir", RECORDS],
        cwd=WORKSPACE,
        env={"HOME": WORKSPACE},
    )


async def call(session, name, arguments, **kw):
    r = await session.call_tool(name, arguments, **kw)
    return {"is_error": r.is_error, "text": text_of(r)}


async def error_of(coro):
    """The JSON-RPC error `coro` raised, as {code, message}; None when it did not raise."""
    try:
        await coro
    except MCPError as e:
        return {"code": e.error.code, "message": e.error.message}
    return None


async def handshake(report):
    """The 2025-11-25 handshake: `initialize`, then the calls."""
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            report["initialize"] = {
                "protocol_version": init.protocol_version,
                "server": init.server_info.name,
                "tools_capability": init.capabilities.tools is not None,
            }
            listed = await s.list_tools()
            report["tools"] = {
                t.name: {
                    "schema_type": t.input_schema.get("type"),
                    "properties": sorted((t.input_schema.get("properties") or {}).keys()),
                    "read_only": t.annotations.read_only_hint if t.annotations else None,
                    "description": bool(t.description),
                }
                for t in listed.tools
            }
            report["allowed"] = await call(s, "shell", {"command": "echo hi"})
            report["denied"] = await call(s, "shell", {"command": f"cat {SECRET}"})
            report["unknown_tool"] = await error_of(s.call_tool("no_such_tool", {}))
            report["unknown_method"] = await error_of(
                s.send_request(types.Request(method="bee/no-such-method", params=None), dict)
            )

            # A long call, abandoned once its process runs and it has reported progress:
            # the SDK sends notifications/cancelled, and bee must kill the call's processes.
            seen = {"running": False, "progress": []}

            async def on_progress(progress, total, message):
                seen["progress"].append(message)

            async def long_call():
                await s.call_tool("shell", {"command": SLEEP}, progress_callback=on_progress)

            with anyio.move_on_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(long_call)
                    for _ in range(200):
                        await anyio.sleep(0.05)
                        seen["running"] = seen["running"] or bool(processes(SLEEP))
                        if seen["running"] and seen["progress"]:
                            break
                    tg.cancel_scope.cancel()
            gone = False
            for _ in range(100):
                await anyio.sleep(0.05)
                if not processes(SLEEP):
                    gone = True
                    break
            report["cancelled"] = {
                "was_running": seen["running"],
                "progress": seen["progress"],
                "gone": gone,
            }
            # The session still answers after the cancellation.
            report["after_cancel"] = await call(s, "shell", {"command": "echo still here"})


async def modern(report):
    """The stateless 2026-07-28 revision: `server/discover`, no `initialize`."""
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as s:
            d = await s.discover()
            report["discover"] = {
                "supported": list(d.supported_versions),
                "tools_capability": d.capabilities.tools is not None,
                "negotiated": getattr(s, "protocol_version", None),
            }
            listed = await s.list_tools()
            report["modern_tools"] = sorted(t.name for t in listed.tools)
            report["modern_call"] = await call(s, "shell", {"command": "echo modern"})


async def main():
    report = {"sdk": "mcp"}
    for step in (handshake, modern):
        try:
            await step(report)
        except BaseException as e:  # noqa: BLE001 - every failure is reported to the test
            report.setdefault("errors", []).append(f"{step.__name__}: {type(e).__name__}: {e!r}")
    print(json.dumps(report))


anyio.run(main)
