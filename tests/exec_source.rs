//! The command source (`exec:COMMAND ARGS…`) with real processes, no mocks:
//! - a fake `rpicam-vid` (a script streaming the bundled clip as MJPEG) and one writing
//!   YUV4MPEG2 through Debian's `ffmpeg` (`-f lavfi` test pattern; skipped, saying so, when
//!   ffmpeg is not installed) are read through the existing readers;
//! - a command that ends is restarted and counted in `reopens`; the ended one is reaped;
//! - output that is neither MJPEG nor Y4M, and a command that fails at once, are clear
//!   messages naming the first bytes / the command's last stderr line, and are retried with
//!   a growing back-off;
//! - the daemon: the command killed mid-stream (`kill -9`) is restarted and logged; SIGTERM
//!   ends lookout and the command's whole process group within a second, leaving no zombie;
//! - a source dropped by a thread that panics still ends and reaps its command.
//!
//! Every wait is polled with a deadline; every process started is ended by the test.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lookout::frame::PixelFormat;
use lookout::source::{self, FrameSource, Pacing, SourceError, SourceOptions};

const LOOKOUT: &str = env!("CARGO_BIN_EXE_lookout");

fn clip() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/demo/vtest-640x480-10fps.mjpeg")
}

/// Frames in the bundled clip.
const CLIP_FRAMES: usize = 200;

/// Writes an executable shell script `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A fake `rpicam-vid` that ignores its arguments, appends its pid to `pids`, and streams the
/// bundled clip as MJPEG (`forever`: again and again, as a camera would).
fn fake_rpicam_mjpeg(dir: &Path, pids: &Path, forever: bool) -> PathBuf {
    let cat = format!("cat '{}'", clip().display());
    let body = if forever {
        format!("while :; do {cat}; done")
    } else {
        format!("exec {cat}")
    };
    script(
        dir,
        "rpicam-vid",
        &format!("echo $$ >> '{}'\n{body}", pids.display()),
    )
}

fn opts(pace: Pacing) -> SourceOptions {
    SourceOptions {
        pace,
        ..SourceOptions::default()
    }
}

fn open(spec: &str, o: &SourceOptions) -> Box<dyn FrameSource + Send> {
    match source::open(spec, o) {
        Ok(s) => s,
        Err(e) => panic!("opening {spec}: {e}"),
    }
}

fn pids_in(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// `Some(state)` (`R`, `S`, `Z`…) while `/proc/PID` exists.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S …`: the state follows the last `)`.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The processes of process group `pgid` (from /proc).
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(')')?.1.to_string();
                    // state ppid pgrp …
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(pgid)
        })
        .collect()
}

/// Polls until none of `pids` exists, not even as a zombie; false after `deadline`.
fn all_gone_within(pids: &[u32], deadline: Duration) -> bool {
    ended_within(pids, &[], deadline)
}

/// Polls until `reaped` no longer exist, not even as zombies (the command lookout started and
/// must reap), and `dead` are gone or zombies (its own children: when the command ends first,
/// they are reparented to init, which reaps them in its own time); false after `deadline`.
fn ended_within(reaped: &[u32], dead: &[u32], deadline: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < deadline {
        if reaped.iter().all(|p| proc_state(*p).is_none())
            && dead
                .iter()
                .all(|p| matches!(proc_state(*p), None | Some('Z')))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10)); // polling interval
    }
    false
}

fn ffmpeg_available() -> bool {
    let ok = Command::new("ffmpeg")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "SKIPPED: ffmpeg is not installed (apt-get install ffmpeg; scripts/setup.sh does)"
        );
    }
    ok
}

