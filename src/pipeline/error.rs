//! The errors that end a run, a thread's caught panic among them.

use crate::{output, source};

/// Errors that end a run.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The source failed for good.
    #[error(transparent)]
    Source(#[from] source::SourceError),
    /// The model failed to load or run.
    #[error(transparent)]
    Detect(#[from] crate::detect::DetectError),
    /// The tracker configuration is invalid.
    #[error("tracker: {0}")]
    Tracker(String),
    /// The event rules (`[events]`, `[zones]`) are invalid.
    #[error("{0}")]
    Events(String),
    /// The tracks file cannot be written.
    #[error(transparent)]
    Output(#[from] output::TracksFileError),
    /// A thread could not be started or died.
    #[error("pipeline thread {0}")]
    Thread(String),
    /// What a run with several cameras cannot do.
    #[error("several cameras: {0}")]
    Cameras(String),
    /// A pipeline thread panicked (logged in full when it was caught): the run ended at once.
    #[error("pipeline thread {} panicked (logged above); the run ended", .0.thread)]
    Panicked(ThreadPanic),
}

/// A pipeline thread's panic, caught.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pipeline thread {thread} panicked{}{}: {message}", frame.map_or(String::new(), |s| format!(" at frame {s}")), location.as_deref().map_or(String::new(), |l| format!(" ({l})")))]
pub struct ThreadPanic {
    /// The thread's name (`lookout-capture`, `lookout-track`, `lookout-detect`).
    pub thread: String,
    /// The frame the thread was working on (the last one it took), if any.
    pub frame: Option<u64>,
    /// The panic's message.
    pub message: String,
    /// Where it panicked (`file:line:column`), when the hook saw it.
    pub location: Option<String>,
}
