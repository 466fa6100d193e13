//! Compiles `include/bee_common.h` with the host C compiler and checks that every struct's
//! size and alignment, every field's offset and size, and every constant agree with Rust.

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

use bee_common::event::{
    EVENT_ALLOWED, EVENT_LEARNED, EVENT_PATH_TRUNCATED, EVENT_PATH_UNRESOLVED, EVENT_REPARENT,
};
use bee_common::scope::{SCOPE_AUDIT_ALLOWS, SCOPE_DNS, SCOPE_LEARN};
use bee_common::*;

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// Lines `name value` for the Rust side, and the C statements printing the same lines.
#[derive(Default)]
struct Layouts {
    rust: BTreeMap<String, u64>,
    c: Vec<String>,
}

impl Layouts {
    fn value(&mut self, name: &str, rust: u64, c_expr: &str) {
        self.rust.insert(name.to_owned(), rust);
        self.c.push(format!(
            "printf(\"%s %llu\\n\", \"{name}\", (unsigned long long)({c_expr}));"
        ));
    }
}

macro_rules! layout {
    ($l:expr, $rust:ty, $c:literal, [$($field:ident),* $(,)?]) => {{
        let l: &mut Layouts = $l;
        l.value(concat!($c, " size"), size_of::<$rust>() as u64, concat!("sizeof(struct ", $c, ")"));
        l.value(
            concat!($c, " align"),
            align_of::<$rust>() as u64,
            concat!("_Alignof(struct ", $c, ")"),
        );
        $(
            l.value(
                concat!($c, ".", stringify!($field), " offset"),
                offset_of!($rust, $field) as u64,
                concat!("offsetof(struct ", $c, ", ", stringify!($field), ")"),
            );
            l.value(
                concat!($c, ".", stringify!($field), " size"),
                field_size(|s: &$rust| &s.$field) as u64,
                concat!("sizeof(((struct ", $c, " *)0)->", stringify!($field), ")"),
            );
        )*
    }};
}

macro_rules! constants {
    ($l:expr, $($rust:expr => $c:literal),* $(,)?) => {{
        let l: &mut Layouts = $l;
        $( l.value($c, u64::from($rust), $c); )*
    }};
}

