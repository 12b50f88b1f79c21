//! The connection to the broker: two threads behind a bounded queue, so the tracker never
//! waits for the network.
//!
//! - `lookout-mqtt` drives the client's event loop: connects, reconnects with back-off
//!   (1 s doubling to 4 s: a broker back is used within 5 s), tells the sender when a connection is up (everything retained is
//!   published again) and when Home Assistant announces itself (discovery is sent again),
//!   and hands a camera's detection switch (`<prefix>/<camera>/detect/set`) to its handler.
//! - `lookout-mqtt-send` takes messages off the queue and hands them to the connection.
//!
//! Retained messages (availability, discovery, counts, snapshots) are *state*: the latest
//! payload per topic is kept and published again after every reconnect. Other messages
//! (events, stats) are sent while connected and dropped — and counted — while not: an event
//! replayed minutes late is worse than none. A full queue drops its oldest droppable message
//! (stats, event updates) first, then its oldest.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rumqttc::{
    Client, ConnectReturnCode, Connection, ConnectionError, Event, MqttOptions, Outgoing, Packet,
    QoS, RecvTimeoutError,
};

use super::incoming::{self, Incoming, Routes};
use crate::logging::RateLimit;
use crate::notify::Counters;

/// The largest message (a snapshot JPEG is the largest lookout sends).
pub const MAX_PACKET: usize = 1 << 20;
/// Room for a PUBLISH packet's own bytes beside its topic and payload (fixed header,
/// topic length, packet id).
const PACKET_OVERHEAD: usize = 16;

/// Whether a message of `topic` and `payload` fits in one packet of at most [`MAX_PACKET`]
/// bytes. One that does not is never handed to the connection, which would drop the
/// connection for it (and again after every reconnect for a retained one).
fn fits(topic: &str, payload: &[u8]) -> bool {
    topic.len() + payload.len() + PACKET_OVERHEAD <= MAX_PACKET
}

/// Why a message too large for a packet was dropped.
const TOO_LARGE: &str = "larger than the 1 MiB an MQTT message may be here (a snapshot: lower [snapshots] height or quality)";
/// The queue's bound in bytes, whatever its bound in messages.
const MAX_QUEUED_BYTES: usize = 16 << 20;
/// Messages the connection (rumqttc's event loop) takes ahead of the socket. When a broker
/// stops reading, what is in memory is at most this many messages plus the queue's bound:
/// 16 snapshots of at most [`MAX_PACKET`] each.
const CONNECTION_QUEUE: usize = 16;
/// Reconnect back-off: first wait and longest wait.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(4);
/// How long a stop waits for `offline` to reach the broker.
const STOP_FLUSH: Duration = Duration::from_millis(700);

/// One message to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Its topic.
    pub topic: String,
    /// Its body.
    pub payload: Vec<u8>,
    /// Its QoS.
    pub qos: QoS,
    /// Whether the broker keeps it for late subscribers.
    pub retain: bool,
    /// Dropped first when the queue is full (stats, event updates).
    pub droppable: bool,
}

/// How to reach the broker.
#[derive(Clone, Debug)]
pub struct LinkOptions {
    /// `host:port`, for messages.
    pub broker: String,
    /// The client's options (id, credentials, will, transport).
    pub mqtt: MqttOptions,
    /// Messages queued at most.
    pub queue: usize,
    /// What is read from the broker: Home Assistant's status topic (if discovery is on) and
    /// the cameras' detection switches.
    pub routes: Routes,
    /// The availability topic and its `offline` payload, sent on a clean stop.
    pub offline: (String, Vec<u8>),
}

/// The link's mutable state.
#[derive(Default)]
struct Inner {
    queue: VecDeque<Message>,
    queued_bytes: usize,
    /// Retained topics: latest payload and QoS.
    state: BTreeMap<String, (Vec<u8>, QoS)>,
    connected: bool,
    /// When to publish every retained topic again (after a connect or a birth message).
    replay_at: Option<Instant>,
    stop: bool,
    /// The clean stop's `offline` reached the connection.
    flushed: bool,
}

/// A running link (see the module documentation).
pub struct Link {
    inner: Mutex<Inner>,
    cv: Condvar,
    counters: Arc<Counters>,
    capacity: usize,
    drops: Mutex<RateLimit>,
    broker: String,
    client: Client,
    threads: Mutex<Vec<JoinHandle<()>>>,
    switches: Mutex<Switching>,
}

/// What receives a camera's detection switch: `(camera, on)`.
pub type DetectHandler = Box<dyn Fn(&str, bool) + Send + Sync>;

