//! Facts about the machine, read from `/proc`, `/sys` and `/etc` without any `unsafe` code:
//! the cores this process may run on (its affinity mask, which configuration validation and
//! the pipeline's core map use), and for benchmark reports the board, CPU, kernel, OS, C
//! library, the CPU features tract's matrix kernels depend on, temperature and (on a
//! Raspberry Pi) throttling. Knows nothing else of the crate.
//!
//! Every reader is forgiving: a file that is missing (not a Pi, not Linux, a container) gives
//! `None` or an empty list, never an error — a benchmark header with a blank is better than no
//! benchmark. Numbers that need two readings (per-core busy time, temperature, throttling) come
//! as snapshots that [`CpuTimes::busy_since`] and [`Thermal::throttled_during`] compare.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

/// Linux reports per-task times in `/proc` in clock ticks of `USER_HZ`, which the kernel ABI
/// fixes at 100 on every architecture lookout runs on (x86, arm, aarch64).
const USER_HZ: f64 = 100.0;

/// The CPUs this process may run on, ascending (its affinity mask: every core, or what
/// systemd's `CPUAffinity=` / `taskset` allows). Empty when the mask cannot be read.
pub fn allowed_cores() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .map(|c| c.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

/// The number of cores this process may run on (at least 1).
pub fn core_count() -> usize {
    allowed_cores().len().max(1)
}

/// The machine, as far as a benchmark report needs it.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SystemInfo {
    /// Board model (`/proc/device-tree/model`, e.g. "Raspberry Pi 4 Model B Rev 1.4").
    pub board: Option<String>,
    /// CPU model: `model name`, else the core named from `CPU implementer`/`CPU part`, else
    /// `Hardware`.
    pub cpu_model: String,
    /// ARM `CPU part` (e.g. `0xd08` = Cortex-A72), when reported.
    pub cpu_part: Option<String>,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    /// Rust target architecture of this binary.
    pub arch: String,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// OS name (`PRETTY_NAME` of `/etc/os-release`).
    pub os: Option<String>,
    /// glibc version, read from the banner inside the `libc.so.6` this process has mapped (see
    /// [`glibc_version`]); `None` for other C libraries.
    pub glibc: Option<String>,
    /// The CPU features that decide which matrix kernels tract picks (subset of the flags).
    pub cpu_features: Vec<String>,
    /// 8-bit dot-product instructions: `asimddp` on aarch64, `avx512_vnni`/`avx_vnni` on x86.
    pub dotprod: bool,
    /// The matrix-product kernels tract-linalg selects for these features (inferred from the
    /// CPU flags the same way tract-linalg 0.23 does at run time).
    pub matmul_kernel: String,
}

impl SystemInfo {
    /// Reads everything now.
    pub fn read() -> SystemInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = parse_cpuinfo(&cpuinfo);
        let arch = std::env::consts::ARCH.to_string();
        let KernelFacts {
            features: cpu_features,
            dotprod,
            matmul_kernel,
            ..
        } = kernel_facts_for(&arch, &cpu.flags, cpu.part.as_deref());
        SystemInfo {
            board: read_trimmed("/proc/device-tree/model"),
            cpu_model: cpu.model,
            cpu_part: cpu.part,
            cores: core_count(),
            arch,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            os: std::fs::read_to_string("/etc/os-release")
                .ok()
                .and_then(|t| os_release_pretty_name(&t)),
            glibc: glibc_version(),
            cpu_features,
            dotprod,
            matmul_kernel,
        }
    }
}

/// Reads a small text file, without the trailing NUL (device tree) and whitespace.
fn read_trimmed(path: &str) -> Option<String> {
    let s = std::fs::read(path).ok()?;
    let s = String::from_utf8_lossy(&s);
    let s = s.trim_end_matches('\0').trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// What `/proc/cpuinfo` says about the CPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuInfo {
    /// A human name for the CPU.
    pub model: String,
    /// ARM `CPU part`.
    pub part: Option<String>,
    /// `flags` (x86) or `Features` (ARM) of the first processor.
    pub flags: Vec<String>,
}

