//! Living under systemd: signals (`signal-hook`) and the `sd_notify` protocol
//! (READY / WATCHDOG / RELOADING with MONOTONIC_USEC / STOPPING / STATUS) on `$NOTIFY_SOCKET`.
//!
//! The protocol's words and the watchdog's environment (`$WATCHDOG_USEC`, honoured only when
//! `$WATCHDOG_PID` is unset or this process) come from the `sd-notify` crate. The socket is
//! ours: one datagram socket for the whole run, speaking to a path or, for `@name`, to the
//! Linux abstract socket `name` (sd-notify 0.5's `notify` treats `@name` as a file name).
//!
//! Without systemd (`$NOTIFY_SOCKET` unset) every notification is a no-op.

use std::ffi::OsStr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sd_notify::NotifyState;
/// Flags set by signal handlers.
#[derive(Clone, Debug, Default)]
pub struct Signals {
    /// SIGINT or SIGTERM arrived: stop cleanly.
    pub stop: Arc<AtomicBool>,
    /// SIGHUP arrived: reload the configuration.
    pub reload: Arc<AtomicBool>,
}

impl Signals {
    /// Registers SIGINT/SIGTERM → `stop` and SIGHUP → `reload`. A second SIGINT/SIGTERM
    /// changes nothing: the stop under way ends within a second in every state, with its
    /// summary and a clean exit status (no "escape hatch" that would skip both).
    pub fn install() -> std::io::Result<Signals> {
        let s = Signals::default();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, s.stop.clone())?;
        }
        signal_hook::flag::register(signal_hook::consts::SIGHUP, s.reload.clone())?;
        Ok(s)
    }
}

/// Sends `sd_notify` messages and keeps the watchdog fed while frames flow.
#[derive(Debug)]
pub struct Notifier {
    socket: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
    last_ping: Mutex<Option<Instant>>,
    ready: AtomicBool,
}

/// The address `$NOTIFY_SOCKET` names: `@name` is the abstract socket `name`, anything else a
/// path.
pub fn notify_address(notify_socket: &OsStr) -> std::io::Result<SocketAddr> {
    match notify_socket.as_bytes().split_first() {
        Some((b'@', name)) => SocketAddr::from_abstract_name(name),
        _ => SocketAddr::from_pathname(notify_socket),
    }
}

impl Notifier {
    /// Speaks to `$NOTIFY_SOCKET` if systemd gave one; the watchdog period from
    /// `$WATCHDOG_USEC` when `$WATCHDOG_PID` is unset or names this process.
    pub fn from_env() -> Notifier {
        let socket = std::env::var_os("NOTIFY_SOCKET").and_then(|s| match Self::connect(&s) {
            Ok(socket) => Some(socket),
            Err(e) => {
                log::warn!(
                    "NOTIFY_SOCKET={}: {e}; systemd will not hear from lookout",
                    s.to_string_lossy()
                );
                None
            }
        });
        Notifier::new(socket, sd_notify::watchdog_enabled())
    }

    /// A notifier speaking to the datagram socket `notify_socket` (a path, or `@name` for an
    /// abstract socket, as in `$NOTIFY_SOCKET`) with a watchdog of `watchdog`, as systemd
    /// would set it up (tests stand in for systemd with this).
    pub fn with_socket(
        notify_socket: &std::path::Path,
        watchdog: Option<Duration>,
    ) -> std::io::Result<Notifier> {
        let socket = Self::connect(notify_socket.as_os_str())?;
        Ok(Notifier::new(Some(socket), watchdog))
    }

    fn connect(notify_socket: &OsStr) -> std::io::Result<(UnixDatagram, SocketAddr)> {
        Ok((UnixDatagram::unbound()?, notify_address(notify_socket)?))
    }

    fn new(socket: Option<(UnixDatagram, SocketAddr)>, watchdog: Option<Duration>) -> Notifier {
        Notifier {
            socket,
            watchdog: watchdog.filter(|d| !d.is_zero()),
            last_ping: Mutex::new(None),
            ready: AtomicBool::new(false),
        }
    }

