//! `--truth` on a timed run (not a sweep): scores what a camera's run wrote to its tracks file
//! against the hand-checked ground truth of its recording, with the scores `--sweep fidelity`
//! gives ([`crate::fidelity::truth::score`]). This is how a run through the live pipeline —
//! its real pacing, dropped frames and a detector shared with other cameras — is judged by
//! what it found, not only by how fast it went.
//!
//! Frame `seq` of a file source is the recording's frame `seq` (0-based), which is truth frame
//! `seq + 1`. Frames the run did not process (dropped as stale, or after the run ended) have no
//! line and count as frames with no track; a looped recording's second pass (`seq` past the
//! truth's last frame) is not scored.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::report::RunFigures;
use crate::config::{tracks_file_of, Camera, Config};
use crate::fidelity::truth::{score, Truth, TruthError, TruthScores};
use crate::fidelity::LabelledBox;
use crate::geom::BBox;
use crate::vocab::labels;

/// The largest tracks file read (its rotation size by default is 64 MB).
const TRACKS_FILE_LIMIT: u64 = 256 * 1024 * 1024;

/// One line of the tracks file, as far as scoring needs it.
#[derive(Deserialize)]
struct Line {
    seq: u64,
    tracks: Vec<Track>,
}

/// One track of a line.
#[derive(Deserialize)]
struct Track {
    id: u64,
    label: String,
    #[serde(rename = "box")]
    bbox: [f32; 4],
    #[serde(default)]
    event: Option<u64>,
}

/// Per frame of the truth: the tracks' boxes and the events' boxes (a track that carries an
/// event, under the event's id).
pub type FrameBoxes = (Vec<Vec<LabelledBox>>, Vec<Vec<LabelledBox>>);

/// Reads a tracks file into `frames` frames of track and event boxes.
///
/// # Errors
/// The file cannot be read, is larger than 256 MB, or a line is not a tracks-file line (the
/// message names the file and line).
pub fn read_tracks_file(path: &Path, frames: usize) -> Result<FrameBoxes, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > TRACKS_FILE_LIMIT {
        return Err(format!(
            "{}: {size} bytes, more than the {TRACKS_FILE_LIMIT} scored",
            path.display()
        ));
    }
    let mut tracks = vec![Vec::new(); frames];
    let mut events = vec![Vec::new(); frames];
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: not a tracks-file line: {e}", path.display(), i + 1))?;
        let Ok(k) = usize::try_from(parsed.seq) else {
            continue;
        };
        if k >= frames {
            continue;
        }
        for t in parsed.tracks {
            let Some(class_id) = labels::class_id(&t.label) else {
                return Err(format!(
                    "{}:{}: unknown label {:?}",
                    path.display(),
                    i + 1,
                    t.label
                ));
            };
            let [x0, y0, x1, y1] = t.bbox;
            let bbox = BBox::new(x0, y0, x1, y1);
            if let Some(event) = t.event {
                events[k].push(LabelledBox {
                    id: event,
                    class_id,
                    bbox,
                });
            }
            tracks[k].push(LabelledBox {
                id: t.id,
                class_id,
                bbox,
            });
        }
    }
    Ok((tracks, events))
}

/// Scores the tracks file at `path` against `truth`, the recording playing at `fps`.
///
/// # Errors
/// As [`read_tracks_file`].
pub fn score_tracks_file(path: &Path, truth: &Truth, fps: f64) -> Result<TruthScores, String> {
    let (tracks, events) = read_tracks_file(path, truth.frames())?;
    Ok(score(truth, &tracks, &events, fps))
}

