// A misbehaving MCP server on stdio for bee's client tests; the first argument says how:
//   echo         answers the handshake, lists `echo`, and echoes a call's arguments (or, given
//                a `path`, answers with that file's text, or its error as an error result)
//   silent-start never answers anything
//   crash        answers the handshake and tool list, exits 3 on a call
//   silent-call  answers the handshake and tool list, never answers a call
//   garbage      answers the handshake and tool list, answers a call with 8 MB of non-JSON
//   many-tools   lists 200 tools
//   dup-tools    lists `echo` twice
//   pages        lists one tool per page, with a next cursor every time
//   rpc-error    answers its first call with a JSON-RPC error, then echoes
//   later        as echo, but reads a call's `path` 300 ms after answering it
//   flood        as echo, but a call with `path` and `marks` writes `marks`/started, waits a
//                second, tries to read `path` 2,000 times, writes `marks`/flooded, tries five
//                more times, one a second, and answers
const mode = process.argv[2] || "echo";
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
let buffer = "";
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let i;
  while ((i = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, i);
    buffer = buffer.slice(i + 1);
    if (line.trim()) handle(JSON.parse(line));
  }
});
process.stdin.on("end", () => process.exit(0));

function handle(m) {
  if (mode === "silent-start" || m.id === undefined) return;
  const reply = (result) => send({ jsonrpc: "2.0", id: m.id, result });
  switch (m.method) {
    case "initialize":
      return reply({
        protocolVersion: m.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "bad-" + mode, version: "1.0.0" },
      });
    case "tools/list": {
      if (mode === "pages") {
        const page = Number((m.params && m.params.cursor) || 0);
        return reply({
          tools: [{ name: "echo" + page, inputSchema: { type: "object" } }],
          nextCursor: String(page + 1),
        });
      }
      const n = mode === "many-tools" ? 200 : mode === "dup-tools" ? 2 : 1;
      const tools = [];
      for (let k = 0; k < n; k++) {
        tools.push({
          name: k === 0 || mode === "dup-tools" ? "echo" : "echo" + k,
          description: "Echoes its arguments.",
          inputSchema: { type: "object", properties: { text: { type: "string" } } },
        });
      }
      return reply({ tools });
    }
    case "tools/call":
      if (mode === "crash") {
        process.stderr.write("bad server: crashing on purpose\n");
        process.exit(3);
      }
      if (mode === "silent-call") return;
      if (mode === "rpc-error" && !handle.refused) {
        handle.refused = true;
        return send({ jsonrpc: "2.0", id: m.id, error: { code: -32602, message: "no such thing" } });
      }
      if (mode === "garbage") {
        process.stdout.write("x".repeat(8 * 1024 * 1024) + "\nnot json at all\n");
        return;
      }
      if (mode === "later" && m.params.arguments && m.params.arguments.path) {
        const path = m.params.arguments.path;
        setTimeout(() => {
          try {
            require("fs").readFileSync(path);
          } catch (e) {}
        }, 300);
        return reply({ content: [{ type: "text", text: "later" }] });
      }
      if (mode === "flood" && m.params.arguments && m.params.arguments.marks) {
        const fs = require("fs");
        const { path, marks } = m.params.arguments;
        fs.writeFileSync(marks + "/started", "");
        setTimeout(() => {
          for (let k = 0; k < 2000; k++) {
            try {
              fs.readFileSync(path);
            } catch (e) {}
          }
          fs.writeFileSync(marks + "/flooded", "");
          // Five more, one a second: once the kernel's queue has drained and bee reads
          // again, their denials come through whatever was lost.
          let left = 5;
          const again = () => {
            try {
              fs.readFileSync(path);
            } catch (e) {}
            left -= 1;
            if (left > 0) {
              setTimeout(again, 1000);
            } else {
              reply({ content: [{ type: "text", text: "flooded" }] });
            }
          };
          setTimeout(again, 1000);
        }, 1000);
        return;
      }
      if (m.params.arguments && m.params.arguments.path) {
        try {
          const text = require("fs").readFileSync(m.params.arguments.path, "utf8");
          return reply({ content: [{ type: "text", text }] });
        } catch (e) {
          return reply({ content: [{ type: "text", text: String(e.message) }], isError: true });
        }
      }
      return reply({ content: [{ type: "text", text: "echo: " + JSON.stringify(m.params.arguments) }] });
    default:
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "no " + m.method } });
  }
}
