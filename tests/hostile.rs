//! Hostile inputs and unlucky moments for the daemon and the tools, each run against the real
//! binary in a child process that is waited for with a deadline (polled, never a blind sleep)
//! and killed if it passes it:
//! - reloads neither grow memory nor empty the tracks file, and a second daemon cannot take the
//!   first one's tracks file;
//! - a stop is honoured within a second however the daemon is waiting: on a FIFO tracks file
//!   with no reader, on a recording's pacer with an absurdly long frame interval, while starting;
//!   a second SIGTERM changes nothing; a SIGHUP while starting does not kill it;
//! - a pipeline thread that cannot be started is an error naming it, not a hang;
//! - a tracks file naming the configuration itself, or a name the system cannot take, is
//!   refused before anything is written;
//! - the tools: `detect … | head -c 1`, `bench --seconds 1e20`, `capture --frames 0`, and
//!   `bench` stopped by SIGINT with what it measured so far.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const LOOKOUT: &str = env!("CARGO_BIN_EXE_lookout");

/// A child killed when dropped, so a failing test leaves nothing running.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Proc {
    /// Waits until the child exits or `deadline` passes (then `None`; the child is killed).
    fn wait_within(&mut self, deadline: Duration) -> Option<(ExitStatus, Duration)> {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return Some((status, t0.elapsed()));
            }
            if t0.elapsed() > deadline {
                let _ = self.0.kill();
                let _ = self.0.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10)); // polling interval
        }
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.0.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// The least of five [`Proc::rss_anon_kib`] samples 100 ms apart (what is resident
    /// between the buffers of an inference in flight).
    fn rss_anon_kib_least(&self) -> u64 {
        (0..5)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(100)); // sampling interval
                self.rss_anon_kib()
            })
            .min()
            .unwrap()
    }

    /// Resident anonymous memory (the heap and stacks: what a leak grows; the file-backed
    /// rest is the binary's own pages, mapped in as code paths first run).
    fn rss_anon_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

/// `lookout ARGS…` with stderr to `dir/stderr.txt`.
fn spawn(dir: &Path, args: &[&str]) -> (Proc, PathBuf) {
    let err = dir.join("stderr.txt");
    let child = Command::new(LOOKOUT)
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env("LOOKOUT_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    (Proc(child), err)
}

/// Polls `err_path` until a line contains `needle` (or the child ended / `deadline` passed).
fn wait_for(err_path: &Path, p: &mut Proc, needle: &str, deadline: Duration) -> bool {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(err_path).unwrap_or_default();
        if text.contains(needle) {
            return true;
        }
        if t0.elapsed() > deadline || p.0.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20)); // polling interval
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The bundled clip played in real time, looped, stats every `stats` seconds.
fn live_config(dir: &Path, extra: &str) -> PathBuf {
    write(
        dir,
        "live.toml",
        &format!(
            "[source]\nspec = \"demo\"\nrealtime = true\nloop = true\n\n[pipeline]\nstats_interval = 1.0\npin_threads = false\n{extra}"
        ),
    )
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn reloads_keep_memory_flat_and_append_to_the_tracks_file() {
    let dir = tempfile::tempdir().unwrap();
    let tracks = dir.path().join("tracks.jsonl");
    let cfg = live_config(dir.path(), "");
    let (mut d, err) = spawn(
        dir.path(),
        &[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--tracks-out",
            tracks.to_str().unwrap(),
        ],
    );
    assert!(wait_for(
        &err,
        &mut d,
        "LOOKOUT_EVENT=stats",
        Duration::from_secs(60)
    ));
    let mut done_before = 0;
    let mut reloads = |d: &mut Proc, n: usize| {
        for i in done_before..done_before + n {
            d.signal("HUP");
            // Wait for the reload to be done before the next one (its log line).
            let done = "reloaded: nothing changed";
            let t0 = Instant::now();
            loop {
                let text = std::fs::read_to_string(&err).unwrap_or_default();
                if text.matches(done).count() > i {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "reload {i} not done"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        done_before += n;
    };
    // Warm up (the allocator's arenas fill with the model's buffers over the first few dozen
    // runs), then measure.
    reloads(&mut d, 40);
    let first_line = |p: &Path| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        text.lines().next().map(str::to_string)
    };
    let first = first_line(&tracks);
    assert!(
        first.is_some(),
        "lines flushed by the stats reports before the reloads"
    );
    let rss0 = d.rss_anon_kib_least();
    reloads(&mut d, 200);
    let rss1 = d.rss_anon_kib_least();
    // Let the last run write a few seconds of lines (two more stats reports), then stop.
    let stats = |err: &Path| {
        let text = std::fs::read_to_string(err).unwrap_or_default();
        text.matches("LOOKOUT_EVENT=stats").count()
    };
    let before = stats(&err);
    let t0 = Instant::now();
    while stats(&err) < before + 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no stats after the reloads"
        );
        std::thread::sleep(Duration::from_millis(50)); // polling interval
    }
    d.signal("TERM");
    let (status, _) = d.wait_within(Duration::from_secs(10)).expect("stops");
    assert!(status.success(), "{status}");
    eprintln!("RssAnon {rss0} → {rss1} KiB over 200 reloads");
    // Keeping each run's summary costs ~1.4 MB per reload (280 MB here); glibc's default
    // arenas (lookout run without `memory::limit_allocator`, as here outside the unit) ~8 MB;
    // what a run in flight holds (an inference's buffers) moves a sample by a few MB either way.
    assert!(
        rss1 <= rss0 + 4096,
        "RssAnon grew {rss0} → {rss1} KiB over 200 reloads"
    );
    // A reload appends: the file still starts with the line written before the reloads,
    // and holds whole JSON lines only.
    assert_eq!(
        first_line(&tracks),
        first,
        "a reload emptied the tracks file"
    );
    let text = std::fs::read_to_string(&tracks).unwrap();
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("whole JSON lines");
        assert!(v["seq"].as_u64().is_some(), "{l}");
    }
}