/// Why a run cannot be scored.
#[derive(Debug, thiserror::Error)]
pub enum ScoringError {
    /// A command line that cannot work whatever the files (exit status 64).
    #[error("{0}")]
    CommandLine(String),
    /// What was asked for cannot be done with these sources or files.
    #[error("{0}")]
    Usage(String),
    /// A `--truth` file cannot be read or is not a ground truth.
    #[error(transparent)]
    Truth(#[from] TruthError),
}

/// One camera to score: its name in the tracks file's name (`None` for a single camera, whose
/// tracks file is the one given), its ground truth and the recording's frame rate.
struct Scored {
    name: Option<String>,
    file: PathBuf,
    truth: Truth,
    fps: f64,
}

/// The `--truth` files of a timed run, loaded and checked before the run, and where the run's
/// tracks go when `--tracks-out` does not say (a directory removed afterwards).
#[derive(Default)]
pub struct Scoring {
    cameras: Vec<Scored>,
    temp_dir: Option<PathBuf>,
}

impl Scoring {
    /// Checks and loads the `truth` files for a timed run (`sweep`: one of a sweep's rows) of
    /// `cameras` (`None`: the single camera `base`). Nothing to do without `--truth`.
    ///
    /// # Errors
    /// Not one truth per camera, or with a sweep (exit 64); a camera or a command as a scored
    /// source; a truth file that cannot be read.
    pub fn prepare(
        truth: &[PathBuf],
        sweep: bool,
        base: &Config,
        cameras: Option<&[Camera]>,
    ) -> Result<Scoring, ScoringError> {
        if truth.is_empty() {
            return Ok(Scoring::default());
        }
        if sweep {
            return Err(ScoringError::CommandLine(
                "--truth scores one run or --sweep fidelity, not the rows of another sweep".into(),
            ));
        }
        let specs: Vec<(Option<String>, &str)> = match cameras {
            Some(cams) => cams
                .iter()
                .map(|c| (Some(c.name.clone()), c.config.source.spec.as_str()))
                .collect(),
            None => vec![(None, base.source.spec.as_str())],
        };
        if specs.len() != truth.len() {
            return Err(ScoringError::CommandLine(format!(
                "--truth: {} file(s) for {} camera(s): give one ground truth per camera, in the cameras' order",
                truth.len(),
                specs.len()
            )));
        }
        let mut scored = Vec::new();
        for ((name, spec), file) in specs.into_iter().zip(truth) {
            if crate::source::Spec::parse(spec).is_ok_and(|s| s.is_live()) {
                return Err(ScoringError::Usage(format!(
                    "--truth scores a recording, and {spec} is a camera or a command: record it first (lookout capture) and pass the file with --source"
                )));
            }
            let fps = crate::source::open(spec, &crate::source::SourceOptions::default())
                .ok()
                .and_then(|src| src.fps())
                .unwrap_or(DEFAULT_FPS);
            scored.push(Scored {
                name,
                file: file.clone(),
                truth: Truth::load(file)?,
                fps,
            });
        }
        Ok(Scoring {
            cameras: scored,
            temp_dir: None,
        })
    }

    /// The tracks file the run writes: `given` (`--tracks-out`), else, when scoring, one in a
    /// fresh temporary directory.
    pub fn tracks_out(&mut self, given: Option<&PathBuf>) -> Result<Option<PathBuf>, ScoringError> {
        if given.is_some() || self.cameras.is_empty() {
            return Ok(given.cloned());
        }
        let dir = std::env::temp_dir().join(format!("lookout-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| {
            ScoringError::Usage(format!(
                "--truth: cannot create {} for the run's tracks: {e}",
                dir.display()
            ))
        })?;
        self.temp_dir = Some(dir.clone());
        Ok(Some(dir.join("tracks.jsonl")))
    }

