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

/// The filesystem server installed at [`server_filesystem_version`] in the test cache (npm,
/// on first use): its package directory. In a VM guest, which has no npm, the cache is
/// copied in by `cargo xtask test`.
pub fn server_filesystem() -> PathBuf {
    let version = server_filesystem_version();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mcp-servers/server-filesystem-{version}"));
    let package = dir.join("node_modules/@modelcontextprotocol/server-filesystem");
    super::npm::install(
        &dir,
        &[],
        &format!("@modelcontextprotocol/server-filesystem@{version}"),
        &[&package.join("dist/index.js")],
    );
    package
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
    let modules = package
        .parent()
        .and_then(Path::parent)
        .map(|m| format!("{}/**", m.display()))
        .unwrap_or_default();
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
    let o = run.run();
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let text = run.transcript();
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
