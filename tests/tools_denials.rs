//! Enforced mode with a fake [`Enforcer`] that records what is installed and hands out audit
//! events the test synthesises: denials reach the model end to end, with the policy's reason.
//! (The fake enforces nothing; where a test needs the access itself to fail, the file's mode
//! makes it fail, since tool calls run without capabilities.)

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

mod support;

use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::sync::{Arc, Mutex};

use bee::provider::ToolCall;
use bee::records::Enforcement;
use bee::sandbox::{RUNNER_ORIGIN_KEY, Sandbox, SandboxConfig, SandboxMode};
use bee::tools::{Registry, ToolLimits, ToolOutcome, ToolState};
use bee_common::event::EVENT_ALLOWED;
use bee_common::{ACCESS_EXEC, ACCESS_READ, AuditEvent, Hook};
use bee_core::glob::PathPattern;
use bee_core::{CompileOptions, CompiledPolicy, compile_str};
use bee_userspace::plan::EnforcementPlan;
use bee_userspace::scope::{EnforceError, Enforcer, InstallId};
use serde_json::{Value, json};
use support::bee_exe;

#[derive(Debug, Default)]
struct Fake {
    installed: Mutex<Vec<u64>>,
    uninstalled: Mutex<Vec<InstallId>>,
    pending: Mutex<Vec<AuditEvent>>,
}

impl Fake {
    fn push(&self, hook: Hook, access: u32, path: &str, pid: u32) {
        let mut e = AuditEvent::zeroed();
        e.hook = hook as u32;
        e.access = access;
        e.error = -libc::EACCES;
        e.pid = pid;
        e.tgid = pid;
        e.comm[..3].copy_from_slice(b"bee");
        let bytes = path.as_bytes();
        e.path[..bytes.len()].copy_from_slice(bytes);
        e.path_len = bytes.len() as u32;
        self.pending.lock().unwrap().push(e);
    }
}

impl Enforcer for Fake {
    fn install(
        &self,
        _: &EnforcementPlan,
        cgroup_id: u64,
        _: u32,
    ) -> Result<InstallId, EnforceError> {
        self.installed.lock().unwrap().push(cgroup_id);
        Ok(InstallId(cgroup_id))
    }

    fn uninstall(&self, id: InstallId) -> Result<(), EnforceError> {
        self.uninstalled.lock().unwrap().push(id);
        Ok(())
    }

    fn drain_events(&self, cgroup_id: u64) -> Vec<AuditEvent> {
        let mut events = std::mem::take(&mut *self.pending.lock().unwrap());
        for e in &mut events {
            e.cgroup_id = cgroup_id;
        }
        events
    }
}

fn policy(ws: &Path) -> CompiledPolicy {
    let text = "version = 1\n[fs]\nread = [\"./src/**\"]\nwrite = [\"./out/**\"]\n";
    let options = CompileOptions {
        base: ws.to_owned(),
        home: None,
    };
    compile_str("test.toml", text, &options).unwrap().policy
}

fn enforced(ws: &Path, fake: &Arc<Fake>, runner: &Path) -> Sandbox {
    let mode = SandboxMode::Enforced {
        enforcer: fake.clone(),
        policy: policy(ws),
    };
    let mut config = SandboxConfig::new(mode, ws);
    config.runner = Some(runner.to_owned());
    Sandbox::new(config).unwrap()
}

fn call(sb: &Sandbox, name: &str, args: Value) -> ToolOutcome {
    let call = ToolCall {
        id: "call_1".to_owned(),
        name: name.to_owned(),
        arguments: args.to_string(),
    };
    Registry::standard(ToolLimits::default()).call(sb, &call)
}

