//! Keeping systemd's watchdog fed through bounded waits that are not hangs, and keeping
//! long work (loading a model) from holding up a stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::PipelineError;
use crate::service::Notifier;

/// How often [`unless_stopped`] looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

/// Runs `f` (start-up work such as loading a model: seconds on a Pi) on its own thread,
/// `lookout-load`, while this thread watches `stop` and keeps the watchdog fed. Returns
/// `Ok(None)` as soon as `stop` is set — within 20 ms, however long `f` takes; `f`
/// is left to finish on its own (the process is about to exit).
///
/// # Errors
/// The thread cannot be started (named in the message), or `f` panicked.
pub fn unless_stopped<T: Send + 'static>(
    stop: &AtomicBool,
    notifier: Option<&Notifier>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<Option<T>, PipelineError> {
    unless_stopped_within(stop, Duration::ZERO, notifier, f)
}

/// As [`unless_stopped`], but once `stop` is set `f` still has `grace` to finish (work that
/// honours the same flag ends with what it has).
///
/// # Errors
/// The thread cannot be started (named in the message), or `f` panicked.
pub fn unless_stopped_within<T: Send + 'static>(
    stop: &AtomicBool,
    grace: Duration,
    notifier: Option<&Notifier>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<Option<T>, PipelineError> {
    let worker = std::thread::Builder::new()
        .name("lookout-load".into())
        .spawn(f)
        .map_err(|e| PipelineError::Thread(format!("cannot start lookout-load: {e}")))?;
    let period = notifier.and_then(|n| n.watchdog_period());
    let mut pinged = Instant::now();
    let mut deadline: Option<Instant> = None;
    while !worker.is_finished() {
        if stop.load(Ordering::Relaxed) {
            let end = *deadline.get_or_insert_with(|| Instant::now() + grace);
            if Instant::now() >= end {
                return Ok(None);
            }
        }
        if let (Some(n), Some(p)) = (notifier, period) {
            if pinged.elapsed() >= p / 2 {
                n.ping_watchdog();
                pinged = Instant::now();
            }
        }
        std::thread::sleep(STOP_POLL);
    }
    worker
        .join()
        .map(Some)
        .map_err(|_| PipelineError::Thread("lookout-load panicked (logged above)".into()))
}

/// Runs `f` while a helper thread pings systemd's watchdog at half its period: for bounded
/// waits that are not hangs (a reload loading a new model, the end of a run waiting for the
/// inference in flight), so systemd does not kill a healthy daemon. Without a watchdog it
/// just runs `f`.
pub fn keeping_watchdog_fed<T>(notifier: Option<&Notifier>, f: impl FnOnce() -> T) -> T {
    let Some((n, period)) = notifier.and_then(|n| n.watchdog_period().map(|p| (n, p))) else {
        return f();
    };
    let done = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let pinger = std::thread::Builder::new()
            .name("lookout-keepalive".into())
            .spawn_scoped(scope, || {
                let mut finished = done.0.lock().unwrap_or_else(|p| p.into_inner());
                while !*finished {
                    n.ping_watchdog();
                    finished = done
                        .1
                        .wait_timeout(finished, period / 2)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            });
        if let Err(e) = pinger {
            log::warn!("cannot start the watchdog keep-alive thread: {e}");
        }
        let out = f();
        *done.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        done.1.notify_all();
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keeping_watchdog_fed_pings_only_while_the_wait_lasts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        let n = Notifier::with_socket(&path, Some(Duration::from_millis(100))).unwrap();
        let mut buf = [0u8; 64];
        server.set_nonblocking(true).unwrap();
        assert!(server.recv(&mut buf).is_err(), "no ping before the wait");
        server.set_nonblocking(false).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        // The wait lasts until systemd (the test) has heard three pings, however slowly the
        // pinger gets scheduled.
        let out = keeping_watchdog_fed(Some(&n), || {
            for i in 0..3 {
                let len = loop {
                    match server.recv(&mut buf) {
                        // A receive with a timeout fails with EINTR when the process is paused.
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        r => break r,
                    }
                }
                .unwrap_or_else(|e| panic!("ping {i} within 30 s: {e}"));
                assert_eq!(&buf[..len], b"WATCHDOG=1");
            }
            7
        });
        assert_eq!(out, 7);
        // The pinger has been joined when the wait returns: drain what it sent, then silence.
        server.set_nonblocking(true).unwrap();
        while server.recv(&mut buf).is_ok() {}
        server.set_nonblocking(false).unwrap();
        server
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        assert!(
            server.recv(&mut buf).is_err(),
            "pings stop when the wait ends"
        );
        // Without systemd it only runs the closure.
        assert_eq!(keeping_watchdog_fed(None, || 3), 3);
    }

    #[test]
    fn unless_stopped_returns_the_result_or_leaves_at_a_stop() {
        let stop = AtomicBool::new(false);
        assert_eq!(unless_stopped(&stop, None, || 5).unwrap(), Some(5));
        // Work that would take an hour: a stop ends the wait at once.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        stop.store(true, Ordering::Relaxed);
        let t = Instant::now();
        let out = unless_stopped(&stop, None, move || {
            rx.recv_timeout(Duration::from_secs(3600))
        });
        assert!(out.unwrap().is_none());
        assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
        drop(tx);
    }
}
