//! Files the core writes hold what tenants did (usage journal, access log): they are created
//! readable by the owner only (0600, directories 0700), and an existing journal directory is
//! narrowed to 0700 when it is opened.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const FILE_MODE: u32 = 0o600;
pub const DIR_MODE: u32 = 0o700;

/// Create `dir` (and missing parents) as 0700; an existing `dir` is set to 0700.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
    let mode = fs::metadata(dir)?.permissions().mode() & 0o777;
    if mode != DIR_MODE {
        tracing::warn!(dir = %dir.display(), mode = format!("{mode:o}"), "narrowing a directory to 0700");
        fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

/// Options that create files as 0600.
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(FILE_MODE);
    options
}

/// Narrow an existing file to 0600 (files written before this rule).
pub fn narrow(path: &Path) -> io::Result<()> {
    let mode = fs::metadata(path)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn files_and_directories_are_the_owners_only() {
        let dir = std::env::temp_dir().join(format!("sg-private-{}", fastrand::u64(..)));
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        create_dir(&dir.join("a/b")).unwrap();
        create_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(dir.join("a/b")).unwrap().permissions().mode() & 0o777, 0o700);
        let path = dir.join("f");
        options().create(true).append(true).open(&path).unwrap().write_all(b"x").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let old = dir.join("old");
        fs::write(&old, b"x").unwrap();
        fs::set_permissions(&old, fs::Permissions::from_mode(0o644)).unwrap();
        narrow(&old).unwrap();
        assert_eq!(fs::metadata(&old).unwrap().permissions().mode() & 0o777, 0o600);
        let _ = fs::remove_dir_all(&dir);
    }
}
