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

/// A started `lookout run`: killed when dropped, so a failing test (a panic) does not leave a
/// daemon running on the machine.
struct Daemon(Child);

impl std::ops::Deref for Daemon {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `lookout run --config CFG ARGS…` with stderr to a file.
fn start(dir: &Path, cfg: &Path, args: &[&str], env: &[(&str, &str)]) -> (Daemon, PathBuf) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.to_string())).collect();
    start_wrapped(dir, &[], cfg, &args, &env)
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

/// Reads the child's stderr file until a line satisfies `pred` or `deadline` passes; returns
/// the whole text read and whether a line matched.
fn wait_for_line(
    err_path: &Path,
    child: &mut Child,
    deadline: Duration,
    pred: impl Fn(&str) -> bool,
) -> (String, bool) {
    let t0 = Instant::now();
    loop {
        let err = std::fs::read_to_string(err_path).unwrap_or_default();
        if err.lines().any(&pred) {
            return (err, true);
        }
        if t0.elapsed() > deadline || child.try_wait().unwrap().is_some() {
            return (err, false);
        }
        std::thread::sleep(Duration::from_millis(50)); // polling interval
    }
}

/// Sends `signal` (a `kill` name: HUP, TERM) to the child.
fn signal(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {}", child.id());
}

/// Stats lines (`LOOKOUT_EVENT=stats`) of `err` after the first line containing `after`.
fn stats_after<'a>(err: &'a str, after: &str) -> Vec<&'a str> {
    err.lines()
        .skip_while(|l| !l.contains(after))
        .filter(|l| l.contains("LOOKOUT_EVENT=stats"))
        .collect()
}

/// The bundled clip's JPEGs (split at each start-of-image marker followed by a marker).
fn demo_jpegs() -> Vec<Vec<u8>> {
    let clip = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/demo/vtest-640x480-10fps.mjpeg"),
    )
    .unwrap();
    let starts: Vec<usize> = (0..clip.len().saturating_sub(2))
        .filter(|&i| clip[i..i + 3] == [0xFF, 0xD8, 0xFF])
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &s)| clip[s..starts.get(k + 1).copied().unwrap_or(clip.len())].to_vec())
        .collect()
}

#[test]
fn a_torn_mjpeg_frame_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let jpegs = demo_jpegs();
    assert!(jpegs.len() >= 20);
    // 20 frames; the 10th cut in half, as a USB transfer cut short leaves it.
    let mut clip = Vec::new();
    for (k, j) in jpegs[..20].iter().enumerate() {
        clip.extend_from_slice(if k == 9 { &j[..j.len() / 2] } else { j });
    }
    let src = dir.path().join("torn.mjpeg");
    std::fs::write(&src, clip).unwrap();
    let cfg = dir.path().join("torn.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nspec = \"{}\"\nrealtime = false\n\n[pipeline]\nstats_interval = 0.5\npin_threads = false\n",
            src.display()
        ),
    )
    .unwrap();
    let (mut child, err_path) = start(dir.path(), &cfg, &[], &[]);
    let done = wait_until(&mut child, Duration::from_secs(120));
    let err = std::fs::read_to_string(&err_path).unwrap();
    let (status, _) = done.unwrap_or_else(|| panic!("still running after 120 s:\n{err}"));
    assert!(status.success(), "{status}:\n{err}");
    let summary = err
        .lines()
        .find(|l| l.contains("LOOKOUT_EVENT=summary"))
        .unwrap_or_else(|| panic!("no summary:\n{err}"));
    assert_eq!(field(summary, "FRAMES"), Some("19"), "{summary}");
    assert_eq!(field(summary, "FRAMES_CORRUPT"), Some("1"), "{summary}");
    assert!(summary.contains("1 damaged frame(s) skipped"), "{summary}");
}

