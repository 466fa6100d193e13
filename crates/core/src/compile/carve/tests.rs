//! The carve-out warnings pinned on representative policies: which rules are named, in
//! which order, with which text.

use std::path::PathBuf;

use crate::compile::{CompileOptions, compile_str};

fn options() -> CompileOptions {
    CompileOptions {
        base: PathBuf::from("/w"),
        home: Some(PathBuf::from("/home/u")),
    }
}

/// Every warning of `text`, as printed.
fn warnings(text: &str) -> Vec<String> {
    let compiled = compile_str("p.toml", text, &options()).unwrap();
    compiled.warnings.iter().map(ToString::to_string).collect()
}

const EVERY_KIND: &str = r#"version = 2
[fs]
read = ["/w/**", "/opt/tool/**", "/data/*.csv", "/w/out/**"]
write = ["/w/out/**", "/w/bin/**", "/tmp/**/*.log", "/w/gen/**/*.rs"]
deny = ["/w/secrets/**", "/nowhere/x", "/w/**/.env", "/srv/**", "/data/a.csv", "/w/out/**", "/data/*.txt", "/tmp/**/*.log"]
protect = ["/w/out/keep/**", "/elsewhere/**", "/w/bin/**/hooks/**"]
unprotect = ["/w/.git/hooks/**", "/nothing/**", "/w/**/.vscode/tasks.json", "/w/src/main.rs"]
[exec]
allow = ["/w/bin/*", "/usr/bin/**", "/opt/tool/run"]
deny = ["/w/bin/echo", "/opt/x", "/usr/bin/*.sh", "/opt/tool/run", "/w/gen/**/*.sh"]
[net]
unix = ["/run/a.sock"]
"#;

#[test]
fn every_kind_of_carve_out_warning_in_order() {
    assert_eq!(
        warnings(EVERY_KIND),
        [
            "p.toml:5:26: fs.deny[1]: `/nowhere/x` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:5:54: fs.deny[3]: `/srv/**` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:5:93: fs.deny[6]: `/data/*.txt` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:6:30: fs.protect[1]: `/elsewhere/**` carves nothing out: no write grant covers any path it matches",
            "p.toml:10:24: exec.deny[1]: `/opt/x` carves nothing out: no exec grant covers any path it matches",
            "p.toml:10:68: exec.deny[4]: `/w/gen/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:10:9: exec.deny[0]: `/w/bin/echo` holds by name only: the scope may read the program and may write where `/w/bin/*` lets it execute, so a copy (or a link or rename of a writable one) runs there",
            "p.toml:10:51: exec.deny[3]: `/opt/tool/run` holds by name only: the scope may read the program and may write where `/w/bin/*` lets it execute, so a copy (or a link or rename of a writable one) runs there",
            "p.toml:10:68: exec.deny[4]: `/w/gen/**/*.sh` holds by name only: the scope may read the program and may write where `/w/bin/*` lets it execute, so a copy (or a link or rename of a writable one) runs there",
            "p.toml:7:77: fs.unprotect[3]: `/w/src/main.rs` lifts no protection: no protected path matches it",
            "p.toml:3:49: fs.read[3]: `/w/out/**` grants nothing: every path it matches is carved out",
            "p.toml:4:10: fs.write[0]: `/w/out/**` grants nothing: every path it matches is carved out",
            "p.toml:4:36: fs.write[2]: `/tmp/**/*.log` grants nothing: every path it matches is carved out",
            "p.toml:9:37: exec.allow[2]: `/opt/tool/run` grants nothing: every path it matches is carved out",
        ]
    );
}

