//! Reading a policy, fragment or configuration file: a regular file of bounded size, never a
//! device, a FIFO or a directory (`/dev/zero` would fill memory, a FIFO would block forever).

use std::io::Read as _;
use std::path::Path;

/// Most bytes of a file bee reads as a policy, fragment or configuration: 16 MiB (a
/// 10,000-rule policy is about 1 MiB).
pub const MAX_SOURCE_BYTES: u64 = 16 * 1024 * 1024;

/// The bytes of the regular file at `path` (symbolic links followed).
///
/// # Errors
/// The I/O error of reading it; `InvalidInput` when it is not a regular file or is larger
/// than [`MAX_SOURCE_BYTES`].
pub fn read_source(path: &Path) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("larger than {MAX_SOURCE_BYTES} bytes"),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_oversized_files_are_refused() {
        for p in ["/dev/zero", "/dev/null", "/"] {
            let e = read_source(Path::new(p)).err().map(|e| e.to_string());
            assert_eq!(e.as_deref(), Some("not a regular file"), "{p}");
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let big = dir.path().join("big.toml");
        let f = std::fs::File::create(&big).unwrap_or_else(|e| unreachable!("{e}"));
        f.set_len(MAX_SOURCE_BYTES + 1)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let e = read_source(&big).err().map(|e| e.to_string());
        assert_eq!(e, Some(format!("larger than {MAX_SOURCE_BYTES} bytes")));
        std::fs::write(&big, "version = 1\n").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(read_source(&big).ok(), Some(b"version = 1\n".to_vec()));
    }
}
