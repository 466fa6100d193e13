//! bee as an MCP client under the BPF LSM engine, in the VM matrix: the real filesystem
//! server (`@modelcontextprotocol/server-filesystem` from npm, the release
//! `tests/mcp/server-filesystem.version` pins) started by `bee run` in a scope of its own
//! reads what its policy grants, and the kernel refuses it the secret beside the workspace,
//! the denial attributed to the call; the real memory server (`@modelcontextprotocol/
//! server-memory`, `tests/mcp/server-memory.version`) reads its graph and is refused the
//! write that would store an entity (the scenarios `landlock_mcp_client` runs natively).
//!
//! Built only with features `kernel-tests` and `mcp`, and run in the VM matrix by `cargo
//! xtask test`, which installs the servers on the host and copies them and `node` into the
//! guests: `cargo xtask vm test -p bee --test kernel_mcp --features kernel-tests,mcp --bin
//! target/debug/bee --bin /usr/bin/node --with
//! target/tmp/mcp-servers/server-filesystem-VERSION --with
//! target/tmp/mcp-servers/server-memory-VERSION --memory 3072`. On a host whose kernel cannot
//! run BPF LSM programs, or without the servers or `node`, it fails; it never skips.

mod support;

use support::mcp_client;

#[test]
fn the_filesystem_server_reads_what_its_policy_grants_and_the_kernel_refuses_the_rest() {
    mcp_client::the_filesystem_server_reads_what_its_policy_grants_and_the_kernel_refuses_the_rest(
    );
}

#[test]
fn the_memory_server_reads_its_graph_and_the_kernel_refuses_it_a_write() {
    mcp_client::the_memory_server_reads_its_graph_and_the_kernel_refuses_it_a_write(true);
}