#[test]
fn a_generated_policy_in_the_bench_shape() {
    assert_eq!(
        warnings(&generated(200)),
        [
            "p.toml:193:3: fs.deny[1]: `/srv/project1/src/module1/file0.rs` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:197:3: fs.deny[5]: `/srv/project5/src/module5/file40.rs` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:201:3: fs.deny[9]: `/srv/project9/src/module2/file80.rs` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:205:3: fs.deny[13]: `/srv/project0/src/module6/file120.rs` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:209:3: fs.deny[17]: `/srv/project4/src/module3/file160.rs` carves nothing out: no read, write, exec or unix-socket grant covers any path it matches",
            "p.toml:223:3: fs.protect[1]: `/opt/**/node_modules/hooks/**` carves nothing out: no write grant covers any path it matches",
            "p.toml:225:3: fs.protect[3]: `/opt/**/__pycache__/hooks/**` carves nothing out: no write grant covers any path it matches",
            "p.toml:227:3: fs.protect[5]: `/opt/**/.env/hooks/**` carves nothing out: no write grant covers any path it matches",
            "p.toml:229:3: fs.protect[7]: `/opt/**/dist/hooks/**` carves nothing out: no write grant covers any path it matches",
            "p.toml:266:3: exec.deny[1]: `/srv/project1/tree17/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:267:3: exec.deny[2]: `/opt/none2` carves nothing out: no exec grant covers any path it matches",
            "p.toml:269:3: exec.deny[4]: `/srv/project4/tree47/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:270:3: exec.deny[5]: `/opt/none5` carves nothing out: no exec grant covers any path it matches",
            "p.toml:272:3: exec.deny[7]: `/srv/project7/tree77/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:273:3: exec.deny[8]: `/opt/none8` carves nothing out: no exec grant covers any path it matches",
            "p.toml:275:3: exec.deny[10]: `/srv/project10/tree107/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:276:3: exec.deny[11]: `/opt/none11` carves nothing out: no exec grant covers any path it matches",
            "p.toml:278:3: exec.deny[13]: `/srv/project0/tree137/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:279:3: exec.deny[14]: `/opt/none14` carves nothing out: no exec grant covers any path it matches",
            "p.toml:281:3: exec.deny[16]: `/srv/project3/tree167/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:282:3: exec.deny[17]: `/opt/none17` carves nothing out: no exec grant covers any path it matches",
            "p.toml:284:3: exec.deny[19]: `/srv/project6/tree197/**/*.sh` carves nothing out: no exec grant covers any path it matches",
            "p.toml:233:3: fs.unprotect[1]: `/opt/node_modules/x` lifts no protection: no protected path matches it",
            "p.toml:235:3: fs.unprotect[3]: `/opt/__pycache__/x` lifts no protection: no protected path matches it",
            "p.toml:237:3: fs.unprotect[5]: `/opt/.env/x` lifts no protection: no protected path matches it",
            "p.toml:239:3: fs.unprotect[7]: `/opt/dist/x` lifts no protection: no protected path matches it",
            "p.toml:21:3: fs.read[17]: `/srv/project0/gen26/**/*.rs` grants nothing: every path it matches is carved out",
            "p.toml:49:3: fs.read[45]: `/srv/project1/gen66/**/*.rs` grants nothing: every path it matches is carved out",
            "p.toml:77:3: fs.read[73]: `/srv/project2/gen106/**/*.rs` grants nothing: every path it matches is carved out",
            "p.toml:105:3: fs.read[101]: `/srv/project3/gen146/**/*.rs` grants nothing: every path it matches is carved out",
            "p.toml:133:3: fs.read[129]: `/srv/project4/gen186/**/*.rs` grants nothing: every path it matches is carved out",
            "p.toml:243:3: exec.allow[0]: `/srv/project1/src/module1/file1.rs` grants nothing: every path it matches is carved out",
            "p.toml:246:3: exec.allow[3]: `/srv/project5/src/module3/file31.rs` grants nothing: every path it matches is carved out",
            "p.toml:249:3: exec.allow[6]: `/srv/project9/src/module5/file61.rs` grants nothing: every path it matches is carved out",
            "p.toml:252:3: exec.allow[9]: `/srv/project0/src/module0/file91.rs` grants nothing: every path it matches is carved out",
            "p.toml:255:3: exec.allow[12]: `/srv/project4/src/module2/file121.rs` grants nothing: every path it matches is carved out",
            "p.toml:258:3: exec.allow[15]: `/srv/project8/src/module4/file151.rs` grants nothing: every path it matches is carved out",
            "p.toml:261:3: exec.allow[18]: `/srv/project12/src/module6/file181.rs` grants nothing: every path it matches is carved out",
        ]
    );
}

