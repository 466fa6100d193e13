use super::*;

/// The paths (or `syscall N`) of what a drain of `cgroup` would take, in order.
fn taken(s: &mut State, cgroup: u64) -> Vec<String> {
    s.take(cgroup).iter().map(path_of).collect()
}

/// Every denial kept, placed or not.
fn kept(s: &State) -> usize {
    s.placed.values().map(Vec::len).sum::<usize>() + s.unplaced.len()
}

fn access(serial: u64, domain: u64, path: &str) -> Record {
    Record::Access(Access {
        serial,
        domain,
        blockers: vec!["fs.read_file".into()],
        path: Some(path.into()),
        addr: None,
        port: None,
    })
}

/// The record of a domain's creation by `pid`, which names no executable.
fn domain(serial: u64, domain: u64, pid: u32) -> Record {
    Record::Domain {
        serial,
        domain,
        pid,
        exe: None,
        logged: LOGGED,
    }
}

/// When the records of these tests were logged (ms since the Unix epoch).
const LOGGED: u64 = 1_800_000_000_000;

fn path_of(d: &Denied) -> String {
    d.access.path.clone().unwrap_or_default()
}

#[test]
fn denials_go_to_the_scope_whose_launch_created_the_domain() {
    let mut s = State::default();
    s.launches.insert(100, 7);
    s.launches.insert(200, 8);
    s.add(access(1, 0xa, "/etc/shadow"));
    s.add(domain(1, 0xa, 100));
    s.add(Record::Syscall {
        serial: 1,
        pid: 101,
        comm: "cat".into(),
        logged: LOGGED,
    });
    s.add(Record::End { serial: 1 });
    // A later denial of the same domain has no domain record; one of another domain.
    s.add(access(2, 0xa, "/root/x"));
    s.add(access(3, 0xb, "/srv"));
    s.add(domain(3, 0xb, 200));
    let serials: Vec<u64> = s.open.keys().copied().collect();
    for serial in serials {
        s.complete(serial);
    }
    let mut of = |cgroup: u64| -> Vec<(String, u32)> {
        s.take(cgroup).iter().map(|d| (path_of(d), d.pid)).collect()
    };
    assert_eq!(
        of(7),
        [("/etc/shadow".to_owned(), 101), ("/root/x".to_owned(), 0)]
    );
    assert_eq!(of(8), [("/srv".to_owned(), 0)]);
}

/// A denial can arrive before the launcher's parent has named the process that made its
/// domain (its first action refused at once): it waits, and the drain places it.
#[test]
fn a_denial_that_comes_before_its_launch_is_named_is_placed_later() {
    let mut s = State::default();
    s.add(access(1, 0xa, "/etc/shadow"));
    s.add(domain(1, 0xa, 100));
    s.add(Record::End { serial: 1 });
    assert_eq!(s.unplaced.len(), 1);
    s.launches.insert(100, 7);
    s.add(access(2, 0xa, "/root/x"));
    s.add(Record::End { serial: 2 });
    assert_eq!(taken(&mut s, 7), ["/etc/shadow", "/root/x"]);
    assert_eq!(kept(&s), 0);
}

#[test]
fn forgetting_a_scope_drops_its_denials_and_keeps_the_others() {
    let reports = Reports {
        shared: Arc::new(Shared::default()),
        socket: Arc::new(netlink::Socket::stand_in(eventfd().unwrap())),
        stop: Arc::new(AtomicBool::new(true)),
        wake: Arc::new(eventfd().unwrap()),
        thread: None,
    };
    {
        let mut s = reports.shared.lock();
        s.launches.insert(100, 7);
        s.launches.insert(200, 8);
        s.add(access(1, 0xa, "/a"));
        s.add(domain(1, 0xa, 100));
        s.add(access(2, 0xb, "/b"));
        s.add(domain(2, 0xb, 200));
        s.add(Record::End { serial: 2 });
    }
    reports.forget(7);
    let s = reports.shared.lock();
    let mut s = s;
    assert_eq!(kept(&s), 1);
    assert_eq!(taken(&mut s, 8), ["/b"]);
    assert!(!s.launches.contains_key(&100) && !s.domains.contains_key(&0xa));
}