#[test]
fn a_garbage_model_file_is_rejected_on_reload_and_the_old_model_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model.onnx");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/nanodet-g-320-int8.onnx"),
        &model,
    )
    .unwrap();
    let cfg = dir.path().join("reload.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nspec = \"demo\"\nfps = 20\nloop = true\n\n[model]\nfile = \"{}\"\n\n[pipeline]\ndetect_every = 2\nstats_interval = 0.5\npin_threads = false\n",
            model.display()
        ),
    )
    .unwrap();
    let (mut child, err_path) = start(dir.path(), &cfg, &[], &[]);
    let long = Duration::from_secs(120);
    let (err, ok) = wait_for_line(&err_path, &mut child, long, |l| {
        l.contains("LOOKOUT_EVENT=stats")
    });
    assert!(ok, "no stats before the reload:\n{err}");
    // The model file is replaced by garbage (a bad copy, a truncated download), then SIGHUP.
    std::fs::write(&model, b"this is not an ONNX model\n").unwrap();
    signal(&child, "HUP");
    let (err, ok) = wait_for_line(&err_path, &mut child, long, |l| {
        l.contains("LOOKOUT_EVENT=reload_rejected") && l.contains("CONFIG_KEY=model.file")
    });
    assert!(ok, "the reload was not rejected naming model.file:\n{err}");
    // The old model keeps running: new stats reports with detections after the rejection.
    let t0 = Instant::now();
    let err = loop {
        let err = std::fs::read_to_string(&err_path).unwrap();
        let detecting = stats_after(&err, "reload_rejected")
            .iter()
            .filter(|l| field(l, "DETECT_FPS").is_some_and(|v| v.parse::<f64>().unwrap() > 0.0))
            .count();
        if detecting >= 2 {
            break err;
        }
        assert!(child.try_wait().unwrap().is_none(), "it exited:\n{err}");
        assert!(
            t0.elapsed() < long,
            "no detections after the rejection:\n{err}"
        );
        std::thread::sleep(Duration::from_millis(50)); // polling interval
    };
    assert!(!err.contains("LOOKOUT_EVENT=reloaded"), "{err}");
    signal(&child, "TERM");
    let done = wait_until(&mut child, Duration::from_secs(30));
    let err = std::fs::read_to_string(&err_path).unwrap();
    let (status, _) = done.unwrap_or_else(|| panic!("no clean stop:\n{err}"));
    assert!(status.success(), "{status}:\n{err}");
    assert!(err.contains("(stopped by signal)"), "{err}");
}

/// A `$NOTIFY_SOCKET` datagram socket in `dir`: what the child says, with when it said it.
struct NotifyListener {
    words: std::sync::Arc<std::sync::Mutex<Vec<(Instant, String)>>>,
    path: PathBuf,
}

impl NotifyListener {
    fn bind(dir: &Path) -> NotifyListener {
        let path = dir.join("notify.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        let words = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let w = words.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = sock.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).to_string();
                for word in msg.lines() {
                    w.lock().unwrap().push((Instant::now(), word.to_string()));
                }
            }
        });
        NotifyListener { words, path }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("NOTIFY_SOCKET", self.path.display().to_string()),
            ("WATCHDOG_USEC", "1000000".to_string()),
        ]
    }

    /// Waits until a word satisfying `pred` was said (or `deadline`); its time.
    fn wait_for(&self, deadline: Duration, pred: impl Fn(&str) -> bool) -> Option<Instant> {
        let t0 = Instant::now();
        while t0.elapsed() < deadline {
            if let Some((t, _)) = self.words.lock().unwrap().iter().find(|(_, w)| pred(w)) {
                return Some(*t);
            }
            std::thread::sleep(Duration::from_millis(20)); // polling interval
        }
        None
    }

    fn pings_between(&self, from: Instant, to: Instant) -> usize {
        self.words
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, w)| *t >= from && *t <= to && w == "WATCHDOG=1")
            .count()
    }

    fn said(&self) -> Vec<String> {
        self.words
            .lock()
            .unwrap()
            .iter()
            .map(|(_, w)| w.clone())
            .collect()
    }
}

fn start_notified(dir: &Path, cfg: &Path, notify: &NotifyListener) -> (Daemon, PathBuf) {
    let env = notify.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (child, err) = start(dir, cfg, &[], &env);
    (child, err)
}

