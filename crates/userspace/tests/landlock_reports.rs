//! The Landlock engine's denial reports natively, where they can be incomplete: records the
//! kernel drops in a flood are counted and said. Root and Landlock ABI 7 with audit; fails,
//! never skips, without them.
mod landlock_support;

use bee_userspace::audit::lost_records_explanation;
use bee_userspace::landlock::LandlockEngine;
use landlock_support::{FLOOD, Ws, policy_text};

const SH: &str = "/usr/bin/dash";
const PERL: &str = "/usr/bin/perl";

/// An engine whose denial reports' socket holds a few records, and the lock that keeps every
/// other scope of this binary from running meanwhile: what a flood makes the kernel drop may
/// be any scope's.
#[expect(
    clippy::expect_used,
    reason = "test support: a step that fails fails the test"
)]
fn alone_with_a_small_socket() -> (std::sync::RwLockWriteGuard<'static, ()>, LandlockEngine) {
    let alone = FLOOD
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let engine = LandlockEngine::new().expect("this host's kernel runs Landlock");
    engine
        .reports_denials()
        .expect("this host's kernel has Landlock ABI 7 and audit");
    engine
        .set_audit_receive_buffer(1)
        .expect("root may set the socket's receive buffer");
    (alone, engine)
}

/// Processes of one scope flood denials faster than a reader whose socket holds a few
/// records can take them: the kernel drops records, and the scope's report says how many
/// (and still has the denials that came through: refused opens once a second for 10 s after
/// the flood come through however many the flood lost, once the kernel's queue has drained
/// and the reader has emptied its socket; a single one 2 s after the flood was once lost in
/// a clean-clone CI run, 2,080 records lost, the queue still full).
#[test]
fn records_the_kernel_drops_in_a_flood_are_counted_and_said() {
    let (_alone, engine) = alone_with_a_small_socket();
    let t = Ws::new();
    let secret = t.outside("secret.txt", "top secret");
    let p = t.policy(&policy_text(&["./**", "/usr/**"], &[], &[SH, PERL], ""));
    let flood = format!(
        "for i in 1 2 3 4 5 6 7 8; do {PERL} -e 'open(my $f, \"<\", $ARGV[0]) for 1..200' {0} & done; wait; \
         {PERL} -e 'for (1..10) {{ sleep 1; open(my $f, \"<\", $ARGV[0]) }}' {0}",
        secret.display()
    );
    let r = t.try_run_in(&engine, &p, &[SH, "-c", &flood]).unwrap();
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.lost > 0, "no record lost: {} denials", r.denials.len());
    assert!(!r.denials.is_empty(), "{r:?}");
    let said = lost_records_explanation(r.lost);
    assert!(
        said.starts_with("some denials may be missing: the kernel dropped "),
        "{said}"
    );
    eprintln!("{} denials reported; {said}", r.denials.len());
}

/// A scope's first denial brings its domain's only creation record; when the reader's socket
/// is full then, the kernel drops that record, and the domain's later denials are still the
/// scope's: the scope adopts its domain through the refused process's cgroup (a CI run once
/// lost a flood's domain record, and with it every denial of the scope). The socket is made
/// full by holding the reader while another scope is refused.
#[test]
fn denials_after_their_domains_record_was_dropped_are_still_reported() {
    let (_alone, engine) = alone_with_a_small_socket();
    let t = Ws::new();
    let secret = t.outside("secret.txt", "top secret");
    let p = t.policy(&policy_text(&["./**", "/usr/**"], &[], &[PERL], ""));
    let path = secret.display().to_string();
    engine.hold_audit_reader(true).unwrap();
    let filler = "open(my $f, '<', $ARGV[0]) for 1..20";
    let filled = t.try_run_in(&engine, &p, &[PERL, "-e", filler, &path]);
    // Released while the scope below sleeps, after its first denial was dropped.
    let release = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            engine.hold_audit_reader(false).unwrap();
        });
        let script = "open(my $f, '<', $ARGV[0]) and die 'read it'; sleep 2; \
                      for (1..3) { sleep 1; open($f, '<', $ARGV[0]) and die 'read it' } \
                      print \"refused\\n\";";
        t.try_run_in(&engine, &p, &[PERL, "-e", script, &path])
    });
    let filled = filled.unwrap();
    assert_eq!(filled.status, 0, "{filled:?}");
    let r = release.unwrap();
    assert_eq!((r.status, r.stdout.as_str()), (0, "refused\n"), "{r:?}");
    assert!(r.lost > 0, "no record lost: {r:?}");
    let want = format!("open {path} for read: no fs.read grant covers it");
    let reported = r.denials.iter().filter(|d| **d == want).count();
    assert!(reported >= 3, "{reported} of 4 denials reported: {r:#?}");
}

