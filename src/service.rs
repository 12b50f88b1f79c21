//! Living under systemd: signals (`signal-hook`) and the `sd_notify` protocol
//! (READY / WATCHDOG / RELOADING / STOPPING / STATUS), spoken directly on `$NOTIFY_SOCKET`.
//!
//! Without systemd (`$NOTIFY_SOCKET` unset) every notification is a no-op.

use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
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

    /// The watchdog period systemd asked for, when it listens and set one.
    pub fn watchdog_period(&self) -> Option<Duration> {
        self.watchdog.filter(|_| self.enabled())
    }

    /// `WATCHDOG=1` now, whatever the rate limit of [`Notifier::frame_processed`].
    pub fn ping_watchdog(&self) {
        *self.last_ping.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.send("WATCHDOG=1");
    }

    /// Free-form status shown by `systemctl status`.
    pub fn status(&self, s: &str) {
        self.send(&format!("STATUS={s}"));
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
}