    /// Whether systemd listens.
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// Sends one message: the states as `KEY=VALUE` lines.
    pub fn send(&self, states: &[NotifyState]) {
        let Some((sock, addr)) = &self.socket else {
            return;
        };
        let msg = states
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        if let Err(e) = sock.send_to_addr(msg.as_bytes(), addr) {
            log::debug!("sd_notify {msg:?}: {e}");
        }
    }

    /// `READY=1` once (model loaded and the first frame processed).
    pub fn ready(&self, status: &str) {
        if !self.ready.swap(true, Ordering::Relaxed) {
            self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
        }
    }

    /// Called for every processed frame: pings the watchdog at half its period, so a stalled
    /// camera or pipeline stops the pings and systemd restarts the service.
    pub fn frame_processed(&self) {
        let Some(period) = self.watchdog else { return };
        let mut last = self.last_ping.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|t| t.elapsed() >= period / 2) {
            *last = Some(Instant::now());
            self.send(&[NotifyState::Watchdog]);
        }
    }

    /// `RELOADING=1` with the monotonic time systemd wants.
    pub fn reloading(&self) {
        let now = crate::frame::monotonic_now().as_micros();
        let now = i128::try_from(now).unwrap_or(i128::MAX);
        self.send(&[NotifyState::Reloading, NotifyState::MonotonicUsec(now)]);
    }

    /// `READY=1` after a reload.
    pub fn reloaded(&self) {
        self.send(&[NotifyState::Ready]);
    }

    /// `STOPPING=1`.
    pub fn stopping(&self) {
        self.send(&[NotifyState::Stopping]);
    }

    /// The watchdog period systemd asked for, when it listens and set one.
    pub fn watchdog_period(&self) -> Option<Duration> {
        self.watchdog.filter(|_| self.enabled())
    }

    /// `WATCHDOG=1` now, whatever the rate limit of [`Notifier::frame_processed`].
    pub fn ping_watchdog(&self) {
        *self.last_ping.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.send(&[NotifyState::Watchdog]);
    }

    /// Free-form status shown by `systemctl status`.
    pub fn status(&self, s: &str) {
        self.send(&[NotifyState::Status(s)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What systemd would read next on a test's notify socket, tried again when the wait is
    /// interrupted: a receive with a timeout fails with `EINTR` when the process is stopped and
    /// continued or frozen and thawed (a paused container), however short the pause.
    fn recv_notification(server: &UnixDatagram, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match server.recv(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

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
        let n = Notifier::with_socket(&path, Some(Duration::from_secs(10))).unwrap();
        n.ready("running");
        n.ready("again"); // only once
        n.frame_processed();
        n.frame_processed(); // rate-limited
        n.stopping();
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        for _ in 0..3 {
            let k = recv_notification(&server, &mut buf).unwrap();
            got.push(String::from_utf8_lossy(&buf[..k]).to_string());
        }
        assert_eq!(got, ["READY=1\nSTATUS=running", "WATCHDOG=1", "STOPPING=1"]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn notifications_reach_an_abstract_socket() {
        let name = format!("lookout-test-notify-{}", std::process::id());
        let server =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let at = std::path::PathBuf::from(format!("@{name}"));
        let n = Notifier::with_socket(&at, None).unwrap();
        n.ready("running");
        n.reloading();
        let mut buf = [0u8; 256];
        let k = recv_notification(&server, &mut buf).unwrap();
        assert_eq!(&buf[..k], b"READY=1\nSTATUS=running");
        let k = recv_notification(&server, &mut buf).unwrap();
        let reloading = String::from_utf8_lossy(&buf[..k]).to_string();
        let usec = reloading.strip_prefix("RELOADING=1\nMONOTONIC_USEC=");
        assert!(
            usec.is_some_and(|u| u.parse::<u64>().is_ok()),
            "{reloading:?}"
        );
    }

    #[test]
    fn notify_socket_names_a_path_or_an_abstract_socket() {
        let path = notify_address(OsStr::new("/run/systemd/notify")).unwrap();
        assert_eq!(
            path.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let abs = notify_address(OsStr::new("@/org/freedesktop/systemd1/notify")).unwrap();
        assert_eq!(
            abs.as_abstract_name(),
            Some(&b"/org/freedesktop/systemd1/notify"[..])
        );
        assert!(abs.as_pathname().is_none());
    }
}
