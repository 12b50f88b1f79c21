//! Where log lines go: the systemd journal (structured fields) when stderr is connected to it,
//! else stderr in a readable `level message KEY=value…` form.
//!
//! Structured key-values of `log` records (`log::info!(FPS = 9.8; "…")`) become journal fields
//! verbatim, so their names are an interface (see ARCHITECTURE.md).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use log::kv::{Key, Value, VisitSource};
use log::{Level, LevelFilter, Log, Metadata, Record};

/// Reads `LOOKOUT_LOG` (error|warn|info|debug|trace, default info).
fn level_from_env() -> LevelFilter {
    std::env::var("LOOKOUT_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LevelFilter::Info)
}

/// Installs the global logger: journal when `JOURNAL_STREAM` says stderr is the journal,
/// else stderr. Safe to call more than once (later calls do nothing).
pub fn init() {
    let level = level_from_env();
    let stderr = StderrLog { level };
    if !systemd_journal_logger::connected_to_journal() {
        if log::set_boxed_logger(Box::new(stderr)).is_ok() {
            log::set_max_level(level);
        }
        return;
    }
    // stderr is the journal's stream, but its native socket may not answer (journald not
    // running yet, a sandbox without /run/systemd/journal/socket): then every record goes to
    // stderr, which the journal (or whoever holds the stream) still receives, and that is said
    // once.
    let (journal, unavailable) = match systemd_journal_logger::JournalLog::new() {
        Ok(j) => (Some(j.with_syslog_identifier("lookout".to_string())), None),
        Err(e) => (None, Some(e)),
    };
    let logger = JournalLog {
        journal,
        stderr,
        fell_back: AtomicBool::new(unavailable.is_some()),
    };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(level);
        if let Some(e) = unavailable {
            log::warn!(
                LOOKOUT_EVENT = "journal_unavailable";
                "cannot log to the journal socket ({e}): logging to stderr instead"
            );
        }
    }
}

/// The journal's native protocol (structured fields), falling back record by record to the
/// readable stderr form when the journal socket cannot take a record (journald stopped or
/// restarting, the socket absent from a sandbox): a line is never silently lost, and the
/// journal is used again as soon as it answers.
struct JournalLog {
    /// `None`: the socket did not answer at start; everything goes to stderr.
    journal: Option<systemd_journal_logger::JournalLog>,
    stderr: StderrLog,
    /// The fallback has been announced (once per outage).
    fell_back: AtomicBool,
}

impl Log for JournalLog {
    fn enabled(&self, metadata: &Metadata) -> bool {
        self.stderr.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let Some(journal) = &self.journal else {
            self.stderr.log(record);
            return;
        };
        match journal.journal_send(record) {
            Ok(()) => {
                if self.fell_back.swap(false, Ordering::Relaxed) {
                    self.stderr.line(
                        "info",
                        &format_args!(
                            "the journal socket answers again: structured logging resumed"
                        ),
                        "",
                    );
                }
            }
            Err(e) => {
                if !self.fell_back.swap(true, Ordering::Relaxed) {
                    self.stderr.line(
                        "warn",
                        &format_args!(
                            "cannot log to the journal socket ({e}): logging to stderr instead"
                        ),
                        " LOOKOUT_EVENT=journal_unavailable",
                    );
                }
                self.stderr.log(record);
            }
        }
    }

    fn flush(&self) {
        self.stderr.flush();
    }
}

/// A readable stderr logger that appends structured fields as `KEY=value`.
struct StderrLog {
    level: LevelFilter,
}

struct Fields(String);

impl<'kvs> VisitSource<'kvs> for Fields {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
        self.0
            .push_str(&format!(" {}={}", key.as_str().to_ascii_uppercase(), value));
        Ok(())
    }
}

impl StderrLog {
    /// Writes one `lookout LEVEL: message FIELDS` line.
    fn line(&self, tag: &str, message: &std::fmt::Arguments, fields: &str) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "lookout {tag}: {message}{fields}");
    }
}

