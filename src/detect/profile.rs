//! Where a network's time goes: each node's evaluation timed during `Detector::run_raw_profiled`,
//! summed by op (`QConvI8`, `FastLut`, tract's `Conv`, …).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Time spent in each op of the network over the profiled runs.
#[derive(Clone, Debug, Default)]
pub struct OpProfile {
    /// Profiled runs.
    pub runs: usize,
    /// One row per node (`<node name> (<op>)`) instead of one per op.
    pub by_node: bool,
    by_op: BTreeMap<String, (Duration, BTreeSet<usize>)>,
}

/// One op's share of a profile.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    /// The op's name as tract reports it (`QConvI8`, `FastLut`, `Conv`, …).
    pub op: String,
    /// Nodes of the network running this op.
    pub nodes: usize,
    /// Mean time per run over all these nodes, ms.
    pub ms_per_run: f64,
}

impl OpProfile {
    /// An empty profile: one row per op, or per node when `by_node`.
    pub fn new(by_node: bool) -> Self {
        OpProfile {
            by_node,
            ..OpProfile::default()
        }
    }

    /// Adds one evaluation of node `node` (named `name`, running `op`) that took `took`.
    pub fn add(&mut self, op: &str, name: &str, node: usize, took: Duration) {
        let key = if self.by_node {
            format!("{name} ({op})")
        } else {
            op.to_string()
        };
        let e = self.by_op.entry(key).or_default();
        e.0 += took;
        e.1.insert(node);
    }

    /// The ops, most time first; empty before a profiled run.
    pub fn ops(&self) -> Vec<OpTime> {
        let runs = self.runs.max(1) as f64;
        let mut v: Vec<OpTime> = self
            .by_op
            .iter()
            .map(|(op, (t, nodes))| OpTime {
                op: op.clone(),
                nodes: nodes.len(),
                ms_per_run: t.as_secs_f64() * 1e3 / runs,
            })
            .collect();
        v.sort_by(|a, b| b.ms_per_run.total_cmp(&a.ms_per_run).then(a.op.cmp(&b.op)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_by_op_counts_nodes_once_and_averages_over_runs() {
        let mut p = OpProfile::default();
        for _ in 0..2 {
            p.add("Conv", "a", 1, Duration::from_millis(3));
            p.add("Conv", "b", 2, Duration::from_millis(1));
            p.add("Lut", "c", 3, Duration::from_millis(5));
            p.runs += 1;
        }
        let ops = p.ops();
        assert_eq!(ops.len(), 2);
        assert_eq!((ops[0].op.as_str(), ops[0].nodes), ("Lut", 1));
        assert!((ops[0].ms_per_run - 5.0).abs() < 1e-9);
        assert_eq!((ops[1].op.as_str(), ops[1].nodes), ("Conv", 2));
        assert!((ops[1].ms_per_run - 4.0).abs() < 1e-9);
        assert!(OpProfile::default().ops().is_empty());
        let mut p = OpProfile::new(true);
        p.add("Conv", "a", 1, Duration::from_millis(3));
        p.add("Conv", "b", 2, Duration::from_millis(1));
        let names: Vec<String> = p.ops().into_iter().map(|o| o.op).collect();
        assert_eq!(names, ["a (Conv)", "b (Conv)"]);
    }
}
