//! MQTT and Home Assistant against a real broker: Debian's `mosquitto`, started here on a free
//! loopback port and stopped by its PID. `lookout run` plays the bundled clip; a subscriber in
//! this test records every message with its retain flag.
//!
//! Without `mosquitto` installed (`apt install mosquitto`; `scripts/setup.sh` and `.ci/run`
//! install it) each test says so loudly and passes: a plain `cargo test` still works on a
//! machine without it.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rumqttc::{Client, Event, MqttOptions, Packet, QoS};

/// A mosquitto on 127.0.0.1:`port`, killed when dropped.
struct Broker {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn have_mosquitto() -> bool {
    let found = Command::new("mosquitto")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        eprintln!(
            "\n*** SKIPPED: mosquitto is not installed (apt install mosquitto); the MQTT tests did not run ***\n"
        );
    }
    found
}

impl Broker {
    fn start() -> Broker {
        let mut b = Broker {
            port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            child: None,
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        self.spawn_with(&format!(
            "listener {} 127.0.0.1\nallow_anonymous true\npersistence false\n",
            self.port
        ));
    }

    /// A broker with `conf` (which must listen on `self.port`).
    fn spawn_with(&mut self, conf_text: &str) {
        let conf = self.dir.path().join("mosquitto.conf");
        std::fs::write(&conf, conf_text).unwrap();
        let log = self.dir.path().join("mosquitto.log");
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One message as a subscriber got it.
#[derive(Clone, Debug)]
struct Got {
    topic: String,
    payload: Vec<u8>,
    retain: bool,
}

impl Got {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.payload)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", self.topic))
    }
}

/// A subscriber to everything, recording what arrives.
struct Sub {
    client: Client,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Sub {
    fn new(port: u16) -> Sub {
        let mut o = MqttOptions::new(format!("test-sub-{}", free_port()), "127.0.0.1", port);
        o.set_max_packet_size(1 << 21, 1 << 21);
        let (client, mut conn) = Client::new(o, 16);
        client.subscribe("#", QoS::AtLeastOnce).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let subscribed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (g, ready) = (got.clone(), subscribed.clone());
        std::thread::spawn(move || {
            // A broker that is not listening yet is retried (the subscription waits in the
            // client's queue), for up to 10 s.
            let mut failures = 0;
            for ev in conn.iter() {
                match ev {
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        ready.store(true, std::sync::atomic::Ordering::SeqCst)
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => g.lock().unwrap().push(Got {
                        topic: p.topic.clone(),
                        payload: p.payload.to_vec(),
                        retain: p.retain,
                    }),
                    Ok(_) => {}
                    Err(_) if failures < 50 => {
                        failures += 1;
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    Err(_) => break,
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !subscribed.load(std::sync::atomic::Ordering::SeqCst) {
            assert!(
                Instant::now() < deadline,
                "the test's subscriber could not subscribe"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Sub { client, got }
    }

    fn all(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    fn clear(&self) {
        self.got.lock().unwrap().clear();
    }

    /// Waits until a message on `topic` satisfies `ok`, and returns it.
    fn wait_for(&self, topic: &str, timeout: Duration, ok: impl Fn(&Got) -> bool) -> Got {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(g) = self.all().into_iter().find(|g| g.topic == topic && ok(g)) {
                return g;
            }
            assert!(
                Instant::now() < deadline,
                "nothing on {topic} within {timeout:?}; got {:?}",
                self.all()
                    .iter()
                    .map(|g| (g.topic.clone(), g.payload.len()))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn on(&self, topic: &str) -> Vec<Got> {
        self.all()
            .into_iter()
            .filter(|g| g.topic == topic)
            .collect()
    }
}

/// The configuration of a test run: the bundled clip (looped when asked), MQTT on `port`.
fn config(port: u16, client_id: &str, looped: bool, extra: &str) -> String {
    format!(
        "[source]\nloop = {looped}\n[pipeline]\nstats_interval = 1.0\npin_threads = false\n[mqtt]\nhost = \"127.0.0.1\"\nport = {port}\nclient_id = \"{client_id}\"\ncamera = \"yard\"\n{extra}"
    )
}

/// A `lookout run` child, killed if a failing test leaves it running.
struct Daemon(Child);

impl std::ops::Deref for Daemon {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lookout run` on `cfg`, its log in `dir/log`.
fn lookout(dir: &Path, cfg: &str) -> (Daemon, PathBuf) {
    let path = dir.join("lookout.toml");
    std::fs::write(&path, cfg).unwrap();
    let log = dir.join("log");
    let child = Command::new(env!("CARGO_BIN_EXE_lookout"))
        .args(["run", "--config"])
        .arg(&path)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("LOOKOUT_MQTT_PASSWORD")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (Daemon(child), log)
}

fn log_of(path: &Path) -> String {
    let mut s = String::new();
    let _ = std::fs::File::open(path).map(|mut f| f.read_to_string(&mut s));
    s
}

fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{name}");
}

fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("lookout did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_run_publishes_events_counts_snapshots_stats_and_ends_offline() {
    if !have_mosquitto() {
        return;
    }
    let broker = Broker::start();
    let sub = Sub::new(broker.port);
    std::thread::sleep(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let (mut child, log) = lookout(dir.path(), &config(broker.port, "lookout-t1", false, ""));
    let status = wait_exit(&mut child, Duration::from_secs(300));
    let log = log_of(&log);
    assert!(status.success(), "{log}");
    std::thread::sleep(Duration::from_millis(500));

    // Events: every `new` has its `end`, in Frigate's shape.
    let events: Vec<serde_json::Value> = sub.on("lookout/events").iter().map(Got::json).collect();
    let new: Vec<_> = events.iter().filter(|e| e["type"] == "new").collect();
    let end: Vec<_> = events.iter().filter(|e| e["type"] == "end").collect();
    assert!(new.len() >= 5, "{} new events; log:\n{log}", new.len());
    assert_eq!(new.len(), end.len(), "every event ends");
    let journal_events = log.matches("LOOKOUT_EVENT=event_start").count();
    assert_eq!(new.len(), journal_events, "one message per journal event");
    for e in &new {
        let a = &e["after"];
        assert_eq!(a["camera"], "yard");
        assert!(a["id"].as_str().unwrap().contains('-'));
        assert!(
            ["person", "car"].contains(&a["label"].as_str().unwrap()),
            "{a}"
        );
        assert_eq!(a["box"].as_array().unwrap().len(), 4);
        assert!(a["end_time"].is_null());
        assert_eq!(e["before"], e["after"]);
    }
    for e in &end {
        assert!(
            e["after"]["end_time"].as_f64().unwrap() >= e["after"]["start_time"].as_f64().unwrap()
        );
    }
    assert!(
        events.iter().any(|e| e["after"]["has_snapshot"] == true),
        "a snapshot is announced in an update or end"
    );
    // Live messages are not retained; counts went up and came back to 0.
    assert!(sub.on("lookout/events").iter().all(|g| !g.retain));
    let person: Vec<String> = sub
        .on("lookout/yard/person")
        .iter()
        .map(Got::text)
        .collect();
    assert!(person.iter().any(|n| n != "0"), "{person:?}");
    assert_eq!(person.last().map(String::as_str), Some("0"));
    // Stats carry the journal's fields.
    let stats = sub
        .wait_for("lookout/stats", Duration::from_secs(1), |_| true)
        .json();
    assert!(stats["fps"].as_f64().unwrap() > 0.0, "{stats}");
    assert!(stats["cameras"]["yard"]["process_fps"].is_number());

    // A subscriber arriving now gets the retained state: offline, zero counts, a snapshot
    // per label, the Home Assistant entities.
    let late = Sub::new(broker.port);
    let avail = late.wait_for("lookout/available", Duration::from_secs(5), |_| true);
    assert!(avail.retain);
    assert_eq!(avail.text(), "offline", "a clean stop says offline");
    let zero = late.wait_for("lookout/yard/person", Duration::from_secs(5), |_| true);
    assert!(zero.retain);
    assert_eq!(zero.text(), "0");
    let snap = late.wait_for(
        "lookout/yard/person/snapshot",
        Duration::from_secs(5),
        |_| true,
    );
    assert!(snap.retain);
    let img = image::load_from_memory_with_format(&snap.payload, image::ImageFormat::Jpeg)
        .expect("the snapshot is a JPEG");
    assert_eq!(img.height(), 270, "snapshots.height");
    let occupancy = late.wait_for(
        "homeassistant/binary_sensor/lookout-t1/yard_person_occupancy/config",
        Duration::from_secs(5),
        |_| true,
    );
    assert!(occupancy.retain);
    let c = occupancy.json();
    assert_eq!(c["state_topic"], "lookout/yard/person");
    assert_eq!(c["availability_topic"], "lookout/available");
    late.wait_for(
        "homeassistant/image/lookout-t1/yard_person_snapshot/config",
        Duration::from_secs(5),
        |g| g.retain,
    );
    late.wait_for(
        "homeassistant/sensor/lookout-t1/yard_fps/config",
        Duration::from_secs(5),
        |g| g.retain,
    );
    late.wait_for(
        "homeassistant/sensor/lookout-t1/model_ms/config",
        Duration::from_secs(5),
        |g| g.retain,
    );
}

#[test]
fn killed_lookout_is_offline_by_its_last_will() {
    if !have_mosquitto() {
        return;
    }
    let broker = Broker::start();
    let sub = Sub::new(broker.port);
    let dir = tempfile::tempdir().unwrap();
    let (mut child, log) = lookout(dir.path(), &config(broker.port, "lookout-t2", true, ""));
    sub.wait_for("lookout/available", Duration::from_secs(120), |g| {
        g.text() == "online"
    });
    sub.wait_for("lookout/stats", Duration::from_secs(120), |_| true);
    signal(&child, "KILL");
    let _ = child.wait();
    let will = sub.wait_for("lookout/available", Duration::from_secs(10), |g| {
        g.text() == "offline"
    });
    assert_eq!(will.text(), "offline", "{}", log_of(&log));
}

#[test]
fn home_assistants_birth_brings_discovery_again_and_a_reload_removes_a_label() {
    if !have_mosquitto() {
        return;
    }
    let broker = Broker::start();
    let sub = Sub::new(broker.port);
    let dir = tempfile::tempdir().unwrap();
    let labels = "[events]\nlabels = [\"person\", \"car\"]\n";
    let cfg = config(broker.port, "lookout-t3", true, labels);
    let (mut child, log) = lookout(dir.path(), &cfg);
    let car = "homeassistant/binary_sensor/lookout-t3/yard_car_occupancy/config";
    sub.wait_for(car, Duration::from_secs(120), |g| !g.payload.is_empty());
    sub.wait_for("lookout/stats", Duration::from_secs(120), |_| true);

    // Home Assistant restarts: its birth message brings every config again (within the
    // random delay of at most a second).
    sub.clear();
    sub.client
        .publish("homeassistant/status", QoS::AtMostOnce, false, "online")
        .unwrap();
    sub.wait_for(car, Duration::from_secs(5), |g| !g.payload.is_empty());
    sub.wait_for("lookout/yard/person", Duration::from_secs(5), |_| true);
    // Anything else on that topic is ignored.
    sub.clear();
    sub.client
        .publish(
            "homeassistant/status",
            QoS::AtMostOnce,
            false,
            vec![0xffu8; 5000],
        )
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(sub.on(car).is_empty(), "garbage is not a birth");

    // `car` leaves the configuration: its entities are removed (empty retained configs).
    let cfg = config(
        broker.port,
        "lookout-t3",
        true,
        "[events]\nlabels = [\"person\"]\n",
    );
    std::fs::write(dir.path().join("lookout.toml"), cfg).unwrap();
    signal(&child, "HUP");
    let gone = sub.wait_for(car, Duration::from_secs(60), |g| g.payload.is_empty());
    assert!(gone.retain || gone.payload.is_empty());
    let late = Sub::new(broker.port);
    late.wait_for(
        "homeassistant/binary_sensor/lookout-t3/yard_person_occupancy/config",
        Duration::from_secs(5),
        |g| g.retain,
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        late.on(car).is_empty(),
        "the removed entity is not retained"
    );
    signal(&child, "TERM");
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "{}", log_of(&log));
}

#[test]
fn a_broker_outage_is_counted_and_everything_is_published_again_when_it_returns() {
    if !have_mosquitto() {
        return;
    }
    let mut broker = Broker::start();
    let sub = Sub::new(broker.port);
    let dir = tempfile::tempdir().unwrap();
    let (mut child, log) = lookout(dir.path(), &config(broker.port, "lookout-t4", true, ""));
    sub.wait_for("lookout/stats", Duration::from_secs(120), |_| true);

    // The broker goes away for a few seconds (stats keep coming every second: dropped and
    // counted), and comes back empty (no persistence): lookout publishes its state again.
    broker.kill();
    std::thread::sleep(Duration::from_secs(4));
    broker.spawn();
    let back = Instant::now();
    let sub = Sub::new(broker.port);
    sub.wait_for("lookout/available", Duration::from_secs(10), |g| {
        g.text() == "online"
    });
    sub.wait_for(
        "homeassistant/sensor/lookout-t4/yard_person_count/config",
        Duration::from_secs(10),
        |_| true,
    );
    sub.wait_for("lookout/yard/all", Duration::from_secs(10), |_| true);
    let republished = back.elapsed();
    assert!(
        republished < Duration::from_secs(6),
        "state published again {republished:?} after the broker's return"
    );
    let stats = sub
        .wait_for("lookout/stats", Duration::from_secs(10), |_| true)
        .json();
    assert!(
        stats["mqtt_dropped"].as_u64().unwrap() >= 1,
        "what was lost while the broker was away is counted: {stats}"
    );
    assert!(stats["fps"].as_f64().unwrap() > 0.0, "frames kept flowing");
    signal(&child, "TERM");
    let status = wait_exit(&mut child, Duration::from_secs(10));
    let log = log_of(&log);
    assert!(status.success(), "{log}");
    assert!(
        log.contains("MQTT 127.0.0.1:"),
        "the outage is logged naming the broker: {log}"
    );
}

/// Runs `cmd` in `dir`, which must succeed.
fn run_in(dir: &Path, cmd: &str) {
    let ok = Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "{cmd}");
}

/// Waits until `log` says `what`; returns the log.
fn wait_log(log: &Path, what: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = log_of(log);
        if text.contains(what) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "the log never said {what:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tls_to_a_broker_whose_ca_is_given_and_one_clear_line_when_trust_or_credentials_fail() {
    if !have_mosquitto() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A CA, a server certificate for 127.0.0.1 signed by it, and a CA nobody signed with.
    run_in(d, "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=lookout-test-ca");
    run_in(d, "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1");
    run_in(d, "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext");
    run_in(d, "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 -subj /CN=other-ca");
    run_in(
        d,
        "mosquitto_passwd -b -c passwords lookout s3cret && chmod 0644 passwords server.key && chmod 0755 .",
    );
    std::fs::write(d.join("pw"), "s3cret\n").unwrap();
    let mut broker = Broker::start();
    broker.kill();
    let p = |f: &str| d.join(f).display().to_string();
    broker.spawn_with(&format!(
        "listener {} 127.0.0.1\ncafile {}\ncertfile {}\nkeyfile {}\nallow_anonymous false\npassword_file {}\npersistence false\n",
        broker.port, p("ca.pem"), p("server.pem"), p("server.key"), p("passwords")
    ));
    let tls = |ca: &str, pw: &str| {
        format!(
            "username = \"lookout\"\npassword_file = \"{}\"\nca_file = \"{}\"\n",
            p(pw),
            p(ca)
        )
    };
    // The right CA and password: connected over TLS (the broker refuses anything else).
    let run = tempfile::tempdir().unwrap();
    std::fs::write(d.join("bad-pw"), "wrong\n").unwrap();
    let (mut child, log) = lookout(
        run.path(),
        &config(broker.port, "lookout-t5", true, &tls("ca.pem", "pw")),
    );
    wait_log(
        &log,
        &format!("MQTT 127.0.0.1:{}: connected", broker.port),
        Duration::from_secs(120),
    );
    signal(&child, "TERM");
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());

    // A CA that did not sign the broker's certificate: one line naming the broker and TLS.
    for (ca, pw, says) in [
        ("other.pem", "pw", "TLS:"),
        ("ca.pem", "bad-pw", "the broker refused"),
    ] {
        let run = tempfile::tempdir().unwrap();
        let (mut child, log) = lookout(
            run.path(),
            &config(broker.port, "lookout-t5", true, &tls(ca, pw)),
        );
        let text = wait_log(&log, says, Duration::from_secs(120));
        let line = text.lines().find(|l| l.contains(says)).unwrap();
        assert!(
            line.contains(&format!("MQTT 127.0.0.1:{}", broker.port)),
            "{line}"
        );
        // Retried every few seconds, said once.
        std::thread::sleep(Duration::from_secs(5));
        assert_eq!(log_of(&log).matches(says).count(), 1, "{}", log_of(&log));
        signal(&child, "TERM");
        assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    }
}

/// A TCP relay from lookout to the broker whose lookout → broker direction can be held:
/// while held it reads nothing, and its receive buffer is 4 KiB, so what lookout writes
/// piles up in lookout's own socket until a write would block — a broker that has stopped
/// reading (overloaded, or a link that has stalled) while the connection stays up.
struct Relay {
    port: u16,
    hold: Arc<std::sync::atomic::AtomicBool>,
    /// lookout's port of the newest connection.
    peer: Arc<std::sync::atomic::AtomicU16>,
}

impl Relay {
    fn start(broker_port: u16) -> Relay {
        use socket2::{Domain, Socket, Type};
        use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.set_recv_buffer_size(4096).unwrap();
        s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        s.listen(8).unwrap();
        let listener: std::net::TcpListener = s.into();
        let port = listener.local_addr().unwrap().port();
        let hold = Arc::new(AtomicBool::new(false));
        let peer = Arc::new(AtomicU16::new(0));
        let (h, p) = (hold.clone(), peer.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(down) = conn else { break };
                let Ok(up) = TcpStream::connect(("127.0.0.1", broker_port)) else {
                    continue;
                };
                p.store(
                    down.peer_addr().map(|a| a.port()).unwrap_or(0),
                    Ordering::SeqCst,
                );
                let (mut down_r, mut up_w) = (down.try_clone().unwrap(), up.try_clone().unwrap());
                let (mut up_r, mut down_w) = (up, down);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut up_r, &mut down_w);
                });
                let h = h.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    loop {
                        while h.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        match down_r.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if std::io::Write::write_all(&mut up_w, &buf[..n]).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = up_w.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Relay { port, hold, peer }
    }

    fn hold(&self, on: bool) {
        self.hold.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Bytes lookout has written to the relay that are not yet taken (its socket's send
    /// queue, from /proc/net/tcp), if the connection is found.
    fn unsent(&self) -> Option<u64> {
        let peer = self.peer.load(std::sync::atomic::Ordering::SeqCst);
        let tcp = std::fs::read_to_string("/proc/net/tcp").ok()?;
        tcp.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let port = |a: &str| u16::from_str_radix(a.rsplit(':').next()?, 16).ok();
            (f.len() > 4 && port(f[1]) == Some(peer) && port(f[2]) == Some(self.port))
                .then(|| u64::from_str_radix(f[4].split(':').next()?, 16).ok())
                .flatten()
        })
    }
}

/// Whether `text` has `pat` at or after byte `from` (a log read again later: `from` need not
/// fall on a character's boundary in it).
fn contains_from(text: &str, from: usize, pat: &str) -> bool {
    text.as_bytes()
        .get(from..)
        .is_some_and(|b| b.windows(pat.len()).any(|w| w == pat.as_bytes()))
}

/// The stats lines of a log (stderr of `lookout run`), as (FPS, FRAMES_DROPPED).
fn stats_lines(log: &str) -> Vec<(f64, u64)> {
    let field = |l: &str, k: &str| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse::<f64>().ok())
    };
    log.lines()
        .filter(|l| l.contains("LOOKOUT_EVENT=stats"))
        .filter_map(|l| Some((field(l, "FPS=")?, field(l, "FRAMES_DROPPED=")? as u64)))
        .collect()
}

#[test]
fn a_broker_that_stops_reading_fills_the_socket_and_the_queue_but_never_the_frame_rate() {
    if !have_mosquitto() {
        return;
    }
    let broker = Broker::start();
    let sub = Sub::new(broker.port);
    let relay = Relay::start(broker.port);
    let dir = tempfile::tempdir().unwrap();
    // Stats twice a second and whole-frame snapshots at 1080 px (tens of kilobytes each), so
    // the socket, the connection's own queue (64) and lookout's (16) fill within the hold; a
    // keepalive long enough that the connection stays up while held.
    let cfg = format!(
        "[source]\nloop = true\n[pipeline]\nstats_interval = 0.5\npin_threads = false\n[mqtt]\nhost = \"127.0.0.1\"\nport = {}\nclient_id = \"lookout-t6\"\ncamera = \"yard\"\nqueue = 16\nkeepalive = 120\n[snapshots]\ncrop = false\nheight = 2160\nquality = 95\n",
        relay.port
    );
    let (mut child, log) = lookout(dir.path(), &cfg);
    sub.wait_for("lookout/stats", Duration::from_secs(120), |_| true);
    let before = stats_lines(&log_of(&log));

    // Held until something is dropped (the kernel's send buffer, up to 4 MB here, fills
    // first: about a minute of this traffic), for at most 4 minutes.
    let rss = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    // Resident memory's floor (the least of a few seconds' samples): a 2160-px encode in
    // flight holds ~40 MB for a moment, which says nothing about what piles up.
    let floor = |secs: u64| {
        let until = Instant::now() + Duration::from_secs(secs);
        let mut least = u64::MAX;
        while Instant::now() < until {
            least = least.min(rss(child.id()));
            std::thread::sleep(Duration::from_millis(50));
        }
        least
    };
    let rss_before = floor(3);
    // What was dropped before the hold: on a busy machine the start's burst (discovery, the
    // first 2160-px snapshots) can overflow a 16-message queue already. Only drops after the
    // hold count below (the warning is at most once a minute, so the first one in the hold
    // may come up to a minute late).
    let dropped_before = sub
        .on("lookout/stats")
        .iter()
        .filter_map(|g| g.json()["mqtt_dropped"].as_u64())
        .max()
        .unwrap_or(0);
    relay.hold(true);
    let held = Instant::now();
    let held_from = log_of(&log).len();
    let dropped_in_hold = || contains_from(&log_of(&log), held_from, "LOOKOUT_EVENT=mqtt_dropped");
    let mut unsent = 0;
    while held.elapsed() < Duration::from_secs(240) && !dropped_in_hold() {
        unsent = unsent.max(relay.unsent().unwrap_or(0));
        std::thread::sleep(Duration::from_millis(100));
    }
    // A few more seconds of drops, the queues full.
    let rss_held = floor(5);
    let text = log_of(&log);
    let during = stats_lines(&text)[before.len()..].to_vec();
    eprintln!(
        "held {:.0} s: at most {unsent} bytes unsent in lookout's socket; RSS floor {rss_before} -> {rss_held} kB",
        held.elapsed().as_secs_f64()
    );
    for l in text.lines().filter(|l| l.contains("LOOKOUT_EVENT=mqtt_")) {
        eprintln!("  {l}");
    }
    relay.hold(false);

    assert!(
        unsent >= 1 << 20,
        "lookout's socket filled while the broker read nothing: at most {unsent} bytes unsent"
    );
    assert!(
        contains_from(&text, held_from, "LOOKOUT_EVENT=mqtt_dropped"),
        "messages were dropped and counted once the socket was full:\n{text}"
    );
    // Memory stays bounded: lookout's queue (16 messages, at most 16 MB) and the
    // connection's (16 messages of at most a snapshot: 2160-px whole frames here, under 1 MB).
    assert!(
        rss_held < rss_before + 34 * 1024,
        "RSS floor {rss_before} -> {rss_held} kB while held"
    );
    // Frames kept flowing at the clip's pace (10 fps) while held: the tracker never waited
    // for the network. (On a machine busy with other jobs and the 2160-px encodes a window
    // may come out slow, and a frame or two may be dropped; a tracker held by the network
    // would fall behind for the whole hold and drop frames by the second.)
    assert!(during.len() >= 20, "stats kept coming: {during:?}");
    let mut paced: Vec<f64> = before.iter().map(|s| s.0).collect();
    paced.sort_by(f64::total_cmp);
    let pace = paced[paced.len() / 2];
    let mean = during.iter().map(|s| s.0).sum::<f64>() / during.len() as f64;
    let slow = during.iter().filter(|s| s.0 < 0.5 * pace).count();
    assert!(
        mean >= 0.8 * pace && slow <= 1,
        "while held: {mean:.1} fps on average, {slow} window(s) under half the pace (before: {pace} fps); all: {during:?}"
    );
    let frames: f64 = during.iter().map(|s| s.0 * 0.5).sum();
    let dropped: u64 = during.iter().map(|s| s.1).sum();
    assert!(
        (dropped as f64) <= 0.02 * frames,
        "{dropped} of {frames:.0} frames dropped while held: {during:?}"
    );
    // Released: the backlog drains and the next stats counts what the full queue dropped.
    sub.clear();
    let released = Instant::now();
    let stats = sub
        .wait_for("lookout/stats", Duration::from_secs(90), |g| {
            g.json()["mqtt_dropped"].as_u64().unwrap_or(0) > dropped_before
        })
        .json();
    eprintln!(
        "released: stats counting the drops after {:.1} s: {stats}; got {:?}",
        released.elapsed().as_secs_f64(),
        sub.on("lookout/stats")
            .iter()
            .map(|g| g.json()["mqtt_dropped"].as_u64())
            .collect::<Vec<_>>()
    );
    assert!(stats["fps"].as_f64().unwrap() > 0.0, "{stats}");
    signal(&child, "TERM");
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "{}", log_of(&log));
}

#[test]
fn several_cameras_publish_under_their_own_names_and_get_their_own_entities() {
    if !have_mosquitto() {
        return;
    }
    let broker = Broker::start();
    let sub = Sub::new(broker.port);
    let dir = tempfile::tempdir().unwrap();
    // Two cameras on the bundled clip; the yard one reports cars only, so its person count
    // and entities do not exist.
    let cfg = format!(
        "[pipeline]\nstats_interval = 1.0\npin_threads = false\n[mqtt]\nhost = \"127.0.0.1\"\nport = {}\nclient_id = \"lookout-t7\"\n\n[[camera]]\nname = \"door\"\n[camera.source]\nspec = \"demo\"\n[camera.events]\nlabels = [\"person\"]\n\n[[camera]]\nname = \"yard\"\n[camera.source]\nspec = \"demo\"\n[camera.events]\nlabels = [\"car\"]\n",
        broker.port
    );
    let (mut child, log) = lookout(dir.path(), &cfg);
    let status = wait_exit(&mut child, Duration::from_secs(300));
    let text = log_of(&log);
    assert!(status.success(), "{text}");
    std::thread::sleep(Duration::from_millis(500));
    let all = sub.all();
    let has = |t: &str| all.iter().any(|g| g.topic == t);
    for t in [
        "homeassistant/binary_sensor/lookout-t7/door_person_occupancy/config",
        "homeassistant/sensor/lookout-t7/yard_car_count/config",
        "homeassistant/sensor/lookout-t7/door_fps/config",
        "homeassistant/sensor/lookout-t7/yard_fps/config",
        "homeassistant/sensor/lookout-t7/model_ms/config",
        "lookout/door/person",
        "lookout/door/all",
        "lookout/yard/car",
        "lookout/yard/all",
    ] {
        assert!(has(t), "{t} was published; got {:?}", topics(&all));
    }
    assert!(
        !has("lookout/yard/person")
            && !has("homeassistant/sensor/lookout-t7/yard_person_count/config")
    );
    // Events name their camera, with that camera's labels; both cameras saw the people and
    // the cars of the clip.
    let events: Vec<serde_json::Value> = sub.on("lookout/events").iter().map(Got::json).collect();
    let of = |cam: &str| {
        events
            .iter()
            .filter(|e| e["after"]["camera"] == cam)
            .map(|e| e["after"]["label"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    let (door, yard) = (of("door"), of("yard"));
    assert!(
        !door.is_empty() && door.iter().all(|l| l == "person"),
        "door: {door:?}"
    );
    assert!(
        !yard.is_empty() && yard.iter().all(|l| l == "car"),
        "yard: {yard:?}"
    );
    // The counts of each camera went up and came back to 0 at the end.
    for t in ["lookout/door/person", "lookout/yard/car"] {
        let counts: Vec<String> = sub.on(t).iter().map(Got::text).collect();
        assert!(counts.iter().any(|c| c != "0"), "{t}: {counts:?}");
        assert_eq!(
            counts.last().map(String::as_str),
            Some("0"),
            "{t}: {counts:?}"
        );
    }
    // A stats message names its camera, and carries every camera that has reported.
    let stats: Vec<serde_json::Value> = sub.on("lookout/stats").iter().map(Got::json).collect();
    assert!(stats.iter().any(|s| s["camera"] == "door"));
    assert!(stats.iter().any(|s| s["camera"] == "yard"));
    assert!(
        stats
            .iter()
            .any(|s| s["cameras"]["door"].is_object() && s["cameras"]["yard"].is_object()),
        "{stats:?}"
    );
}

fn topics(all: &[Got]) -> Vec<String> {
    let mut t: Vec<String> = all.iter().map(|g| g.topic.clone()).collect();
    t.sort();
    t.dedup();
    t
}

#[test]
fn detect_set_switches_a_cameras_detection_off_and_on_and_its_state_follows() {
    if !have_mosquitto() {
        return;
    }
    let broker = Broker::start();
    let sub = Sub::new(broker.port);
    let dir = tempfile::tempdir().unwrap();
    let (mut child, log) = lookout(dir.path(), &config(broker.port, "lookout-t9", true, ""));
    let state = "lookout/yard/detect/state";
    let set = "lookout/yard/detect/set";
    let switch = "homeassistant/switch/lookout-t9/yard_detect/config";
    let cfg = sub.wait_for(switch, Duration::from_secs(120), |g| !g.payload.is_empty());
    assert_eq!(cfg.json()["command_topic"], set);
    assert_eq!(cfg.json()["state_topic"], state);
    sub.wait_for(state, Duration::from_secs(5), |g| g.text() == "ON");
    let detecting = |g: &Got| g.json()["detect_fps"].as_f64().is_some_and(|f| f > 0.0);
    sub.wait_for("lookout/stats", Duration::from_secs(120), detecting);

    // OFF: the state follows, the camera's events end and its detector stops; frames flow.
    sub.clear();
    sub.client
        .publish(set, QoS::AtLeastOnce, false, "OFF")
        .unwrap();
    sub.wait_for(state, Duration::from_secs(5), |g| g.text() == "OFF");
    wait_log(
        &log,
        "detection for camera \"yard\" switched off",
        Duration::from_secs(5),
    );
    // The tracker thread applies it on its next frame; an event may have started until then.
    wait_log(
        &log,
        "camera \"yard\": detection switched off",
        Duration::from_secs(5),
    );
    std::thread::sleep(Duration::from_millis(300));
    sub.clear();
    let idle = |g: &Got| {
        let j = g.json();
        j["detect_fps"].as_f64() == Some(0.0) && j["fps"].as_f64().is_some_and(|f| f > 0.0)
    };
    // The window under way when it was switched may still hold detections; a later one not.
    sub.wait_for("lookout/stats", Duration::from_secs(10), idle);
    let late = Sub::new(broker.port);
    late.wait_for(state, Duration::from_secs(5), |g| {
        g.retain && g.text() == "OFF"
    });
    late.wait_for("lookout/yard/all", Duration::from_secs(5), |g| {
        g.retain && g.text() == "0"
    });
    let events: Vec<serde_json::Value> = sub.on("lookout/events").iter().map(Got::json).collect();
    assert!(
        events.iter().all(|e| e["type"] != "new"),
        "no event starts while detection is off: {events:?}"
    );

    // Neither another camera's name nor another word switches anything.
    sub.clear();
    sub.client
        .publish("lookout/porch/detect/set", QoS::AtLeastOnce, false, "ON")
        .unwrap();
    sub.client
        .publish(set, QoS::AtLeastOnce, false, "maybe")
        .unwrap();
    wait_log(
        &log,
        "lookout/porch/detect/set names no camera",
        Duration::from_secs(5),
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(sub.on(state).is_empty(), "{:?}", topics(&sub.all()));

    // ON: detection comes back.
    sub.client
        .publish(set, QoS::AtLeastOnce, false, "on")
        .unwrap();
    sub.wait_for(state, Duration::from_secs(5), |g| g.text() == "ON");
    sub.wait_for("lookout/stats", Duration::from_secs(30), detecting);
    signal(&child, "TERM");
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "{}", log_of(&log));
}
