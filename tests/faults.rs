//! Faults `lookout run` must survive, or end cleanly, on the bundled clip:
//! - the tracks file on a full disk (`/dev/full`: ENOSPC on every write): the run goes on to the
//!   end of the clip, exit 0, one warning naming the file and the OS error, every line counted
//!   in `TRACKS_LINES_LOST`;
//! - a panic in a pipeline thread (the test-only `LOOKOUT_TEST_PANIC` hook of debug builds, see
//!   `src/pipeline/panics.rs`): the process exits promptly with status 1 (systemd restarts it)
//!   and the log names the thread, even though the looped clip would run forever.
//!
//! Each child is waited for with a deadline (polled, no fixed sleeps) and killed if it passes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The bundled clip at `fps`, stats every half second, optionally looped for ever.
fn config(dir: &Path, fps: u32, looped: bool) -> PathBuf {
    let p = dir.join("faults.toml");
    std::fs::write(
        &p,
        format!(
            "[source]\nspec = \"demo\"\nfps = {fps}\nloop = {looped}\n\n[pipeline]\ndetect_every = 2\nstats_interval = 0.5\npin_threads = false\n"
        ),
    )
    .unwrap();
    p
}

/// Starts `lookout run --config CFG ARGS…` with stderr to a file.
fn start(dir: &Path, cfg: &Path, args: &[&str], env: &[(&str, &str)]) -> (Child, PathBuf) {
    let err_path = dir.join("stderr.txt");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
    cmd.args(["run", "--config"])
        .arg(cfg)
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("LOOKOUT_TEST_PANIC")
        .env("LOOKOUT_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    (cmd.spawn().unwrap(), err_path)
}

/// Waits for the child until `deadline` has passed (then kills it and returns `None`).
fn wait_until(child: &mut Child, deadline: Duration) -> Option<(ExitStatus, Duration)> {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status, t0.elapsed()));
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20)); // polling interval, not a wait for an event
    }
}

/// The value of ` KEY=` in `line`.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split(' ').next()
}

#[test]
fn a_full_disk_under_the_tracks_file_never_stops_the_daemon() {
    assert!(Path::new("/dev/full").exists(), "/dev/full is needed");
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 100, false);
    let (mut child, err_path) = start(dir.path(), &cfg, &["--tracks-out", "/dev/full"], &[]);
    let done = wait_until(&mut child, Duration::from_secs(120));
    let err = std::fs::read_to_string(&err_path).unwrap();
    let (status, _) = done.unwrap_or_else(|| panic!("still running after 120 s:\n{err}"));
    assert!(status.success(), "{status}:\n{err}");
    // One warning (rate-limited: the clip takes ~2 s), naming the file and the OS error.
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("LOOKOUT_EVENT=tracks_file_error"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("tracks file /dev/full: No space left on device"),
        "{}",
        warnings[0]
    );
    // The whole clip was processed and every line counted as lost.
    let summary = err
        .lines()
        .find(|l| l.contains("LOOKOUT_EVENT=summary"))
        .unwrap_or_else(|| panic!("no summary:\n{err}"));
    let frames: u64 = field(summary, "FRAMES").unwrap().parse().unwrap();
    let lost: u64 = field(summary, "TRACKS_LINES_LOST")
        .unwrap()
        .parse()
        .unwrap();
    assert!(summary.contains("(end of source)"), "{summary}");
    assert!(frames > 100, "{summary}");
    assert_eq!(lost, frames, "{summary}");
    // The stats reports carry the counter too.
    let reported: u64 = err
        .lines()
        .filter(|l| l.contains("LOOKOUT_EVENT=stats"))
        .map(|l| {
            field(l, "TRACKS_LINES_LOST")
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert!(reported > 0, "{err}");
}

#[test]
fn a_panic_in_any_pipeline_thread_ends_the_process_promptly_naming_the_thread() {
    if !cfg!(debug_assertions) {
        eprintln!("skipped: LOOKOUT_TEST_PANIC exists in debug builds only");
        return;
    }
    for (hook, thread) in [
        ("capture", "lookout-capture"),
        ("tracking", "lookout-track"),
        ("detection", "lookout-detect"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // Looped: without the panic policy the run would never end.
        let cfg = config(dir.path(), 50, true);
        let (mut child, err_path) = start(dir.path(), &cfg, &[], &[("LOOKOUT_TEST_PANIC", hook)]);
        // Generous for a loaded machine (the model loads first); a live run takes ~0.5 s.
        let done = wait_until(&mut child, Duration::from_secs(60));
        let err = std::fs::read_to_string(&err_path).unwrap();
        let (status, took) =
            done.unwrap_or_else(|| panic!("{hook}: still running after 60 s (half-alive):\n{err}"));
        assert_eq!(status.code(), Some(1), "{hook}: {status}\n{err}");
        let panics: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("LOOKOUT_EVENT=panic"))
            .collect();
        assert_eq!(panics.len(), 1, "{hook}: logged once:\n{err}");
        assert!(
            panics[0].contains(&format!("pipeline thread {thread} panicked at frame "))
                && panics[0].contains(&format!("THREAD={thread}"))
                && panics[0].contains(&format!("LOOKOUT_TEST_PANIC={hook}")),
            "{hook}: {}",
            panics[0]
        );
        // Where it happened: the caller of the hook, in the thread's own file.
        assert!(panics[0].contains("src/pipeline/"), "{}", panics[0]);
        assert!(!panics[0].contains("panics.rs"), "{}", panics[0]);
        assert!(
            !err.contains("LOOKOUT_EVENT=summary"),
            "{hook}: a panic is not a clean end:\n{err}"
        );
        eprintln!("{hook}: exit 1 after {took:?}");
    }
}