#[test]
fn a_second_daemon_cannot_take_the_first_ones_tracks_file() {
    let dir = tempfile::tempdir().unwrap();
    let tracks = dir.path().join("tracks.jsonl");
    let cfg = live_config(dir.path(), "");
    let args = [
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--tracks-out",
        tracks.to_str().unwrap(),
    ];
    let (mut first, err1) = spawn(dir.path(), &args);
    assert!(wait_for(
        &err1,
        &mut first,
        "LOOKOUT_EVENT=stats",
        Duration::from_secs(60)
    ));
    let before = count_lines(&tracks);
    let second_dir = tempfile::tempdir().unwrap();
    let (mut second, err2) = spawn(second_dir.path(), &args);
    let (status, _) = second
        .wait_within(Duration::from_secs(60))
        .expect("refused");
    let text = std::fs::read_to_string(&err2).unwrap();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(text.contains("another process"), "{text}");
    assert!(text.contains("tracks.jsonl"), "{text}");
    // The first daemon's lines are intact and it goes on writing.
    assert!(
        count_lines(&tracks) >= before,
        "the second daemon emptied the file"
    );
    first.signal("TERM");
    assert!(first
        .wait_within(Duration::from_secs(10))
        .unwrap()
        .0
        .success());
}

#[test]
fn a_fifo_tracks_file_without_a_reader_never_holds_up_a_stop() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("t.fifo");
    mkfifo(&fifo);
    let cfg = live_config(dir.path(), "");
    let (mut d, err) = spawn(
        dir.path(),
        &[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--tracks-out",
            fifo.to_str().unwrap(),
        ],
    );
    // It runs (the lines are counted as lost until a reader comes) ...
    assert!(wait_for(
        &err,
        &mut d,
        "LOOKOUT_EVENT=stats",
        Duration::from_secs(60)
    ));
    // ... and stops at once.
    d.signal("TERM");
    let (status, took) = d.wait_within(Duration::from_secs(10)).expect("stopped");
    assert!(status.success(), "{status}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

/// A Y4M recording (one 16×16 grey frame) whose header claims `rate` (`F` field).
fn y4m(dir: &Path, rate: &str) -> PathBuf {
    let mut data = format!("YUV4MPEG2 W16 H16 F{rate} Ip A1:1 Cmono\n").into_bytes();
    for _ in 0..3 {
        data.extend_from_slice(b"FRAME\n");
        data.extend(std::iter::repeat_n(128u8, 16 * 16));
    }
    let p = dir.join(format!("slow-{}.y4m", rate.replace(':', "-")));
    std::fs::write(&p, data).unwrap();
    p
}

#[test]
fn a_stop_is_honoured_within_a_second_whatever_the_pacer_waits_for() {
    for rate in ["1:10", "1:1000000000"] {
        let dir = tempfile::tempdir().unwrap();
        let clip = y4m(dir.path(), rate);
        let cfg = write(
            dir.path(),
            "slow.toml",
            &format!(
                "[source]\nspec = \"{}\"\nrealtime = true\nloop = true\n\n[pipeline]\npin_threads = false\n",
                clip.display()
            ),
        );
        let (mut d, err) = spawn(dir.path(), &["run", "--config", cfg.to_str().unwrap()]);
        assert!(
            wait_for(&err, &mut d, "LOOKOUT_EVENT=start", Duration::from_secs(60)),
            "{rate}: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300)); // into the pacer's wait
        d.signal("TERM");
        let (status, took) = d.wait_within(Duration::from_secs(20)).expect("stopped");
        let text = std::fs::read_to_string(&err).unwrap_or_default();
        assert!(status.success(), "{rate}: {status}\n{text}");
        assert!(took < Duration::from_millis(1500), "{rate}: took {took:?}");
        assert!(text.contains("summary"), "{rate}: {text}");
    }
}

#[test]
fn signals_while_starting_neither_kill_nor_hang_and_a_second_term_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = live_config(dir.path(), "");
    // SIGHUP in the first milliseconds: once the handlers are in, a reload, never a death.
    let (mut d, err) = spawn(dir.path(), &["run", "--config", cfg.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(30));
    d.signal("HUP");
    assert!(wait_for(
        &err,
        &mut d,
        "LOOKOUT_EVENT=stats",
        Duration::from_secs(60)
    ));
    assert!(
        d.0.try_wait().unwrap().is_none(),
        "killed by an early SIGHUP"
    );
    // Two SIGTERMs: one clean stop with its summary.
    d.signal("TERM");
    d.signal("TERM");
    let (status, took) = d.wait_within(Duration::from_secs(10)).expect("stopped");
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "{status}\n{text}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(text.contains("LOOKOUT_EVENT=summary"), "{text}");
    // SIGTERM while starting (loading the model): a prompt, clean exit.
    let (mut d, err) = spawn(dir.path(), &["run", "--config", cfg.to_str().unwrap()]);
    assert!(wait_for(
        &err,
        &mut d,
        "configuration",
        Duration::from_secs(30)
    ));
    d.signal("TERM");
    let (status, took) = d.wait_within(Duration::from_secs(10)).expect("stopped");
    assert!(status.success(), "{status}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// Whether this test may drop to `nobody` (root, with `setpriv`): a process limit binds only a
/// user without CAP_SYS_RESOURCE.
fn can_drop_to_nobody() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if !(root && setpriv) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI runs as root with setpriv"
        );
        eprintln!("SKIPPED: needs root and setpriv to run as nobody under a process limit");
    }
    root && setpriv
}

#[test]
fn a_thread_that_cannot_be_started_is_an_error_naming_it_not_a_hang() {
    if !can_drop_to_nobody() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // `nobody` must be able to read the config and write stderr.
    let cfg = write(
        dir.path(),
        "base.toml",
        "[source]\nspec = \"demo\"\nrealtime = false\n\n[pipeline]\npin_threads = false\n",
    );
    Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir.path())
        .status()
        .unwrap();
    Command::new("chmod")
        .args(["a+x"])
        .arg(dir.path().parent().unwrap())
        .status()
        .unwrap();
    for nproc in 1..=6 {
        let err = dir.path().join(format!("stderr-{nproc}.txt"));
        let child = Command::new("prlimit")
            .arg(format!("--nproc={nproc}"))
            .args([
                "setpriv",
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
            ])
            .arg(LOOKOUT)
            .args(["run", "--config"])
            .arg(&cfg)
            .env("LOOKOUT_LOG", "info")
            .env_remove("JOURNAL_STREAM")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let mut p = Proc(child);
        let result = p.wait_within(Duration::from_secs(60));
        let text = std::fs::read_to_string(&err).unwrap_or_default();
        let (status, _) = result.unwrap_or_else(|| panic!("nproc={nproc}: hung\n{text}"));
        eprintln!("nproc={nproc}: {status}");
        if !status.success() {
            assert_eq!(status.code(), Some(1), "nproc={nproc}: {text}");
            assert!(
                text.contains("cannot start lookout-") || text.contains("pool"),
                "nproc={nproc}: the thread is named: {text}"
            );
            assert!(!text.contains("panicked"), "nproc={nproc}: {text}");
        }
    }
}

