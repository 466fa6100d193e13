//! bee as an MCP client, the scenarios its native (`landlock_mcp_client`) and VM
//! (`kernel_mcp`) tests share: a scratch run with a replayed model, the servers' policies, and
//! the real filesystem server from npm.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{code, processes_with, stderr, stdout, tool_call, tool_result, transcript_text};

/// The filesystem server's release the tests run (`tests/mcp/server-filesystem.version`,
/// which `cargo xtask test` reads to install the same release for the kernel tests' guests).
pub fn server_filesystem_version() -> &'static str {
    include_str!("../mcp/server-filesystem.version").trim()
}

/// The misbehaving server (`tests/mcp/bad_server.js`; its first argument says how).
pub const BAD_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/bad_server.js");

/// The memory server's release the tests run (`tests/mcp/server-memory.version`, which
/// `cargo xtask test` reads as it does the filesystem server's).
pub fn server_memory_version() -> &'static str {
    include_str!("../mcp/server-memory.version").trim()
}

/// The server `@modelcontextprotocol/server-NAME` installed at `version` in the test cache
/// (npm, on first use): its package directory. In a VM guest, which has no npm, the cache is
/// copied in by `cargo xtask test`.
fn npm_server(name: &str, version: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-servers/server-{name}-{version}"));
    let package = dir.join(format!("node_modules/@modelcontextprotocol/server-{name}"));
    super::npm::install(
        &dir,
        &[],
        &format!("@modelcontextprotocol/server-{name}@{version}"),
        &[&package.join("dist/index.js")],
    );
    package
}

/// The filesystem server at [`server_filesystem_version`]: its package directory.
pub fn server_filesystem() -> PathBuf {
    npm_server("filesystem", server_filesystem_version())
}

/// The memory server at [`server_memory_version`]: its package directory.
pub fn server_memory() -> PathBuf {
    npm_server("memory", server_memory_version())
}

/// The package's `node_modules` directory as a tree (`…/node_modules/**`), which a server's
/// policy reads.
fn modules_of(package: &Path) -> String {
    package
        .parent()
        .and_then(Path::parent)
        .map(|m| format!("{}/**", m.display()))
        .unwrap_or_default()
}

