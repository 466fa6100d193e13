//! Policy files compiled once per command: a run names the same files for its sessions,
//! their tool scopes and every subagent spawn, and each (file, workspace, home) is compiled
//! the first time it is asked for and read from here after. The compiler's warnings stay
//! with each entry, so whoever asks gets them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bee_core::{CompileOptions, Compiled, PolicyError, compile_file};

/// What one compilation depends on: the file, the directory relative paths resolve
/// against, and the home `~` means.
type Key = (PathBuf, PathBuf, Option<PathBuf>);

/// Compiled policy files, shared by a command's sessions and subagents.
#[derive(Debug, Default)]
pub struct PolicyCache {
    compiled: Mutex<HashMap<Key, Compiled>>,
}

impl PolicyCache {
    /// `path` compiled with `options` ([`compile_file`]): from the cache, or compiled now
    /// and kept. A policy is read once per command; a file changed during the run is not
    /// read again.
    ///
    /// # Errors
    /// [`PolicyError`] as [`compile_file`] gives it, each time it is asked (a refusal is not
    /// kept).
    pub fn compile_file(
        &self,
        path: &Path,
        options: &CompileOptions,
    ) -> Result<Compiled, PolicyError> {
        let key = (path.to_owned(), options.base.clone(), options.home.clone());
        if let Some(hit) = self.lock().get(&key) {
            return Ok(hit.clone());
        }
        let compiled = compile_file(path, options)?;
        self.lock().insert(key, compiled.clone());
        Ok(compiled)
    }

    /// The entries, locked; a panic elsewhere while holding the lock leaves whole entries.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Compiled>> {
        self.compiled.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_compiled_once_and_a_refusal_is_not_kept() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("p.toml");
        std::fs::write(&file, "version = 1\n[fs]\nread = [\"./**\"]\n").expect("written");
        let options = CompileOptions {
            base: dir.path().to_owned(),
            home: None,
        };
        let cache = PolicyCache::default();
        let first = cache.compile_file(&file, &options).expect("a valid policy");
        // Changed on disk: the command goes on with what it compiled.
        std::fs::write(&file, "not toml").expect("written");
        let second = cache.compile_file(&file, &options).expect("from the cache");
        assert_eq!(first.policy, second.policy);
        // Another workspace is another compilation, and this one is refused.
        let other = CompileOptions {
            base: std::env::temp_dir(),
            home: None,
        };
        assert!(cache.compile_file(&file, &other).is_err());
        std::fs::write(&file, "version = 1\n").expect("written");
        assert!(
            cache.compile_file(&file, &other).is_ok(),
            "a refusal was not kept"
        );
    }
}