#[test]
fn a_camera_missing_at_start_is_waited_for_with_the_watchdog_fed() {
    let dir = tempfile::tempdir().unwrap();
    let device = format!("/dev/video-lookout-test-{}", std::process::id());
    let cfg = dir.path().join("camera.toml");
    std::fs::write(
        &cfg,
        format!("[source]\nspec = \"{device}\"\n\n[pipeline]\nstats_interval = 0.5\npin_threads = false\n"),
    )
    .unwrap();
    let notify = NotifyListener::bind(dir.path());
    let (mut child, err_path) = start_notified(dir.path(), &cfg, &notify);
    // READY (so `systemctl start` returns), with a STATUS saying what it waits for.
    let long = Duration::from_secs(120);
    let ready = notify.wait_for(long, |w| w == "READY=1");
    assert!(ready.is_some(), "no READY: {:?}", notify.said());
    assert!(
        notify
            .said()
            .iter()
            .any(|w| w == "STATUS=waiting for the camera to appear"),
        "{:?}",
        notify.said()
    );
    let (err, ok) = wait_for_line(&err_path, &mut child, long, |l| {
        l.contains("LOOKOUT_EVENT=camera_waiting") && l.contains(&device)
    });
    assert!(ok, "no log line saying it waits:\n{err}");
    // The watchdog stays fed while it waits (period 1 s: pings at least every 0.5 s... 5 s
    // back-off at most between attempts, each attempt a sign of life).
    let from = Instant::now();
    std::thread::sleep(Duration::from_secs(4)); // a window to count pings in
    let pings = notify.pings_between(from, Instant::now());
    assert!(
        pings >= 2,
        "watchdog not fed while waiting: {:?}",
        notify.said()
    );
    assert!(child.try_wait().unwrap().is_none(), "it gave up waiting");
    signal(&child, "TERM");
    let done = wait_until(&mut child, Duration::from_secs(30));
    let err = std::fs::read_to_string(&err_path).unwrap();
    let (status, took) = done.unwrap_or_else(|| panic!("no stop while waiting:\n{err}"));
    assert!(status.success(), "{status}:\n{err}");
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
}

#[test]
fn a_spec_that_can_never_be_a_camera_stays_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, extra) in [
        ("/dev/null", ""),                                           // there, but not V4L2
        ("/dev/lookout-no-such-node", ""),                           // not a camera name
        ("/dev/video-lookout-missing", "wait_for_camera = false\n"), // waiting turned off
    ] {
        let cfg = dir.path().join("never.toml");
        std::fs::write(
            &cfg,
            format!("[source]\nspec = \"{spec}\"\n{extra}\n[pipeline]\npin_threads = false\n"),
        )
        .unwrap();
        let (mut child, err_path) = start(dir.path(), &cfg, &[], &[]);
        let done = wait_until(&mut child, Duration::from_secs(120));
        let err = std::fs::read_to_string(&err_path).unwrap();
        let (status, _) = done.unwrap_or_else(|| panic!("{spec}: still running:\n{err}"));
        assert_eq!(status.code(), Some(78), "{spec}: {status}\n{err}");
        assert!(
            err.contains("source.spec") && err.contains(spec),
            "{spec}:\n{err}"
        );
    }
}

/// Starts `WRAPPER… lookout run --config CFG ARGS…` (a wrapper such as `unshare -rm sh -c …`
/// that ends by exec'ing its arguments; none: lookout itself) with stderr to a file.
fn start_wrapped(
    dir: &Path,
    wrapper: &[String],
    cfg: &Path,
    args: &[String],
    env: &[(&str, String)],
) -> (Daemon, PathBuf) {
    let err_path = dir.join("stderr.txt");
    let lookout = env!("CARGO_BIN_EXE_lookout").to_string();
    let mut cmd = Command::new(wrapper.first().unwrap_or(&lookout));
    if !wrapper.is_empty() {
        cmd.args(&wrapper[1..]).arg(&lookout);
    }
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
    (Daemon(cmd.spawn().unwrap()), err_path)
}