/// A version 1 policy: node and its libraries, `read` and `write` (TOML array items).
pub fn policy(read: &[String], write: &[String]) -> String {
    // Where a VM guest has the shared libraries (`cargo xtask vm` copies them to the paths
    // `ldd` names, which on a merged-`/usr` host are these links to `/usr/lib`).
    const LIBS: &str = "\"/lib/x86_64-linux-gnu/**\", \"/lib64/**\"";
    let list = |v: &[String]| {
        v.iter()
            .map(|p| format!("{p:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "version = 1\n[fs]\nread = [\"/usr/lib/**\", {LIBS}, \"/etc/ld.so.cache\", \"/etc/ssl/**\", {}]\n\
         write = [\"/dev/null\"{}]\n[exec]\nallow = [\"/usr/lib/x86_64-linux-gnu/**\", {LIBS}, \
         \"/usr/bin/node\", \"/usr/bin/dash\", \"/usr/bin/sleep\"]\n",
        list(read),
        if write.is_empty() {
            String::new()
        } else {
            format!(", {}", list(write))
        }
    )
}

/// A scratch run: `ws/` with `a.txt`, `secret.txt` beside it, the session's policy (reading
/// `extra` too, and the whole scratch directory), and a replayed model making `turns`.
pub struct Run {
    dir: tempfile::TempDir,
}

impl Run {
    pub fn new(extra: &[String], turns: &[String]) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let root = dir.path();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap_or_else(|e| unreachable!("{e}"));
        std::fs::write(ws.join("a.txt"), "hello from the workspace\n")
            .unwrap_or_else(|e| unreachable!("{e}"));
        std::fs::write(root.join("secret.txt"), "TOP SECRET\n")
            .unwrap_or_else(|e| unreachable!("{e}"));
        let mut read = vec![format!("{}/**", root.display())];
        read.extend_from_slice(extra);
        let session = policy(&read, &[format!("{}/**", ws.display())]);
        std::fs::write(root.join("session.toml"), session).unwrap_or_else(|e| unreachable!("{e}"));
        super::replay_scenario(root, "ws", "session.toml", turns);
        Self { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes the server's policy (`server.toml`) and the configuration naming it.
    pub fn server(&self, name: &str, command: &str, args: &[&str], read: &[String], more: &str) {
        std::fs::write(self.root().join("server.toml"), policy(read, &[]))
            .unwrap_or_else(|e| unreachable!("{e}"));
        let config = format!(
            "[mcp.servers.{name}]\ncommand = {command:?}\nargs = {}\npolicy = \"server.toml\"\n{more}",
            json!(args)
        );
        std::fs::write(self.root().join("bee.toml"), config)
            .unwrap_or_else(|e| unreachable!("{e}"));
    }

    pub fn run(&self) -> std::process::Output {
        super::bee_in(
            self.root(),
            &[
                "run",
                "--config",
                "bee.toml",
                "--provider",
                "provider.toml",
                "--records-dir",
                "rec",
                "--scenario",
                "scenario.toml",
            ],
        )
    }

    /// [`Run::run`], checked to exit 0: the run's transcript.
    pub fn completed(&self) -> String {
        let o = self.run();
        assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
        self.transcript()
    }

    pub fn transcript(&self) -> String {
        transcript_text(&self.root().join("rec"))
    }
}

pub fn done() -> String {
    json!({"text": "done"}).to_string()
}

/// The real filesystem server (`@modelcontextprotocol/server-filesystem`), told it may use all
/// of `/`, in a scope that reads the workspace only: it reads a workspace file; a read of the
/// secret beside the workspace is refused by the kernel, the denial attributed to that call;
/// a write, the session's grant and not the server's, fails; no server process outlives the
/// session.
pub fn the_filesystem_server_reads_what_its_policy_grants_and_the_kernel_refuses_the_rest() {
    let package = server_filesystem();
    let modules = modules_of(&package);
    let turns = |ws: &Path, root: &Path| {
        vec![
            tool_call(
                "c1",
                "fs__read_text_file",
                &json!({"path": ws.join("a.txt")}),
            ),
            tool_call(
                "c2",
                "fs__read_text_file",
                &json!({"path": root.join("secret.txt")}),
            ),
            tool_call(
                "c3",
                "fs__write_file",
                &json!({"path": ws.join("planted.txt"), "content": "x"}),
            ),
            done(),
        ]
    };
    // The paths are only known once the scratch directory is: write the turns after.
    let run = Run::new(std::slice::from_ref(&modules), &[]);
    let (root, ws) = (run.root().to_path_buf(), run.root().join("ws"));
    super::replay_scenario(&root, "ws", "session.toml", &turns(&ws, &root));
    let entry = package.join("dist/index.js");
    // The server is told it may use all of `/`; its scope reads the workspace only.
    run.server(
        "fs",
        "/usr/bin/node",
        &[&entry.display().to_string(), "/"],
        &[format!("{}/**", ws.display()), modules],
        "",
    );
    let text = run.completed();
    let read = tool_result(&text, "c1");
    assert_eq!(read["state"], "completed", "{read}");
    assert!(
        read["output"]
            .as_str()
            .is_some_and(|s| s.starts_with("hello from the workspace")),
        "{read}"
    );
    // The session may read the secret; the server's policy may not, and the kernel says so.
    let secret = tool_result(&text, "c2");
    assert_eq!(secret["state"], "failed", "{secret}");
    let out = secret["output"].as_str().unwrap_or_default();
    assert!(
        out.contains(&format!(
            "denied by policy: open {}/secret.txt for read: no fs.read grant covers it",
            root.display()
        )),
        "{out}"
    );
    assert!(!out.contains("TOP SECRET"), "{out}");
    assert!(
        text.lines().any(|l| l.contains("\"event\":\"denial\"")
            && l.contains("\"call_id\":\"c2\"")
            && l.contains("secret.txt")),
        "the denial is attributed to the call that caused it:\n{text}"
    );
    // Writing is the session's grant, not the server's.
    let write = tool_result(&text, "c3");
    assert_eq!(write["state"], "failed", "{write}");
    assert!(!ws.join("planted.txt").exists());
    assert!(
        processes_with(&entry.display().to_string()).is_empty(),
        "the server outlived its session"
    );
}

/// The real memory server (`@modelcontextprotocol/server-memory`), its knowledge graph kept
/// in the workspace (`MEMORY_FILE_PATH`, one entity written before the run), in a scope that
/// reads the workspace and writes nothing: reading the graph returns that entity; storing
/// another, which writes a temporary file beside the graph and renames it over the graph, is
/// refused by the kernel, the graph is left as it was and no temporary file is left; no
/// server process outlives the session. With `reported` (the BPF LSM), the refusal is explained in the
/// call's result and its denial attributed to the call; without (the Landlock engine, whose
/// read-only mounts refuse a write with `EROFS` before Landlock is asked, and report
/// nothing), the result says `EROFS`.
pub fn the_memory_server_reads_its_graph_and_the_kernel_refuses_it_a_write(reported: bool) {
    let package = server_memory();
    let modules = modules_of(&package);
    let run = Run::new(std::slice::from_ref(&modules), &[]);
    let (root, ws) = (run.root().to_path_buf(), run.root().join("ws"));
    let entity = json!({"entities": [
        {"name": "bee", "entityType": "sandbox", "observations": ["confines MCP servers"]}
    ]});
    let turns = vec![
        tool_call("c1", "memory__read_graph", &json!({})),
        tool_call("c2", "memory__create_entities", &entity),
        done(),
    ];
    super::replay_scenario(&root, "ws", "session.toml", &turns);
    let entry = package.join("dist/index.js");
    let graph = ws.join("memory.jsonl");
    let stored = json!({"type": "entity", "name": "workspace", "entityType": "project",
        "observations": ["seeded by the test"]})
    .to_string();
    std::fs::write(&graph, &stored).unwrap_or_else(|e| unreachable!("{e}"));
    run.server(
        "memory",
        "/usr/bin/node",
        &[&entry.display().to_string()],
        &[format!("{}/**", ws.display()), modules],
        &format!(
            "env = {{ MEMORY_FILE_PATH = {:?} }}\n",
            graph.display().to_string()
        ),
    );
    let text = run.completed();
    let read = tool_result(&text, "c1");
    assert_eq!(read["state"], "completed", "{read}");
    assert!(
        read["output"]
            .as_str()
            .is_some_and(|s| s.contains("\"workspace\"") && s.contains("seeded by the test")),
        "{read}"
    );
    // The session writes the workspace; the server's policy does not, and the kernel says so.
    let write = tool_result(&text, "c2");
    assert_eq!(write["state"], "failed", "{write}");
    let out = write["output"].as_str().unwrap_or_default();
    let temporary = format!("{}/memory.jsonl.", ws.display());
    if reported {
        let refused = format!("denied by policy: create {temporary}");
        assert!(
            out.contains(&refused) && out.contains("no fs.write grant covers it"),
            "{out}"
        );
        assert!(
            text.lines().any(|l| l.contains("\"event\":\"denial\"")
                && l.contains("\"call_id\":\"c2\"")
                && l.contains("memory.jsonl")),
            "the denial is attributed to the call that caused it:\n{text}"
        );
    } else {
        assert!(
            out.contains(&format!("EROFS: read-only file system, open '{temporary}")),
            "{out}"
        );
        // Nothing reports it: the read-only mount refused it before Landlock was asked.
        assert!(
            !text
                .lines()
                .any(|l| l.contains("\"event\":\"denial\"") && l.contains("\"call_id\":\"c2\"")),
            "{text}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&graph).ok().as_deref(),
        Some(stored.as_str()),
        "the graph is as the test wrote it"
    );
    let left: Vec<_> = std::fs::read_dir(&ws)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("memory.jsonl."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        processes_with(&entry.display().to_string()).is_empty(),
        "the server outlived its session"
    );
}