#[test]
fn a_denied_read_leads_with_the_policy_reason() {
    let ws = tempfile::tempdir().unwrap();
    let secret = ws.path().join("secret");
    fs::write(&secret, "key").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o000)).unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &bee_exe());
    assert_eq!(sb.enforcement(), Enforcement::Kernel);
    assert_eq!(*fake.installed.lock().unwrap(), vec![sb.cgroup_id()]);
    let path = secret.to_str().unwrap();
    fake.push(Hook::FileOpen, ACCESS_READ, path, 4242);
    let o = call(&sb, "read_file", json!({"path": "secret"}));
    assert_eq!(o.state, ToolState::Failed, "{}", o.content);
    assert_eq!(o.enforcement, Enforcement::Kernel);
    assert_eq!(o.denials.len(), 1);
    let first = o.content.lines().next().unwrap();
    assert_eq!(
        first,
        format!("denied by policy: open {path} for read: no fs.read grant covers it")
    );
    assert!(
        o.content
            .contains("failed: read `secret`: Permission denied"),
        "{}",
        o.content
    );
}

#[test]
fn a_denial_during_a_completed_call_follows_as_a_note() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &bee_exe());
    fake.push(Hook::FileOpen, ACCESS_READ, "/etc/shadow", 7);
    fake.push(Hook::FileOpen, ACCESS_READ, "/etc/shadow", 7);
    let o = call(&sb, "read_file", json!({"path": "a.txt"}));
    assert_eq!(o.state, ToolState::Completed, "{}", o.content);
    assert_eq!(
        o.content,
        "     1\tone\n\nnote: the policy denied 2 accesses during this call:\n\
         denied by policy: open /etc/shadow for read: no fs.read grant covers it (2 times)"
    );
}

#[test]
fn a_failed_shell_command_leads_with_its_denials() {
    let ws = tempfile::tempdir().unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &bee_exe());
    fake.push(Hook::BprmCheckSecurity, ACCESS_EXEC, "/usr/bin/curl", 9);
    let o = call(&sb, "shell", json!({"command": "exit 126"}));
    assert_eq!(o.state, ToolState::Failed);
    assert_eq!(
        o.content,
        "denied by policy: exec /usr/bin/curl: no exec.allow rule covers it\n\
         failed: exit status 126\n(no output)"
    );
}

#[test]
fn a_runner_that_cannot_start_could_not_run_and_says_why() {
    let ws = tempfile::tempdir().unwrap();
    // A runner that is not executable: the launch fails with EACCES, as a denied execve would.
    let runner = ws.path().join("bee-copy");
    fs::copy(bee_exe(), &runner).unwrap();
    fs::set_permissions(&runner, fs::Permissions::from_mode(0o644)).unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &runner);
    let shown = fs::canonicalize(&runner).unwrap();
    fake.push(
        Hook::BprmCheckSecurity,
        ACCESS_EXEC,
        shown.to_str().unwrap(),
        11,
    );
    let o = call(&sb, "list_dir", json!({}));
    assert_eq!(o.state, ToolState::CouldNotRun);
    let mut lines = o.content.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("denied by policy: exec "),
        "{}",
        o.content
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("could not run: the tool runner could not start"),
        "{}",
        o.content
    );
}

#[test]
fn the_runners_own_startup_read_is_kept_apart() {
    let ws = tempfile::tempdir().unwrap();
    fs::create_dir(ws.path().join("src")).unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &bee_exe());
    fake.push(Hook::FileOpen, ACCESS_READ, "/proc/31337/maps", 31337);
    let o = call(&sb, "list_dir", json!({}));
    assert_eq!(o.state, ToolState::Completed);
    assert_eq!(o.content, "src/\n");
    assert!(o.denials.is_empty());
    assert_eq!(o.runner_denials.len(), 1);
}

