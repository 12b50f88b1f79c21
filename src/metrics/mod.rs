//! Prometheus metrics (`[metrics]`): an [`Outlet`] that turns each stats window into counters
//! and histograms (frames, detections by cause, events by label, model time, frame age, the
//! outlets' MQTT and snapshot [`Counters`], the process's CPU, memory and temperature),
//! served as `GET /metrics` in the Prometheus text format (version 0.0.4) and optionally
//! written as a node_exporter text file.
//!
//! **When figures move**: the counters advance once per stats window
//! (`pipeline.stats_interval`, 10 s by default), when the tracker thread hands the window
//! over, and the body is rendered then; events are counted as they start and appear in the
//! next rendering. A scrape reads the last rendering, so two scrapes within a window are
//! equal. A window cut short by a reload or the end of the run is not counted.
//!
//! **Cost on the tracker thread**: one [`Outlet::stats`] call per window (adding the window,
//! rendering a few kilobytes of text, one `write` to an eventfd) and one counter increment
//! per started event; nothing per frame. The HTTP server and the text file live on the
//! exporter thread (`lookout-metrics`, [`server`]), which the tracker never waits for.
//!
//! **A port that cannot be bound** (taken, or an address this machine does not have) is one
//! error line naming `metrics.listen`; the daemon goes on detecting without `/metrics` (the
//! text file, if any, is still written), and a reload (SIGHUP) tries again. A camera daemon
//! that stops detecting because a dashboard's port is busy would be the worse failure.
//!
//! **Reload**: an unchanged `[metrics]` keeps the exporter and its counters; a changed one
//! restarts the exporter (the counters go on); turning it off stops it.

pub mod config;
mod families;
pub mod histogram;
pub mod server;

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

pub use config::{MetricsConfig, MetricsConfigError};

use crate::events::EventRecord;
use crate::notify::{Counters, Outlet};
use crate::stats::{Report, Window};
use families::Families;
use server::{Exporter, Shared};

/// The metrics outlet: the families, the last rendering, and the exporter thread.
#[derive(Debug)]
pub struct Metrics {
    families: Families,
    counters: Arc<Counters>,
    /// `None` when no eventfd could be made (then nothing is exported, which was logged).
    shared: Option<Arc<Shared>>,
    running: Mutex<Running>,
}

/// The exporter as configured now.
#[derive(Debug, Default)]
struct Running {
    cfg: MetricsConfig,
    exporter: Option<Exporter>,
    /// The listener could not be bound (a reload retries even when nothing changed).
    bind_failed: bool,
}

impl Metrics {
    /// The metrics of `cfg` (assumed enabled), reading the outlets' `counters`, with the
    /// events of `event_labels` (`[events] labels`) counted from 0; starts the exporter
    /// thread. Problems (a port taken, no thread) are logged, never fatal.
    pub fn new(
        cfg: &MetricsConfig,
        event_labels: &[String],
        counters: Arc<Counters>,
    ) -> Arc<Metrics> {
        let families = Families::new();
        families.expect_labels(event_labels);
        let shared = match Shared::new(families.render()) {
            Ok(s) => Some(Arc::new(s)),
            Err(e) => {
                log::error!(LOOKOUT_EVENT = "metrics_error"; "metrics: cannot create the exporter's wake-up (eventfd): {e}; running without metrics");
                None
            }
        };
        let m = Arc::new(Metrics {
            families,
            counters,
            shared,
            running: Mutex::new(Running::default()),
        });
        m.apply(cfg);
        m
    }

