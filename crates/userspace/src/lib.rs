//! bee's enforcement backend: everything between a [`bee_core::CompiledPolicy`] and a
//! confined process.
//!
//! | module | concept |
//! |---|---|
//! | [`support`] | can this kernel enforce? (a typed report, proven by loading a program) |
//! | [`plan`] | stage two: the exact kernel map contents for a policy |
//! | [`engine`] | the loaded kernel programs and their maps: install and remove plans, read audit events |
//! | [`cgroup`] | scope cgroups: create, limit, kill, remove |
//! | [`landlock`] | the Landlock engine: a policy enforced exactly by Landlock, private namespaces and seccomp, or refused |
//! | [`launch`] | the hardened launcher that starts a child inside its scope |
//! | [`scope`] | the scope lifecycle tying plan, cgroup, launcher and enforcer together |
//! | [`audit`] | kernel audit events as records and one-line explanations |
//! | [`dns`] | the per-scope DNS resolver behind egress by domain name: grants, answers, admissions |

pub mod audit;
pub mod bpffs;
pub mod cgroup;
pub mod dns;
pub mod engine;
pub mod landlock;
pub mod launch;
pub mod plan;
pub mod scope;
pub mod support;
