//! The journal, for real: `lookout run` logs to a standalone systemd-journald (started by
//! `.ci/harness/journald-check.sh real`, which sets `JOURNAL_MODE=real`) and the stats and
//! track events are read back with `journalctl -o json`.
//!
//! Outside that harness (`JOURNAL_MODE` unset) the test checks the stderr form instead, so a
//! plain `cargo test` still exercises the same fields.
//!
//! The other half of living under systemd, the notify socket, is checked here too with the
//! form of `$NOTIFY_SOCKET` a plain path cannot stand in for: an abstract socket (`@name`).

use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};

fn write_config(dir: &std::path::Path, looped: bool) -> std::path::PathBuf {
    let p = dir.join("journal-test.toml");
    std::fs::write(
        &p,
        format!("[source]\nspec = \"demo\"\nfps = 40\nloop = {looped}\n\n[pipeline]\ndetect_every = 2\nstats_interval = 1.0\n"),
    )
    .unwrap();
    p
}

const STATS_FIELDS: [&str; 16] = [
    "CAMERA",
    "FPS",
    "DETECT_FPS",
    "MODEL_TIME_MS",
    "MODEL_TIME_P95_MS",
    "TRACK_TIME_MS",
    "FRAME_AGE_MS",
    "FRAME_AGE_P95_MS",
    "FRAMES_DROPPED",
    "FRAMES_CORRUPT",
    "DETECT_MOTION",
    "DETECT_UNCERTAIN",
    "DETECT_INTERVAL",
    "DETECT_IDLE",
    "TRACKS_LINES_LOST",
    "TRACKS",
];

