//! Living under systemd: signals (`signal-hook`) and the `sd_notify` protocol
//! (READY / WATCHDOG / RELOADING / STOPPING / STATUS), spoken directly on `$NOTIFY_SOCKET`.
//!
//! Without systemd (`$NOTIFY_SOCKET` unset) every notification is a no-op.

use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Flags set by signal handlers.
#[derive(Clone, Debug, Default)]
pub struct Signals {
    /// SIGINT or SIGTERM arrived: stop cleanly.
    pub stop: Arc<AtomicBool>,
    /// SIGHUP arrived: reload the configuration.
    pub reload: Arc<AtomicBool>,
}

impl Signals {
    /// Registers SIGINT/SIGTERM → `stop` and SIGHUP → `reload`. A second SIGINT/SIGTERM while
    /// stopping terminates at once (the conventional escape hatch).
    pub fn install() -> std::io::Result<Signals> {
        let s = Signals::default();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register_conditional_shutdown(sig, 1, s.stop.clone())?;
            signal_hook::flag::register(sig, s.stop.clone())?;
        }
        signal_hook::flag::register(signal_hook::consts::SIGHUP, s.reload.clone())?;
        Ok(s)
    }
}

/// Sends `sd_notify` messages and keeps the watchdog fed while frames flow.
#[derive(Debug)]
pub struct Notifier {
    socket: Option<(UnixDatagram, std::path::PathBuf)>,
    watchdog: Option<Duration>,
    last_ping: Mutex<Option<Instant>>,
    ready: AtomicBool,
}

