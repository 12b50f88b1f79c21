//! The exporter thread (`lookout-metrics`): serves `GET /metrics` and rewrites the text file,
//! both from the body the tracker thread last rendered ([`Shared`]); the tracker never waits
//! for it.
//!
//! One thread, one connection at a time, each bounded: the request head is read up to
//! [`MAX_HEAD`] bytes and the whole exchange must finish within [`DEADLINE`], then the
//! connection is closed (no keep-alive). A slow or silent client therefore holds the exporter
//! for at most that long, other scrapes wait in the kernel's accept queue, and nothing grows
//! with the number of clients. (A crate such as tiny_http starts a thread per open connection,
//! with no limit and no timeout, which a client that connects and says nothing holds forever.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags};

use crate::logging::RateLimit;

/// The media type of the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Longest request head read (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;

/// Longest a connection may take, from accept to the last byte of the response.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// How often a wait for a client looks at the stop flag: stopping the exporter (a reload, the
/// end of the daemon) waits at most about this long for a connection in progress.
const SLICE: Duration = Duration::from_millis(50);

/// What the tracker thread hands the exporter: the latest rendering, a counter of renderings
/// and a wake-up (an eventfd) for the text file.
#[derive(Debug)]
pub struct Shared {
    body: Mutex<Arc<str>>,
    generation: AtomicU64,
    wake: OwnedFd,
}

impl Shared {
    /// `body` as the first rendering.
    pub fn new(body: String) -> std::io::Result<Shared> {
        Ok(Shared {
            body: Mutex::new(body.into()),
            generation: AtomicU64::new(0),
            wake: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        })
    }

    /// A new rendering: replaces the body (a pointer swap under the lock) and wakes the
    /// exporter (one `write` to an eventfd, which never blocks).
    pub fn publish(&self, body: String) {
        *self.body.lock().unwrap_or_else(|p| p.into_inner()) = body.into();
        self.generation.fetch_add(1, Ordering::Release);
        self.poke();
    }

    /// The latest rendering.
    pub fn body(&self) -> Arc<str> {
        self.body.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn poke(&self) {
        // Only fails when the counter would overflow (2^64 - 2 pending wake-ups): then the
        // exporter is awake anyway.
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }

    fn drain(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.wake, &mut buf);
    }
}

/// A running exporter thread; dropping it stops the thread and waits for it (a connection in
/// progress is abandoned within about 50 ms).
#[derive(Debug)]
pub struct Exporter {
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    /// The address served, when there is a listener.
    pub address: Option<SocketAddr>,
}