    /// What a reload does with the metrics: `current` kept (its exporter restarted when
    /// `[metrics]` changed), started, or stopped (`None`) when `cfg` turns them off.
    pub fn reconcile(
        current: Option<Arc<Metrics>>,
        cfg: &MetricsConfig,
        event_labels: &[String],
        counters: &Arc<Counters>,
    ) -> Option<Arc<Metrics>> {
        match (current, cfg.enabled) {
            (Some(m), true) => {
                m.families.expect_labels(event_labels);
                m.apply(cfg);
                Some(m)
            }
            (None, true) => Some(Metrics::new(cfg, event_labels, counters.clone())),
            (Some(m), false) => {
                m.stop();
                log::info!(LOOKOUT_EVENT = "metrics"; "metrics: off (metrics.enabled = false)");
                None
            }
            (None, false) => None,
        }
    }

    /// The address `/metrics` is served on now (the bound one: with port 0, the port chosen).
    pub fn address(&self) -> Option<SocketAddr> {
        self.lock().exporter.as_ref().and_then(|e| e.address)
    }

    /// The families now, rendered (what the next scrape would get after a window).
    pub fn render(&self) -> String {
        self.families.render()
    }

    /// Stops the exporter thread (waits for it: a connection in progress is abandoned within
    /// about 50 ms).
    pub fn stop(&self) {
        let mut r = self.lock();
        r.exporter = None;
        r.cfg = MetricsConfig::default();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts, keeps or restarts the exporter for `cfg`.
    fn apply(&self, cfg: &MetricsConfig) {
        let Some(shared) = &self.shared else {
            return;
        };
        let mut r = self.lock();
        if r.cfg == *cfg && r.exporter.is_some() && !r.bind_failed {
            return;
        }
        // The old listener is closed before the new one binds (the same port may be asked for).
        r.exporter = None;
        r.cfg = cfg.clone();
        let listener = cfg.listen_addr().and_then(|addr| bind(addr, &cfg.listen));
        r.bind_failed = cfg.listen_addr().is_some() && listener.is_none();
        let textfile = cfg.textfile_path().map(|p| p.to_path_buf());
        if listener.is_none() && textfile.is_none() {
            return;
        }
        match Exporter::spawn(listener, textfile.clone(), shared.clone()) {
            Ok(ex) => {
                let serving = ex.address.map_or("no HTTP server".into(), |a| {
                    format!("serving /metrics on {a}")
                });
                let file = textfile.map_or(String::new(), |p| format!(", writing {}", p.display()));
                log::info!(LOOKOUT_EVENT = "metrics"; "metrics: {serving}{file} (updated every pipeline.stats_interval)");
                r.exporter = Some(ex);
            }
            Err(e) => {
                log::error!(LOOKOUT_EVENT = "metrics_error"; "metrics: cannot start the exporter thread: {e}; running without metrics");
            }
        }
    }
}

/// Binds `addr`; a failure is one error line naming `metrics.listen`, and `None`.
fn bind(addr: SocketAddr, spelled: &str) -> Option<TcpListener> {
    match TcpListener::bind(addr) {
        Ok(l) => {
            if !config::is_loopback(&addr) {
                log::warn!(
                    LOOKOUT_EVENT = "metrics", CONFIG_KEY = "metrics.listen";
                    "metrics.listen = {spelled:?} exposes /metrics on the network (anyone who can reach this port reads the counters); use 127.0.0.1:PORT to keep it on this machine"
                );
            }
            Some(l)
        }
        Err(e) => {
            log::error!(
                LOOKOUT_EVENT = "metrics_error", CONFIG_KEY = "metrics.listen";
                "metrics.listen = {spelled:?}: cannot listen: {e}; running without /metrics (detection goes on); free the port or change metrics.listen, then reload (SIGHUP)"
            );
            None
        }
    }
}

impl Outlet for Metrics {
    fn event(&self, _camera: &str, record: &EventRecord) {
        if let EventRecord::Start(e) = record {
            self.families
                .event_started(&crate::vocab::labels::label(e.class_id));
        }
    }

    fn stats(&self, _camera: &str, window: &Window, report: &Report) {
        self.families.window(window, report, &self.counters);
        if let Some(shared) = &self.shared {
            shared.publish(self.families.render());
        }
    }
}
