//! Waits that end early when the run that owns them ends.
//!
//! Every wait lookout makes on behalf of a run — a recording's pacer sleeping until the next
//! frame is due, a camera's reopen back-off, a poll for a silent camera — watches an
//! [`Interrupt`]. The pipeline raises it when a run ends for any reason (a stop signal, a
//! reload, a failure elsewhere), so a stop is honoured within [`SLICE`] plus the time the
//! pipeline takes to notice, whatever the source was waiting for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a wait sleeps without looking at its interrupt.
pub const SLICE: Duration = Duration::from_millis(50);

/// A shared flag that ends waits early (cheap to clone; clones share the flag).
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// A new, lowered interrupt.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Ends every wait on this interrupt (and every later one, until [`Interrupt::lower`]).
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Lets waits wait again.
    pub fn lower(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    /// Whether it is raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Sleeps for `d`, or less when raised (checked every [`SLICE`]). True when it was raised.
    pub fn sleep(&self, d: Duration) -> bool {
        self.sleep_until(Instant::now() + d)
    }

    /// Sleeps until `deadline`, or less when raised. True when it was raised.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        loop {
            if self.is_raised() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(SLICE));
        }
    }
}

/// Options structs compare by their settings; an interrupt is not one.
impl PartialEq for Interrupt {
    fn eq(&self, _: &Interrupt) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowered_interrupt_sleeps_the_whole_time() {
        let i = Interrupt::new();
        let t = Instant::now();
        assert!(!i.sleep(Duration::from_millis(30)));
        assert!(t.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn raising_ends_a_long_sleep_within_a_slice() {
        let i = Interrupt::new();
        let j = i.clone();
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            j.raise();
        });
        let t = Instant::now();
        assert!(i.sleep(Duration::from_secs(3600)));
        // Generous bound for a loaded machine; an unwatched sleep would take an hour.
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        raiser.join().unwrap();
        assert!(i.sleep(Duration::from_secs(3600)), "stays raised");
        i.lower();
        assert!(!i.sleep(Duration::ZERO));
    }
}
