//! MQTT: events, counts, snapshots and stats for Home Assistant, Node-RED and anything that
//! speaks Frigate's topics, plus Home Assistant discovery. See `payload` for the topics and
//! bodies, `discovery` for the entities, `link` for the connection (a bounded queue and two
//! threads: the tracker never waits for the network), `incoming` for what is read (Home
//! Assistant's birth, each camera's detection switch).

pub mod config;
pub mod discovery;
pub mod incoming;
pub mod link;
pub mod payload;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rumqttc::{LastWill, MqttOptions, QoS};
use serde_json::Value;

pub use config::{MqttConfig, MqttConfigError};

use crate::events::{EventRecord, EventsConfig, DEFAULT_LABELS};
use crate::geom::BBox;
use crate::logging::RateLimit;
use crate::notify::{Counters, DetectSwitches, Outlet};
use crate::stats::{Report, Window};
use crate::vocab::labels;
use discovery::DiscoveryInput;
use incoming::Routes;
use link::{Link, LinkOptions, Message};
use payload::{EventContext, EventKind, StatsContext, Topics};

/// Seconds since the Unix epoch, now.
fn wall_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A switch's payload: `ON` / `OFF`.
fn on_off(on: bool) -> &'static str {
    if on {
        "ON"
    } else {
        "OFF"
    }
}

fn qos(n: u8) -> QoS {
    match n {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    }
}

/// The label levels announced to Home Assistant: the event labels (the defaults when
/// `[events] labels` is empty, which means every label).
pub fn announced_labels(events: &EventsConfig) -> Vec<String> {
    let names: Vec<&str> = if events.labels.is_empty() {
        DEFAULT_LABELS.to_vec()
    } else {
        events.labels.iter().map(String::as_str).collect()
    };
    names
        .into_iter()
        .filter_map(labels::class_id)
        .map(payload::label_level)
        .collect()
}

/// What the events under way look like to MQTT.
#[derive(Default)]
struct Live {
    /// Per camera and event number (each camera numbers its own): its context and the last
    /// `after` sent.
    events: HashMap<(String, u64), (EventContext, Value)>,
    /// Events under way per camera and label level.
    counts: BTreeMap<(String, String), u32>,
    /// Every camera's latest entry in the stats message's `cameras` object.
    cameras: serde_json::Map<String, Value>,
}

impl Live {
    fn count(&self, camera: &str, label: &str) -> u32 {
        self.counts
            .get(&(camera.to_string(), label.to_string()))
            .copied()
            .unwrap_or(0)
    }

    fn count_all(&self, camera: &str) -> u32 {
        self.counts
            .iter()
            .filter(|((c, _), _)| c == camera)
            .map(|(_, n)| n)
            .sum()
    }
}

/// A connected (or connecting) MQTT outlet.
pub struct Mqtt {
    link: Arc<Link>,
    cfg: MqttConfig,
    topics: Topics,
    qos: QoS,
    started: Instant,
    counters: Arc<Counters>,
    live: Mutex<Live>,
    /// The discovery topics announced now.
    announced: Mutex<Vec<String>>,
    /// The cameras announced now (the only ones a `detect/set` may switch).
    cameras: Mutex<Vec<String>>,
    /// Each camera's detection switch, shared with the pipeline.
    switches: Arc<DetectSwitches>,
    /// Switches naming no camera: one warning a minute at most.
    unknown: Mutex<RateLimit>,
}

/// What discovery and counts depend on beyond `[mqtt]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Announce {
    /// The cameras, each with its label levels (`person`, …).
    pub cameras: Vec<(String, Vec<String>)>,
    /// Whether snapshots are published.
    pub snapshots: bool,
}