impl Notifier {
    /// Connects to `$NOTIFY_SOCKET` if systemd gave one; reads `$WATCHDOG_USEC`.
    pub fn from_env() -> Notifier {
        let path = std::env::var_os("NOTIFY_SOCKET").map(std::path::PathBuf::from);
        // Abstract sockets ("@name") are not supported by std; systemd uses a path by default.
        let socket = path
            .filter(|p| !p.to_string_lossy().starts_with('@'))
            .and_then(|p| UnixDatagram::unbound().ok().map(|s| (s, p)));
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|us| *us > 0)
            .map(Duration::from_micros);
        Notifier {
            socket,
            watchdog,
            last_ping: Mutex::new(None),
            ready: AtomicBool::new(false),
        }
    }

    /// A notifier speaking to the datagram socket at `path` with a watchdog of `watchdog`,
    /// as systemd would set it up (tests stand in for systemd with this).
    pub fn with_socket(
        path: &std::path::Path,
        watchdog: Option<Duration>,
    ) -> std::io::Result<Notifier> {
        Ok(Notifier {
            socket: Some((UnixDatagram::unbound()?, path.to_path_buf())),
            watchdog,
            last_ping: Mutex::new(None),
            ready: AtomicBool::new(false),
        })
    }

    /// Whether systemd listens.
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// Sends one raw message (`KEY=VALUE` lines).
    pub fn send(&self, msg: &str) {
        if let Some((sock, path)) = &self.socket {
            if let Err(e) = sock.send_to(msg.as_bytes(), path) {
                log::debug!("sd_notify {msg:?}: {e}");
            }
        }
    }

    /// `READY=1` once (model loaded and the first frame processed).
    pub fn ready(&self, status: &str) {
        if !self.ready.swap(true, Ordering::Relaxed) {
            self.send(&format!("READY=1\nSTATUS={status}"));
        }
    }

    /// Called for every processed frame: pings the watchdog at half its period, so a stalled
    /// camera or pipeline stops the pings and systemd restarts the service.
    pub fn frame_processed(&self) {
        let Some(period) = self.watchdog else { return };
        let mut last = self.last_ping.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|t| t.elapsed() >= period / 2) {
            *last = Some(Instant::now());
            self.send("WATCHDOG=1");
        }
    }

    /// `RELOADING=1` with the monotonic time systemd wants.
    pub fn reloading(&self) {
        let now = crate::frame::monotonic_now().as_micros();
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={now}"));
    }

    /// `READY=1` after a reload.
    pub fn reloaded(&self) {
        self.send("READY=1");
    }

    /// `STOPPING=1`.
    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }

    /// A keep-alive, inactive until [`KeepAlive::arm`]: from then on until it is dropped, a
    /// helper thread pings the watchdog at half its period. For bounded waits that are not a
    /// hang — a reload loading a new model, the end of a run waiting for the inference in
    /// flight (seconds on a slow board) — so systemd does not kill a healthy daemon.
    pub fn keep_alive(self: &Arc<Self>) -> KeepAlive {
        KeepAlive {
            notifier: self.clone(),
            state: Arc::new((Mutex::new(KeepState::Idle), Condvar::new())),
            thread: Mutex::new(None),
        }
    }

    /// Free-form status shown by `systemctl status`.
    pub fn status(&self, s: &str) {
        self.send(&format!("STATUS={s}"));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeepState {
    Idle,
    Armed,
    Done,
}

/// See [`Notifier::keep_alive`]. Dropping it stops the pings and joins the helper thread.
#[derive(Debug)]
pub struct KeepAlive {
    notifier: Arc<Notifier>,
    state: Arc<(Mutex<KeepState>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl KeepAlive {
    /// Starts pinging (once; later calls do nothing). A no-op without a systemd watchdog.
    pub fn arm(&self) {
        let Some(period) = self.notifier.watchdog.filter(|_| self.notifier.enabled()) else {
            return;
        };
        {
            let mut st = self.state.0.lock().unwrap_or_else(|p| p.into_inner());
            if *st != KeepState::Idle {
                return;
            }
            *st = KeepState::Armed;
        }
        let (notifier, state) = (self.notifier.clone(), self.state.clone());
        let spawned = std::thread::Builder::new()
            .name("lookout-keepalive".into())
            .spawn(move || {
                let (lock, cv) = &*state;
                let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
                while *st == KeepState::Armed {
                    notifier.send("WATCHDOG=1");
                    st = cv
                        .wait_timeout(st, period / 2)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            });
        match spawned {
            Ok(h) => *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(h),
            Err(e) => log::warn!("cannot start the watchdog keep-alive thread: {e}"),
        }
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        *self.state.0.lock().unwrap_or_else(|p| p.into_inner()) = KeepState::Done;
        self.state.1.notify_all();
        if let Some(h) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_reach_the_socket() {
        let dir = std::env::temp_dir().join(format!("lookout-notify-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let n = Notifier {
            socket: Some((UnixDatagram::unbound().unwrap(), path.clone())),
            watchdog: Some(Duration::from_secs(10)),
            last_ping: Mutex::new(None),
            ready: AtomicBool::new(false),
        };
        n.ready("running");
        n.ready("again"); // only once
        n.frame_processed();
        n.frame_processed(); // rate-limited
        n.stopping();
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        for _ in 0..3 {
            let k = server.recv(&mut buf).unwrap();
            got.push(String::from_utf8_lossy(&buf[..k]).to_string());
        }
        assert_eq!(got, ["READY=1\nSTATUS=running", "WATCHDOG=1", "STOPPING=1"]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn keep_alive_pings_only_while_armed() {
        let dir = std::env::temp_dir().join(format!("lookout-keep-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let n = Arc::new(Notifier {
            socket: Some((UnixDatagram::unbound().unwrap(), path.clone())),
            watchdog: Some(Duration::from_millis(100)),
            last_ping: Mutex::new(None),
            ready: AtomicBool::new(false),
        });
        let mut buf = [0u8; 64];
        let k = n.keep_alive();
        assert!(server.recv(&mut buf).is_err(), "no ping before arm()");
        k.arm();
        k.arm(); // idempotent
        for _ in 0..3 {
            let len = server.recv(&mut buf).unwrap();
            assert_eq!(&buf[..len], b"WATCHDOG=1");
        }
        drop(k);
        while server.recv(&mut buf).is_ok() {} // drain what was in flight
        assert!(server.recv(&mut buf).is_err(), "pings stop when dropped");
        let _ = std::fs::remove_dir_all(dir);
    }
}
