//! A command's stderr as log lines: split on `\n` or `\r` (progress lines), each cut to
//! [`MAX_LINE`] bytes, at most [`LINES_PER_WINDOW`] lines per [`WINDOW`] and then one line
//! saying how many were held back. Memory is bounded whatever the command writes: one partial
//! line of at most [`MAX_LINE`] bytes.

use std::time::{Duration, Instant};

/// The longest stderr line logged, in bytes (longer ones are cut and end with `…`).
pub const MAX_LINE: usize = 300;
/// Stderr lines logged per [`WINDOW`]; the rest are counted and reported as one line.
pub const LINES_PER_WINDOW: u32 = 20;
/// The rate limit's window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Splits, cuts and rate-limits a command's stderr (see the module documentation).
#[derive(Debug, Default)]
pub struct StderrLines {
    /// The line being read (at most [`MAX_LINE`] bytes).
    partial: Vec<u8>,
    /// The line being read was longer than [`MAX_LINE`]: the rest of it is dropped.
    cut: bool,
    window_start: Option<Instant>,
    logged: u32,
    suppressed: u64,
    /// The last non-blank line, logged or not (for the message when the command fails).
    last: Option<String>,
}

impl StderrLines {
    /// A splitter with nothing read yet.
    pub fn new() -> StderrLines {
        StderrLines::default()
    }

    /// Takes what the command wrote; returns the lines to log now (suppression notices
    /// included).
    pub fn feed(&mut self, bytes: &[u8], now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                self.end_line(now, &mut out);
            } else if self.partial.len() < MAX_LINE {
                self.partial.push(b);
            } else {
                self.cut = true;
            }
        }
        out
    }

    /// The command ended: its unterminated last line and the count still held back.
    pub fn finish(&mut self, now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        self.end_line(now, &mut out);
        if self.suppressed > 0 {
            out.push(suppressed_line(self.suppressed));
            self.suppressed = 0;
        }
        out
    }

    /// The last non-blank line the command wrote.
    pub fn last_line(&self) -> Option<&str> {
        self.last.as_deref()
    }

    fn end_line(&mut self, now: Instant, out: &mut Vec<String>) {
        let cut = std::mem::take(&mut self.cut);
        let text: String = String::from_utf8_lossy(&self.partial)
            .chars()
            .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
            .collect();
        self.partial.clear();
        let text = text.trim_end();
        if text.trim().is_empty() {
            return;
        }
        let line = if cut {
            format!("{text}…")
        } else {
            text.to_string()
        };
        self.last = Some(line.clone());
        let fresh = self
            .window_start
            .is_none_or(|start| now.saturating_duration_since(start) >= WINDOW);
        if fresh {
            if self.suppressed > 0 {
                out.push(suppressed_line(self.suppressed));
            }
            self.window_start = Some(now);
            self.logged = 0;
            self.suppressed = 0;
        }
        if self.logged < LINES_PER_WINDOW {
            self.logged += 1;
            out.push(line);
        } else {
            self.suppressed += 1;
        }
    }
}

fn suppressed_line(n: u64) -> String {
    format!(
        "… {n} more stderr lines suppressed (at most {LINES_PER_WINDOW} every {} s are logged)",
        WINDOW.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_on_newlines_and_carriage_returns_and_skip_blanks() {
        let mut s = StderrLines::new();
        let t = Instant::now();
        assert_eq!(s.feed(b"one\ntw", t), ["one"]);
        assert_eq!(s.feed(b"o\r\n\n#1 (30 fps)\r", t), ["two", "#1 (30 fps)"]);
        assert_eq!(s.feed(b"tail \x1b[0m", t), Vec::<String>::new());
        assert_eq!(s.finish(t), ["tail  [0m"]);
        assert_eq!(s.last_line(), Some("tail  [0m"));
    }

    #[test]
    fn long_lines_are_cut_and_memory_stays_bounded() {
        let mut s = StderrLines::new();
        let t = Instant::now();
        let big = vec![b'x'; 10 << 20];
        assert!(s.feed(&big, t).is_empty());
        assert!(
            s.partial.capacity() <= 2 * MAX_LINE,
            "{}",
            s.partial.capacity()
        );
        let out = s.feed(b"\nshort\n", t);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].len(), MAX_LINE + '…'.len_utf8());
        assert!(out[0].ends_with('…'));
        assert_eq!(out[1], "short");
    }

    #[test]
    fn a_flood_is_rate_limited_with_one_notice_per_window() {
        let mut s = StderrLines::new();
        let t0 = Instant::now();
        let flood: Vec<u8> = (0..1000)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let out = s.feed(&flood, t0);
        assert_eq!(out.len(), LINES_PER_WINDOW as usize);
        assert_eq!(s.last_line(), Some("line 999"));
        // The next window starts with the count of what was held back.
        let out = s.feed(b"later\n", t0 + WINDOW);
        assert_eq!(out.len(), 2);
        assert!(
            out[0].starts_with("… 980 more stderr lines suppressed"),
            "{out:?}"
        );
        assert_eq!(out[1], "later");
        // Held back at the end: reported when the command ends.
        s.feed(&flood, t0 + WINDOW);
        let out = s.finish(t0 + WINDOW);
        assert!(out[0].starts_with("… 981 more"), "{out:?}");
    }
}
