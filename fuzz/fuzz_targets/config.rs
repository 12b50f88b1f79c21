//! The configuration: arbitrary text through the TOML parser, serde and validation. Checks
//! that would open a file named by the input (`model.file` loads an ONNX model) are kept out:
//! a config naming a model is validated with the model cleared. Every error must point into
//! the text, and a valid configuration printed by `to_toml` (what `check-config` shows) must
//! parse back to the same configuration.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count() + 1;
    // The same deserializer Config::parse uses, to see the model file before validation.
    let cfg = match toml::from_str::<Config>(text) {
        Ok(cfg) => cfg,
        Err(_) => {
            // Syntax and type errors are found before any validation touches a file.
            let errs = Config::parse(text, "fuzz.toml").expect_err("toml refused it");
            for e in &errs.0 {
                assert!(e.line <= lines, "error line {} past the text: {e}", e.line);
                assert!(!e.message.is_empty(), "empty message for {}", e.key);
            }
            return;
        }
    };
    if !cfg.model.file.is_empty() {
        let mut cfg = cfg;
        cfg.model.file.clear();
        let _ = cfg.problems();
        return;
    }
    match Config::parse(text, "fuzz.toml") {
        Ok(valid) => {
            let printed = valid.to_toml();
            let again = Config::parse(&printed, "printed.toml")
                .unwrap_or_else(|e| panic!("the printed config does not parse: {e}\n{printed}"));
            assert_eq!(again.to_toml(), printed, "printing is not stable");
        }
        Err(errs) => {
            assert!(!errs.0.is_empty());
            for e in &errs.0 {
                assert!(e.line <= lines, "error line {} past the text: {e}", e.line);
                assert!(!e.key.is_empty() && !e.message.is_empty(), "{e}");
            }
        }
    }
});
