//! The two models compiled into the binary, and which of them runs by default on this CPU.
//!
//! tract's int8 matrix kernels only beat its FP32 kernels where the CPU has 8-bit dot-product
//! instructions (aarch64 `SDOT`, x86 AVX-512 VNNI / AVX-VNNI). Without them the INT8 model did
//! *more* work than FP32: on a Pi 4 (Cortex-A72, tract's `SMLAL` kernel) 1.06× FP32's
//! instructions per image with lookout's other int8 ops (1.43× with tract's), and tract's AVX2
//! int8 kernel ran the default model at 27× FP32's time on an AMD EPYC (AVX2, no VNNI). On
//! aarch64 without the dot product lookout runs its own int8 kernel
//! ([`super::int8::pairwise`]: `SMULL`/`SMLAL2`/`SADALP`, 8 multiply-adds per cycle on an A72
//! against FP32's 4), which brings the Pi 4 to 0.76× FP32's instructions (docs/performance.md).
//! So by default (`[model] precision = "auto"`) lookout runs the INT8 model where one of these
//! kernels exists — dot products, or any 64-bit ARM CPU — FP32 elsewhere (32-bit ARM, x86
//! without VNNI), and says why in the model's load line.

use serde::{Deserialize, Serialize};

use crate::sysinfo::{self, KernelFacts};

/// The INT8 NanoDet-g 416 (the INT8 accuracy gate's default form; models/README.md).
pub const INT8_MODEL: &[u8] = include_bytes!("../../models/nanodet-g-416-int8.onnx");
/// The FP32 NanoDet-g 416 (the reference the INT8 form is gated against).
pub const FP32_MODEL: &[u8] = include_bytes!("../../models/nanodet-g-416-fp32.onnx");

/// One of the models compiled into the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Embedded {
    /// `nanodet-g-416-int8.onnx`.
    Int8,
    /// `nanodet-g-416-fp32.onnx`.
    Fp32,
}

impl Embedded {
    /// The ONNX bytes.
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Embedded::Int8 => INT8_MODEL,
            Embedded::Fp32 => FP32_MODEL,
        }
    }

    /// The file it was built from (in `models/`; the key of its golden outputs).
    pub fn file_name(self) -> &'static str {
        match self {
            Embedded::Int8 => "nanodet-g-416-int8.onnx",
            Embedded::Fp32 => "nanodet-g-416-fp32.onnx",
        }
    }
}

/// `[model] precision`: which embedded model runs when `model.file` is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// INT8 where an int8 kernel beats FP32 (8-bit dot products, or any 64-bit ARM CPU),
    /// FP32 elsewhere.
    #[default]
    Auto,
    /// The INT8 model, whatever the CPU.
    Int8,
    /// The FP32 model, whatever the CPU.
    Fp32,
}

/// The embedded model to run and why (for the load log line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The model.
    pub model: Embedded,
    /// One sentence: what decided it.
    pub reason: String,
}

/// This machine's CPU as tract sees it, from `/proc/cpuinfo` (read once per process).
pub fn this_cpu() -> &'static KernelFacts {
    static FACTS: std::sync::OnceLock<KernelFacts> = std::sync::OnceLock::new();
    FACTS.get_or_init(sysinfo::cpu_kernel_facts)
}