/// A scope that floods keeps its earliest denials, and drops only its own: the denials of
/// another scope, before and after the flood, are all kept.
#[test]
fn a_flood_keeps_the_earliest_denials_and_only_its_own_scopes() {
    let mut s = State::default();
    s.launches.insert(100, 7);
    s.launches.insert(200, 8);
    for (serial, id, pid) in [(1, 0xa, 100), (2, 0xb, 200)] {
        s.add(domain(serial, id, pid));
    }
    s.add(Record::End { serial: 2 });
    s.add(access(3, 0xb, "/before"));
    s.add(Record::End { serial: 3 });
    let flood = 3 * SCOPE_MAX as u64;
    for i in 0..flood {
        s.add(access(10 + i, 0xa, &format!("/flood/{i}")));
    }
    s.add(access(flood + 21, 0xb, "/after"));
    s.add(Record::End { serial: u64::MAX });
    let scope7 = taken(&mut s, 7);
    assert_eq!(scope7.len(), SCOPE_MAX);
    assert_eq!(scope7.first().map(String::as_str), Some("/flood/0"));
    assert_eq!(
        scope7.last().map(String::as_str),
        Some(format!("/flood/{}", SCOPE_MAX - 1).as_str())
    );
    assert_eq!(taken(&mut s, 8), ["/before", "/after"]);
}

/// Denials no scope ever claims are bounded too (the oldest go).
#[test]
fn unplaced_denials_are_bounded() {
    let mut s = State::default();
    for i in 0..(UNPLACED_MAX as u64 + 10) {
        s.add(access(i, 0xdead, "/x"));
    }
    s.add(Record::End { serial: u64::MAX });
    assert_eq!(s.unplaced.len(), UNPLACED_MAX);
    assert_eq!(s.unplaced.front().map(|d| d.access.serial), Some(10));
}

/// A domain another program made, whose creator's pid a launch has since been given (reused),
/// is not the scope's: its record names another executable than bee's.
#[test]
fn another_programs_domain_is_not_taken_for_a_launchs() {
    let mut s = State {
        own_exe: Some("/usr/bin/bee".into()),
        ..State::default()
    };
    s.launches.insert(100, 7);
    for (serial, domain, exe) in [
        (1, 0xa, "/usr/bin/other"),
        (2, 0xb, "/usr/bin/bee (deleted)"),
    ] {
        s.add(access(serial, domain, &format!("/by/{domain:x}")));
        s.add(Record::Domain {
            serial,
            domain,
            pid: 100,
            exe: Some(exe.into()),
            logged: LOGGED,
        });
        s.add(Record::End { serial });
    }
    assert_eq!(taken(&mut s, 7), ["/by/b"]);
    assert_eq!(s.unplaced.len(), 1);
}

/// A mark ends every event open before it; only this reader's own marks count as read.
#[test]
fn a_mark_completes_what_came_before_it_and_only_its_readers_count() {
    let mut s = State {
        pid: 40,
        reader: 2,
        ..State::default()
    };
    s.launches.insert(100, 7);
    s.add(domain(1, 0xa, 100));
    s.add(access(1, 0xa, "/last"));
    let mark = |serial, pid, reader, number| Record::Mark {
        serial,
        pid,
        reader,
        number,
    };
    // Another process's mark, and another reader's of this process: events end, no mark.
    s.add(mark(2, 41, 2, 5));
    assert!(s.open.is_empty());
    s.add(access(3, 0xa, "/after"));
    s.add(mark(4, 40, 3, 5));
    assert_eq!(s.marked, 0);
    s.add(mark(5, 40, 2, 1));
    assert_eq!(s.marked, 1);
    assert_eq!(taken(&mut s, 7), ["/last", "/after"]);
}