/// Names of ARM Ltd. cores by `CPU part` (implementer `0x41`), the ones found in Raspberry Pis
/// and similar boards.
fn arm_core_name(part: &str) -> Option<&'static str> {
    Some(match part {
        "0xb76" => "ARM1176",
        "0xc07" => "Cortex-A7",
        "0xc08" => "Cortex-A8",
        "0xc09" => "Cortex-A9",
        "0xc0f" => "Cortex-A15",
        "0xd03" => "Cortex-A53",
        "0xd04" => "Cortex-A35",
        "0xd05" => "Cortex-A55",
        "0xd07" => "Cortex-A57",
        "0xd08" => "Cortex-A72",
        "0xd09" => "Cortex-A73",
        "0xd0a" => "Cortex-A75",
        "0xd0b" => "Cortex-A76",
        "0xd0c" => "Neoverse-N1",
        "0xd0d" => "Cortex-A77",
        "0xd41" => "Cortex-A78",
        _ => return None,
    })
}

/// Parses `/proc/cpuinfo` text (x86 or ARM).
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let part = field("CPU part");
    let implementer = field("CPU implementer");
    let flags = field("flags")
        .or_else(|| field("Features"))
        .map(|f| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let model = field("model name")
        .filter(|m| !m.is_empty() && !m.starts_with("ARMv"))
        .or_else(|| {
            let p = part.as_deref()?;
            let name = (implementer.as_deref() == Some("0x41"))
                .then(|| arm_core_name(p))
                .flatten();
            Some(match name {
                Some(n) => format!("{n} (CPU part {p})"),
                None => format!(
                    "CPU implementer {}, part {p}",
                    implementer.as_deref().unwrap_or("?")
                ),
            })
        })
        .or_else(|| field("model name"))
        .or_else(|| field("Hardware"))
        .unwrap_or_else(|| "unknown CPU".to_string());
    CpuInfo { model, part, flags }
}

/// The CPU as tract-linalg sees it (see [`kernel_facts_for`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFacts {
    /// The CPU features relevant to tract (subset of the flags).
    pub features: Vec<String>,
    /// 8-bit dot-product instructions: `asimddp` on aarch64, `avx512_vnni`/`avx_vnni` on x86.
    pub dotprod: bool,
    /// Whether the int8 path (tract's dot-product kernels, or lookout's pairwise kernel on
    /// aarch64 without them) does more multiply-adds per cycle than FP32 here: what
    /// `model.precision = "auto"` goes by.
    pub int8_beats_fp32: bool,
    /// The matrix-product kernels tract-linalg (or lookout, for int8 on aarch64 without the
    /// dot product) selects for these features.
    pub matmul_kernel: String,
}

/// [`kernel_facts_for`] this machine (`/proc/cpuinfo`, this binary's architecture).
pub fn cpu_kernel_facts() -> KernelFacts {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = parse_cpuinfo(&cpuinfo);
    kernel_facts_for(std::env::consts::ARCH, &cpu.flags, cpu.part.as_deref())
}

/// The CPU features relevant to tract, whether 8-bit dot products exist, and the kernel family
/// tract-linalg picks (from its x86_64 / arm64 / arm32 selection rules), for a CPU of `arch`
/// with these `/proc/cpuinfo` flags and ARM `CPU part`.
pub fn kernel_facts_for(arch: &str, flags: &[String], part: Option<&str>) -> KernelFacts {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let wanted: &[&str] = match arch {
        "x86_64" => &[
            "fma",
            "avx2",
            "avx512f",
            "avx512_vnni",
            "avx_vnni",
            "amx_int8",
        ],
        "aarch64" => &["asimd", "asimdhp", "asimddp", "i8mm", "sve", "sve2"],
        "arm" => &["neon", "vfpv4", "idiva"],
        _ => &[],
    };
    let features: Vec<String> = wanted
        .iter()
        .filter(|f| has(f))
        .map(|f| f.to_string())
        .collect();
    let (dotprod, kernel) = match arch {
        "x86_64" => {
            let vnni = has("avx512_vnni") || has("avx_vnni");
            let k = if has("avx512f") {
                format!(
                    "x86_64 AVX-512 f32 kernels; int8 via {}",
                    if has("avx512_vnni") {
                        "AVX-512 VNNI"
                    } else if has("avx_vnni") {
                        "AVX-VNNI"
                    } else {
                        "AVX2 i32"
                    }
                )
            } else if has("fma") && has("avx2") {
                format!(
                    "x86_64 FMA/AVX2 f32 kernels; int8 via {}",
                    if vnni { "AVX-VNNI" } else { "AVX2 i32" }
                )
            } else {
                "generic (no FMA/AVX2: tract's portable Rust kernels)".to_string()
            };
            (vnni, k)
        }
        "aarch64" => {
            // tract trusts Cortex-A55/A75 to have dot products even when the kernel does not
            // say so (kernels before 4.15).
            let dp = has("asimddp") || matches!(part, Some("0xd05") | Some("0xd0a"));
            let tuned = match part {
                Some("0xd03") => " (tuned for Cortex-A53)",
                Some("0xd05") => " (tuned for Cortex-A55)",
                _ => "",
            };
            (
                dp,
                format!(
                    "arm64 NEON f32 kernels{tuned}; int8 via {}",
                    if dp {
                        "SDOT 8x8 (dot product)"
                    } else {
                        "lookout's SMULL/SADALP 4x4 (no dot product)"
                    }
                ),
            )
        }
        "arm" => (
            false,
            if has("neon") {
                "armv7 NEON kernels (no int8 dot product)".to_string()
            } else {
                "generic (no NEON: tract's portable Rust kernels)".to_string()
            },
        ),
        other => (false, format!("generic ({other})")),
    };
    KernelFacts {
        features,
        dotprod,
        // On aarch64 without the dot product, lookout's pairwise kernel
        // (`detect::int8::pairwise`): 8 multiply-adds per cycle on a Cortex-A72 against
        // FP32's 4. armv7 has tract's 16-bit `vmlal` only (FP32's rate), x86 without VNNI
        // tract's AVX2 i32 kernels (slower than FP32's FMA).
        int8_beats_fp32: dotprod || arch == "aarch64",
        matmul_kernel: kernel,
    }
}

