//! Parse, compile and attenuate arbitrary policy text: nothing may panic.
//!
//! The input is split at the first `\n%%\n` into a child and a parent policy.
#![no_main]

use std::path::PathBuf;

use bee_core::compile::{CompileOptions, compile_str};
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
    if let Ok(child) = &child {
        let json = child.policy.to_json().unwrap_or_default();
        assert!(!json.is_empty());
    }
    let _ = parent;
});