/// A domain another program created is the scope's when its creator is, as its record is
/// read, a process in a live scope's cgroup (the scope's program nesting a sandbox of its
/// own); its denials are marked nested. A creator in no live scope's cgroup gets nothing
/// (until a launch names its cgroup: the test below).
#[test]
fn a_domain_a_scopes_own_program_nests_is_the_scopes() {
    let mut s = State {
        own_exe: Some("/usr/bin/bee".into()),
        // Processes 300–399 are in cgroup 7, 400 in cgroup 9 (no launch there).
        cgroup_of: Some(|pid| match pid {
            300..400 => Some(7),
            400 => Some(9),
            _ => None,
        }),
        began_of: Some(|_| Some(LOGGED)),
        ..State::default()
    };
    s.launches.insert(100, 7);
    for (serial, domain, pid) in [(1, 0xa, 100), (2, 0xb, 301), (3, 0xc, 400), (4, 0xd, 500)] {
        s.add(access(serial, domain, &format!("/by/{domain:x}")));
        let exe = if pid == 100 {
            "/usr/bin/bee"
        } else {
            "/usr/bin/codex"
        };
        s.add(Record::Domain {
            serial,
            domain,
            pid,
            exe: Some(exe.into()),
            logged: LOGGED,
        });
        s.add(Record::End { serial });
    }
    assert_eq!(taken(&mut s, 7), ["/by/a", "/by/b"]);
    assert!(s.nested.contains_key(&0xb) && !s.nested.contains_key(&0xa));
    assert_eq!(s.unplaced.len(), 2);
}

/// A scope's first process can nest a domain, and be refused in it, before the launcher's
/// parent names the launch: the domain waits with its creator's cgroup as the record was
/// read, and becomes the scope's (its denials nested) once a launch names that cgroup. A
/// domain of a cgroup no launch ever names stays unplaced, and so do its denials.
#[test]
fn a_domain_nested_before_its_scopes_launch_is_named_is_the_scopes_after() {
    let mut s = State {
        own_exe: Some("/usr/bin/bee".into()),
        cgroup_of: Some(|pid| match pid {
            300 => Some(7),
            400 => Some(9),
            _ => None,
        }),
        began_of: Some(|_| Some(LOGGED)),
        ..State::default()
    };
    for (serial, domain, pid) in [(1, 0xb, 300), (2, 0xc, 400)] {
        s.add(access(serial, domain, &format!("/by/{domain:x}")));
        s.add(Record::Domain {
            serial,
            domain,
            pid,
            exe: Some("/usr/bin/codex".into()),
            logged: LOGGED,
        });
        s.add(Record::End { serial });
    }
    assert_eq!(s.unplaced.len(), 2);
    assert_eq!(s.nested_unplaced, [(0xb, 7), (0xc, 9)]);
    s.launches.insert(299, 7);
    assert_eq!(taken(&mut s, 7), ["/by/b"]);
    assert!(s.nested.contains_key(&0xb));
    assert_eq!(s.nested_unplaced, [(0xc, 9)]);
    assert_eq!(s.unplaced.len(), 1);
}

/// The domains waiting for a launch are bounded: the oldest go first.
#[test]
fn nested_domains_waiting_for_a_launch_are_bounded() {
    let mut s = State {
        cgroup_of: Some(|_| Some(9)),
        began_of: Some(|_| Some(LOGGED)),
        ..State::default()
    };
    for domain in 0..=(NESTED_UNPLACED_MAX as u64) {
        s.nested_created(domain, 400, LOGGED);
    }
    assert_eq!(s.nested_unplaced.len(), NESTED_UNPLACED_MAX);
    assert_eq!(s.nested_unplaced.front(), Some(&(1, 9)));
}

