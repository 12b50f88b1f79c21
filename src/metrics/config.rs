//! The `[metrics]` table: whether the Prometheus exporter runs, the address `/metrics` is
//! served on and the optional node_exporter text file; validation that names the key.

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where the exporter listens unless told otherwise: loopback only, Prometheus' port for
/// exporters of this kind.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// Settings of the Prometheus exporter ([`super::Metrics`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Export metrics at all (off by default).
    pub enabled: bool,
    /// `IP:PORT` the HTTP server serves `GET /metrics` on; `""` = no server (text file only).
    /// An address other than loopback makes the port reachable from the network (logged as a
    /// warning at start).
    pub listen: String,
    /// node_exporter textfile collector file (an absolute path ending in `.prom`), rewritten
    /// atomically (a temporary file in the same directory, then a rename) every
    /// `pipeline.stats_interval`; `""` = none.
    pub textfile: String,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: false,
            listen: DEFAULT_LISTEN.into(),
            textfile: String::new(),
        }
    }
}

/// A bad `[metrics]` setting: the dotted key and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct MetricsConfigError {
    /// Dotted key path, e.g. `metrics.listen`.
    pub key: &'static str,
    /// What was expected and what was found.
    pub message: String,
}

fn err(key: &'static str, message: String) -> MetricsConfigError {
    MetricsConfigError { key, message }
}

impl MetricsConfig {
    /// The address to listen on; `None` for no HTTP server (or an address that does not
    /// parse, which validation refuses).
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        match self.listen.trim() {
            "" => None,
            s => s.parse().ok(),
        }
    }

    /// The text file to write, if any.
    pub fn textfile_path(&self) -> Option<&Path> {
        match self.textfile.trim() {
            "" => None,
            _ => Some(Path::new(&self.textfile)),
        }
    }

    /// The checks of the values alone (the address's form, the file name's): no file or
    /// socket is touched. Checked whether or not the exporter is enabled: a typo is a typo.
    pub fn check_values(&self) -> Vec<MetricsConfigError> {
        let mut p = Vec::new();
        let listen = self.listen.trim();
        if !listen.is_empty() {
            match listen.parse::<SocketAddr>() {
                Ok(a) if a.port() == 0 => p.push(err(
                    "metrics.listen",
                    format!("expected a port in 1..=65535, found {listen:?} (port 0 would be a different one at every start)"),
                )),
                Ok(_) => {}
                Err(_) => p.push(err(
                    "metrics.listen",
                    format!("expected IP:PORT such as \"127.0.0.1:9464\" or \"[::1]:9464\" (a host name is not resolved), or \"\" for no HTTP server; found {listen:?}"),
                )),
            }
        }
        if let Some(path) = self.textfile_path() {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let prom = name.as_deref().is_some_and(|n| {
                n.len() > ".prom".len() && n.ends_with(".prom") && !n.starts_with('.')
            });
            if !path.is_absolute() || !prom {
                p.push(err(
                    "metrics.textfile",
                    format!(
                        "expected an absolute path of a file named *.prom (node_exporter's textfile collector reads only those), such as \"/var/lib/prometheus/node-exporter/lookout.prom\"; found {:?}",
                        self.textfile
                    ),
                ));
            }
        }
        if self.enabled && listen.is_empty() && self.textfile_path().is_none() {
            p.push(err(
                "metrics.enabled",
                "is true but there is nothing to export to: set metrics.listen (an IP:PORT) or metrics.textfile".into(),
            ));
        }
        p
    }

    /// The checks that ask the machine, when the exporter is enabled: the text file's
    /// directory exists and the file is not a directory. Whether the address can be bound is
    /// learnt at start (a port taken is logged, and the daemon goes on detecting).
    pub fn check_environment(&self) -> Vec<MetricsConfigError> {
        let mut p = Vec::new();
        let Some(path) = self.textfile_path().filter(|_| self.enabled) else {
            return p;
        };
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if !dir.is_some_and(Path::is_dir) {
            p.push(err(
                "metrics.textfile",
                format!(
                    "expected a file in an existing directory, found {} (no such directory)",
                    self.textfile
                ),
            ));
        } else if path.is_dir() {
            p.push(err(
                "metrics.textfile",
                format!("expected a file, found {} (a directory)", self.textfile),
            ));
        }
        p
    }
}

/// Whether an address only this machine can reach.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(c: &MetricsConfig) -> Vec<&'static str> {
        c.check_values().into_iter().map(|e| e.key).collect()
    }

    #[test]
    fn defaults_are_valid_and_off() {
        let c = MetricsConfig::default();
        assert!(!c.enabled);
        assert_eq!(keys(&c), Vec::<&str>::new());
        assert_eq!(c.listen_addr(), Some("127.0.0.1:9464".parse().unwrap()));
        assert!(c.textfile_path().is_none());
    }

    #[test]
    fn addresses_and_file_names_are_checked() {
        let mut c = MetricsConfig::default();
        for bad in [
            "localhost:9464",
            "127.0.0.1",
            "127.0.0.1:0",
            "1.2.3.4:99999",
            ":9464",
        ] {
            c.listen = bad.into();
            assert_eq!(keys(&c), ["metrics.listen"], "{bad}");
        }
        for good in ["0.0.0.0:9464", "[::1]:9464", " 127.0.0.1:1 ", ""] {
            c.listen = good.into();
            assert_eq!(keys(&c), Vec::<&str>::new(), "{good}");
        }
        c.listen = DEFAULT_LISTEN.into();
        for bad in ["lookout.prom", "/tmp/lookout.txt", "/tmp/.prom", "/tmp/"] {
            c.textfile = bad.into();
            assert_eq!(keys(&c), ["metrics.textfile"], "{bad}");
        }
        c.textfile = "/var/lib/prometheus/node-exporter/lookout.prom".into();
        assert_eq!(keys(&c), Vec::<&str>::new());
        // Off: the directory is not asked about.
        assert_eq!(c.check_environment(), Vec::new());
    }

    #[test]
    fn enabled_with_nowhere_to_export_is_refused() {
        let c = MetricsConfig {
            enabled: true,
            listen: String::new(),
            textfile: String::new(),
        };
        assert_eq!(keys(&c), ["metrics.enabled"]);
    }

    #[test]
    fn the_text_file_needs_an_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = MetricsConfig {
            enabled: true,
            textfile: dir
                .path()
                .join("no/such/lookout.prom")
                .display()
                .to_string(),
            ..MetricsConfig::default()
        };
        let e = c.check_environment();
        assert_eq!(e.len(), 1);
        assert!(e[0].message.contains("no such directory"), "{}", e[0]);
        std::fs::create_dir(dir.path().join("d.prom")).unwrap();
        c.textfile = dir.path().join("d.prom").display().to_string();
        assert!(c.check_environment()[0].message.contains("a directory"));
        c.textfile = dir.path().join("lookout.prom").display().to_string();
        assert_eq!(c.check_environment(), Vec::new());
    }
}
