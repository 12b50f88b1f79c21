//! The command line of an `exec:` source: split into words like a POSIX shell would (quotes
//! and backslashes, no expansion of variables, globs or `~`, no pipes or redirections) and
//! its program found the way `execvp` finds it. A shell runs only when the user writes one:
//! `exec:sh -c 'rpicam-vid … | ffmpeg …'`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Splits an `exec:` command line into its argument vector.
///
/// # Errors
/// A message saying what is wrong: nothing to run, or a quote that is never closed.
pub fn split(command: &str) -> Result<Vec<String>, String> {
    let words = shlex::split(command).ok_or_else(|| {
        format!("cannot split the command line {command:?} into words: a quote is not closed (words are split like a shell's, with '…', \"…\" and \\)")
    })?;
    if words.is_empty() {
        return Err("expected a command after `exec:`, found nothing".into());
    }
    Ok(words)
}

/// The command line as lookout shows it (journal, errors, `lookout bench`): the password of
/// every URL in it (`scheme://user:password@host…`, as RTSP cameras take them) replaced by
/// `***`. The command itself runs with the password.
pub fn redact(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first '/', whitespace or quote; its user info at the
        // last '@' in it.
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority
            .rfind('@')
            .map(|at| (at, authority[..at].find(':')))
        {
            Some((at, Some(colon))) => {
                out.push_str(&authority[..colon]);
                out.push_str(":***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Finds the executable a program name starts: a name with a `/` as it is, else the first
/// match in `path` (the value of `$PATH`; empty entries mean the current directory, as for
/// `execvp`).
///
/// # Errors
/// A message naming the program and where it was looked for: not found, not a regular file,
/// or not executable.
pub fn resolve(program: &str, path: Option<&str>) -> Result<PathBuf, String> {
    if program.contains('/') {
        return check_executable(Path::new(program)).map(|()| PathBuf::from(program));
    }
    let search = path.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let mut found_unusable = None;
    for dir in search.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = Path::new(dir).join(program);
        if !candidate.exists() {
            continue;
        }
        match check_executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) => {
                found_unusable.get_or_insert(e);
            }
        }
    }
    Err(found_unusable.unwrap_or_else(|| {
        format!("the program {program:?} is not found in PATH ({search}); install it, or give its full path")
    }))
}

/// The program named by `argv[0]`, found with this process's `$PATH`.
///
/// # Errors
/// As [`resolve`].
pub fn resolve_in_env(program: &str) -> Result<PathBuf, String> {
    let path = std::env::var("PATH").ok();
    resolve(program, path.as_deref())
}

/// A regular file someone may execute.
fn check_executable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| {
        format!(
            "the program {} cannot be found ({e}); install it, or correct the path",
            path.display()
        )
    })?;
    if !meta.is_file() {
        return Err(format!(
            "the program {} is not a regular file",
            path.display()
        ));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!(
            "the program {} is not executable (chmod +x)",
            path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_urls_are_not_shown() {
        assert_eq!(
            redact("exec:ffmpeg -i rtsp://admin:s3cr@t!@192.168.1.20:554/sub -f mjpeg -"),
            "exec:ffmpeg -i rtsp://admin:***@192.168.1.20:554/sub -f mjpeg -"
        );
        assert_eq!(
            redact("exec:sh -c 'ffmpeg -i \"rtsp://u:p@cam/a\" -f mjpeg -'"),
            "exec:sh -c 'ffmpeg -i \"rtsp://u:***@cam/a\" -f mjpeg -'"
        );
        // No password, no user, several URLs, no URL: unchanged but for the passwords.
        assert_eq!(
            redact("rtsp://cam@host/x http://h/y"),
            "rtsp://cam@host/x http://h/y"
        );
        assert_eq!(
            redact("a rtsp://a:b@h1/ rtsp://c:d@h2"),
            "a rtsp://a:***@h1/ rtsp://c:***@h2"
        );
        assert_eq!(redact("rpicam-vid -t 0 -o -"), "rpicam-vid -t 0 -o -");
    }

    #[test]
    fn words_split_like_a_shell_without_expansion() {
        assert_eq!(
            split("rpicam-vid -t 0 --codec mjpeg -o -").unwrap(),
            ["rpicam-vid", "-t", "0", "--codec", "mjpeg", "-o", "-"]
        );
        assert_eq!(
            split(r#"sh -c 'a | b "c"' x\ y $HOME"#).unwrap(),
            ["sh", "-c", r#"a | b "c""#, "x y", "$HOME"]
        );
        assert!(split("   ").unwrap_err().contains("nothing"));
        assert!(split("sh -c 'oops").unwrap_err().contains("quote"));
    }

    #[test]
    fn programs_are_found_in_path_or_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("cam");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let plain = dir.path().join("notes");
        std::fs::write(&plain, "text").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", dir.path().display());
        assert_eq!(resolve("cam", Some(&path)).unwrap(), exe);
        assert!(resolve("nope", Some(&path))
            .unwrap_err()
            .contains("not found in PATH"));
        assert!(resolve("notes", Some(&path))
            .unwrap_err()
            .contains("not executable"));
        let full = dir.path().display().to_string();
        assert!(resolve(&full, None)
            .unwrap_err()
            .contains("not a regular file"));
        assert!(resolve("/no/such/cam", None)
            .unwrap_err()
            .contains("cannot be found"));
        assert_eq!(resolve(&exe.display().to_string(), None).unwrap(), exe);
    }
}