#[test]
fn a_tracks_file_that_would_overwrite_the_configuration_or_cannot_exist_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("self.toml");
    let text = format!(
        "[source]\nspec = \"demo\"\nrealtime = false\n\n[output]\ntracks_file = \"{}\"\n",
        cfg.display()
    );
    std::fs::write(&cfg, &text).unwrap();
    for cmd in ["check-config", "run"] {
        let args: Vec<&str> = match cmd {
            "run" => vec!["run", "--config", cfg.to_str().unwrap()],
            _ => vec!["check-config", cfg.to_str().unwrap()],
        };
        let (mut p, err) = spawn(dir.path(), &args);
        let (status, _) = p.wait_within(Duration::from_secs(60)).unwrap();
        let msg = std::fs::read_to_string(&err).unwrap();
        assert_eq!(status.code(), Some(78), "{cmd}: {msg}");
        assert!(msg.contains("output.tracks_file"), "{cmd}: {msg}");
        assert!(msg.contains("configuration file"), "{cmd}: {msg}");
        assert_eq!(
            std::fs::read_to_string(&cfg).unwrap(),
            text,
            "{cmd} overwrote it"
        );
    }
    // A name longer than the system allows: refused, not every line lost later.
    let long = format!("{}/{}.jsonl", dir.path().display(), "x".repeat(300));
    let cfg2 = write(
        dir.path(),
        "long.toml",
        &format!("[source]\nspec = \"demo\"\n\n[output]\ntracks_file = \"{long}\"\n"),
    );
    let (mut p, err) = spawn(dir.path(), &["check-config", cfg2.to_str().unwrap()]);
    let (status, _) = p.wait_within(Duration::from_secs(60)).unwrap();
    let msg = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(78), "{msg}");
    assert!(
        msg.contains("output.tracks_file") && msg.contains("255"),
        "{msg}"
    );
    // The same on the command line: a usage error.
    let cfg3 = live_config(dir.path(), "");
    let (mut p, err) = spawn(
        dir.path(),
        &[
            "run",
            "--config",
            cfg3.to_str().unwrap(),
            "--tracks-out",
            cfg3.to_str().unwrap(),
        ],
    );
    let (status, _) = p.wait_within(Duration::from_secs(60)).unwrap();
    let msg = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(64), "{msg}");
    assert!(msg.contains("--tracks-out"), "{msg}");
}