/// `PRETTY_NAME` from `/etc/os-release` text, unquoted.
pub fn os_release_pretty_name(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix("PRETTY_NAME=")?;
        Some(v.trim().trim_matches('"').trim_matches('\'').to_string())
    })
}

/// The glibc version this process actually runs with, without FFI.
///
/// Method: find the `libc.so.6` mapped into this process in `/proc/self/maps`, read that file
/// and take the version from glibc's banner string inside it (`GNU C Library (…) stable release
/// version 2.36.`), which glibc has embedded for decades. `None` when the process has no
/// `libc.so.6` (static or musl builds) or the banner is not found.
pub fn glibc_version() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let path = maps.lines().find_map(|l| {
        let p = l.split_whitespace().nth(5)?;
        Path::new(p)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
            .then(|| PathBuf::from(p))
    })?;
    let bytes = std::fs::read(&path).ok()?;
    glibc_version_in(&bytes)
}

/// The version in glibc's banner (`… release version X.Y`) inside a `libc.so.6` image.
pub fn glibc_version_in(bytes: &[u8]) -> Option<String> {
    let needle = b"release version ";
    let at = bytes.windows(needle.len()).position(|w| w == needle)? + needle.len();
    let v: String = bytes[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'.')
        .map(|b| *b as char)
        .collect();
    let v = v.trim_end_matches('.').to_string();
    (!v.is_empty()).then_some(v)
}

/// Peak resident set size of this process (`VmHWM` in `/proc/self/status`), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    status_kib(&s, "VmHWM:")
}

/// A `kB` field of `/proc/*/status` text.
pub fn status_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// CPU time one thread of this process has used so far.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskCpu {
    /// Thread id.
    pub tid: u32,
    /// Thread name (`comm`, at most 15 bytes).
    pub name: String,
    /// User + system time.
    #[serde(serialize_with = "ser_secs")]
    pub cpu: Duration,
    /// The CPU it last ran on.
    pub last_cpu: Option<usize>,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Every thread of this process with its CPU time so far (`/proc/self/task/*/stat`, fields
/// `utime` + `stime` in `USER_HZ` ticks: 10 ms resolution).
pub fn task_cpu_times() -> Vec<TaskCpu> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out: Vec<TaskCpu> = dir
        .flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            parse_task_stat(tid, &stat)
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

/// Parses one `/proc/PID/task/TID/stat` line. The name is between the first `(` and the
/// *last* `)` (a thread name may contain either).
pub fn parse_task_stat(tid: u32, stat: &str) -> Option<TaskCpu> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    // Fields after the name, numbered from 3 (state) as in proc(5).
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let ticks = field(14)? + field(15)?;
    Some(TaskCpu {
        tid,
        name,
        cpu: Duration::from_secs_f64(ticks as f64 / USER_HZ),
        last_cpu: field(39).map(|c| c as usize),
    })
}

/// Busy and total time of every CPU from `/proc/stat` (the whole machine, all processes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuTimes {
    /// `(busy ticks, total ticks)` per CPU, by CPU number.
    pub per_cpu: Vec<(u64, u64)>,
}

impl CpuTimes {
    /// Reads `/proc/stat` now.
    pub fn read() -> CpuTimes {
        std::fs::read_to_string("/proc/stat")
            .map(|t| CpuTimes::parse(&t))
            .unwrap_or_default()
    }