#[test]
fn the_runner_grant_is_exact_pinned_and_the_only_widening() {
    let ws = tempfile::tempdir().unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &bee_exe());
    let original = policy(ws.path());
    let widened = sb.policy().unwrap();
    let grant = sb.runner_grant().unwrap();
    // The sandbox keeps what was requested apart from what was installed (for the records).
    assert_eq!(sb.requested_policy(), Some(&original));
    assert_ne!(sb.requested_policy(), Some(widened));

    // The executable: canonical path, pinned to its device and inode.
    let exe = fs::canonicalize(bee_exe()).unwrap();
    let meta = fs::metadata(&exe).unwrap();
    assert_eq!(grant.executable.path, exe.to_str().unwrap());
    assert_eq!(
        (grant.executable.id.dev, grant.executable.id.ino),
        (meta.dev(), meta.ino())
    );
    assert!(grant.libraries.iter().any(|l| l.path.contains("libc.so")));

    // Everything added is exact and carries the runner's origin; exec rules are pinned to
    // the file now at that path.
    let added_exec: Vec<_> = widened.exec.iter().skip(original.exec.len()).collect();
    assert_eq!(added_exec.len(), 1 + grant.libraries.len());
    for rule in &added_exec {
        assert_eq!(rule.origin.key, RUNNER_ORIGIN_KEY);
        let PathPattern::Exact { path } = &rule.pattern else {
            panic!("not exact: {:?}", rule.pattern);
        };
        assert!(!path.contains('*'));
        let m = fs::metadata(path).unwrap();
        let pin = rule.pin.unwrap();
        assert_eq!((pin.dev, pin.ino), (m.dev(), m.ino()), "{path}");
        assert_eq!(fs::canonicalize(path).unwrap(), Path::new(path));
    }
    let added_read: Vec<_> = widened
        .fs
        .read
        .iter()
        .skip(original.fs.read.len())
        .collect();
    for rule in &added_read {
        assert_eq!(rule.origin.key, RUNNER_ORIGIN_KEY);
        assert!(matches!(&rule.pattern, PathPattern::Exact { path } if !path.contains('*')));
    }
    let read_paths: Vec<String> = added_read
        .iter()
        .filter_map(|r| match &r.pattern {
            PathPattern::Exact { path } => Some(path.clone()),
            _ => None,
        })
        .collect();
    for exec in &added_exec {
        if let PathPattern::Exact { path } = &exec.pattern {
            assert!(
                read_paths.contains(path),
                "{path} is executable but not readable"
            );
        }
    }
    // The policy's own rules are untouched, and nothing was added to writes or the network.
    assert_eq!(&widened.exec[..original.exec.len()], &original.exec[..]);
    assert_eq!(
        &widened.fs.read[..original.fs.read.len()],
        &original.fs.read[..]
    );
    assert_eq!(widened.fs.write, original.fs.write);
    assert_eq!(widened.net, original.net);
    assert!(sb.plan().is_some());
}

#[test]
fn teardown_uninstalls_the_plan_on_finish_and_on_drop() {
    let ws = tempfile::tempdir().unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &bee_exe());
    let id = sb.cgroup_id();
    fake.push(Hook::FileOpen, ACCESS_READ, "/late", 1);
    let late = sb.finish().unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(*fake.uninstalled.lock().unwrap(), vec![InstallId(id)]);

    let sb = enforced(ws.path(), &fake, &bee_exe());
    let id2 = sb.cgroup_id();
    drop(sb);
    assert_eq!(
        *fake.uninstalled.lock().unwrap(),
        vec![InstallId(id), InstallId(id2)]
    );
}

#[test]
fn audited_allows_are_kept_apart_from_denials() {
    let ws = tempfile::tempdir().unwrap();
    let fake = Arc::new(Fake::default());
    let sb = enforced(ws.path(), &fake, &bee_exe());
    fake.push(Hook::FileOpen, ACCESS_READ, "/denied", 5);
    fake.push(Hook::FileOpen, ACCESS_READ, "/allowed", 5);
    {
        let mut pending = fake.pending.lock().unwrap();
        let allowed = pending.last_mut().unwrap();
        allowed.flags = EVENT_ALLOWED;
        allowed.error = 0;
    }
    let spec = sb.command("/bin/true");
    let out = sb
        .run(&spec, std::time::Duration::from_secs(5), 1024)
        .unwrap();
    assert_eq!(out.enforcement, Enforcement::Kernel);
    assert_eq!(out.denials.len(), 1);
    assert_eq!(out.denials[0].path.as_deref(), Some("/denied"));
    assert_eq!(out.allowed.len(), 1);
    assert_eq!(out.allowed[0].path.as_deref(), Some("/allowed"));
}