#[test]
fn a_reader_that_closes_the_pipe_ends_detect_quietly() {
    let mut child = Command::new(LOOKOUT)
        .args(["detect", "--json"])
        .args([
            "tests/data/astronaut.jpg",
            "tests/data/chelsea.jpg",
            "tests/data/coffee.jpg",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then close the pipe (what `| head -c 1` does).
    let mut out = child.stdout.take().unwrap();
    let mut one = [0u8; 1];
    out.read_exact(&mut one).unwrap();
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(one[0], b'{');
    assert!(!err.contains("panicked"), "{err}");
    assert!(status.success(), "{status}: {err}");
}

#[test]
fn out_of_range_tool_arguments_are_usage_errors() {
    for args in [
        &["bench", "--seconds", "1e20"][..],
        &["capture", "demo", "--frames", "0"],
        &["capture", "demo", "--size", "0x0"],
        &["capture", "demo", "--format", "XXXX"],
    ] {
        let out = Command::new(LOOKOUT).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn bench_stopped_by_sigint_reports_what_it_measured() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stdout.txt");
    let err = dir.path().join("stderr.txt");
    let child = Command::new(LOOKOUT)
        .args(["bench", "--seconds", "600", "--json"])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut p = Proc(child);
    // Into the timed run: the self-check and the model load come first.
    std::thread::sleep(Duration::from_secs(8));
    p.signal("INT");
    let (status, took) = p.wait_within(Duration::from_secs(30)).expect("stopped");
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "{status}: {text}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let report = std::fs::read_to_string(&out).unwrap();
    if text.contains("before a measurement finished") {
        // A very slow machine was still loading: a clean stop with nothing to report.
        eprintln!("stopped before the run: {text}");
        return;
    }
    let v: serde_json::Value = serde_json::from_str(&report).expect("a whole JSON report");
    assert_eq!(v["runs"][0]["end"], "stopped", "{report}");
    assert!(
        v["runs"][0]["frames"]["processed"].as_u64().is_some(),
        "{report}"
    );
    assert!(text.contains("stopped by signal"), "{text}");
}

#[test]
fn a_signal_at_any_moment_of_start_up_ends_cleanly_and_promptly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let cfg = live_config(dir.path(), "");
    // From before the handlers can exist (the first milliseconds are the dynamic loader's)
    // through reading the configuration, loading the model and opening the source, to running.
    for delay_ms in [0u64, 2, 5, 10, 20, 40, 80, 160, 320, 640, 1280] {
        let (mut d, err) = spawn(dir.path(), &["run", "--config", cfg.to_str().unwrap()]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        d.signal("TERM");
        let (status, took) = d
            .wait_within(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{delay_ms} ms: hung after SIGTERM"));
        let text = std::fs::read_to_string(&err).unwrap_or_default();
        // Either the signal came before `main` (the default action: terminated by it), or the
        // handlers took it: status 0. Never a failure status, never a panic.
        let before_main = status.signal() == Some(libc::SIGTERM) && text.is_empty();
        assert!(
            status.success() || before_main,
            "{delay_ms} ms: {status}\n{text}"
        );
        assert!(
            took < Duration::from_millis(1500),
            "{delay_ms} ms: took {took:?}\n{text}"
        );
        assert!(!text.contains("panicked"), "{delay_ms} ms: {text}");
    }
}

#[test]
fn a_fifo_recording_whose_writer_stalls_never_holds_up_a_stop() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("cam.mjpeg");
    mkfifo(&fifo);
    // A recorder that sends a few frames, then hangs with the pipe open.
    let clip = std::fs::read("tests/data/demo/vtest-640x480-10fps.mjpeg").unwrap();
    let f2 = fifo.clone();
    let writer = std::thread::spawn(move || {
        let mut w = std::fs::OpenOptions::new().write(true).open(&f2).unwrap();
        let _ = std::io::Write::write_all(&mut w, &clip[..clip.len().min(200_000)]);
        std::thread::sleep(Duration::from_secs(30));
    });
    let cfg = write(
        dir.path(),
        "fifo.toml",
        &format!(
            "[source]\nspec = \"{}\"\nrealtime = true\n\n[pipeline]\npin_threads = false\nstats_interval = 0.5\n",
            fifo.display()
        ),
    );
    let (mut d, err) = spawn(dir.path(), &["run", "--config", cfg.to_str().unwrap()]);
    assert!(wait_for(
        &err,
        &mut d,
        "LOOKOUT_EVENT=stats",
        Duration::from_secs(60)
    ));
    // The frames sent are played within a couple of seconds; then the writer is silent.
    std::thread::sleep(Duration::from_secs(3));
    d.signal("TERM");
    let (status, took) = d.wait_within(Duration::from_secs(20)).expect("stopped");
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "{status}\n{text}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    drop(writer); // detached: it ends by itself
}