/// The embedded model for `precision` on a CPU with `cpu`'s facts.
pub fn choose(precision: Precision, cpu: &KernelFacts) -> Choice {
    match precision {
        Precision::Int8 => Choice {
            model: Embedded::Int8,
            reason: "model.precision = \"int8\"".into(),
        },
        Precision::Fp32 => Choice {
            model: Embedded::Fp32,
            reason: "model.precision = \"fp32\"".into(),
        },
        Precision::Auto if cpu.dotprod => Choice {
            model: Embedded::Int8,
            reason: format!(
                "INT8 chosen for this CPU: it has 8-bit dot-product instructions ({}), where \
                 tract's int8 kernels beat FP32",
                cpu.matmul_kernel
            ),
        },
        Precision::Auto if cpu.int8_beats_fp32 => Choice {
            model: Embedded::Int8,
            reason: format!(
                "INT8 chosen for this CPU: it has no 8-bit dot-product instructions ({}), \
                 where lookout's pairwise int8 kernel does twice FP32's multiply-adds per \
                 cycle and its Winograd 3x3 convolutions 2.25x fewer products; \
                 model.precision = \"fp32\" forces FP32",
                cpu.matmul_kernel
            ),
        },
        Precision::Auto => Choice {
            model: Embedded::Fp32,
            reason: format!(
                "FP32 chosen for this CPU: it has no 8-bit dot-product instructions ({}), where \
                 tract's INT8 runs slower than FP32; model.precision = \"int8\" forces INT8",
                cpu.matmul_kernel
            ),
        },
    }
}

/// [`choose`] for this machine.
pub fn choose_for_this_cpu(precision: Precision) -> Choice {
    choose(precision, this_cpu())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(arch: &str, flags: &str, part: Option<&str>) -> KernelFacts {
        let flags: Vec<String> = flags.split_whitespace().map(String::from).collect();
        sysinfo::kernel_facts_for(arch, &flags, part)
    }

    #[test]
    fn auto_picks_int8_where_an_int8_kernel_beats_fp32() {
        // Pi 5: Cortex-A76 with asimddp.
        let pi5 = cpu("aarch64", "fp asimd asimddp crc32", Some("0xd0b"));
        let c = choose(Precision::Auto, &pi5);
        assert_eq!(c.model, Embedded::Int8, "{}", c.reason);
        assert!(c.reason.contains("SDOT"), "{}", c.reason);
        // Pi 4 (Cortex-A72), Pi 3 / Zero 2 W (Cortex-A53): no dot product, lookout's
        // pairwise kernel.
        for part in ["0xd08", "0xd03"] {
            let c = choose(
                Precision::Auto,
                &cpu("aarch64", "fp asimd crc32", Some(part)),
            );
            assert_eq!(c.model, Embedded::Int8, "{part}: {}", c.reason);
            assert!(c.reason.contains("pairwise"), "{}", c.reason);
        }
        // 32-bit OS, even on a Pi 5: tract's armv7 kernels have no dot product.
        let armv7 = cpu(
            "arm",
            "half thumb fastmult vfp neon vfpv4 idiva",
            Some("0xd0b"),
        );
        assert_eq!(choose(Precision::Auto, &armv7).model, Embedded::Fp32);
        // x86: AVX2 only → FP32; AVX-512 VNNI or AVX-VNNI → INT8.
        let avx2 = cpu("x86_64", "sse2 fma avx2", None);
        assert_eq!(choose(Precision::Auto, &avx2).model, Embedded::Fp32);
        let vnni = cpu("x86_64", "sse2 fma avx2 avx512f avx512_vnni", None);
        assert_eq!(choose(Precision::Auto, &vnni).model, Embedded::Int8);
        let avx_vnni = cpu("x86_64", "sse2 fma avx2 avx_vnni", None);
        assert_eq!(choose(Precision::Auto, &avx_vnni).model, Embedded::Int8);
    }

    #[test]
    fn an_explicit_precision_wins_over_the_cpu() {
        let pi4 = cpu("aarch64", "fp asimd", Some("0xd08"));
        let pi5 = cpu("aarch64", "fp asimd asimddp", Some("0xd0b"));
        assert_eq!(choose(Precision::Int8, &pi4).model, Embedded::Int8);
        assert_eq!(choose(Precision::Fp32, &pi5).model, Embedded::Fp32);
        assert!(choose(Precision::Int8, &pi4).reason.contains("precision"));
    }

    #[test]
    fn the_embedded_bytes_are_the_shipped_files() {
        for m in [Embedded::Int8, Embedded::Fp32] {
            let file = std::fs::read(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("models")
                    .join(m.file_name()),
            )
            .unwrap();
            assert!(file == m.bytes(), "{}", m.file_name());
        }
    }
}
