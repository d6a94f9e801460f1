//! Content digests: sha256 over bytes and over directory trees.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 of a file, hex, read in 1 MiB pieces (model files are hundreds of MB).
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Files skipped by tree digests and sandbox copies: interpreter caches that
/// appear when someone runs a task's tests in place.
pub(crate) fn is_ignored(name: &str) -> bool {
    name == "__pycache__" || name.ends_with(".pyc") || name == ".pytest_cache"
}

/// Every entry under `root` that is not a folder (a symlink is listed, not followed: reading
/// it reads its target), relative to it, sorted (ignored names skipped).
pub fn list_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    walk(root, Path::new(""), &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(rel))? {
        let entry = entry?;
        let name = entry.file_name();
        if is_ignored(&name.to_string_lossy()) {
            continue;
        }
        let rel_child = rel.join(&name);
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(root, &rel_child, out)?;
        } else {
            out.push(rel_child);
        }
    }
    Ok(())
}

/// sha256 over a tree: each file contributes its relative path and the sha256
/// of its bytes, in sorted path order. Renaming or editing any file changes it.
pub fn tree_digest(root: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    for rel in list_files(root)? {
        let bytes = std::fs::read(root.join(&rel))?;
        hasher.update(rel.to_string_lossy().replace('\\', "/").as_bytes());
        hasher.update([0u8]);
        hasher.update(sha256_hex(&bytes).as_bytes());
        hasher.update([b'\n']);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// sha256 over a list of named parts, order preserved.
pub fn digest_parts<'a>(parts: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut hasher = Sha256::new();
    for (name, value) in parts {
        hasher.update(name.as_bytes());
        hasher.update([0u8]);
        hasher.update(value.as_bytes());
        hasher.update([b'\n']);
    }
    hex::encode(hasher.finalize())
}

/// `path` opened for reading without blocking (a FIFO opens at once), with
/// its metadata, when it is a regular file; anything else is refused
/// (`ErrorKind::InvalidInput`, "not a regular file"). `follow`: a final
/// symlink is followed, else refused.
pub fn open_regular(
    path: &Path,
    follow: bool,
) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = if follow { libc::O_NONBLOCK } else { libc::O_NOFOLLOW | libc::O_NONBLOCK };
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok((file, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest of a tree as documented, in Python:
    /// `hashlib.sha256(b"".join(p.encode() + b"\0" + hashlib.sha256(c).hexdigest().encode() + b"\n" for p, c in sorted(files))).hexdigest()`.
    #[test]
    fn tree_digest_changes_with_content_and_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/x.py"), "1").unwrap();
        let d1 = tree_digest(dir.path()).unwrap();
        assert_eq!(
            d1, "2db863ce93c6245a3468ad85239112911921129e8d5a7c015699b94e0226b186",
            "a/x.py = \"1\""
        );
        std::fs::write(dir.path().join("a/x.py"), "2").unwrap();
        let d2 = tree_digest(dir.path()).unwrap();
        assert_eq!(
            d2, "65d0c952d660f8bb3fc3ad6a8ce8d2fedf43e136ee305373e66aa5dc36717e09",
            "a/x.py = \"2\""
        );
        std::fs::rename(dir.path().join("a/x.py"), dir.path().join("a/y.py")).unwrap();
        assert_eq!(
            tree_digest(dir.path()).unwrap(),
            "2064f2a25c8c736b325b965ce05ba9f654288b30e23a8aa5761e502796b6bb52",
            "a/y.py = \"2\""
        );
        // caches do not count
        std::fs::create_dir(dir.path().join("a/__pycache__")).unwrap();
        std::fs::write(dir.path().join("a/__pycache__/y.pyc"), "zz").unwrap();
        let d3 = tree_digest(dir.path()).unwrap();
        std::fs::remove_dir_all(dir.path().join("a/__pycache__")).unwrap();
        assert_eq!(d3, tree_digest(dir.path()).unwrap());
    }

    #[test]
    fn sha256_known_value() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
