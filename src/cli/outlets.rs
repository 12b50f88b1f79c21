//! The daemon's outlets beyond the journal — MQTT (with Home Assistant discovery), snapshots
//! and Prometheus metrics — started with the daemon, kept across reloads (restarted only when their
//! settings change), stopped last: `offline` is the final word the broker hears.

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::mqtt::{self, Announce, Mqtt};
use crate::notify::{Counters, DetectSwitches, Outlet, Outlets};
use crate::snapshot::Snapshots;

/// The running outlets.
pub struct Running {
    counters: Arc<Counters>,
    mqtt: Option<Arc<Mqtt>>,
    snapshots: Option<Arc<Snapshots>>,
    metrics: Option<Arc<Metrics>>,
    switches: Arc<DetectSwitches>,
}

fn announce(cfg: &Config) -> Announce {
    Announce {
        cameras: cfg
            .cameras()
            .into_iter()
            .map(|c| (c.name, mqtt::announced_labels(&c.config.events)))
            .collect(),
        snapshots: cfg.snapshots.enabled,
    }
}

fn warn_password(cfg: &Config, config_file: Option<&Path>) {
    if let Some(w) = config_file.and_then(|f| mqtt::config::readable_password_warning(&cfg.mqtt, f))
    {
        log::warn!(LOOKOUT_EVENT = "config"; "{w}");
    }
}

impl Running {
    /// Starts what `cfg` asks for. Errors are the threads that could not be started.
    pub fn start(cfg: &Config, config_file: Option<&Path>) -> Result<Running, String> {
        let mut r = Running {
            counters: Arc::new(Counters::default()),
            mqtt: None,
            snapshots: None,
            metrics: None,
            switches: Arc::new(DetectSwitches::default()),
        };
        r.start_mqtt(cfg, config_file)?;
        r.start_snapshots(cfg)?;
        r.metrics = Metrics::reconcile(None, &cfg.metrics, &cfg.events.labels, &r.counters);
        Ok(r)
    }

    fn start_mqtt(&mut self, cfg: &Config, config_file: Option<&Path>) -> Result<(), String> {
        if !cfg.mqtt.enabled() {
            return Ok(());
        }
        warn_password(cfg, config_file);
        let a = announce(cfg);
        let m = Mqtt::start(&cfg.mqtt, &a, self.counters.clone(), self.switches.clone())?;
        let names: Vec<String> = a.cameras.iter().map(|(c, _)| format!("{c:?}")).collect();
        log::info!(
            LOOKOUT_EVENT = "mqtt";
            "MQTT: publishing to {}:{} under {}/ as camera {}{}",
            cfg.mqtt.host, cfg.mqtt.port, cfg.mqtt.topic_prefix, names.join(", "),
            if cfg.mqtt.discovery { format!(", Home Assistant discovery under {}/", cfg.mqtt.discovery_prefix) } else { String::new() }
        );
        self.mqtt = Some(m);
        Ok(())
    }

    fn start_snapshots(&mut self, cfg: &Config) -> Result<(), String> {
        let s = &cfg.snapshots;
        if !s.enabled || (self.mqtt.is_none() && s.dir.is_empty()) {
            return Ok(());
        }
        self.snapshots = Some(Snapshots::start(
            s,
            self.mqtt.clone(),
            self.counters.clone(),
        )?);
        Ok(())
    }

    /// The outlets for a run.
    pub fn outlets(&self) -> Outlets {
        let mut v: Vec<Arc<dyn Outlet>> = Vec::new();
        if let Some(m) = &self.mqtt {
            v.push(m.clone());
        }
        if let Some(s) = &self.snapshots {
            v.push(s.clone());
        }
        if let Some(m) = &self.metrics {
            v.push(m.clone());
        }
        Outlets(v)
    }

    /// Each camera's detection switch (MQTT `detect/set`), kept across reloads.
    pub fn switches(&self) -> Arc<DetectSwitches> {
        self.switches.clone()
    }

    /// What the outlets did (shared with metrics).
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Applies a reloaded configuration: a changed `[mqtt]` reconnects (the old entities are
    /// removed from Home Assistant first), changed labels re-announce, a changed
    /// `[snapshots]` restarts the encoder.
    pub fn reconfigure(
        &mut self,
        old: &Config,
        new: &Config,
        config_file: Option<&Path>,
    ) -> Result<(), String> {
        let mqtt_changed = old.mqtt != new.mqtt;
        if mqtt_changed {
            if let Some(m) = self.mqtt.take() {
                m.retire();
            }
            self.start_mqtt(new, config_file)?;
        } else if let Some(m) = &self.mqtt {
            if announce(old) != announce(new) {
                m.announce(&announce(new));
            }
        }
        if mqtt_changed || old.snapshots != new.snapshots {
            if let Some(s) = self.snapshots.take() {
                s.stop();
            }
            self.start_snapshots(new)?;
        }
        self.metrics = Metrics::reconcile(
            self.metrics.take(),
            &new.metrics,
            &new.events.labels,
            &self.counters,
        );
        Ok(())
    }

    /// Stops everything: snapshots, then `offline` to the broker and a clean disconnect (the
    /// metrics exporter ends with the process).
    pub fn stop(&mut self) {
        if let Some(s) = self.snapshots.take() {
            s.stop();
        }
        if let Some(m) = self.mqtt.take() {
            m.stop();
        }
    }
}