impl Log for StderrLog {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut fields = Fields(String::new());
        let _ = record.key_values().visit(&mut fields);
        let tag = match record.level() {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        };
        self.line(tag, record.args(), &fields.0);
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

/// Holds back a warning that can repeat on every frame (a bad frame, a failed detection, a
/// full disk): the first occurrence is logged, then at most one line per `period`, which says
/// how many were held back in between.
///
/// Time is whatever monotonic clock the caller goes by (`now` as a [`Duration`]), so tests
/// drive it with a fake one.
#[derive(Clone, Debug)]
pub struct RateLimit {
    period: Duration,
    last_logged: Option<Duration>,
    held: u64,
}

/// Occurrences a [`RateLimit`] held back since the line it last let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// How many.
    pub count: u64,
    /// Since how long ago (the line last let through).
    pub over: Duration,
}

impl std::fmt::Display for Held {
    /// `37 more like it in the last 60 s` (empty when nothing was held back).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.count > 0 {
            write!(
                f,
                "{} more like it in the last {:.0} s",
                self.count,
                self.over.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

impl RateLimit {
    /// One line a minute.
    pub const MINUTE: Duration = Duration::from_secs(60);

    /// At most one line per `period`.
    pub fn new(period: Duration) -> RateLimit {
        RateLimit {
            period,
            last_logged: None,
            held: 0,
        }
    }

    /// At most one line a minute.
    pub fn per_minute() -> RateLimit {
        RateLimit::new(Self::MINUTE)
    }

    /// One occurrence at `now`: `Some(held)` when it is to be logged (mentioning `held`, the
    /// occurrences held back since the last logged one; zero the first time), `None` when it is
    /// held back (and counted).
    pub fn hit(&mut self, now: Duration) -> Option<Held> {
        match self.last_logged {
            Some(t) if now.saturating_sub(t) < self.period => {
                self.held += 1;
                None
            }
            last => Some(self.let_through(now, last)),
        }
    }

    /// The occurrences held back, once a `period` has passed since the last logged line (to
    /// log a summary when the fault stopped repeating); `None` when there is nothing to say
    /// yet. Counts as a logged line.
    pub fn overdue(&mut self, now: Duration) -> Option<Held> {
        match self.last_logged {
            Some(t) if self.held > 0 && now.saturating_sub(t) >= self.period => {
                Some(self.let_through(now, Some(t)))
            }
            _ => None,
        }
    }

    /// Occurrences held back since the last logged line.
    pub fn held(&self) -> u64 {
        self.held
    }

    fn let_through(&mut self, now: Duration, last: Option<Duration>) -> Held {
        let held = Held {
            count: std::mem::take(&mut self.held),
            over: last.map_or(Duration::ZERO, |t| now.saturating_sub(t)),
        };
        self.last_logged = Some(now);
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_first_occurrence_is_logged_then_one_a_period_with_the_count_held_back() {
        let mut r = RateLimit::per_minute();
        let mut logged = Vec::new();
        // One occurrence a second for three minutes (a fake clock: t in seconds).
        for t in 0..180u32 {
            if let Some(h) = r.hit(t * S) {
                logged.push((t, h.count));
            }
        }
        assert_eq!(logged, [(0, 0), (60, 59), (120, 59)]);
        assert_eq!(r.held(), 59);
    }

    #[test]
    fn a_fault_that_stops_repeating_gets_its_summary_once_the_period_is_over() {
        let mut r = RateLimit::new(10 * S);
        assert!(r.hit(100 * S).is_some());
        assert!(r.overdue(105 * S).is_none(), "nothing held back");
        assert!(r.hit(101 * S).is_none());
        assert!(r.hit(102 * S).is_none());
        assert!(r.overdue(109 * S).is_none(), "the period is not over");
        let h = r.overdue(110 * S).unwrap();
        assert_eq!(
            h,
            Held {
                count: 2,
                over: 10 * S
            }
        );
        assert_eq!(h.to_string(), "2 more like it in the last 10 s");
        assert!(r.overdue(200 * S).is_none(), "told once");
        // The summary counts as a line: the next occurrence within the period is held back.
        assert!(r.hit(111 * S).is_none());
        assert!(r.hit(121 * S).is_some());
    }

    #[test]
    fn nothing_held_back_says_nothing() {
        assert_eq!(Held { count: 0, over: S }.to_string(), "");
    }
}