impl Exporter {
    /// Starts the thread for `listener` and/or `textfile`.
    pub fn spawn(
        listener: Option<TcpListener>,
        textfile: Option<PathBuf>,
        shared: Arc<Shared>,
    ) -> std::io::Result<Exporter> {
        let address = match &listener {
            Some(l) => {
                l.set_nonblocking(true)?;
                Some(l.local_addr()?)
            }
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            listener,
            textfile,
            shared: shared.clone(),
            stop: stop.clone(),
            written: None,
            file_errors: RateLimit::per_minute(),
            started: Instant::now(),
        };
        let handle = std::thread::Builder::new()
            .name("lookout-metrics".into())
            .spawn(move || worker.run())?;
        Ok(Exporter {
            stop,
            shared,
            handle: Some(handle),
            address,
        })
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.shared.poke();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The thread's state.
struct Worker {
    listener: Option<TcpListener>,
    textfile: Option<PathBuf>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    /// The generation last written to the text file.
    written: Option<u64>,
    file_errors: RateLimit,
    started: Instant,
}

impl Worker {
    fn run(mut self) {
        loop {
            let (woken, incoming) = match self.wait() {
                Ok(w) => w,
                Err(e) => {
                    log::error!(LOOKOUT_EVENT = "metrics_error"; "metrics: cannot wait for scrapes: {e}; the exporter stops");
                    return;
                }
            };
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if woken {
                self.shared.drain();
                self.write_textfile();
            }
            if incoming {
                self.serve_pending();
            }
        }
    }

    /// Blocks until a wake-up or a connection: (woken, a connection is waiting).
    fn wait(&self) -> rustix::io::Result<(bool, bool)> {
        let mut fds = vec![PollFd::new(&self.shared.wake, PollFlags::IN)];
        if let Some(l) = &self.listener {
            fds.push(PollFd::from_borrowed_fd(l.as_fd(), PollFlags::IN));
        }
        loop {
            match poll(&mut fds, None) {
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e),
            }
        }
        let ready = |f: &PollFd| !f.revents().is_empty();
        Ok((ready(&fds[0]), fds.get(1).is_some_and(ready)))
    }

    /// The connections waiting now, one after another (at most 16 before the text file gets
    /// a turn).
    fn serve_pending(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        for _ in 0..16 {
            match listener.accept() {
                Ok((stream, _)) => {
                    let body = self.shared.body();
                    // A client that goes away or stalls is its own problem.
                    let _ = serve(stream, &body, &self.stop);
                }
                // WouldBlock: none left; anything else (a connection reset before accept,
                // out of descriptors): try again at the next readiness.
                Err(_) => return,
            }
        }
    }

    /// Rewrites the text file when there is a newer rendering; a failure is logged (once a
    /// minute at most) and retried at the next one.
    fn write_textfile(&mut self) {
        let Some(path) = &self.textfile else {
            return;
        };
        let generation = self.shared.generation.load(Ordering::Acquire);
        if self.written == Some(generation) {
            return;
        }
        match write_atomically(path, self.shared.body().as_bytes()) {
            Ok(()) => self.written = Some(generation),
            Err(e) => {
                if let Some(held) = self.file_errors.hit(self.started.elapsed()) {
                    log::warn!(
                        LOOKOUT_EVENT = "metrics_error", CONFIG_KEY = "metrics.textfile";
                        "metrics.textfile: cannot write {}: {e}{}{held}",
                        path.display(),
                        if held.count > 0 { "; " } else { "" }
                    );
                }
            }
        }
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// reader sees the old file or the new one, never half of one. The temporary file is created
/// anew (`O_EXCL`: never opened if something is in its place, so never a FIFO that blocks) and
/// made readable by all (node_exporter runs as another user).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(bytes)?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Ask {
    /// `GET /metrics` (`head`: `HEAD /metrics`, headers only).
    Metrics { head: bool },
    /// Another path.
    NotFound,
    /// Another method.
    NotAllowed,
    /// Not an HTTP request line.
    Bad,
}

/// Reads the request line of `head` (the bytes before the blank line).
pub fn parse_request(head: &[u8]) -> Ask {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else {
        return Ask::Bad;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Ask::Bad;
    };
    if !version.starts_with("HTTP/1.") || target.is_empty() {
        return Ask::Bad;
    }
    let path = target.split(['?', '#']).next().unwrap_or_default();
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => Ask::Metrics {
            head: method == "HEAD",
        },
        ("GET" | "HEAD", _) => Ask::NotFound,
        _ => Ask::NotAllowed,
    }
}

/// One connection: the request head within the deadline, one response, closed; abandoned
/// when `stop` is raised.
fn serve(mut stream: TcpStream, body: &str, stop: &AtomicBool) -> std::io::Result<()> {
    let deadline = Instant::now() + DEADLINE;
    stream.set_nonblocking(false)?;
    let head = Reader {
        stream: &mut stream,
        deadline,
        stop,
    }
    .head()?;
    let (code, reason, content_type, text, head_only) = match head.as_deref().map(parse_request) {
        None => (
            431,
            "Request Header Fields Too Large",
            "text/plain",
            "request head too large\n",
            false,
        ),
        Some(Ask::Metrics { head }) => (200, "OK", CONTENT_TYPE, body, head),
        Some(Ask::NotFound) => (
            404,
            "Not Found",
            "text/plain",
            "lookout serves /metrics only\n",
            false,
        ),
        Some(Ask::NotAllowed) => (
            405,
            "Method Not Allowed",
            "text/plain",
            "GET or HEAD only\n",
            false,
        ),
        Some(Ask::Bad) => (
            400,
            "Bad Request",
            "text/plain",
            "not an HTTP/1 request\n",
            false,
        ),
    };
    let response = respond(code, reason, content_type, text, head_only);
    stream.set_write_timeout(Some(remaining(deadline)?))?;
    stream.write_all(response.as_bytes())?;
    if code != 200 {
        // What the client sent beyond what was read would make the close a reset that can
        // destroy the response before the client reads it: read the rest first (bounded).
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut reader = Reader {
            stream: &mut stream,
            deadline,
            stop,
        };
        let mut sink = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match reader.read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(())
}

/// Reads from a client within a deadline, in slices that look at the stop flag.
struct Reader<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
    stop: &'a AtomicBool,
}

impl Reader<'_> {
    /// One `read`: waits for data until the deadline (`TimedOut`) or a stop (`Interrupted`).
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
        loop {
            if self.stop.load(Ordering::Acquire) {
                return Err(Interrupted.into());
            }
            let slice = remaining(self.deadline)?.min(SLICE);
            self.stream.set_read_timeout(Some(slice))?;
            match self.stream.read(buf) {
                Err(e) if matches!(e.kind(), WouldBlock | TimedOut | Interrupted) => continue,
                other => return other,
            }
        }
    }

    /// The request head (through the blank line), `None` when it is longer than
    /// [`MAX_HEAD`]; an error when the client closes, the deadline passes or a stop comes
    /// first.
    fn head(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let mut head = Vec::with_capacity(512);
        let mut buf = [0u8; 1024];
        loop {
            let n = self.read(&mut buf)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            head.extend_from_slice(&buf[..n]);
            if let Some(end) = find_blank_line(&head) {
                if end > MAX_HEAD {
                    return Ok(None);
                }
                head.truncate(end);
                return Ok(Some(head));
            }
            if head.len() > MAX_HEAD {
                return Ok(None);
            }
        }
    }
}