    /// Scores each camera's tracks file (under `tracks_out`) into its entry of `runs[0]`.
    ///
    /// # Errors
    /// A tracks file that cannot be read back.
    pub fn score(
        &self,
        runs: &mut [RunFigures],
        tracks_out: Option<&PathBuf>,
    ) -> Result<(), ScoringError> {
        let (Some(run), Some(out)) = (runs.first_mut(), tracks_out) else {
            return Ok(());
        };
        for (c, figures) in self.cameras.iter().zip(run.cameras.iter_mut()) {
            let path = match &c.name {
                Some(name) => PathBuf::from(tracks_file_of(&out.display().to_string(), name)),
                None => out.clone(),
            };
            let scores = score_tracks_file(&path, &c.truth, c.fps)
                .map_err(|e| ScoringError::Usage(format!("--truth: {e}")))?;
            figures.truth_file = Some(c.file.display().to_string());
            figures.truth = Some(scores);
        }
        Ok(())
    }
}

impl Drop for Scoring {
    fn drop(&mut self) {
        if let Some(dir) = &self.temp_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The frame rate assumed for a recording that does not say its own.
const DEFAULT_FPS: f64 = 10.0;

#[cfg(test)]
mod tests {
    use super::*;

    const TRUTH: &str = "1,1,10,10,20,40,1,0,1\n2,1,12,10,20,40,1,0,1\n3,1,14,10,20,40,1,0,1\n";

    fn write(lines: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), lines).unwrap();
        f
    }

    #[test]
    fn lines_land_on_their_frames_and_events_keep_their_ids() {
        let f = write(concat!(
            r#"{"seq":0,"captured_at_ms":0,"tracks":[{"id":7,"label":"person","score":0.9,"box":[10,10,30,50],"detected":true,"detected_seq":0,"event":3}]}"#,
            "\n",
            r#"{"seq":2,"captured_at_ms":0,"tracks":[{"id":7,"label":"person","score":0.9,"box":[14,10,34,50],"detected":false,"detected_seq":0}]}"#,
            "\n",
            r#"{"seq":9,"captured_at_ms":0,"tracks":[{"id":8,"label":"car","score":0.9,"box":[0,0,5,5],"detected":true,"detected_seq":9}]}"#,
            "\n"
        ));
        let (tracks, events) = read_tracks_file(f.path(), 3).unwrap();
        assert_eq!(tracks.len(), 3);
        assert_eq!(tracks[0].len(), 1);
        assert!(tracks[1].is_empty(), "a frame with no line has no track");
        assert_eq!(tracks[2][0].id, 7);
        assert_eq!(events[0][0].id, 3);
        assert!(events[2].is_empty(), "no event on that line");
    }

    #[test]
    fn a_missing_frame_lowers_the_recall() {
        let truth = Truth::parse(TRUTH, "t").unwrap();
        let all = write(concat!(
            r#"{"seq":0,"captured_at_ms":0,"tracks":[{"id":1,"label":"person","score":0.9,"box":[10,10,30,50],"detected":true,"detected_seq":0,"event":1}]}"#,
            "\n",
            r#"{"seq":1,"captured_at_ms":0,"tracks":[{"id":1,"label":"person","score":0.9,"box":[12,10,32,50],"detected":true,"detected_seq":1,"event":1}]}"#,
            "\n",
            r#"{"seq":2,"captured_at_ms":0,"tracks":[{"id":1,"label":"person","score":0.9,"box":[14,10,34,50],"detected":true,"detected_seq":2,"event":1}]}"#,
            "\n"
        ));
        let s = score_tracks_file(all.path(), &truth, 10.0).unwrap();
        assert!((s.recall - 1.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.events, 1);
        let gap = write(concat!(
            r#"{"seq":0,"captured_at_ms":0,"tracks":[{"id":1,"label":"person","score":0.9,"box":[10,10,30,50],"detected":true,"detected_seq":0,"event":1}]}"#,
            "\n"
        ));
        let s = score_tracks_file(gap.path(), &truth, 10.0).unwrap();
        assert!((s.recall - 1.0 / 3.0).abs() < 1e-3, "{s:?}");
    }

    #[test]
    fn a_broken_line_names_the_file_and_line() {
        let f = write("{\"seq\":0,\"tracks\":[]}\nnot json\n");
        let e = read_tracks_file(f.path(), 5).unwrap_err();
        assert!(e.contains(":2: not a tracks-file line"), "{e}");
        let f = write(r#"{"seq":0,"tracks":[{"id":1,"label":"dragon","box":[0,0,1,1]}]}"#);
        let e = read_tracks_file(f.path(), 5).unwrap_err();
        assert!(e.contains("unknown label \"dragon\""), "{e}");
    }
}