    /// Parses `/proc/stat` text: busy = total − idle − iowait.
    pub fn parse(text: &str) -> CpuTimes {
        let mut per_cpu = Vec::new();
        for l in text.lines() {
            let mut it = l.split_whitespace();
            let Some(name) = it.next() else { continue };
            let Some(n) = name
                .strip_prefix("cpu")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal (guest time is inside user).
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            if per_cpu.len() <= n {
                per_cpu.resize(n + 1, (0, 0));
            }
            per_cpu[n] = (total.saturating_sub(idle), total);
        }
        CpuTimes { per_cpu }
    }

    /// Busy share (0..100 %) of each CPU between `earlier` and `self`.
    pub fn busy_since(&self, earlier: &CpuTimes) -> Vec<f64> {
        self.per_cpu
            .iter()
            .enumerate()
            .map(|(i, (b, t))| {
                let (b0, t0) = earlier.per_cpu.get(i).copied().unwrap_or((0, 0));
                let dt = t.saturating_sub(t0);
                if dt == 0 {
                    0.0
                } else {
                    100.0 * b.saturating_sub(b0) as f64 / dt as f64
                }
            })
            .collect()
    }
}

/// Temperature, clock and throttling at one moment.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Thermal {
    /// Highest temperature of the thermal zones, °C (the SoC on a Pi).
    pub temp_c: Option<f64>,
    /// Current clock of CPU 0 in MHz (`scaling_cur_freq`).
    pub cpu_mhz: Option<f64>,
    /// Raw `vcgencmd get_throttled` value (e.g. `0x50005`), when `vcgencmd` exists.
    pub throttled: Option<String>,
    /// The bits of `throttled` in words.
    pub throttled_flags: Vec<String>,
}

const THROTTLE_BITS: [(u32, &str); 8] = [
    (0, "under-voltage now"),
    (1, "ARM frequency capped now"),
    (2, "throttled now"),
    (3, "soft temperature limit now"),
    (16, "under-voltage has occurred"),
    (17, "ARM frequency capping has occurred"),
    (18, "throttling has occurred"),
    (19, "soft temperature limit has occurred"),
];

impl Thermal {
    /// Reads the thermal zones, CPU 0's clock and, when present, `vcgencmd get_throttled`.
    pub fn read() -> Thermal {
        let temp_c = std::fs::read_dir("/sys/class/thermal")
            .ok()
            .into_iter()
            .flat_map(|d| d.flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with("thermal_zone"))
            .filter_map(|e| std::fs::read_to_string(e.path().join("temp")).ok())
            .filter_map(|t| t.trim().parse::<f64>().ok())
            .map(|milli| milli / 1000.0)
            .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
        let cpu_mhz =
            std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
                .ok()
                .and_then(|t| t.trim().parse::<f64>().ok())
                .map(|khz| khz / 1000.0);
        let throttled = vcgencmd_throttled();
        let throttled_flags = throttled
            .as_deref()
            .and_then(parse_throttled)
            .map(throttle_words)
            .unwrap_or_default();
        Thermal {
            temp_c,
            cpu_mhz,
            throttled,
            throttled_flags,
        }
    }

    /// Whether throttling (or under-voltage, or a frequency cap) happened between `before` and
    /// `self`: a "now" bit set in either reading, or a "has occurred" bit that appeared.
    pub fn throttled_during(&self, before: &Thermal) -> bool {
        let b = before
            .throttled
            .as_deref()
            .and_then(parse_throttled)
            .unwrap_or(0);
        let a = self
            .throttled
            .as_deref()
            .and_then(parse_throttled)
            .unwrap_or(0);
        (a | b) & 0xf != 0 || (a & !b) & 0xf_0000 != 0
    }
}

/// `vcgencmd get_throttled` output (`throttled=0x0`) → `0x0`; `None` without vcgencmd.
fn vcgencmd_throttled() -> Option<String> {
    let exe = ["/usr/bin/vcgencmd", "/opt/vc/bin/vcgencmd"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let out = std::process::Command::new(exe)
        .arg("get_throttled")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout);
    s.trim().strip_prefix("throttled=").map(str::to_string)
}

/// `0x50005` → 0x50005.
pub fn parse_throttled(v: &str) -> Option<u32> {
    u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok()
}

/// The meaning of the set bits of a `get_throttled` value.
pub fn throttle_words(bits: u32) -> Vec<String> {
    THROTTLE_BITS
        .iter()
        .filter(|(b, _)| bits & (1 << b) != 0)
        .map(|(_, w)| w.to_string())
        .collect()
}