/// A denial event as the kernel logs one after its domain's first: the access and the
/// refused process's system call, with no domain record.
fn denial_by(s: &mut State, serial: u64, domain: u64, pid: u32, path: &str) {
    s.add(access(serial, domain, path));
    s.add(Record::Syscall {
        serial,
        pid,
        comm: "perl".into(),
        logged: LOGGED,
    });
    s.add(Record::End { serial });
}

/// A domain whose creation record was lost is adopted by the scope its refused process is
/// in, once records were lost while that scope lived; its earlier and later denials are the
/// scope's, not nested. A process in no launched cgroup, or one begun after the denial was
/// logged (its pid given again), adopts nothing.
#[test]
fn a_domain_whose_record_was_lost_is_adopted_by_its_refused_process_scope() {
    let mut s = State {
        // Processes 300–399 are in cgroup 7, 400 in cgroup 9 (no launch there); 350 began
        // after the records were logged.
        cgroup_of: Some(|pid| match pid {
            300..400 => Some(7),
            400 => Some(9),
            _ => None,
        }),
        began_of: Some(|pid| {
            Some(if pid == 350 {
                LOGGED + process::START_SLACK_MS + 1
            } else {
                LOGGED - 5_000
            })
        }),
        ..State::default()
    };
    s.launches.insert(100, 7);
    s.losses.begin(7);
    // No record lost yet: a domain without its record is not taken for the scope's.
    denial_by(&mut s, 1, 0xa, 301, "/before/loss");
    assert!(taken(&mut s, 7).is_empty());
    s.losses.overrun();
    denial_by(&mut s, 2, 0xb, 350, "/by/a/pid/given/again");
    denial_by(&mut s, 3, 0xc, 400, "/in/a/cgroup/no/launch/names");
    denial_by(&mut s, 4, 0xd, 999, "/by/a/process/gone");
    assert!(taken(&mut s, 7).is_empty());
    denial_by(&mut s, 5, 0xa, 302, "/after/loss");
    denial_by(&mut s, 6, 0xa, 0, "/with/no/process/named");
    assert_eq!(
        taken(&mut s, 7),
        ["/before/loss", "/after/loss", "/with/no/process/named"]
    );
    assert_eq!(s.adopted.get(&0xa), Some(&7));
    assert!(!s.nested.contains_key(&0xa));
    assert_eq!(s.unplaced.len(), 3);
    // A domain whose record came is never adopted by another scope.
    s.launches.insert(200, 8);
    s.add(access(7, 0xe, "/by/e"));
    s.add(domain(7, 0xe, 200));
    s.add(Record::End { serial: 7 });
    denial_by(&mut s, 8, 0xe, 301, "/by/e/again");
    assert_eq!(taken(&mut s, 8), ["/by/e", "/by/e/again"]);
    assert!(!s.adopted.contains_key(&0xe));
    // Forgetting the scope forgets what it adopted.
    s.forget(7);
    assert!(s.adopted.is_empty());
}

/// A nested domain's creator is the scope's only if it began before the record was logged:
/// a process given the creator's pid since, in a scope's cgroup, does not make it the
/// scope's.
#[test]
fn a_nested_domains_creator_begun_after_its_record_is_not_the_scopes() {
    let mut s = State {
        own_exe: Some("/usr/bin/bee".into()),
        cgroup_of: Some(|_| Some(7)),
        began_of: Some(|_| Some(LOGGED + process::START_SLACK_MS + 1)),
        ..State::default()
    };
    s.launches.insert(100, 7);
    s.add(access(1, 0xb, "/by/b"));
    s.add(Record::Domain {
        serial: 1,
        domain: 0xb,
        pid: 301,
        exe: Some("/usr/bin/codex".into()),
        logged: LOGGED,
    });
    s.add(Record::End { serial: 1 });
    assert!(taken(&mut s, 7).is_empty());
    assert!(s.nested.is_empty() && s.nested_unplaced.is_empty());
}