/// Where the head ends (`\r\n\r\n` or `\n\n`).
fn find_blank_line(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = b.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn remaining(deadline: Instant) -> std::io::Result<Duration> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

fn respond(code: u16, reason: &str, content_type: &str, body: &str, head_only: bool) -> String {
    let mut r = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if code == 405 {
        r.push_str("Allow: GET, HEAD\r\n");
    }
    r.push_str("\r\n");
    if !head_only {
        r.push_str(body);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_read_strictly() {
        let m = |h: &str| parse_request(h.as_bytes());
        assert_eq!(
            m("GET /metrics HTTP/1.1\r\nHost: x\r\n"),
            Ask::Metrics { head: false }
        );
        assert_eq!(m("GET /metrics?x=1 HTTP/1.0"), Ask::Metrics { head: false });
        assert_eq!(m("HEAD /metrics HTTP/1.1"), Ask::Metrics { head: true });
        assert_eq!(m("GET / HTTP/1.1"), Ask::NotFound);
        assert_eq!(m("GET /metrics/ HTTP/1.1"), Ask::NotFound);
        assert_eq!(m("POST /metrics HTTP/1.1"), Ask::NotAllowed);
        for bad in [
            "",
            "GET",
            "GET /metrics",
            "GET /metrics HTTP/2",
            "GET  /metrics HTTP/1.1",
            "\u{0}\u{1}",
            "GET /metrics HTTP/1.1 x",
        ] {
            assert_eq!(m(bad), Ask::Bad, "{bad:?}");
        }
        assert_eq!(parse_request(&[0xff, 0xfe, b' ']), Ask::Bad);
    }

    #[test]
    fn heads_end_at_the_blank_line() {
        assert_eq!(
            find_blank_line(b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest"),
            Some(20)
        );
        assert_eq!(find_blank_line(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(find_blank_line(b"GET / HTTP/1.1\r\n"), None);
    }

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_the_latest_body_and_nothing_else_and_a_silent_client_blocks_no_one_for_long() {
        let shared = Arc::new(Shared::new("a 1\n".into()).unwrap());
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ex = Exporter::spawn(Some(l), None, shared.clone()).unwrap();
        let addr = ex.address.unwrap();
        let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(
            r.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")),
            "{r}"
        );
        assert!(r.ends_with("\r\n\r\na 1\n"), "{r}");
        shared.publish("a 2\n".into());
        assert!(get(addr, "GET /metrics HTTP/1.0\r\n\r\n").ends_with("\r\n\r\na 2\n"));
        assert!(get(addr, "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(get(addr, "DELETE /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
        let huge = format!(
            "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
            "y".repeat(MAX_HEAD)
        );
        assert!(get(addr, &huge).starts_with("HTTP/1.1 431 "));
        // A client that connects and says nothing is dropped at the deadline; the next scrape
        // is answered after it, not never.
        let _silent = TcpStream::connect(addr).unwrap();
        let t0 = Instant::now();
        assert!(get(addr, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 "));
        assert!(t0.elapsed() < DEADLINE + Duration::from_secs(3));
        // Stopping does not wait for a silent client's deadline.
        let _silent = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(100)); // let the exporter take it
        let t0 = Instant::now();
        drop(ex);
        assert!(
            t0.elapsed() < DEADLINE / 2,
            "stopping took {:?}",
            t0.elapsed()
        );
        assert!(
            TcpStream::connect(addr).is_err(),
            "the listener is closed with the exporter"
        );
    }

    #[test]
    fn the_text_file_is_replaced_whole_and_readable_by_others() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lookout.prom");
        let shared = Arc::new(Shared::new("a 1\n".into()).unwrap());
        let ex = Exporter::spawn(None, Some(path.clone()), shared.clone()).unwrap();
        shared.publish("a 2\n".into());
        let t0 = Instant::now();
        while std::fs::read_to_string(&path).ok().as_deref() != Some("a 2\n") {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "text file not written"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        drop(ex);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["lookout.prom"], "no temporary file left behind");
    }
}