impl Mqtt {
    /// Connects in the background (a missing broker is retried, never fatal), announces
    /// `online`, the Home Assistant entities, zero counts and each camera's detection state,
    /// and from then on switches `switches` on the cameras' `detect/set` messages.
    pub fn start(
        cfg: &MqttConfig,
        announce: &Announce,
        counters: Arc<Counters>,
        switches: Arc<DetectSwitches>,
    ) -> Result<Arc<Mqtt>, String> {
        let topics = Topics::new(&cfg.topic_prefix, &cfg.camera);
        let client_id = cfg.client_id();
        let mut o = MqttOptions::new(client_id, cfg.host.clone(), cfg.port);
        o.set_keep_alive(Duration::from_secs(cfg.keepalive));
        o.set_clean_session(true);
        o.set_max_packet_size(link::MAX_PACKET, link::MAX_PACKET);
        o.set_last_will(LastWill::new(
            topics.available(),
            payload::OFFLINE,
            QoS::AtLeastOnce,
            true,
        ));
        if let Some(password) = cfg
            .password()
            .map_err(|e| format!("mqtt.password_file: {e}"))?
        {
            o.set_credentials(cfg.username.clone(), password);
        } else if !cfg.username.is_empty() {
            o.set_credentials(cfg.username.clone(), "");
        }
        if cfg.tls() {
            o.set_transport(tls::transport(cfg)?);
        }
        let broker = format!("{}:{}", cfg.host, cfg.port);
        let link = Link::start(
            LinkOptions {
                broker,
                mqtt: o,
                queue: cfg.queue,
                routes: Routes {
                    birth: cfg
                        .discovery
                        .then(|| format!("{}/status", cfg.discovery_prefix)),
                    prefix: cfg.topic_prefix.clone(),
                },
                offline: (topics.available(), payload::OFFLINE.as_bytes().to_vec()),
            },
            counters.clone(),
        )?;
        let m = Arc::new(Mqtt {
            link,
            cfg: cfg.clone(),
            qos: qos(cfg.qos),
            topics,
            started: Instant::now(),
            counters,
            live: Mutex::new(Live::default()),
            announced: Mutex::new(Vec::new()),
            cameras: Mutex::new(Vec::new()),
            switches,
            unknown: Mutex::new(RateLimit::per_minute()),
        });
        m.link.set_state(
            &m.topics.available(),
            payload::ONLINE.as_bytes().to_vec(),
            QoS::AtLeastOnce,
        );
        m.announce(announce);
        let weak = Arc::downgrade(&m);
        m.link.on_detect(Box::new(move |camera, on| {
            if let Some(m) = weak.upgrade() {
                m.switch_detection(camera, on);
            }
        }));
        Ok(m)
    }