#[test]
fn a_fake_rpicam_vid_streams_the_clip_as_mjpeg_and_is_restarted_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let cam = fake_rpicam_mjpeg(dir.path(), &pids, false);
    let spec = format!(
        "exec:{} -t 0 --codec mjpeg --width 640 --height 480 --framerate 10 -n -o -",
        cam.display()
    );
    let mut src = open(&spec, &opts(Pacing::AsFastAsPossible));
    assert!(src.unpaced(), "realtime = false: every frame, in order");
    let mut frames = Vec::new();
    let mut lost = Vec::new();
    let t0 = Instant::now();
    // The clip once, the end of the command, and the first frames of its second run.
    while frames.len() < CLIP_FRAMES + 5 && t0.elapsed() < Duration::from_secs(60) {
        match src.next() {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => panic!("a command source never ends"),
            Err(e) if e.is_transient() => lost.push(e),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(frames.len(), CLIP_FRAMES + 5, "errors: {lost:?}");
    assert!(frames
        .iter()
        .all(|f| f.format == PixelFormat::Mjpeg && (f.width, f.height) == (640, 480)));
    assert!(
        frames.windows(2).all(|w| w[1].seq == w[0].seq + 1),
        "numbered across runs"
    );
    assert!(
        frames
            .windows(2)
            .all(|w| w[1].captured_at >= w[0].captured_at),
        "stamped on arrival"
    );
    // The whole clip came through, byte for byte, before the restart.
    let whole: Vec<u8> = frames[..CLIP_FRAMES]
        .iter()
        .flat_map(|f| f.data.iter().copied())
        .collect();
    assert_eq!(whole, std::fs::read(clip()).unwrap());
    assert!(
        matches!(lost.as_slice(), [SourceError::Disconnected { .. }]),
        "{lost:?}"
    );
    let msg = lost[0].to_string();
    assert!(
        msg.contains("its output ended") && msg.contains("exit status: 0"),
        "{msg}"
    );
    let stats = src.stats();
    assert_eq!((stats.delivered, stats.reopens, stats.corrupt), (205, 1, 0));
    let runs = pids_in(&pids);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(proc_state(runs[0]), None, "the first run is reaped");
    drop(src);
    assert!(all_gone_within(&runs, Duration::from_secs(1)), "{runs:?}");
}

#[test]
fn a_fake_rpicam_vid_writing_y4m_through_ffmpeg_is_read_by_the_y4m_reader() {
    if !ffmpeg_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cam = script(
        dir.path(),
        "rpicam-vid",
        "exec ffmpeg -nostdin -hide_banner -loglevel error -f lavfi -i testsrc=size=320x240:rate=10 -t 3 -pix_fmt yuv420p -f yuv4mpegpipe -",
    );
    let spec = format!("exec:{} --codec yuv420 -o -", cam.display());
    let mut src = open(&spec, &opts(Pacing::AsFastAsPossible));
    let mut frames = Vec::new();
    let t0 = Instant::now();
    while frames.len() < 20 && t0.elapsed() < Duration::from_secs(60) {
        match src.next() {
            Ok(Some(f)) => frames.push(f),
            Err(e) if e.is_transient() => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(frames.len(), 20);
    assert!(frames
        .iter()
        .all(|f| f.format == PixelFormat::Yu12 && (f.width, f.height) == (320, 240)));
    assert!(frames.iter().all(|f| f.data.len() == 320 * 240 * 3 / 2));
    assert_eq!(src.fps(), Some(10.0), "the Y4M header's rate");
    assert!(
        src.describe().contains("YU12 320x240"),
        "{}",
        src.describe()
    );
}

#[test]
fn output_that_is_neither_mjpeg_nor_y4m_names_its_first_bytes_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let cam = script(dir.path(), "cam", "echo 'GIF89a not a camera'; sleep 30");
    let mut src = open(&format!("exec:{}", cam.display()), &opts(Pacing::RealTime));
    let e = match src.next() {
        Err(e) => e,
        Ok(f) => panic!("an error, not {:?}", f.map(|f| f.seq)),
    };
    let msg = e.to_string();
    assert!(
        e.is_transient(),
        "retried like a camera that is gone: {msg}"
    );
    assert!(
        msg.contains("neither MJPEG")
            && msg.contains("47 49 46 38 39 61")
            && msg.contains("GIF89a"),
        "{msg}"
    );
    assert!(
        matches!(e, SourceError::WaitingForDevice { attempts: 1, .. }),
        "{e:?}"
    );
}

#[test]
fn a_command_that_fails_at_once_is_retried_with_a_growing_back_off_naming_its_last_words() {
    let dir = tempfile::tempdir().unwrap();
    let cam = script(
        dir.path(),
        "cam",
        "echo 'starting' >&2\necho 'ERROR: no cameras available' >&2\nexit 3",
    );
    let mut src = open(&format!("exec:{}", cam.display()), &opts(Pacing::RealTime));
    let mut waits = Vec::new();
    for attempt in 1..=3u32 {
        match src.next() {
            Err(SourceError::WaitingForDevice {
                attempts,
                reason,
                retry_in,
                ..
            }) => {
                assert_eq!(attempts, attempt);
                assert!(
                    reason.contains("exit status: 3")
                        && reason.contains("\"ERROR: no cameras available\""),
                    "{reason}"
                );
                waits.push(retry_in);
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    assert_eq!(
        waits,
        [500, 1000, 2000].map(Duration::from_millis),
        "the camera's back-off"
    );
    assert_eq!(src.stats().delivered, 0);
}

#[test]
fn a_source_dropped_by_a_panicking_thread_still_ends_and_reaps_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let cam = fake_rpicam_mjpeg(dir.path(), &pids, true);
    let spec = format!("exec:{}", cam.display());
    let (tell, told) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let mut src = open(&spec, &opts(Pacing::AsFastAsPossible));
        assert!(matches!(src.next(), Ok(Some(_))));
        let leader = pids_in(&pids)[0];
        tell.send((leader, group_members(leader))).unwrap();
        panic!("the capture thread fails with the command running");
    });
    assert!(worker.join().is_err(), "it panicked");
    let (leader, group) = told.recv().unwrap();
    assert!(group.len() >= 2, "the script and its cat: {group:?}");
    assert!(
        ended_within(&[leader], &group, Duration::from_secs(1)),
        "the command outlived its source: {:?}",
        group.iter().map(|p| proc_state(*p)).collect::<Vec<_>>()
    );
}

/// The daemon, with stderr to a file and `LOOKOUT_LOG=info`; killed when dropped.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Daemon {
    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls the log until `needle` appears `times` times (false if the daemon ended or
    /// `deadline` passed).
    fn wait_for(&mut self, needle: &str, times: usize, deadline: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if self.text().matches(needle).count() >= times {
                return true;
            }
            if t0.elapsed() > deadline || !matches!(self.child.try_wait(), Ok(None)) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20)); // polling interval
        }
    }
}