/// CPU time of the whole process so far (`CLOCK_PROCESS_CPUTIME_ID`).
pub fn process_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// This machine's host name (the kernel's), `pi` when it cannot be read.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "pi".into())
}

/// The SoC temperature in °C (`/sys/class/thermal/thermal_zone0`), where the board has one.
pub fn cpu_temperature() -> Option<f64> {
    let t = std::fs::read_to_string("/sys/class/thermal/thermal_zone0/temp").ok()?;
    let milli: f64 = t.trim().parse().ok()?;
    Some((milli / 100.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi4_cpuinfo_without_model_name_names_the_core() {
        let t = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\nCPU revision\t: 3\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n";
        let c = parse_cpuinfo(t);
        assert_eq!(c.model, "Cortex-A72 (CPU part 0xd08)");
        assert_eq!(c.part.as_deref(), Some("0xd08"));
        assert!(c.flags.contains(&"asimd".to_string()));
        let KernelFacts {
            features: f,
            dotprod: dp,
            int8_beats_fp32: fast,
            matmul_kernel: k,
        } = kernel_facts_for("aarch64", &c.flags, c.part.as_deref());
        assert_eq!(f, vec!["asimd".to_string()]);
        assert!(!dp && fast);
        assert!(k.contains("SMULL/SADALP"), "{k}");
        let k = kernel_facts_for(
            "aarch64",
            &["asimd".into(), "asimddp".into()],
            Some("0xd0b"),
        );
        assert!(
            k.dotprod && k.matmul_kernel.contains("SDOT"),
            "{}",
            k.matmul_kernel
        );
    }

    #[test]
    fn x86_cpuinfo_uses_model_name_and_flags() {
        let t = "model name\t: Intel(R) Xeon(R)\nflags\t\t: fpu fma avx2 avx512f avx512_vnni\n";
        let c = parse_cpuinfo(t);
        assert_eq!(c.model, "Intel(R) Xeon(R)");
        let KernelFacts {
            features: f,
            dotprod: dp,
            matmul_kernel: k,
            ..
        } = kernel_facts_for("x86_64", &c.flags, None);
        assert_eq!(f, vec!["fma", "avx2", "avx512f", "avx512_vnni"]);
        assert!(dp && k.contains("VNNI"), "{k}");
    }

    #[test]
    fn task_stat_with_a_paren_in_the_name() {
        let s = "123 (a (b) c) S 1 1 1 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";
        let t = parse_task_stat(123, s).unwrap();
        assert_eq!(t.name, "a (b) c");
        assert_eq!(t.cpu, Duration::from_secs(3));
        assert_eq!(t.last_cpu, Some(3));
    }

    #[test]
    fn proc_stat_busy_share() {
        let a = CpuTimes::parse("cpu  1 1 1 1\ncpu0 10 0 10 80 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0\n");
        let b = CpuTimes::parse("cpu0 40 0 20 140 0 0 0 0\ncpu1 0 0 0 200 0 0 0 0\n");
        let busy = b.busy_since(&a);
        assert_eq!(busy.len(), 2);
        assert!((busy[0] - 40.0).abs() < 1e-9, "{busy:?}");
        assert_eq!(busy[1], 0.0);
    }

    #[test]
    fn throttling_bits_and_flagging() {
        assert_eq!(parse_throttled("0x50005"), Some(0x50005));
        assert_eq!(
            throttle_words(0x50005),
            vec![
                "under-voltage now",
                "throttled now",
                "under-voltage has occurred",
                "throttling has occurred"
            ]
        );
        let t = |v: &str| Thermal {
            throttled: Some(v.into()),
            ..Thermal::default()
        };
        assert!(!t("0x0").throttled_during(&t("0x0")));
        assert!(t("0x40000").throttled_during(&t("0x0")));
        assert!(
            !t("0x40000").throttled_during(&t("0x40000")),
            "an old event is not this run's"
        );
        assert!(t("0x4").throttled_during(&t("0x0")));
        assert!(!Thermal::default().throttled_during(&Thermal::default()));
    }

    #[test]
    fn glibc_banner_and_os_release() {
        let img = b"\x7fELF....GNU C Library (Debian GLIBC 2.36-9+deb12u4) stable release version 2.36.\n";
        assert_eq!(glibc_version_in(img).as_deref(), Some("2.36"));
        assert_eq!(
            os_release_pretty_name("NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
                .as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            status_kib("VmPeak:\t 10 kB\nVmHWM:\t  2048 kB\n", "VmHWM:"),
            Some(2048)
        );
    }
}