/// A version 2 policy in the shape of the pipeline bench's (`crates/userspace/benches/
/// pipeline.rs`), `n` grants over 13 projects, with carve-outs that meet them, carve-outs
/// that meet nothing, and segment and postfix patterns among grants, carve-outs and
/// protected paths.
fn generated(n: usize) -> String {
    let (mut read, mut write, mut exec, mut deny, mut protect, mut unprotect, mut exec_deny) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let (p, d) = (i % 13, i % 7);
        let rule = match i % 10 {
            0..=3 => format!("/srv/project{p}/src/module{d}/file{i}.rs"),
            4 | 5 => format!("/srv/project{p}/vendor/crate{i}/**"),
            6 => format!("/srv/project{p}/gen{i}/**/*.rs"),
            7 => format!("/srv/project{p}/tree{i}/**/Cargo.toml"),
            8 if i % 100 == 8 => format!("/srv/project{p}/*/lib{i}/*.so"),
            _ => format!("/home/u/cache/{p}/{i}"),
        };
        match i % 5 {
            0 => write.push(rule),
            1 if i % 10 == 1 => exec.push(rule),
            _ => read.push(rule),
        }
    }
    for i in 0..n / 10 {
        let p = i % 13;
        deny.push(match i % 4 {
            0 => format!("/srv/project{p}/vendor/crate{}/secrets/**", i * 10 + 4),
            1 => format!("/srv/project{p}/src/module{}/file{}.rs", i % 7, i * 10 - 10),
            2 => format!("/srv/project{p}/gone{i}/**"),
            _ => format!("/srv/project{}/gen{}/**", (i * 10 - 4) % 13, i * 10 - 4),
        });
        exec_deny.push(match i % 3 {
            0 => {
                let j = i * 10 + 1;
                format!("/srv/project{}/src/module{}/file{j}.rs", j % 13, j % 7)
            }
            1 => format!("/srv/project{p}/tree{}/**/*.sh", i * 10 + 7),
            _ => format!("/opt/none{i}"),
        });
    }
    for (k, name) in ["node_modules", "__pycache__", ".env", "dist"]
        .iter()
        .enumerate()
    {
        write.push(format!("/srv/**/{name}/**"));
        deny.push(format!("/srv/project{k}/**/{name}"));
        deny.push(format!("/srv/project{k}/**/*.k{k}"));
        protect.push(format!("/srv/**/{name}/hooks/**"));
        protect.push(format!("/opt/**/{name}/hooks/**"));
        unprotect.push(format!("/srv/project{k}/{name}/hooks/**"));
        unprotect.push(format!("/opt/{name}/x"));
    }
    let list = |v: &[String]| {
        v.iter()
            .map(|r| format!("  \"{r}\",\n"))
            .collect::<String>()
    };
    format!(
        "version = 2\n[fs]\nread = [\n{}]\nwrite = [\n{}]\ndeny = [\n{}]\nprotect = [\n{}]\nunprotect = [\n{}]\n[exec]\nallow = [\n{}]\ndeny = [\n{}]\n",
        list(&read),
        list(&write),
        list(&deny),
        list(&protect),
        list(&unprotect),
        list(&exec),
        list(&exec_deny)
    )
}

mod corpus {
    //! The index changes no warning: random policies over one small tree, linted with the
    //! grants indexed and scanned whole.

    use proptest::prelude::*;

    use super::options;
    use crate::attenuate::carve::{
        Carve, Grants, Searcher, carves_nothing, excess, grants_nothing, leaves_something,
        meets_any,
    };
    use crate::attenuate::paths::PathSet;
    use crate::compile::carve::{lint, lint_with};
    use crate::compile::compile_str;
    use crate::glob::PathPattern;

    const ROOTS: [&str; 7] = ["/", "/srv", "/srv/a", "/srv/a/b", "/srv/c", "/home/u", "/w"];
    const NAMES: [&str; 5] = ["x", "b", ".env", "node_modules", "a"];

    /// One pattern of one of the six shapes, rooted in the tree.
    fn pattern() -> impl Strategy<Value = String> {
        (0..ROOTS.len(), 0..NAMES.len(), 0..7usize).prop_map(|(r, n, shape)| {
            let (root, name) = (ROOTS[r].trim_end_matches('/'), NAMES[n]);
            match shape {
                0 => format!("{root}/{name}"),
                1 => format!("{root}/{name}/**"),
                2 => format!("{root}/**/*{name}"),
                3 => format!("{root}/**/{name}"),
                4 => format!("{root}/**/{name}/x/**"),
                5 => format!("{root}/*/{name}"),
                _ => format!("{root}/{name}*"),
            }
        })
    }

    fn list() -> impl Strategy<Value = String> {
        prop::collection::vec(pattern(), 0..4).prop_map(|v| {
            let quoted: Vec<String> = v.iter().map(|p| format!("\"{p}\"")).collect();
            format!("[{}]", quoted.join(", "))
        })
    }