/// Whether this machine lets a test make its own mount namespace (`unshare -rm`: as root in
/// CI, or an unprivileged user namespace). Where it does not, the tests that need one say so
/// and are skipped — except in CI (`CI=true`), where that is a failure.
fn can_unshare() -> bool {
    let ok = Command::new("unshare")
        .args(["-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").is_err(),
            "CI must be able to run `unshare -rm` (mount namespaces) for the fault tests"
        );
        eprintln!("skipped: `unshare -rm` (a private mount namespace) is not allowed here");
    }
    ok
}

#[test]
fn with_the_journal_socket_absent_lines_fall_back_to_stderr() {
    use std::os::unix::fs::MetadataExt;
    if !can_unshare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 100, false);
    // stderr is "the journal stream" (JOURNAL_STREAM names its device and inode, as systemd
    // sets it), but /run is an empty tmpfs: no /run/systemd/journal/socket.
    let err_path = dir.path().join("stderr.txt");
    std::fs::write(&err_path, "").unwrap();
    let meta = std::fs::metadata(&err_path).unwrap();
    let wrapper: Vec<String> = [
        "unshare",
        "-rm",
        "sh",
        "-c",
        "mount -t tmpfs tmpfs /run && exec \"$@\"",
        "sh",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env = [("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))];
    // start_wrapped creates stderr.txt anew: same path, so take dev:ino after it.
    let (mut child, err_path) = {
        let err_file = std::fs::OpenOptions::new()
            .append(true)
            .open(&err_path)
            .unwrap();
        let mut cmd = Command::new(&wrapper[0]);
        cmd.args(&wrapper[1..])
            .arg(env!("CARGO_BIN_EXE_lookout"))
            .args(["run", "--config"])
            .arg(&cfg)
            .env_remove("NOTIFY_SOCKET")
            .env("LOOKOUT_LOG", "info")
            .env(env[0].0, &env[0].1)
            .stdout(Stdio::null())
            .stderr(err_file);
        (cmd.spawn().unwrap(), err_path)
    };
    let done = wait_until(&mut child, Duration::from_secs(120));
    let err = std::fs::read_to_string(&err_path).unwrap();
    let (status, _) = done.unwrap_or_else(|| panic!("still running after 120 s:\n{err}"));
    assert!(status.success(), "{status}:\n{err}");
    let told: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("LOOKOUT_EVENT=journal_unavailable"))
        .collect();
    assert_eq!(told.len(), 1, "the fallback is told once:\n{err}");
    // Nothing lost: the start, the stats and the summary are all on stderr, with their fields.
    assert!(err.contains("LOOKOUT_EVENT=start"), "{err}");
    assert!(err.contains("LOOKOUT_EVENT=stats"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("LOOKOUT_EVENT=summary") && l.contains(" FRAMES=")),
        "{err}"
    );
}

/// Runs the looped clip with its tracks file on a small tmpfs at `mnt` made unwritable by
/// `break_it` (shell, inside the child's mount namespace); once the failure is logged, the
/// test creates `ctl/fix`, on which `fix_it` runs in the namespace. Asserts the failure is
/// told once with `os_error`, the run goes on, writing resumes, and the stop is clean.
fn tracks_file_outage(break_it: &str, fix_it: &str, os_error: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let ctl = dir.path().join("ctl");
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::create_dir_all(&ctl).unwrap();
    let cfg = config(dir.path(), 50, true);
    let script = format!(
        "set -e; mount -t tmpfs -o size=256k tmpfs {mnt}; cd {mnt}; {break_it}; \
         ( while [ ! -e {ctl}/fix ] && kill -0 $$ 2>/dev/null; do sleep 0.05; done; \
           cd /; {fix_it}; touch {ctl}/fixed ) & \
         exec \"$@\"",
        mnt = mnt.display(),
        ctl = ctl.display()
    );
    let wrapper: Vec<String> = ["unshare", "-rm", "sh", "-c", &script, "sh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let tracks = mnt.join("tracks.jsonl").display().to_string();
    let (mut child, err_path) = start_wrapped(
        dir.path(),
        &wrapper,
        &cfg,
        &["--tracks-out".into(), tracks.clone()],
        &[],
    );
    let long = Duration::from_secs(120);
    let (err, ok) = wait_for_line(&err_path, &mut child, long, |l| {
        l.contains("LOOKOUT_EVENT=tracks_file_error")
    });
    assert!(ok, "no tracks_file_error:\n{err}");
    let told: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("LOOKOUT_EVENT=tracks_file_error"))
        .collect();
    assert!(
        told[0].contains(&format!("tracks file {tracks}: {os_error}")),
        "{}",
        told[0]
    );
    // The pipeline keeps running, and the stats count the lost lines.
    let t0 = Instant::now();
    loop {
        let err = std::fs::read_to_string(&err_path).unwrap();
        let lost: u64 = stats_after(&err, "tracks_file_error")
            .iter()
            .filter_map(|l| field(l, "TRACKS_LINES_LOST")?.parse::<u64>().ok())
            .sum();
        if lost > 0 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "it exited:\n{err}");
        assert!(
            t0.elapsed() < long,
            "no TRACKS_LINES_LOST in the stats:\n{err}"
        );
        std::thread::sleep(Duration::from_millis(50)); // polling interval
    }
    // Space (or write access) comes back: writing resumes by itself.
    std::fs::write(ctl.join("fix"), "").unwrap();
    let (err, ok) = wait_for_line(&err_path, &mut child, long, |l| {
        l.contains("LOOKOUT_EVENT=tracks_file_resumed")
    });
    assert!(ok, "writing did not resume:\n{err}");
    // The helper marks the fix done after it (lookout may notice the space first).
    let t0 = Instant::now();
    while !ctl.join("fixed").exists() {
        assert!(t0.elapsed() < long, "the fix never finished");
        std::thread::sleep(Duration::from_millis(50)); // polling interval
    }
    // Lines are written again: the file (seen inside the child's namespace) grows.
    let inside = PathBuf::from(format!("/proc/{}/root{tracks}", child.id()));
    if let Ok(first) = std::fs::metadata(&inside).map(|m| m.len()) {
        let t0 = Instant::now();
        while std::fs::metadata(&inside).map_or(0, |m| m.len()) <= first {
            assert!(
                t0.elapsed() < long,
                "the tracks file does not grow after the fix"
            );
            std::thread::sleep(Duration::from_millis(50)); // polling interval
        }
    }
    signal(&child, "TERM");
    let done = wait_until(&mut child, Duration::from_secs(30));
    let err = std::fs::read_to_string(&err_path).unwrap();
    let (status, _) = done.unwrap_or_else(|| panic!("no clean stop:\n{err}"));
    assert!(status.success(), "{status}:\n{err}");
    let summary = err
        .lines()
        .find(|l| l.contains("LOOKOUT_EVENT=summary"))
        .unwrap_or_else(|| panic!("no summary:\n{err}"));
    let frames: u64 = field(summary, "FRAMES").unwrap().parse().unwrap();
    let lost: u64 = field(summary, "TRACKS_LINES_LOST")
        .unwrap()
        .parse()
        .unwrap();
    assert!(lost > 0 && lost < frames, "{summary}");
}

