//! The thread → core plan ([`CoreMap`], over the cores this process may use) and pinning.

use crate::config::Config;

/// The thread → core assignment.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CoreMap {
    /// Capture thread core.
    pub capture: Option<usize>,
    /// Tracker thread core.
    pub track: Option<usize>,
    /// Detector thread core.
    pub detect: Option<usize>,
    /// Cores of the model's matmul pool (when threads > 1).
    pub matmul: Vec<usize>,
}

impl CoreMap {
    /// The map for the cores this process may run on (`allowed`, ascending CPU ids: all of
    /// them, or the set systemd's `CPUAffinity=` or `taskset` left). Explicit cores from the
    /// config win when allowed; otherwise, counting positions in `allowed`, with 4+ cores
    /// capture 1st, tracking 2nd, detection 3rd.. ; with 2–3 cores capture and tracking share
    /// the 1st and detection gets the rest; with 1 core nothing is pinned.
    pub fn plan(cfg: &Config, allowed: &[usize]) -> CoreMap {
        let p = &cfg.pipeline;
        let cores = allowed.len();
        if !p.pin_threads || cores <= 1 {
            return CoreMap::default();
        }
        let (cap, trk, det_from) = match cores {
            2 | 3 => (0, 0, 1),
            _ => (0, 1, 2),
        };
        let ok = |c: &usize| allowed.contains(c);
        let explicit: Vec<usize> = p.detect_cores.iter().copied().filter(ok).collect();
        let detect_cores: Vec<usize> = if explicit.is_empty() {
            allowed[det_from..].to_vec()
        } else {
            explicit
        };
        let threads = cfg.model.threads.max(1);
        CoreMap {
            capture: Some(p.capture_core.filter(ok).unwrap_or(allowed[cap])),
            track: Some(p.track_core.filter(ok).unwrap_or(allowed[trk])),
            detect: detect_cores.first().copied(),
            matmul: if threads > 1 {
                detect_cores.iter().copied().cycle().take(threads).collect()
            } else {
                Vec::new()
            },
        }
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        let c = |o: Option<usize>| o.map_or("-".to_string(), |c| c.to_string());
        format!(
            "capture→core {}, tracking→core {}, detection→core {}{}",
            c(self.capture),
            c(self.track),
            c(self.detect),
            if self.matmul.is_empty() {
                String::new()
            } else {
                format!(", model matmul pool→cores {:?}", self.matmul)
            }
        )
    }
}

/// Pins the calling thread; a failure is logged, never fatal.
pub(super) fn pin(core: Option<usize>, what: &str) {
    if let Some(c) = core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
            log::warn!("could not pin the {what} thread to core {c}; it runs unpinned");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(threads: usize) -> Config {
        let mut c = Config::default();
        c.pipeline.pin_threads = true;
        c.model.threads = threads;
        c
    }

    #[test]
    fn core_map_uses_the_cores_this_process_may_run_on() {
        let all = CoreMap::plan(&cfg(2), &[0, 1, 2, 3]);
        assert_eq!(
            (all.capture, all.track, all.detect, all.matmul.clone()),
            (Some(0), Some(1), Some(2), vec![2, 3])
        );
        // CPUAffinity=2 3: positions map onto the allowed ids, never onto cores 0/1.
        let two = CoreMap::plan(&cfg(2), &[2, 3]);
        assert_eq!(
            (two.capture, two.track, two.detect, two.matmul.clone()),
            (Some(2), Some(2), Some(3), vec![3, 3])
        );
        let one = CoreMap::plan(&cfg(1), &[3]);
        assert_eq!(one, CoreMap::default());
    }

    #[test]
    fn explicit_cores_outside_the_affinity_mask_are_ignored() {
        let mut c = cfg(1);
        c.pipeline.capture_core = Some(0);
        c.pipeline.track_core = Some(3);
        c.pipeline.detect_cores = vec![0, 1];
        let m = CoreMap::plan(&c, &[2, 3]);
        assert_eq!((m.capture, m.track, m.detect), (Some(2), Some(3), Some(3)));
    }
}