    fn policy() -> impl Strategy<Value = String> {
        (prop::collection::vec(list(), 8), any::<bool>()).prop_map(|(l, v2)| {
            let unprotect = if v2 { l[4].as_str() } else { "[]" };
            format!(
                "version = {}\n[fs]\nread = {}\nwrite = {}\ndeny = {}\nprotect = {}\nunprotect = {unprotect}\n[exec]\nallow = {}\ndeny = {}\n[net]\nunix = {}\n",
                if v2 { 2 } else { 1 },
                l[0],
                l[1],
                l[2],
                l[3],
                l[5],
                l[6],
                l[7]
            )
        })
    }

    fn parsed(s: &str) -> PathPattern {
        PathPattern::parse(s).unwrap()
    }

    fn parsed_lists(lists: &[Vec<String>]) -> Vec<Vec<PathPattern>> {
        lists
            .iter()
            .map(|l| l.iter().map(|p| parsed(p)).collect())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Each carve-out rule against each grant list, as the lint asks.
        #[test]
        fn indexed_and_scanned_grants_meet_alike(
            d in pattern(),
            grants in prop::collection::vec(pattern(), 0..10),
        ) {
            let d = parsed(&d);
            let grants: Vec<PathPattern> = grants.iter().map(|g| parsed(g)).collect();
            let refs: Vec<&PathPattern> = grants.iter().collect();
            let mut searcher = Searcher::default();
            let scanned = meets_any(&mut searcher, &d, &Grants::scanned(refs.clone()));
            prop_assert_eq!(
                meets_any(&mut searcher, &d, &Grants::indexed(refs.clone())),
                scanned
            );
            prop_assert_eq!(
                carves_nothing(&mut searcher, &d, &Grants::indexed(refs)),
                scanned == Some(false)
            );
        }

        /// A grant against a carve-out, with and without the sample paths.
        #[test]
        fn a_sample_spares_the_automaton_only_where_it_would_find_a_path(
            g in pattern(),
            lists in prop::collection::vec(prop::collection::vec(pattern(), 0..5), 3),
        ) {
            let g = parsed(&g);
            let lists = parsed_lists(&lists);
            let refs = |i: usize| lists[i].iter().collect::<Vec<_>>();
            let carve = Carve::indexed(refs(0), refs(1), refs(2));
            let mut searcher = Searcher::default();
            prop_assert_eq!(
                grants_nothing(&mut searcher, &g, &carve, true),
                leaves_something(&mut searcher, &g, &carve) == Some(false)
            );
        }

        /// The search cut short where the child's deny rules cover the rest finds what the
        /// whole search finds: the same answer and the same path.
        #[test]
        fn a_vetoed_search_finds_the_same_path(
            g in pattern(),
            lists in prop::collection::vec(prop::collection::vec(pattern(), 0..5), 4),
        ) {
            let g = parsed(&g);
            let lists = parsed_lists(&lists);
            let refs = |i: usize| lists[i].iter().collect::<Vec<_>>();
            let child = Carve::indexed(refs(0), refs(1), refs(2));
            let parent = Carve::indexed(refs(0)[..refs(0).len() / 2].to_vec(), refs(1), vec![]);
            let grants = refs(3);
            let (mut cut, mut whole) = (Searcher::default(), Searcher::exhaustive());
            prop_assert_eq!(
                leaves_something(&mut cut, &g, &child),
                leaves_something(&mut whole, &g, &child)
            );
            let mut set = PathSet::new(grants.clone());
            let a = excess(&mut cut, &g, &child, &mut set, &grants, &parent);
            let mut set = PathSet::new(grants.clone());
            let b = excess(&mut whole, &g, &child, &mut set, &grants, &parent);
            prop_assert_eq!(a, b);
        }

        /// Whole policies of version 1 (version 2's protected paths make each case slow).
        #[test]
        fn indexed_and_scanned_grants_warn_alike(text in policy()) {
            let text = text.replacen("version = 2", "version = 1", 1);
            let text = text.replace("unprotect =", "# unprotect =");
            let Ok(compiled) = compile_str("p.toml", &text, &options()) else {
                return Ok(());
            };
            let p = &compiled.policy;
            prop_assert_eq!(lint(p, "p.toml"), lint_with(p, "p.toml", true));
        }
    }
}