#[test]
fn a_full_file_system_under_the_tracks_file_is_survived_and_writing_resumes() {
    if !can_unshare() {
        return;
    }
    tracks_file_outage(
        "dd if=/dev/zero of=filler bs=4k 2>/dev/null || true",
        &"rm -f FILLER".replace("FILLER", "\"$OLDPWD\"/filler"),
        "No space left on device",
    );
}

#[test]
fn a_read_only_file_system_under_the_tracks_file_is_survived_and_writing_resumes() {
    if !can_unshare() {
        return;
    }
    tracks_file_outage(
        "mount -o remount,ro .",
        "mount -o remount,rw \"$OLDPWD\"",
        "Read-only file system",
    );
}

#[test]
fn a_silent_source_stops_the_watchdog_pings() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    // A camera that is present but sends nothing: a FIFO that stops being written.
    let fifo = dir.path().join("silent.y4m");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let cfg = dir.path().join("silent.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nspec = \"{}\"\n\n[pipeline]\nstats_interval = 0.5\npin_threads = false\n",
            fifo.display()
        ),
    )
    .unwrap();
    let notify = NotifyListener::bind(dir.path());
    let (mut child, err_path) = start_notified(dir.path(), &cfg, &notify);
    // Opening the FIFO waits for lookout to open it (after the model loaded).
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let (width, height) = (64usize, 48usize);
    w.write_all(format!("YUV4MPEG2 W{width} H{height} F10:1 C420jpeg\n").as_bytes())
        .unwrap();
    for k in 0..20u8 {
        w.write_all(b"FRAME\n").unwrap();
        w.write_all(&vec![k.wrapping_mul(11); width * height * 3 / 2])
            .unwrap();
    }
    w.flush().unwrap();
    let long = Duration::from_secs(120);
    assert!(
        notify.wait_for(long, |s| s == "READY=1").is_some(),
        "{:?}",
        notify.said()
    );
    let first_ping = notify.wait_for(long, |s| s == "WATCHDOG=1");
    assert!(
        first_ping.is_some(),
        "no pings while frames flow: {:?}",
        notify.said()
    );
    // 20 frames at 10 fps: after 2 s the source is silent (still open, nothing sent).
    std::thread::sleep(Duration::from_secs(3)); // let the frames run out
    let quiet_from = Instant::now();
    std::thread::sleep(Duration::from_secs(3)); // 3 watchdog periods of silence
    assert!(
        child.try_wait().unwrap().is_none(),
        "a silent source is not an exit"
    );
    assert_eq!(
        notify.pings_between(quiet_from, Instant::now()),
        0,
        "the watchdog must starve while no frame comes (systemd then restarts lookout): {:?}",
        notify.said()
    );
    // The writer closes: end of the file, a clean end.
    drop(w);
    let done = wait_until(&mut child, Duration::from_secs(60));
    let err = std::fs::read_to_string(&err_path).unwrap();
    let (status, _) = done.unwrap_or_else(|| panic!("no end after EOF:\n{err}"));
    assert!(status.success(), "{status}:\n{err}");
}

