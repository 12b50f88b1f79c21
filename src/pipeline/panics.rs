//! The panic policy of the pipeline threads: a panic in capture, tracking or detection is
//! caught where the thread starts ([`guard`]), logged once with the thread's name and the
//! frame it was working on, and ends the run with [`PipelineError::Panicked`]: the other
//! threads are told to stop (the hub's `shutdown`), the run returns at once, and `lookout run`
//! exits with status 1 so systemd restarts it. Never a half-alive daemon whose tracker waits
//! forever for a capture thread that is gone.
//!
//! [`install_panic_hook`] (called by `main`) keeps the default hook from printing a caught
//! pipeline panic a second time, and sends any other thread's panic through the logger.
//!
//! **Test-only hook**: in debug builds (`cfg(debug_assertions)`, what `cargo test` runs), the
//! environment variable `LOOKOUT_TEST_PANIC=capture|tracking|detection` makes that thread
//! panic once it reaches frame [`INJECT_AT`] (`tests/faults.rs`). Release builds do not read it.
//!
//! [`PipelineError::Panicked`]: super::error::PipelineError::Panicked

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::error::ThreadPanic;
use super::hub::Hub;

thread_local! {
    /// The frame this thread is working on, for the panic's context.
    static FRAME: Cell<Option<u64>> = const { Cell::new(None) };
    /// This thread runs inside [`guard`]: its panics are caught and logged there.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Where this thread's last panic happened (left by the hook for [`guard`]).
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Notes the frame this thread is working on (the context of a panic).
pub(super) fn working_on(seq: u64) {
    FRAME.with(|f| f.set(Some(seq)));
}

/// Runs `body` (a pipeline thread's loop) catching a panic, which is logged once (thread,
/// frame, message, location) and returned.
pub(super) fn guard<T>(body: impl FnOnce() -> T) -> Result<T, ThreadPanic> {
    GUARDED.with(|g| g.set(true));
    FRAME.with(|f| f.set(None));
    // The thread's state is abandoned after a panic (the run ends), so unwind safety is moot.
    let result = catch_unwind(AssertUnwindSafe(body));
    GUARDED.with(|g| g.set(false));
    result.map_err(|payload| {
        let p = ThreadPanic {
            thread: std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_string(),
            frame: FRAME.with(Cell::get),
            message: message_of(payload.as_ref()),
            location: LOCATION.with(|l| l.borrow_mut().take()),
        };
        match p.frame {
            Some(seq) => log::error!(
                LOOKOUT_EVENT = "panic", THREAD = p.thread.as_str(), FRAME = seq;
                "{p}; ending the run"
            ),
            None => log::error!(
                LOOKOUT_EVENT = "panic", THREAD = p.thread.as_str();
                "{p}; ending the run"
            ),
        }
        p
    })
}

/// Records a caught panic in the hub (the first one wins) and tells every thread to stop.
pub(super) fn stop_everything(hub: &Hub, p: ThreadPanic) {
    let mut g = hub.lock();
    g.panicked.get_or_insert(p);
    g.shutdown = true;
    drop(g);
    hub.cv.notify_all();
}

fn message_of(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// Installs the process's panic hook: a pipeline thread's panic (caught by `guard`, which
/// logs it) only leaves its location for the log line; any other thread's panic is logged
/// through the logger (journal or stderr) with the thread's name and location.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        if GUARDED.with(Cell::get) {
            LOCATION.with(|l| *l.borrow_mut() = location);
            return;
        }
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        log::error!(
            LOOKOUT_EVENT = "panic", THREAD = name;
            "thread {name} panicked at {}: {}",
            location.as_deref().unwrap_or("an unknown place"),
            message_of(info.payload())
        );
    }));
}

/// The frame at which `LOOKOUT_TEST_PANIC` strikes (debug builds only).
pub const INJECT_AT: u64 = 3;

/// Test-only fault injection (debug builds): panics if `LOOKOUT_TEST_PANIC` names `thread`
/// (`capture`, `tracking`, `detection`) and `seq` ≥ [`INJECT_AT`].
#[cfg(debug_assertions)]
#[allow(clippy::panic)] // the one deliberate panic: a test-only hook, absent from release builds
#[track_caller]
pub(super) fn injected_panic(thread: &str, seq: u64) {
    static WANTED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let wanted = WANTED.get_or_init(|| std::env::var("LOOKOUT_TEST_PANIC").ok());
    if seq >= INJECT_AT && wanted.as_deref() == Some(thread) {
        std::panic::panic_any(format!(
            "LOOKOUT_TEST_PANIC={thread}: injected panic at frame {seq}"
        ));
    }
}

/// Release builds: no test hook.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub(super) fn injected_panic(_thread: &str, _seq: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_with_the_thread_frame_and_message_and_stops_everyone() {
        let hub = Hub::default();
        let r = std::thread::Builder::new()
            .name("lookout-test".into())
            .spawn(|| {
                guard(|| {
                    working_on(7);
                    let v: Vec<u8> = Vec::new();
                    v[1] // index out of bounds
                })
            })
            .unwrap()
            .join()
            .expect("the panic was caught inside the thread");
        let p = r.unwrap_err();
        assert_eq!(p.thread, "lookout-test");
        assert_eq!(p.frame, Some(7));
        assert!(p.message.contains("index out of bounds"), "{p}");
        assert!(
            p.to_string()
                .starts_with("pipeline thread lookout-test panicked at frame 7: "),
            "{p}"
        );
        stop_everything(&hub, p.clone());
        stop_everything(
            &hub,
            ThreadPanic {
                thread: "second".into(),
                ..p.clone()
            },
        );
        let g = hub.lock();
        assert!(g.shutdown);
        assert_eq!(g.panicked.as_ref(), Some(&p), "the first panic is kept");
    }

    #[test]
    fn a_body_that_does_not_panic_returns_its_value() {
        assert_eq!(guard(|| 5), Ok(5));
    }
}
