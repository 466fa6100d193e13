//! Parse, compile, plan and attenuate arbitrary policy text: nothing may panic, and a
//! policy always attenuates itself.
//!
//! The input is split at the first `\n%%\n` into a child and a parent policy.
#![no_main]

use std::path::PathBuf;

use bee_core::attenuate;
use bee_core::compile::{CompileOptions, compile_str};
use bee_userspace::plan::EnforcementPlan;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (child, parent) = text.split_once("\n%%\n").unwrap_or((text, ""));
    let options = CompileOptions {
        base: PathBuf::from("/work/repo"),
        home: Some(PathBuf::from("/home/u")),
    };
    let child = compile_str("child.toml", child, &options);
    let parent = compile_str("parent.toml", parent, &options);
    for compiled in [&child, &parent].into_iter().flatten() {
        let json = compiled.policy.to_json().unwrap_or_default();
        assert!(!json.is_empty());
        let _ = EnforcementPlan::new(&compiled.policy);
        let own = attenuate(&compiled.policy, &compiled.policy);
        assert!(own.is_subset(), "a policy must attenuate itself: {own}");
    }
    if let (Ok(child), Ok(parent)) = (&child, &parent) {
        let _ = attenuate(&child.policy, &parent.policy);
    }
});
