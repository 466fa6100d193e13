//! Builders for hand-written compiled policies, shared by the planner's tests.
#![allow(dead_code, reason = "each test binary uses part of the support module")]

use bee_core::CompiledPolicy;
use bee_core::compiled::{
    COMPILED_FORMAT, ExecRule, FileId, FsGrants, NetGrants, NetRule, Origin, PathRule,
};
use bee_core::glob::PathPattern;
use bee_core::net::{IpNet, PortRange, Protocol};

/// An empty policy.
pub fn policy() -> CompiledPolicy {
    CompiledPolicy {
        format: COMPILED_FORMAT,
        version: 1,
        name: None,
        description: None,
        source: "test.toml".to_owned(),
        base: "/".to_owned(),
        include: Vec::new(),
        fs: FsGrants::default(),
        exec: Vec::new(),
        exec_deny: Vec::new(),
        net: NetGrants::default(),
    }
}

pub fn origin(key: &str, text: &str) -> Origin {
    Origin {
        key: key.to_owned(),
        line: 1,
        column: 1,
        text: text.to_owned(),
    }
}

pub fn pattern(text: &str) -> PathPattern {
    match PathPattern::parse(text) {
        Ok(p) => p,
        Err(e) => unreachable!("{text}: {e}"),
    }
}

pub fn path_rule(key: &str, text: &str) -> PathRule {
    PathRule {
        pattern: pattern(text),
        origin: origin(key, text),
    }
}

pub fn read(p: &mut CompiledPolicy, text: &str) {
    let key = format!("fs.read[{}]", p.fs.read.len());
    p.fs.read.push(path_rule(&key, text));
}

pub fn write(p: &mut CompiledPolicy, text: &str) {
    let key = format!("fs.write[{}]", p.fs.write.len());
    p.fs.write.push(path_rule(&key, text));
}

pub fn unix(p: &mut CompiledPolicy, text: &str) {
    let key = format!("net.unix[{}]", p.net.unix.len());
    p.net.unix.push(path_rule(&key, text));
}

pub fn exec(p: &mut CompiledPolicy, text: &str, pin: Option<FileId>) {
    let key = format!("exec[{}]", p.exec.len());
    p.exec.push(ExecRule {
        pattern: pattern(text),
        pin,
        origin: origin(&key, text),
    });
}

pub fn net(p: &mut CompiledPolicy, block: &str, ports: (u16, u16), protocols: &[Protocol]) {
    let key = format!("net.allow[{}]", p.net.allow.len());
    let net: IpNet = match block.parse() {
        Ok(n) => n,
        Err(e) => unreachable!("{block}: {e}"),
    };
    p.net.allow.push(NetRule {
        net,
        ports: PortRange {
            first: ports.0,
            last: ports.1,
        },
        protocols: protocols.to_vec(),
        origin: origin(&key, block),
    });
}

pub fn deny(p: &mut CompiledPolicy, text: &str) {
    let key = format!("fs.deny[{}]", p.fs.deny.len());
    p.fs.deny.push(path_rule(&key, text));
}

pub fn exec_deny(p: &mut CompiledPolicy, text: &str) {
    let key = format!("exec.deny[{}]", p.exec_deny.len());
    p.exec_deny.push(path_rule(&key, text));
}

pub fn protect(p: &mut CompiledPolicy, text: &str) {
    let key = format!("fs.protect[{}]", p.fs.protect.len());
    p.fs.protect.push(path_rule(&key, text));
}

pub fn unprotect(p: &mut CompiledPolicy, text: &str) {
    let key = format!("fs.unprotect[{}]", p.fs.unprotect.len());
    p.fs.unprotect.push(path_rule(&key, text));
}
