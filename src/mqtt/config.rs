//! The `[mqtt]` table: where the broker is, who lookout is to it, and how it names things.
//! MQTT is off while `host` is empty.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The environment variable a password may come from (`password_file` wins over it, it wins
/// over `password`).
pub const PASSWORD_ENV: &str = "LOOKOUT_MQTT_PASSWORD";

/// The longest password file read (a password, not a file to slurp).
const PASSWORD_FILE_LIMIT: u64 = 4096;

/// Settings of the MQTT client ([`super::Mqtt`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MqttConfig {
    /// The broker's host name or address. Empty: MQTT off.
    pub host: String,
    /// The broker's port (1883 plain, 8883 usual for TLS).
    pub port: u16,
    /// The client id. Empty: `lookout-<hostname>`.
    pub client_id: String,
    /// The first level of every topic lookout publishes (`lookout/events`, …). `frigate`
    /// makes automations written for Frigate's topics work for the fields lookout fills.
    pub topic_prefix: String,
    /// This camera's name in topics, payloads and Home Assistant (letters, digits, `_`, `-`).
    pub camera: String,
    /// User name; empty: anonymous.
    pub username: String,
    /// Password (a configuration file that others can read is warned about: prefer
    /// `password_file` or the `LOOKOUT_MQTT_PASSWORD` environment variable).
    pub password: String,
    /// A file holding the password (its first line).
    pub password_file: String,
    /// CA certificate file (PEM): set it to connect with TLS.
    pub ca_file: String,
    /// Client certificate (PEM) for brokers that ask for one; with `client_key`.
    pub client_cert: String,
    /// The client certificate's private key (PEM).
    pub client_key: String,
    /// Seconds between keep-alive pings (5–3600).
    pub keepalive: u64,
    /// QoS of events, counts and stats (0, 1 or 2). Availability and discovery use 1.
    pub qos: u8,
    /// Messages waiting for the broker at most (then the oldest stats and updates are
    /// dropped first, and counted).
    pub queue: usize,
    /// Announce lookout's entities to Home Assistant (MQTT discovery).
    pub discovery: bool,
    /// Home Assistant's discovery prefix.
    pub discovery_prefix: String,
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            host: String::new(),
            port: 1883,
            client_id: String::new(),
            topic_prefix: "lookout".into(),
            camera: "camera".into(),
            username: String::new(),
            password: String::new(),
            password_file: String::new(),
            ca_file: String::new(),
            client_cert: String::new(),
            client_key: String::new(),
            keepalive: 60,
            qos: 0,
            queue: 256,
            discovery: true,
            discovery_prefix: "homeassistant".into(),
        }
    }
}

/// A problem with one key of `[mqtt]`.
#[derive(Clone, Debug, PartialEq)]
pub struct MqttConfigError {
    /// The key, `mqtt.` included.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

fn err(key: &str, message: impl Into<String>) -> MqttConfigError {
    MqttConfigError {
        key: format!("mqtt.{key}"),
        message: message.into(),
    }
}

/// Whether `s` is usable as one topic level and a Home Assistant object id.
pub fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `s` is usable as a topic prefix: levels of printable characters, no wildcard, no
/// empty level.
fn is_topic_prefix(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.split('/').all(|level| {
            !level.is_empty()
                && level
                    .chars()
                    .all(|c| c.is_ascii_graphic() && c != '+' && c != '#')
        })
}

impl MqttConfig {
    /// Whether MQTT is on.
    pub fn enabled(&self) -> bool {
        !self.host.is_empty()
    }

    /// Whether the connection uses TLS.
    pub fn tls(&self) -> bool {
        !self.ca_file.is_empty()
    }

    /// The client id to use: the configured one, or `lookout-<hostname>`.
    pub fn client_id(&self) -> String {
        if self.client_id.is_empty() {
            format!("lookout-{}", crate::sysinfo::hostname())
        } else {
            self.client_id.clone()
        }
    }

    /// The checks of the values alone (no file is read).
    pub fn check_values(&self) -> Vec<MqttConfigError> {
        let mut p = Vec::new();
        if self.host.chars().any(|c| c.is_whitespace() || c == '/') || self.host.len() > 253 {
            p.push(err(
                "host",
                format!("{:?} is not a host name or address", self.host),
            ));
        }
        if self.port == 0 {
            p.push(err("port", "must be 1–65535"));
        }
        let id = &self.client_id;
        if id.len() > 128 || id.chars().any(|c| c.is_control()) {
            p.push(err("client_id", "must be at most 128 printable characters"));
        }
        if !is_topic_prefix(&self.topic_prefix) {
            p.push(err(
                "topic_prefix",
                format!(
                    "{:?} is not a topic prefix: levels separated by '/', none empty, no '+' or '#', no spaces",
                    self.topic_prefix
                ),
            ));
        }
        if !is_plain_name(&self.camera) {
            p.push(err(
                "camera",
                format!(
                    "{:?}: use 1–64 letters, digits, '_' or '-' (it is a topic level and a Home Assistant id)",
                    self.camera
                ),
            ));
        }
        if !(5..=3600).contains(&self.keepalive) {
            p.push(err("keepalive", "must be 5–3600 seconds"));
        }
        if self.qos > 2 {
            p.push(err("qos", "must be 0, 1 or 2"));
        }
        if !(16..=100_000).contains(&self.queue) {
            p.push(err("queue", "must be 16–100000 messages"));
        }
        if !is_topic_prefix(&self.discovery_prefix) {
            p.push(err(
                "discovery_prefix",
                format!("{:?} is not a topic prefix", self.discovery_prefix),
            ));
        }
        if self.client_cert.is_empty() != self.client_key.is_empty() {
            p.push(err(
                if self.client_cert.is_empty() {
                    "client_key"
                } else {
                    "client_cert"
                },
                "client_cert and client_key go together",
            ));
        }
        if !self.client_cert.is_empty() && self.ca_file.is_empty() {
            p.push(err(
                "ca_file",
                "a client certificate needs TLS: set ca_file to the broker's CA",
            ));
        }
        p
    }