/// The network gate's refusals go through a ring buffer of 1 MiB that bee drains when it
/// collects a scope's denials: a scope that floods refused sends fills it, and what it has no
/// room for is counted and said, as the kernel's dropped audit records are (the first
/// refusals, made while the ring had room, are reported).
#[test]
fn refusals_the_gates_ring_buffer_drops_are_counted_and_said() {
    let _alone = FLOOD
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let engine = LandlockEngine::new().unwrap();
    let t = Ws::new();
    // A UDP grant (the gate decides UDP), to a port the flood does not use.
    let net = "[[net.allow]]\naddr = [\"127.0.0.1/32\"]\nports = [5000]\nproto = \"udp\"\n";
    let p = t.policy(&policy_text(&["./**", "/usr/**"], &[], &[PERL], net));
    let flood = "use Socket; socket(my $s, PF_INET, SOCK_DGRAM, 0) or die \"socket: $!\"; \
                 my $to = sockaddr_in(5001, inet_aton('127.0.0.1')); \
                 my $refused = grep { !defined send($s, 'x', 0, $to) } 1..20000; \
                 print \"refused $refused\\n\";";
    let r = t.try_run_in(&engine, &p, &[PERL, "-e", flood]).unwrap();
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("refused 20000"), "{r:?}");
    assert!(
        r.denials
            .iter()
            .any(|d| d.contains("send udp 127.0.0.1:5001")),
        "{:?}",
        r.denials
    );
    assert!(r.lost > 0, "no refusal lost: {} reported", r.denials.len());
    eprintln!(
        "{} refusals reported; {}",
        r.denials.len(),
        lost_records_explanation(r.lost)
    );
}

/// A program that nests a Landlock sandbox of its own (as Codex does) cannot hide its
/// denials: one its sandbox logs, of a path bee's policy refuses too, is reported to the
/// scope, and says that it came from the program's own sandbox.
#[test]
fn a_denial_logged_by_the_programs_own_nested_sandbox_is_reported() {
    let _shared = FLOOD
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let engine = LandlockEngine::new().unwrap();
    engine
        .reports_denials()
        .expect("this host's kernel has Landlock ABI 7 and audit");
    let t = Ws::new();
    let secret = t.outside("secret.txt", "top secret");
    let p = t.policy(&policy_text(&["./**", "/usr/**"], &[], &[PERL], ""));
    // landlock_create_ruleset(read_file handled, no rule), no_new_privs, restrict_self; then
    // the read, and a pause so that the creator is alive when its domain's record is read
    // (a denial of a nested domain whose creator has exited is not reported, docs/serve.md):
    // 5 s, since a loaded host (CI's parallel tests) once delayed the read past 1 s.
    let nest = r#"my $attr = pack("QQQ", 4, 0, 0);
        my $fd = syscall(444, $attr, 24, 0); $fd >= 0 or die "create: $!";
        syscall(157, 38, 1, 0, 0, 0);
        syscall(446, $fd, 0) == 0 or die "restrict: $!";
        open(my $f, "<", $ARGV[0]) and die "read it";
        print "nested: $!\n"; sleep 5;"#;
    let path = secret.display().to_string();
    let r = t
        .try_run_in(&engine, &p, &[PERL, "-e", nest, &path])
        .unwrap();
    assert!(r.stdout.contains("nested: Permission denied"), "{r:?}");
    let want = format!(
        "open {path} for read: no fs.read grant covers it (refused by the program's own nested Landlock sandbox)"
    );
    assert!(
        r.denials.iter().any(|d| d == &want),
        "no `{want}` in {r:#?}"
    );
}