/// The detection-switch handler, and the switches that came before it was set (a retained
/// `detect/set` arrives at once on connecting).
#[derive(Default)]
struct Switching {
    handler: Option<DetectHandler>,
    early: Vec<(String, bool)>,
}

impl Link {
    /// Starts the threads; the connection is made in the background (a broker that is not
    /// there yet is retried, never fatal).
    pub fn start(opts: LinkOptions, counters: Arc<Counters>) -> Result<Arc<Link>, String> {
        let (client, connection) = Client::new(opts.mqtt.clone(), CONNECTION_QUEUE);
        let link = Arc::new(Link {
            inner: Mutex::new(Inner::default()),
            cv: Condvar::new(),
            counters,
            capacity: opts.queue,
            drops: Mutex::new(RateLimit::per_minute()),
            broker: opts.broker.clone(),
            client,
            threads: Mutex::new(Vec::new()),
            switches: Mutex::new(Switching::default()),
        });
        let l = link.clone();
        let routes = opts.routes.clone();
        let conn = std::thread::Builder::new()
            .name("lookout-mqtt".into())
            .spawn(move || l.drive(connection, routes))
            .map_err(|e| format!("cannot start lookout-mqtt: {e}"))?;
        let l = link.clone();
        let offline = opts.offline.clone();
        let send = std::thread::Builder::new()
            .name("lookout-mqtt-send".into())
            .spawn(move || l.send_loop(offline))
            .map_err(|e| format!("cannot start lookout-mqtt-send: {e}"))?;
        link.lock_threads().extend([conn, send]);
        Ok(link)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits on the link's condition variable for at most `d`.
    fn wait<'g>(&self, g: MutexGuard<'g, Inner>, d: Duration) -> MutexGuard<'g, Inner> {
        self.cv
            .wait_timeout(g, d)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0)
    }

    /// Sets what receives the cameras' detection switches, and gives it those that came
    /// before.
    pub fn on_detect(&self, handler: DetectHandler) {
        let mut g = self.switches.lock().unwrap_or_else(|p| p.into_inner());
        for (camera, on) in std::mem::take(&mut g.early) {
            handler(&camera, on);
        }
        g.handler = Some(handler);
    }

    /// A camera's detection switch came.
    fn switch(&self, camera: String, on: bool) {
        let mut g = self.switches.lock().unwrap_or_else(|p| p.into_inner());
        match &g.handler {
            Some(h) => h(&camera, on),
            // Bounded: one entry per camera, the latest.
            None if g.early.len() < 64 => {
                g.early.retain(|(c, _)| *c != camera);
                g.early.push((camera, on));
            }
            None => {}
        }
    }

    fn lock_threads(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the broker is connected now.
    pub fn connected(&self) -> bool {
        self.lock().connected
    }

    /// Queues a message that is not retained (an event, stats): dropped and counted while
    /// the broker is away.
    pub fn send(&self, m: Message) {
        if !fits(&m.topic, &m.payload) {
            self.dropped(1, TOO_LARGE);
            return;
        }
        let g = self.lock();
        if !g.connected || g.stop {
            drop(g);
            self.dropped(1, "the broker is not connected");
            return;
        }
        self.push(g, m);
    }

    /// Sets a retained topic: kept, and published now if connected, again after every
    /// reconnect. An empty payload removes the topic from the broker (and from the state).
    pub fn set_state(&self, topic: &str, payload: Vec<u8>, qos: QoS) {
        if !fits(topic, &payload) {
            // The topic keeps what it had: a retained message the connection cannot carry
            // would be sent again after every reconnect.
            self.dropped(1, TOO_LARGE);
            return;
        }
        let mut g = self.lock();
        if payload.is_empty() {
            g.state.remove(topic);
        } else if g
            .state
            .get(topic)
            .is_some_and(|(p, q)| *p == payload && *q == qos)
        {
            return; // nothing changed
        } else {
            g.state.insert(topic.to_string(), (payload.clone(), qos));
        }
        if !g.connected || g.stop {
            return; // sent on the next connect (a removal then is moot: see `forget`)
        }
        let m = Message {
            topic: topic.to_string(),
            payload,
            qos,
            retain: true,
            droppable: false,
        };
        self.push(g, m);
    }

    /// The retained topics now.
    pub fn state_topics(&self) -> Vec<String> {
        self.lock().state.keys().cloned().collect()
    }

    /// Publishes every retained topic again (Home Assistant came back) after `delay`.
    pub fn replay_after(&self, delay: Duration) {
        let mut g = self.lock();
        g.replay_at = Some(Instant::now() + delay);
        drop(g);
        self.cv.notify_all();
    }

    fn push(&self, mut g: MutexGuard<'_, Inner>, m: Message) {
        let mut lost = 0;
        g.queued_bytes += m.payload.len();
        g.queue.push_back(m);
        while g.queue.len() > self.capacity || g.queued_bytes > MAX_QUEUED_BYTES {
            let i = g.queue.iter().position(|m| m.droppable).unwrap_or(0);
            if let Some(old) = g.queue.remove(i) {
                g.queued_bytes -= old.payload.len();
                lost += 1;
            }
        }
        drop(g);
        self.cv.notify_all();
        if lost > 0 {
            self.dropped(lost, "the queue is full (the broker is slow)");
        }
    }

    fn dropped(&self, n: u64, why: &str) {
        let total = self.counters.mqtt_dropped.fetch_add(n, Ordering::Relaxed) + n;
        let mut rl = self.drops.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = rl.hit(crate::frame::monotonic_now()) {
            log::warn!(
                LOOKOUT_EVENT = "mqtt_dropped", MQTT_DROPPED = total;
                "MQTT {}: message(s) dropped, {why} ({total} dropped so far{})",
                self.broker,
                if held.count > 0 { format!(", {} warning(s) like this held back", held.count) } else { String::new() }
            );
        }
    }

    /// Ends the link: `offline` (retained) to the broker if it is connected, a clean
    /// disconnect, at most 0.7 s of waiting; the threads end on their own.
    pub fn stop(&self) {
        let mut g = self.lock();
        if g.stop {
            return;
        }
        g.stop = true;
        let connected = g.connected;
        drop(g);
        self.cv.notify_all();
        if !connected {
            let _ = self.client.try_disconnect();
            return;
        }
        let deadline = Instant::now() + STOP_FLUSH;
        let mut g = self.lock();
        while !g.flushed && Instant::now() < deadline {
            g = self.wait(g, deadline.saturating_duration_since(Instant::now()));
        }
        drop(g);
        // Give the threads a moment to end (they would anyway when the process does).
        let handles: Vec<JoinHandle<()>> = self.lock_threads().drain(..).collect();
        for h in handles {
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }

    /// The sender thread: the queue → the connection; every retained topic again when a
    /// replay is due; `offline` and a disconnect on stop.
    fn send_loop(&self, offline: (String, Vec<u8>)) {
        loop {
            let mut g = self.lock();
            let batch: Vec<Message> = loop {
                if g.stop {
                    // What is queued when lookout stops (the last events' `end`) still goes
                    // out before `offline`, connected; the connection takes what it can at once.
                    let rest = if g.connected {
                        g.queued_bytes = 0;
                        g.queue.drain(..).collect()
                    } else {
                        Vec::new()
                    };
                    break rest;
                }
                if g.connected {
                    if g.replay_at.is_some_and(|t| t <= Instant::now()) {
                        g.replay_at = None;
                        break g
                            .state
                            .iter()
                            .map(|(t, (p, q))| Message {
                                topic: t.clone(),
                                payload: p.clone(),
                                qos: *q,
                                retain: true,
                                droppable: false,
                            })
                            .collect();
                    }
                    if let Some(m) = g.queue.pop_front() {
                        g.queued_bytes -= m.payload.len();
                        break vec![m];
                    }
                }
                let wait = g
                    .replay_at
                    .map(|t| t.saturating_duration_since(Instant::now()))
                    .unwrap_or(Duration::from_millis(500))
                    .clamp(Duration::from_millis(1), Duration::from_millis(500));
                g = self.wait(g, wait);
            };
            let stopping = g.stop;
            let connected = g.connected;
            drop(g);
            if stopping {
                let until = Instant::now() + STOP_FLUSH;
                for m in batch {
                    self.publish(m, until);
                }
                if connected {
                    let (topic, payload) = offline;
                    let _ = self
                        .client
                        .try_publish(topic, QoS::AtLeastOnce, true, payload);
                }
                let _ = self.client.try_disconnect();
                return;
            }
            for m in batch {
                self.publish(m, Instant::now() + Duration::from_secs(2));
            }
        }
    }

    /// Hands one message to the connection; waits while the connection's own queue is full
    /// (a slow socket), until `deadline` (2 s; on stop, what is left of the stop's wait), then
    /// drops it.
    fn publish(&self, m: Message, deadline: Instant) {
        loop {
            match self
                .client
                .try_publish(m.topic.clone(), m.qos, m.retain, m.payload.clone())
            {
                Ok(()) => {
                    self.counters.mqtt_sent.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => {
                    self.dropped(1, "the connection's queue is full");
                    return;
                }
            }
        }
    }

    fn set_connected(&self, up: bool) {
        let mut g = self.lock();
        g.connected = up;
        if up {
            g.replay_at = Some(Instant::now());
        } else {
            // Not sent, never will be: stale by the time the broker is back.
            let lost = g.queue.iter().filter(|m| !m.retain).count() as u64;
            g.queue.clear();
            g.queued_bytes = 0;
            drop(g);
            if lost > 0 {
                self.dropped(lost, "the broker went away");
            }
        }
        self.counters.mqtt_connected.store(up, Ordering::Relaxed);
        self.cv.notify_all();
    }

    /// The connection thread (see the module documentation).
    fn drive(&self, mut connection: Connection, routes: Routes) {
        let mut backoff = BACKOFF_FIRST;
        let mut last_error = String::new();
        loop {
            if self.lock().stop && !self.lock().connected {
                return;
            }
            match connection.recv_timeout(Duration::from_millis(500)) {
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
                Ok(Ok(Event::Incoming(Packet::ConnAck(ack)))) => {
                    if ack.code == ConnectReturnCode::Success {
                        log::info!(LOOKOUT_EVENT = "mqtt_connected"; "MQTT {}: connected", self.broker);
                        last_error.clear();
                        backoff = BACKOFF_FIRST;
                        for t in routes.filters() {
                            let _ = self.client.try_subscribe(t, QoS::AtMostOnce);
                        }
                        self.set_connected(true);
                    }
                }
                Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                    match incoming::parse(&routes, &p.topic, &p.payload) {
                        // Home Assistant's advice: a random delay, so that not every device
                        // answers its birth at once.
                        Incoming::HomeAssistantOnline => self.replay_after(incoming::jitter()),
                        Incoming::Detect { camera, on } => self.switch(camera, on),
                        Incoming::Ignored => {}
                    }
                }
                Ok(Ok(Event::Outgoing(Outgoing::Disconnect))) => {
                    let mut g = self.lock();
                    g.flushed = true;
                    g.connected = false;
                    drop(g);
                    self.counters.mqtt_connected.store(false, Ordering::Relaxed);
                    self.cv.notify_all();
                    // Let the disconnect reach the socket before the loop is dropped.
                    let _ = connection.recv_timeout(Duration::from_millis(100));
                    return;
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    let was_up = self.lock().connected;
                    self.set_connected(false);
                    let why = describe(&e);
                    if was_up || why != last_error {
                        log::warn!(
                            LOOKOUT_EVENT = "mqtt_disconnected";
                            "MQTT {}: {why}; retrying every {}–{} s",
                            self.broker, BACKOFF_FIRST.as_secs(), BACKOFF_MAX.as_secs()
                        );
                        last_error = why;
                    }
                    if self.sleep_unless_stopped(backoff) {
                        return;
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// Sleeps `d` in short slices; true when a stop came.
    fn sleep_unless_stopped(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = self.lock();
        while !g.stop && Instant::now() < deadline {
            g = self.wait(g, deadline.saturating_duration_since(Instant::now()));
        }
        g.stop
    }
}

/// A connection error in words a Pi owner can act on.
fn describe(e: &ConnectionError) -> String {
    match e {
        ConnectionError::ConnectionRefused(code) => match code {
            ConnectReturnCode::BadUserNamePassword => {
                "the broker refused the user name or password (mqtt.username, mqtt.password_file)".into()
            }
            ConnectReturnCode::NotAuthorized => {
                "the broker refused the connection: not authorised (mqtt.username, mqtt.password_file)".into()
            }
            ConnectReturnCode::BadClientId => {
                "the broker refused the client id (mqtt.client_id)".into()
            }
            other => format!("the broker refused the connection ({other:?})"),
        },
        ConnectionError::NetworkTimeout => "no answer from the broker (timeout)".into(),
        ConnectionError::Tls(t) => format!("TLS: {t} (mqtt.ca_file, mqtt.client_cert, mqtt.client_key)"),
        ConnectionError::Io(io) => format!("cannot reach the broker: {io}"),
        other => format!("connection lost: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_fits_up_to_the_packet_size_with_its_topic_and_headers() {
        let topic = "lookout/yard/person/snapshot";
        let room = MAX_PACKET - PACKET_OVERHEAD - topic.len();
        assert!(fits(topic, &vec![0; room]));
        assert!(!fits(topic, &vec![0; room + 1]));
        assert!(fits(topic, b""));
    }
}