    /// The checks that read files: the password file and TLS files exist and are readable.
    pub fn check_environment(&self) -> Vec<MqttConfigError> {
        let mut p = Vec::new();
        if !self.enabled() {
            return p;
        }
        if !self.password_file.is_empty() {
            if let Err(e) = read_password_file(Path::new(&self.password_file)) {
                p.push(err("password_file", e));
            }
        }
        for (key, path) in [
            ("ca_file", &self.ca_file),
            ("client_cert", &self.client_cert),
            ("client_key", &self.client_key),
        ] {
            if path.is_empty() {
                continue;
            }
            let marker = if key == "client_key" {
                "PRIVATE KEY-----"
            } else {
                "-----BEGIN CERTIFICATE-----"
            };
            match crate::files::read_bounded(Path::new(path), 1 << 20, key) {
                Err(e) => p.push(err(key, e.to_string())),
                Ok(bytes) if !String::from_utf8_lossy(&bytes).contains(marker) => p.push(err(
                    key,
                    format!("{path} is not PEM (no \"{marker}\" line)"),
                )),
                Ok(_) => {}
            }
        }
        p
    }

    /// The password to log in with: from `password_file`, else `LOOKOUT_MQTT_PASSWORD`, else
    /// `password`; `None` when none is set.
    pub fn password(&self) -> Result<Option<String>, String> {
        if !self.password_file.is_empty() {
            return read_password_file(Path::new(&self.password_file)).map(Some);
        }
        if let Ok(p) = std::env::var(PASSWORD_ENV) {
            if !p.is_empty() {
                return Ok(Some(p));
            }
        }
        Ok((!self.password.is_empty()).then(|| self.password.clone()))
    }
}

/// The first line of a password file.
fn read_password_file(path: &Path) -> Result<String, String> {
    let text = crate::files::read_bounded_text(path, PASSWORD_FILE_LIMIT, "password file")
        .map_err(|e| e.to_string())?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(format!("{} holds no password", path.display()));
    }
    Ok(line.to_string())
}

/// Whether a configuration file others can read holds a password: the warning's text.
pub fn readable_password_warning(cfg: &MqttConfig, config_file: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if cfg.password.is_empty() {
        return None;
    }
    let mode = std::fs::metadata(config_file).ok()?.permissions().mode();
    (mode & 0o004 != 0).then(|| {
        format!(
            "{} holds mqtt.password and every user can read it (mode {:o}): use mqtt.password_file or {PASSWORD_ENV}, or chmod o-r",
            config_file.display(),
            mode & 0o777
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_off_and_valid() {
        let c = MqttConfig::default();
        assert!(!c.enabled());
        assert!(c.check_values().is_empty());
    }

    #[test]
    fn names_that_cannot_be_topic_levels_are_refused() {
        let c = MqttConfig {
            camera: "front door".into(),
            topic_prefix: "home/#".into(),
            discovery_prefix: "".into(),
            qos: 3,
            keepalive: 1,
            ..MqttConfig::default()
        };
        let keys: Vec<String> = c.check_values().into_iter().map(|e| e.key).collect();
        assert_eq!(
            keys,
            [
                "mqtt.topic_prefix",
                "mqtt.camera",
                "mqtt.keepalive",
                "mqtt.qos",
                "mqtt.discovery_prefix"
            ]
        );
        assert!(is_topic_prefix("home/cameras"));
        assert!(!is_topic_prefix("home//cameras"));
    }

    #[test]
    fn the_password_file_wins_and_its_first_line_is_the_password() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "s3cret\nignored\n").unwrap();
        let c = MqttConfig {
            host: "localhost".into(),
            password: "inline".into(),
            password_file: f.display().to_string(),
            ..MqttConfig::default()
        };
        assert_eq!(c.password().unwrap().as_deref(), Some("s3cret"));
        std::fs::write(&f, "").unwrap();
        assert!(c.password().is_err());
        assert_eq!(c.check_environment()[0].key, "mqtt.password_file");
    }

    #[test]
    fn a_world_readable_config_with_a_password_is_warned_about() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut c = MqttConfig {
            password: "x".into(),
            ..MqttConfig::default()
        };
        assert!(readable_password_warning(&c, &f).is_some());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(readable_password_warning(&c, &f).is_none());
        c.password.clear();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(readable_password_warning(&c, &f).is_none());
    }
}