fn kill(signal: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{signal} {pid}");
}

#[test]
fn the_daemon_restarts_a_killed_command_and_a_stop_ends_its_whole_group_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let pids = dir.path().join("pids");
    fake_rpicam_mjpeg(&bin, &pids, true);
    // Found in PATH by name, as on a Pi; `realtime = false`: every frame, so the fake camera
    // (`cat`) runs at the pipeline's pace instead of spinning.
    let cfg = dir.path().join("exec.toml");
    std::fs::write(
        &cfg,
        "[source]\nspec = \"exec:rpicam-vid -t 0 --codec mjpeg --width 640 --height 480 --framerate 10 -n -o -\"\nrealtime = false\n\n[pipeline]\npin_threads = false\nstats_interval = 1.0\n",
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let log = dir.path().join("stderr.txt");
    let child = Command::new(LOOKOUT)
        .args(["run", "--config"])
        .arg(&cfg)
        .env("PATH", path)
        .env("LOOKOUT_LOG", "info")
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut d = Daemon { child, log };
    assert!(
        d.wait_for("frames flow", 1, Duration::from_secs(120)),
        "{}",
        d.text()
    );
    let first = pids_in(&pids)[0];
    let first_group = group_members(first);
    assert!(
        first_group.len() >= 2,
        "the script and its cat: {first_group:?}"
    );
    kill("KILL", first);
    // The script's `cat` keeps the pipe open: lookout notices the script's exit, ends the
    // rest of its group, reaps it, and starts the command again.
    assert!(
        d.wait_for("the command runs again", 1, Duration::from_secs(30)),
        "{}",
        d.text()
    );
    let text = d.text();
    assert!(
        text.contains("camera lost") && text.contains("signal: 9"),
        "{text}"
    );
    assert!(
        ended_within(&[first], &first_group, Duration::from_secs(1)),
        "the killed run is reaped, its cat ended: {:?}",
        first_group
            .iter()
            .map(|p| proc_state(*p))
            .collect::<Vec<_>>()
    );
    let runs = pids_in(&pids);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let second_group = group_members(runs[1]);
    assert!(!second_group.is_empty());
    // A stop: lookout exits at once, and the command's group with it, no zombie left.
    let t0 = Instant::now();
    kill("TERM", d.child.id());
    let gone = ended_within(&runs[1..], &second_group, Duration::from_secs(1));
    let took_group = t0.elapsed();
    let status = loop {
        if let Ok(Some(s)) = d.child.try_wait() {
            break Some(s);
        }
        if t0.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10)); // polling interval
    };
    let took = t0.elapsed();
    let text = d.text();
    assert!(
        gone,
        "the command's group still there {took_group:?} after SIGTERM: {:?}\n{text}",
        second_group
            .iter()
            .map(|p| (p, proc_state(*p)))
            .collect::<Vec<_>>()
    );
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{text}");
    assert!(
        took < Duration::from_millis(1500),
        "lookout took {took:?} to stop"
    );
}

