//! Snapshots on disk: one file per event (replaced by a better picture of it), named
//! `<camera>-<UTC start, YYYYmmdd-HHMMSS>-<event number>-<label>.jpg`, written atomically
//! (a temporary file renamed), and pruned oldest first to stay within a count, a size and an
//! age: an SD card never fills.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The bounds of the directory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// Files at most.
    pub max_files: usize,
    /// Bytes at most.
    pub max_bytes: u64,
    /// Age at most (`None`: no limit).
    pub max_age: Option<Duration>,
}

/// `YYYYmmdd-HHMMSS` (UTC) of `secs` since the Unix epoch.
pub fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 1970-01-01 → civil date (proleptic Gregorian), by 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The file of an event's snapshot.
pub fn file_name(camera: &str, start_secs: u64, event: u64, label: &str) -> String {
    format!("{camera}-{}-{event}-{label}.jpg", utc_stamp(start_secs))
}

/// Writes `bytes` to `dir/name` atomically, then prunes `dir`'s snapshots of `camera`.
pub fn save(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    camera: &str,
    b: &Bounds,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    prune(dir, camera, b, SystemTime::now())?;
    Ok(path)
}

/// Removes `camera`'s oldest snapshots in `dir` until the bounds hold (other files are left
/// alone). Returns how many went.
pub fn prune(dir: &Path, camera: &str, b: &Bounds, now: SystemTime) -> std::io::Result<usize> {
    let prefix = format!("{camera}-");
    let mut files: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with(&prefix) || !name.ends_with(".jpg") {
            continue;
        }
        let Ok(m) = entry.metadata() else { continue };
        if m.is_file() {
            files.push((m.modified().unwrap_or(now), m.len(), entry.path()));
        }
    }
    files.sort();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    let mut count = files.len();
    let mut removed = 0;
    for (mtime, len, path) in files {
        let too_old = b
            .max_age
            .is_some_and(|a| now.duration_since(mtime).unwrap_or_default() > a);
        if !(too_old || count > b.max_files || total > b.max_bytes) {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
        count -= 1;
        total = total.saturating_sub(len);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc_civil_times() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
        assert_eq!(utc_stamp(1_795_910_399), "20261128-235959");
        assert_eq!(
            file_name("front", 0, 7, "person"),
            "front-19700101-000000-7-person.jpg"
        );
    }

    #[test]
    fn the_oldest_go_first_until_count_size_and_age_hold() {
        let dir = tempfile::tempdir().unwrap();
        let b = Bounds {
            max_files: 3,
            max_bytes: 1000,
            max_age: None,
        };
        for i in 0..5u64 {
            save(
                dir.path(),
                &file_name("cam", i, i, "person"),
                &[0u8; 100],
                "cam",
                &b,
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::write(dir.path().join("notes.txt"), "kept").unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left.len(), 4, "{left:?}");
        assert!(left.contains(&"notes.txt".to_string()));
        assert!(
            !left.iter().any(|n| n.contains("-0-") || n.contains("-1-")),
            "{left:?}"
        );
        // Size: 250 bytes allow two files of 100.
        let b = Bounds {
            max_files: 100,
            max_bytes: 250,
            max_age: None,
        };
        assert_eq!(prune(dir.path(), "cam", &b, SystemTime::now()).unwrap(), 1);
        // Age: everything is older than a day, a day later.
        let b = Bounds {
            max_files: 100,
            max_bytes: 1 << 30,
            max_age: Some(Duration::from_secs(86_400)),
        };
        let later = SystemTime::now() + Duration::from_secs(2 * 86_400);
        assert_eq!(prune(dir.path(), "cam", &b, later).unwrap(), 2);
        assert!(dir.path().join("notes.txt").exists());
    }
}