    /// `<prefix>/<camera>/detect/set` said `ON` or `OFF`: a camera of the configuration is
    /// switched and its `detect/state` follows; any other name is ignored with a warning.
    fn switch_detection(&self, camera: &str, on: bool) {
        let known = self
            .cameras
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|c| c == camera);
        let topics = self.topics_of(camera);
        if !known {
            let mut rl = self.unknown.lock().unwrap_or_else(|p| p.into_inner());
            if rl.hit(crate::frame::monotonic_now()).is_some() {
                log::warn!(
                    LOOKOUT_EVENT = "mqtt_command";
                    "MQTT: {} names no camera of this configuration; ignored",
                    topics.detect_set()
                );
            }
            return;
        }
        if self.switches.set(camera, on) {
            log::info!(
                LOOKOUT_EVENT = "mqtt_command", CAMERA = camera;
                "MQTT: {} {}: detection for camera {camera:?} switched {}",
                topics.detect_set(),
                on_off(on),
                if on { "on" } else { "off" }
            );
        }
        self.put_detect_state(camera);
    }

    /// `camera`'s detection state, retained.
    fn put_detect_state(&self, camera: &str) {
        self.link.set_state(
            &self.topics_of(camera).detect_state(),
            on_off(self.switches.is_on(camera)).as_bytes().to_vec(),
            self.qos,
        );
    }

    /// The `[mqtt]` settings this client runs with.
    pub fn config(&self) -> &MqttConfig {
        &self.cfg
    }

    /// Whether the broker is connected now.
    pub fn connected(&self) -> bool {
        self.link.connected()
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Announces the entities of `a` (and zero counts for labels new to it); entities
    /// announced before and not now are removed from Home Assistant (an empty retained
    /// config).
    pub fn announce(&self, a: &Announce) {
        let messages = if self.cfg.discovery {
            discovery::messages(&DiscoveryInput {
                prefix: self.cfg.discovery_prefix.clone(),
                client_id: self.cfg.client_id(),
                topics: self.topics.clone(),
                cameras: a.cameras.clone(),
                snapshots: a.snapshots,
                temperature: crate::sysinfo::cpu_temperature().is_some(),
            })
        } else {
            Vec::new()
        };
        let mut announced = self.announced.lock().unwrap_or_else(|p| p.into_inner());
        let new: Vec<String> = messages.iter().map(|(t, _)| t.clone()).collect();
        for gone in announced.iter().filter(|t| !new.contains(t)) {
            self.link.set_state(gone, Vec::new(), QoS::AtLeastOnce);
        }
        for (topic, body) in messages {
            self.link.set_state(&topic, body, QoS::AtLeastOnce);
        }
        *announced = new;
        drop(announced);
        *self.cameras.lock().unwrap_or_else(|p| p.into_inner()) =
            a.cameras.iter().map(|(c, _)| c.clone()).collect();
        let live = self.live();
        for (camera, labels) in &a.cameras {
            self.put_detect_state(camera);
            let topics = self.topics_of(camera);
            for label in labels {
                self.put_count(&topics.count(label), live.count(camera, label));
            }
            self.put_count(&topics.count_all(), live.count_all(camera));
        }
    }

    /// A count, retained.
    fn put_count(&self, topic: &str, n: u32) {
        self.link
            .set_state(topic, n.to_string().into_bytes(), self.qos);
    }

    /// `camera`'s topics.
    fn topics_of(&self, camera: &str) -> Topics {
        Topics::new(&self.cfg.topic_prefix, camera)
    }

    /// Removes every entity this client announced (the configuration no longer has them),
    /// then stops.
    pub fn retire(&self) {
        self.announce(&Announce {
            cameras: Vec::new(),
            snapshots: false,
        });
        let gone: Vec<String> =
            std::mem::take(&mut *self.announced.lock().unwrap_or_else(|p| p.into_inner()));
        for t in gone {
            self.link.set_state(&t, Vec::new(), QoS::AtLeastOnce);
        }
        self.stop();
    }

    /// `offline`, a clean disconnect (at most 0.7 s).
    pub fn stop(&self) {
        self.link.stop();
    }

    /// A snapshot of `camera`'s event `event` (its number) was made: published (retained) on
    /// its label's snapshot topic, and an `update` tells the event has one.
    #[allow(clippy::too_many_arguments)]
    pub fn snapshot(
        &self,
        camera: &str,
        event: u64,
        label: &str,
        jpeg: Vec<u8>,
        frame_time: f64,
        b: BBox,
        score: f32,
    ) {
        self.link.set_state(
            &self.topics_of(camera).snapshot(label),
            jpeg,
            QoS::AtMostOnce,
        );
        let mut live = self.live();
        let Some((ctx, after)) = live.events.get_mut(&(camera.to_string(), event)) else {
            return;
        };
        ctx.snapshot = Some((frame_time, b, score));
        let before = after.clone();
        after["has_snapshot"] = Value::Bool(true);
        after["snapshot"] = serde_json::json!({
            "frame_time": (frame_time * 1000.0).round() / 1000.0,
            "box": [b.x0.round() as i64, b.y0.round() as i64, b.x1.round() as i64, b.y1.round() as i64],
            "area": ((b.x1 - b.x0) * (b.y1 - b.y0)).round() as i64,
            "score": ((score as f64) * 1000.0).round() / 1000.0,
        });
        let body = payload::event_message(EventKind::Update, Some(&before), after);
        drop(live);
        self.send_event(body, true);
    }

    fn send_event(&self, payload: Vec<u8>, droppable: bool) {
        self.link.send(Message {
            topic: self.topics.events(),
            payload,
            qos: self.qos,
            retain: false,
            droppable,
        });
    }

    fn set_count(&self, live: &Live, camera: &str, label: &str) {
        let topics = self.topics_of(camera);
        self.put_count(&topics.count(label), live.count(camera, label));
        self.put_count(&topics.count_all(), live.count_all(camera));
    }
}

