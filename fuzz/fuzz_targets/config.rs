//! The configuration: arbitrary text through the TOML parser and serde, then the value checks
//! (`Config::check_values`, pure) and the location of every problem in the text
//! (`ConfigErrors::from_problems`). The whole `Config::parse` (which adds the environment
//! checks: paths are only `stat`ed) runs unless the text names a model file, which it would
//! load. Every error must point into the text, and a valid configuration printed by `to_toml`
//! (what `check-config` shows) must parse back to the same configuration.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout::config::{Config, ConfigErrors};

fn check_located(errs: &ConfigErrors, lines: usize) {
    for e in &errs.0 {
        assert!(e.line <= lines, "error line {} past the text: {e}", e.line);
        assert!(!e.key.is_empty() && !e.message.is_empty(), "{e}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count() + 1;
    // The deserializer Config::parse uses, to see the values before any check.
    let cfg = match toml::from_str::<Config>(text) {
        Ok(cfg) => cfg,
        Err(_) => {
            // Syntax and type errors are found before any check touches a file.
            let errs = Config::parse(text, "fuzz.toml").expect_err("toml refused it");
            check_located(&errs, lines);
            return;
        }
    };
    let problems = cfg.check_values();
    check_located(
        &ConfigErrors::from_problems("fuzz.toml", Some(text), problems),
        lines,
    );
    if !cfg.model.file.is_empty() {
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
            check_located(&errs, lines);
        }
    }
});
