//! Prometheus metrics, for real: `lookout run` on the bundled clip with `[metrics]` on, scraped
//! over loopback with a raw TCP connection (status, content type, counters that grow between
//! windows), the body linted by `promtool check metrics` (Debian package `prometheus`), the
//! node_exporter text file, reloads that keep or move the server, and a port already taken.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Prometheus text format's media type, as lookout sends it.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Long enough for a debug build to load the model on a machine busy with other builds.
const PATIENCE: Duration = Duration::from_secs(300);

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_config(path: &Path, port: u16, textfile: &Path) {
    std::fs::write(
        path,
        format!(
            "[source]\nspec = \"demo\"\nfps = 40\nloop = true\n\n[pipeline]\nstats_interval = 0.5\n\n\
             [metrics]\nenabled = true\nlisten = \"127.0.0.1:{port}\"\ntextfile = \"{}\"\n",
            textfile.display()
        ),
    )
    .unwrap();
}

/// A `lookout run` that is stopped (SIGTERM) when dropped, its stderr in a file.
struct Daemon {
    child: Child,
    stderr: PathBuf,
}

impl Daemon {
    fn start(config: &Path, stderr: PathBuf) -> Daemon {
        let child = Command::new(env!("CARGO_BIN_EXE_lookout"))
            .args(["run", "--config"])
            .arg(config)
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Daemon { child, stderr }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("lookout run ended ({status}):\n{}", self.log());
        }
    }

    /// SIGTERM, then the exit status must be 0.
    fn stop(mut self) -> String {
        self.signal("-TERM");
        let status = self.child.wait().unwrap();
        let log = self.log();
        assert!(status.success(), "lookout run: {status}\n{log}");
        log
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One HTTP response: status code, headers (lower-case names), body.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `GET path` over a fresh connection; `None` when nothing answers.
fn get(addr: SocketAddr, path: &str) -> Option<Response> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Response {
        status,
        headers,
        body: body.to_string(),
    })
}

/// The value of the sample line `name` (a metric name with its labels, if any).
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

const FRAMES: &str = "lookout_frames_processed_total";

/// Scrapes until the processed-frames counter is above `above`; the last response.
fn scrape_until_above(addr: SocketAddr, above: f64, daemon: &mut Daemon) -> Response {
    let t0 = Instant::now();
    loop {
        if let Some(r) = get(addr, "/metrics") {
            if sample(&r.body, FRAMES).is_some_and(|v| v > above) {
                return r;
            }
        }
        daemon.assert_running();
        assert!(
            t0.elapsed() < PATIENCE,
            "{FRAMES} did not pass {above} at {addr} within {PATIENCE:?}:\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(200)); // polling interval
    }
}

/// `promtool check metrics` on `body`; `None` (and a loud note) when promtool is missing.
fn promtool(body: &str) -> Option<(bool, String)> {
    let spawned = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
            );
            eprintln!("!!! promtool not runnable ({e}): the /metrics lint is SKIPPED.");
            eprintln!(
                "!!! Install it with `TEST_TOOLS=1 scripts/setup.sh` (Debian package prometheus)."
            );
            eprintln!(
                "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
            );
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success() && said.trim().is_empty(), said))
}

/// Every family served is in docs/metrics.md's table and every documented one is served
/// (the CPU temperature only where the machine has thermal zone 0).
fn assert_served_is_documented(body: &str) {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    let documented: std::collections::BTreeSet<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split(['`', '{']).next().unwrap())
        .collect();
    let served: std::collections::BTreeSet<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "served but not in docs/metrics.md: {undocumented:?}"
    );
    let thermal = Path::new("/sys/class/thermal/thermal_zone0/temp").exists();
    let missing: Vec<_> = documented
        .difference(&served)
        .filter(|n| thermal || **n != "lookout_cpu_temperature_celsius")
        .collect();
    assert!(
        missing.is_empty(),
        "in docs/metrics.md but not served: {missing:?}"
    );
}

#[test]
fn metrics_are_served_grow_pass_promtool_and_survive_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lookout.toml");
    let textfile = dir.path().join("lookout.prom");
    let port = free_port();
    write_config(&config, port, &textfile);
    let mut daemon = Daemon::start(&config, dir.path().join("stderr.txt"));
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();

    // Two scrapes: 200, the text format's media type, a counter that grows.
    let first = scrape_until_above(addr, 0.0, &mut daemon);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-type"), Some(CONTENT_TYPE));
    let frames = sample(&first.body, FRAMES).unwrap();
    let second = scrape_until_above(addr, frames, &mut daemon);
    assert_eq!(second.status, 200);
    assert_eq!(second.header("content-type"), Some(CONTENT_TYPE));
    let body = second.body;
    assert!(body.ends_with('\n'));
    for name in [
        "lookout_frames_captured_total",
        "lookout_frames_dropped_total",
        "lookout_detections_total{cause=\"interval\"}",
        "lookout_model_duration_seconds_count",
        "lookout_frame_age_seconds_bucket{le=\"+Inf\"}",
        "lookout_tracks_active",
        "lookout_mqtt_messages_dropped_total",
        "process_resident_memory_bytes",
    ] {
        assert!(
            sample(&body, name).is_some(),
            "no sample {name} in:\n{body}"
        );
    }
    assert!(
        sample(&body, "process_resident_memory_bytes").unwrap() > 1e6,
        "{body}"
    );
    assert_served_is_documented(&body);
    if let Some((ok, said)) = promtool(&body) {
        assert!(ok, "promtool check metrics:\n{said}\n--- body:\n{body}");
    }
    // Another path is not found; the text file holds a whole rendering.
    assert_eq!(get(addr, "/").map(|r| r.status), Some(404));
    let file = std::fs::read_to_string(&textfile).unwrap();
    assert!(sample(&file, FRAMES).is_some_and(|v| v > 0.0), "{file}");
    assert!(file.ends_with('\n'));

    // Reload, nothing changed: the same server, the counters go on.
    let before = sample(&get(addr, "/metrics").unwrap().body, FRAMES).unwrap();
    daemon.signal("-HUP");
    let after = scrape_until_above(addr, before, &mut daemon);
    assert!(sample(&after.body, FRAMES).unwrap() > before);

    // Reload with another port: the old one closes, the new one serves the same counters.
    let before = sample(&after.body, FRAMES).unwrap();
    let port2 = free_port();
    write_config(&config, port2, &textfile);
    daemon.signal("-HUP");
    let addr2: SocketAddr = format!("127.0.0.1:{port2}").parse().unwrap();
    let moved = scrape_until_above(addr2, before, &mut daemon);
    assert_eq!(moved.status, 200);
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err(),
        "the old port still answers after the reload"
    );
    let log = daemon.stop();
    assert!(
        log.contains(&format!("serving /metrics on 127.0.0.1:{port2}")),
        "{log}"
    );
}

#[test]
fn a_port_already_taken_is_one_error_naming_the_key_and_detection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let config = dir.path().join("lookout.toml");
    // The clip once, unpaced: the run ends by itself, with status 0.
    std::fs::write(
        &config,
        format!(
            "[source]\nspec = \"demo\"\nrealtime = false\n\n[metrics]\nenabled = true\nlisten = \"127.0.0.1:{port}\"\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lookout"))
        .args(["run", "--config"])
        .arg(&config)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cannot listen"))
        .collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains(&format!("metrics.listen = \"127.0.0.1:{port}\"")),
        "{}",
        errors[0]
    );
    assert!(log.contains("summary (end of source)"), "{log}");
    drop(taken);
}