/// The `spec = "exec:…"` lines of docs/cameras.md, as the configuration reads them.
fn documented_recipes() -> Vec<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cameras.md"))
            .unwrap();
    doc.lines()
        .filter(|l| l.starts_with("spec = \"exec:"))
        .map(|l| {
            let table: toml::Table = toml::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            table["spec"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn the_documented_recipes_deliver_frames_with_stand_ins_for_the_cameras() {
    let recipes = documented_recipes();
    assert!(recipes.len() >= 4, "{recipes:?}");
    let with_ffmpeg = ffmpeg_available();
    let dir = tempfile::tempdir().unwrap();
    // A stand-in `rpicam-vid`: the clip as MJPEG, or a test pattern as raw YUV 4:2:0 frames.
    script(
        dir.path(),
        "rpicam-vid",
        &format!(
            "case \"$*\" in\n  *yuv420*) exec ffmpeg -nostdin -loglevel error -f lavfi -i testsrc=size=640x480:rate=10 -t 10 -pix_fmt yuv420p -f rawvideo - ;;\n  *) exec cat '{}' ;;\nesac",
            clip().display()
        ),
    );
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut tried = 0;
    for recipe in &recipes {
        if recipe.contains("ffmpeg") && !with_ffmpeg {
            continue;
        }
        // An RTSP camera: a test pattern at 1280x720, 25 fps, in its place.
        let spec = match recipe.split_once("-rtsp_transport tcp -i ") {
            Some((head, tail)) => {
                let rest = tail.split_once(' ').map_or("", |(_, r)| r);
                format!("{head}-f lavfi -i testsrc=size=1280x720:rate=25 -t 10 {rest}")
            }
            None => recipe.clone(),
        };
        let out = Command::new(LOOKOUT)
            .args(["capture", &spec, "--frames", "20", "--json"])
            .env("PATH", &path)
            .env_remove("JOURNAL_STREAM")
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{spec}: {e}\n{}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(report["frames"], 20, "{spec}: {report}");
        let (w, h) = if recipe.contains("rtsp") {
            (640, 360)
        } else {
            (640, 480)
        };
        assert_eq!(
            (report["width"].as_u64(), report["height"].as_u64()),
            (Some(w), Some(h)),
            "{spec}"
        );
        let format = if recipe.contains("yuv4mpegpipe") {
            "YU12"
        } else {
            "MJPG"
        };
        assert_eq!(report["format"], format, "{spec}");
        tried += 1;
    }
    assert!(tried >= 1);
}