/// Runs `lookout ARGS…` with its data memory (heap) limited to `data_kib` and a deadline;
/// returns the exit status (`None`: killed at the deadline) and stdout + stderr.
fn run_limited(dir: &Path, data_kib: u64, args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let out_path = dir.join("limited.out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new("sh")
        .args(["-c", &format!("ulimit -d {data_kib} && exec \"$0\" \"$@\"")])
        .arg(env!("CARGO_BIN_EXE_lookout"))
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let status = wait_until(&mut child, Duration::from_secs(120));
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    (status.and_then(|(s, _)| s.code()), text)
}

#[test]
fn a_long_mjpeg_recording_is_streamed_in_bounded_memory() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = tempfile::tempdir().unwrap();
    let jpegs = demo_jpegs();
    // Frame, 320 MiB of zeros (a hole: no disk used), frame.
    let p = dir.path().join("long.mjpeg");
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(&jpegs[0]).unwrap();
    f.set_len(jpegs[0].len() as u64 + (320 << 20)).unwrap();
    f.seek(SeekFrom::End(0)).unwrap();
    f.write_all(&jpegs[1]).unwrap();
    drop(f);
    // With 128 MiB of heap a reader that loads the file whole fails; a streaming one holds
    // a frame and one read at a time.
    let (code, out) = run_limited(
        dir.path(),
        128 << 10,
        &[
            "capture".as_ref(),
            p.as_os_str(),
            "--frames".as_ref(),
            "2".as_ref(),
            "--json".as_ref(),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("\"frames\": 2"), "{out}");
}

#[test]
fn a_fifo_among_the_images_of_a_directory_is_skipped_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let made = Command::new("mkfifo").arg(images.join("a.jpg")).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    std::fs::write(images.join("b.jpg"), &demo_jpegs()[0]).unwrap();
    let spec = format!("{}/", images.display());
    let (code, out) = run_limited(
        dir.path(),
        1 << 20,
        &[
            "capture".as_ref(),
            spec.as_ref(),
            "--frames".as_ref(),
            "1".as_ref(),
            "--json".as_ref(),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("\"frames\": 1") && out.contains("\"corrupt\": 1"),
        "{out}"
    );
    assert!(
        out.contains("a.jpg") && out.contains("FIFO"),
        "the skip is warned about: {out}"
    );
}