impl Outlet for Mqtt {
    fn event(&self, camera: &str, record: &EventRecord) {
        let now = wall_now();
        let mut live = self.live();
        match record {
            EventRecord::Start(e) => {
                let ctx = EventContext {
                    id: format!("{now:.6}-{}", e.id),
                    start_time: now,
                    frame_time: now,
                    end_time: None,
                    entered_zones: e.zones.clone(),
                    snapshot: None,
                };
                let after = payload::event_object(e, camera, &ctx);
                let body = payload::event_message(EventKind::New, None, &after);
                let label = payload::label_level(e.class_id);
                *live
                    .counts
                    .entry((camera.to_string(), label.clone()))
                    .or_insert(0) += 1;
                live.events.insert((camera.to_string(), e.id), (ctx, after));
                self.set_count(&live, camera, &label);
                drop(live);
                self.send_event(body, false);
            }
            EventRecord::Update(e) | EventRecord::End(e) => {
                let end = matches!(record, EventRecord::End(_));
                let key = (camera.to_string(), e.id);
                let Some((mut ctx, before)) = live.events.remove(&key) else {
                    return;
                };
                ctx.frame_time = now;
                for z in &e.zones {
                    if !ctx.entered_zones.contains(z) {
                        ctx.entered_zones.push(z.clone());
                    }
                }
                if end {
                    ctx.end_time = Some(now);
                }
                let after = payload::event_object(e, camera, &ctx);
                let old_label = before["label"].as_str().unwrap_or("").replace(' ', "_");
                let label = payload::label_level(e.class_id);
                let kind = if end {
                    EventKind::End
                } else {
                    EventKind::Update
                };
                let body = payload::event_message(kind, Some(&before), &after);
                if end || old_label != label {
                    if let Some(n) = live
                        .counts
                        .get_mut(&(camera.to_string(), old_label.clone()))
                    {
                        *n = n.saturating_sub(1);
                    }
                    self.set_count(&live, camera, &old_label);
                }
                if end {
                    self.set_count(&live, camera, &label);
                } else {
                    if old_label != label {
                        *live
                            .counts
                            .entry((camera.to_string(), label.clone()))
                            .or_insert(0) += 1;
                        self.set_count(&live, camera, &label);
                    }
                    live.events.insert(key, (ctx, after));
                }
                drop(live);
                self.send_event(body, !end);
            }
        }
    }

    fn stats(&self, camera: &str, _window: &Window, report: &Report) {
        let ctx = StatsContext {
            uptime: self.started.elapsed().as_secs_f64(),
            cpu_temperature: crate::sysinfo::cpu_temperature(),
            mqtt_sent: self.counters.mqtt_sent.load(Ordering::Relaxed),
            mqtt_dropped: self.counters.mqtt_dropped.load(Ordering::Relaxed),
        };
        let cameras = {
            let mut live = self.live();
            live.cameras
                .insert(camera.to_string(), payload::camera_entry(report));
            live.cameras.clone()
        };
        self.link.send(Message {
            topic: self.topics.stats(),
            payload: payload::stats_message(report, camera, &cameras, &ctx),
            qos: self.qos,
            retain: false,
            droppable: true,
        });
    }
}

/// TLS through rustls with the `ring` provider (C and assembly that build with the same cross
/// compilers as the rest; no system OpenSSL).
mod tls {
    use super::MqttConfig;
    use rumqttc::{TlsConfiguration, Transport};

    fn read(key: &'static str, path: &str) -> Result<Vec<u8>, String> {
        crate::files::read_bounded(std::path::Path::new(path), 1 << 20, key)
            .map_err(|e| format!("mqtt.{key}: {e}"))
    }

    /// The transport for `cfg`'s TLS settings: the CA (PEM) to trust, a client certificate
    /// and key (PEM) when given.
    pub fn transport(cfg: &MqttConfig) -> Result<Transport, String> {
        // rumqttc builds its rustls configuration with the process's default provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = read("ca_file", &cfg.ca_file)?;
        let client_auth = if cfg.client_cert.is_empty() {
            None
        } else {
            Some((
                read("client_cert", &cfg.client_cert)?,
                read("client_key", &cfg.client_key)?,
            ))
        };
        Ok(Transport::tls_with_config(TlsConfiguration::Simple {
            ca,
            alpn: None,
            client_auth,
        }))
    }
}
