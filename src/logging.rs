//! Where log lines go: the systemd journal (structured fields) when stderr is connected to it,
//! else stderr in a readable `level message KEY=value…` form.
//!
//! Structured key-values of `log` records (`log::info!(FPS = 9.8; "…")`) become journal fields
//! verbatim, so their names are an interface (see ARCHITECTURE.md).

use std::io::Write;

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
    if systemd_journal_logger::connected_to_journal() {
        if let Ok(logger) = systemd_journal_logger::JournalLog::new() {
            let logger = logger.with_syslog_identifier("lookout".to_string());
            if logger.install().is_ok() {
                log::set_max_level(level);
                return;
            }
        }
    }
    if log::set_boxed_logger(Box::new(StderrLog { level })).is_ok() {
        log::set_max_level(level);
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
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "lookout {tag}: {}{}", record.args(), fields.0);
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}