/// The entries lookout logged so far: from the journal (`_PID=pid`) in real mode, else parsed
/// from its stderr lines (`lookout info: message KEY=value KEY=value`).
fn read_entries(
    real: bool,
    pid: u32,
    err_path: &std::path::Path,
) -> Vec<serde_json::Map<String, serde_json::Value>> {
    if real {
        let out = Command::new("journalctl")
            .args(["--no-pager", "-o", "json", &format!("_PID={pid}")])
            .output()
            .expect("journalctl");
        assert!(
            out.status.success(),
            "journalctl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    } else {
        // stderr form: "lookout info: message KEY=value KEY=value"
        std::fs::read_to_string(err_path)
            .unwrap()
            .lines()
            .filter(|l| l.contains("LOOKOUT_EVENT="))
            .map(|l| {
                let mut m = serde_json::Map::new();
                for kv in l.split(' ').filter(|w| w.contains('=')) {
                    let (k, v) = kv.split_once('=').unwrap();
                    if k.chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                    {
                        m.insert(k.into(), serde_json::Value::String(v.into()));
                    }
                }
                m
            })
            .collect()
    }
}

#[test]
fn stats_track_and_event_records_carry_their_fields() {
    let dir = std::env::temp_dir().join(format!("lookout-journal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = write_config(&dir, true);
    let real = std::env::var("JOURNAL_MODE").as_deref() == Ok("real");
    let err_path = dir.join("stderr.txt");
    let err_file = std::fs::File::create(&err_path).unwrap();
    let meta = err_file.metadata().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
    cmd.args(["run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(err_file);
    if real {
        // What systemd does: stderr is the journal stream, identified by device:inode.
        cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    } else {
        cmd.env_remove("JOURNAL_STREAM");
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    // The clip loops: the run goes on until what the test looks for has been logged (on a
    // machine loaded by other builds one inference can outlast the whole clip), then stops on
    // SIGTERM, as systemd stops it.
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(300) {
        std::thread::sleep(std::time::Duration::from_millis(500)); // polling interval
        let entries = read_entries(real, pid, &err_path);
        // Entries of event `ev` (with `field` > 0, when given).
        let count = |ev: &str, field: Option<&str>| {
            entries
                .iter()
                .filter(|e| {
                    e.get("LOOKOUT_EVENT").and_then(|v| v.as_str()) == Some(ev)
                        && field.is_none_or(|f| {
                            e.get(f)
                                .and_then(|v| v.as_str()?.parse::<f64>().ok())
                                .is_some_and(|v| v > 0.0)
                        })
                })
                .count()
        };
        // Two stats windows at least: with a fast model the first window can already carry
        // model time and both track events (seen in CI with the FP32 built-in model).
        if count("stats", None) >= 2
            && count("stats", Some("MODEL_TIME_MS")) > 0
            && count("track_start", None) > 0
            && count("track_end", None) > 0
            && count("event_start", None) > 0
        {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "lookout run ended early"
        );
    }
    let stopped = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "lookout run failed: {}",
        std::fs::read_to_string(&err_path).unwrap()
    );
    let entries = read_entries(real, pid, &err_path);

    let event = |e: &serde_json::Map<String, serde_json::Value>| {
        e.get("LOOKOUT_EVENT")
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    let stats: Vec<_> = entries
        .iter()
        .filter(|e| event(e).as_deref() == Some("stats"))
        .collect();
    assert!(
        stats.len() >= 2,
        "stats entries: {} of {} entries",
        stats.len(),
        entries.len()
    );
    for s in &stats {
        for f in STATS_FIELDS {
            let v = s
                .get(f)
                .and_then(|v| v.as_str())
                .unwrap_or_else(|| panic!("stats entry lacks {f}: {s:?}"));
            if f == "CAMERA" {
                // One camera (no `[[camera]]`): named by `[mqtt] camera`, `camera` by default.
                assert_eq!(v, "camera");
            } else {
                assert!(v.parse::<f64>().is_ok(), "{f}={v} is not a number");
            }
        }
        if real {
            let msg = s["MESSAGE"].as_str().unwrap();
            assert!(msg.contains("fps") && msg.contains("model"), "{msg}");
            assert_eq!(s["PRIORITY"].as_str(), Some("5"));
        }
    }
    // Any window, not the first: on a loaded machine the first inference (tract warming up)
    // can outlast the first 1 s window, which then reports no model time.
    let best = |f: &str| {
        stats
            .iter()
            .filter_map(|s| s[f].as_str()?.parse::<f64>().ok())
            .fold(0.0f64, f64::max)
    };
    let fps = best("FPS");
    assert!(fps > 5.0, "FPS {fps}");
    // The model time shows in a window, or (on a machine so loaded that the one inference of
    // the 5-s clip outlasts every window: seen in CI beside other builds) in the summary, which
    // the end of the file waits for.
    let summary_model_ms = entries
        .iter()
        .filter(|e| event(e).as_deref() == Some("summary"))
        .filter_map(|e| e.get("MODEL_TIME_MS")?.as_str()?.parse::<f64>().ok())
        .fold(0.0f64, f64::max);
    let model_ms = best("MODEL_TIME_MS").max(summary_model_ms);
    assert!(model_ms > 0.0, "MODEL_TIME_MS {model_ms}");
    for kind in ["track_start", "track_end"] {
        let ev: Vec<_> = entries
            .iter()
            .filter(|e| event(e).as_deref() == Some(kind))
            .collect();
        assert!(!ev.is_empty(), "no {kind} events");
        for e in ev {
            for f in ["CAMERA", "TRACK_ID", "LABEL", "SCORE", "BOX"] {
                assert!(e.contains_key(f), "{kind} lacks {f}: {e:?}");
            }
            let bx = e["BOX"].as_str().unwrap();
            assert_eq!(bx.split(',').count(), 4, "BOX={bx}");
        }
    }
    // Events: a start for an object worth telling about (a default label), and its end at the
    // latest when the run stops; an event's id is the same in its start and its end.
    let events_of = |kind: &str| -> Vec<_> {
        entries
            .iter()
            .filter(|e| event(e).as_deref() == Some(kind))
            .collect()
    };
    let (starts, ends) = (events_of("event_start"), events_of("event_end"));
    assert!(
        !starts.is_empty() && !ends.is_empty(),
        "event_start {} event_end {}",
        starts.len(),
        ends.len()
    );
    for e in starts.iter().chain(&ends) {
        for f in [
            "CAMERA", "EVENT_ID", "TRACK_ID", "LABEL", "SCORE", "BOX", "ZONES",
        ] {
            assert!(e.contains_key(f), "event lacks {f}: {e:?}");
        }
        let label = e["LABEL"].as_str().unwrap();
        assert!(
            lookout::events::DEFAULT_LABELS.contains(&label),
            "event of a {label}"
        );
        let score: f64 = e["SCORE"].as_str().unwrap().parse().unwrap();
        assert!(score >= 0.5, "event SCORE {score}");
    }
    for e in &ends {
        let secs: f64 = e["EVENT_SECONDS"].as_str().unwrap().parse().unwrap();
        assert!(secs >= 0.0);
        let id = e["EVENT_ID"].as_str().unwrap();
        assert!(
            starts.iter().any(|s| s["EVENT_ID"].as_str() == Some(id)),
            "event_end of event {id} without its start"
        );
    }
    let summary = entries
        .iter()
        .find(|e| event(e).as_deref() == Some("summary"))
        .expect("a summary");
    let n_events: usize = summary["EVENTS"].as_str().unwrap().parse().unwrap();
    assert_eq!(n_events, starts.len(), "EVENTS in the summary");
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `lookout run` on the demo clip with `$NOTIFY_SOCKET=@name` (an abstract socket),
/// `$WATCHDOG_USEC` set and `$WATCHDOG_PID` as given, and returns what it said up to
/// STOPPING=1.
fn notifications_on_an_abstract_socket(tag: &str, watchdog_pid: Option<&str>) -> Vec<String> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    use std::time::Duration;

    let id = format!("{}-{tag}", std::process::id());
    let dir = std::env::temp_dir().join(format!("lookout-notify-run-{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = write_config(&dir, false);
    let name = format!("lookout-test-run-notify-{id}");
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let server = UnixDatagram::bind_addr(&addr).unwrap();
    // Generous: the model loads first, and the machine may be busy with other builds.
    server
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
    cmd.args(["run", "--config"])
        .arg(&cfg)
        .env("NOTIFY_SOCKET", format!("@{name}"))
        .env("WATCHDOG_USEC", "20000")
        .env_remove("WATCHDOG_PID")
        .env_remove("JOURNAL_STREAM")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(pid) = watchdog_pid {
        cmd.env("WATCHDOG_PID", pid);
    }
    let mut child = cmd.spawn().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while got.last().map(String::as_str) != Some("STOPPING=1") {
        match server.recv(&mut buf) {
            Ok(k) => got.push(String::from_utf8_lossy(&buf[..k]).to_string()),
            // A receive with a timeout fails with EINTR when the process is paused and resumed.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no word from lookout run ({e}); so far: {got:?}");
            }
        }
    }
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(dir);
    got
}

/// `$NOTIFY_SOCKET=@name` (an abstract socket, as some systemd versions and containers set it)
/// hears READY=1, watchdog pings and STOPPING=1 from `lookout run`; with `$WATCHDOG_PID`
/// naming another process the watchdog is not lookout's: no WATCHDOG=1 although
/// `$WATCHDOG_USEC` is set.
#[test]
fn run_notifies_an_abstract_socket_and_honours_watchdog_pid() {
    let ours = notifications_on_an_abstract_socket("ours", None);
    assert!(ours[0].starts_with("READY=1\nSTATUS="), "{ours:?}");
    assert!(ours.iter().any(|m| m == "WATCHDOG=1"), "{ours:?}");
    let other = notifications_on_an_abstract_socket("other", Some("1"));
    assert!(other[0].starts_with("READY=1\nSTATUS="), "{other:?}");
    assert!(!other.iter().any(|m| m == "WATCHDOG=1"), "{other:?}");
}