fn layouts() -> Layouts {
    let mut l = Layouts::default();
    layout!(
        &mut l,
        ScopeValue,
        "bee_scope",
        [policy_id, flags, start_state, install]
    );
    layout!(
        &mut l,
        StateValue,
        "bee_state",
        [accept, default_next, glob_first, glob_count, move_class]
    );
    layout!(&mut l, EdgeKeyShort, "bee_edge_short", [state, len, name]);
    layout!(&mut l, EdgeKeyLong, "bee_edge_long", [state, len, name]);
    layout!(&mut l, GlobValue, "bee_glob", [len, pattern]);
    layout!(&mut l, ComboKey, "bee_combo", [group, mask]);
    layout!(&mut l, ExecPinKey, "bee_exec_pin", [state, dev, ino]);
    layout!(&mut l, LpmKeyV4, "bee_lpm_v4", [prefixlen, policy_id, addr]);
    layout!(&mut l, LpmKeyV6, "bee_lpm_v6", [prefixlen, policy_id, addr]);
    layout!(
        &mut l,
        NetPortRule,
        "bee_port_rule",
        [first, last, protocols, _pad]
    );
    layout!(&mut l, NetValue, "bee_net_value", [count, _pad, rules]);
    layout!(&mut l, DnsValue, "bee_dns", [port, v6, _pad]);
    layout!(&mut l, GateScope, "bee_gate_scope", [gate_id, flags]);
    layout!(&mut l, AnswerKey, "bee_answer_key", [cgroup_id, addr]);
    layout!(&mut l, AnswerValue, "bee_answer", [expires_ns, ports]);
    layout!(
        &mut l,
        AuditEvent,
        "bee_event",
        [
            cgroup_id, pid, tgid, hook, error, policy_id, access, comm, family, port, protocol,
            flags, _pad0, addr, path_len, _pad1, path,
        ]
    );
    constants!(
        &mut l,
        ACCESS_READ => "BEE_ACCESS_READ",
        ACCESS_WRITE => "BEE_ACCESS_WRITE",
        ACCESS_EXEC => "BEE_ACCESS_EXEC",
        ACCESS_UNIX => "BEE_ACCESS_UNIX",
        ACCESS_EXEC_PINNED => "BEE_ACCESS_EXEC_PINNED",
        ACCESS_NET => "BEE_ACCESS_NET",
        DEAD_STATE => "BEE_DEAD_STATE",
        PATH_MAX as u64 => "BEE_PATH_MAX",
        NAME_MAX as u64 => "BEE_NAME_MAX",
        SHORT_SEGMENT_MAX as u64 => "BEE_SHORT_SEGMENT_MAX",
        GLOB_MAX as u64 => "BEE_GLOB_MAX",
        GLOBS_PER_STATE_MAX as u64 => "BEE_GLOBS_PER_STATE_MAX",
        NET_RULES_MAX as u64 => "BEE_NET_RULES_MAX",
        PROTO_TCP => "BEE_PROTO_TCP",
        PROTO_UDP => "BEE_PROTO_UDP",
        SCOPE_AUDIT_ALLOWS => "BEE_SCOPE_AUDIT_ALLOWS",
        SCOPE_LEARN => "BEE_SCOPE_LEARN",
        SCOPE_DNS => "BEE_SCOPE_DNS",
        bee_common::scope::SCOPE_SLOTS => "BEE_SCOPE_SLOTS",
        bee_common::net::DNS_PORT => "BEE_DNS_PORT",
        bee_common::net::DOT_PORT => "BEE_DOT_PORT",
        EVENT_ALLOWED => "BEE_EVENT_ALLOWED",
        EVENT_PATH_TRUNCATED => "BEE_EVENT_PATH_TRUNCATED",
        EVENT_PATH_UNRESOLVED => "BEE_EVENT_PATH_UNRESOLVED",
        EVENT_REPARENT => "BEE_EVENT_REPARENT",
        EVENT_LEARNED => "BEE_EVENT_LEARNED",
        bee_common::event::EVENT_NESTED => "BEE_EVENT_NESTED",
    );
    for hook in Hook::ALL {
        let c = format!("BEE_HOOK_{}", hook.name().to_ascii_uppercase());
        l.value(&c, hook as u64, &c);
    }
    l
}

type Result<T = (), E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[test]
fn c_header_matches_rust_layouts() -> Result {
    let l = layouts();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bee-common-c-layout");
    std::fs::create_dir_all(&dir)?;
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let program = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"bee_common.h\"\nint main(void) {{\n{}\nreturn 0;\n}}\n",
        l.c.join("\n")
    );
    let source = dir.join("layout.c");
    let binary = dir.join("layout");
    std::fs::write(&source, program)?;
    // `-Wpadded` turns any implicit padding in the header into an error.
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".to_owned());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-Wpadded", "-I"])
        .arg(&include)
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .status()
        .map_err(|e| format!("cannot run the C compiler `{cc}` (set CC): {e}"))?;
    assert!(
        status.success(),
        "{cc} failed to compile the layout program"
    );
    let out = Command::new(&binary).output()?;
    assert!(out.status.success());
    let mut c = BTreeMap::new();
    for line in String::from_utf8(out.stdout)?.lines() {
        let (name, value) = line.rsplit_once(' ').ok_or("malformed line")?;
        c.insert(name.to_owned(), value.parse::<u64>()?);
    }
    assert_eq!(l.rust.len(), c.len(), "a name was printed twice");
    let mismatches: Vec<String> = l
        .rust
        .iter()
        .filter(|(name, v)| c.get(*name) != Some(v))
        .map(|(name, v)| format!("{name}: rust {v}, C {:?}", c.get(name)))
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    Ok(())
}
