//! The one way lookout opens the files it reads: every file loaded whole goes through
//! [`read_bounded`], every recording streamed through [`open_stream`].
//!
//! **What is bounded and refused.** A file loaded whole must be a regular file (a symlink is
//! followed to what it names): a FIFO, a directory, a character device such as `/dev/zero`, a
//! block device or a socket is refused with a message naming the file and what it is, and the
//! open never blocks (the file is opened with `O_NONBLOCK`, then its descriptor is `fstat`ed,
//! so a FIFO without a writer cannot hold the process). Its size must be at most the limit of
//! its kind, checked against the metadata before anything is allocated and again while
//! reading (a file that grows is cut off with the same error):
//!
//! | file | limit | constant |
//! |---|---|---|
//! | configuration (`--config`) | 1 MiB | [`CONFIG_LIMIT`] |
//! | model (`model.file`, `--model`) | 256 MiB | [`MODEL_LIMIT`] |
//! | image (directory source, `lookout detect`) | 64 MiB | [`IMAGE_LIMIT`] |
//!
//! A recording (MJPEG, Y4M) is never loaded whole: it is read frame by frame with a bounded
//! buffer (an MJPEG frame may be at most `MAX_JPEG_FRAME` bytes, 16 MiB; a Y4M frame's size
//! follows from its header's bounded sides). [`open_stream`] accepts a regular file or a FIFO
//! (a pipe a recorder writes into) and refuses directories and devices: `/dev/zero` renamed
//! `x.mjpeg` would otherwise be an endless stream of zero bytes.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Largest configuration file read (1 MiB: the shipped one is under 10 KiB).
pub const CONFIG_LIMIT: u64 = 1 << 20;
/// Largest model file read (256 MiB: the FP32 NanoDet models are under 5 MiB, and a model too
/// large for this would not run on a Pi's memory anyway).
pub const MODEL_LIMIT: u64 = 256 << 20;
/// Largest image file read (64 MiB: a 16384×16384 PNG of one colour is far smaller; a photo
/// is a few MiB).
pub const IMAGE_LIMIT: u64 = 64 << 20;

/// Why a file could not be read. Every message names the file, what kind of file it was
/// read as, and (for a size) the limit.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file cannot be opened or read (missing, no permission, an I/O error).
    #[error("cannot read the {what} {}: {reason}", path.display())]
    Io {
        /// What the file was read as ("configuration file", "model file", "image").
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error's text (kept as text: the message already says it all, and an error
        /// chain would print it twice).
        reason: String,
        /// The OS error's kind.
        kind: std::io::ErrorKind,
    },
    /// The path names something that is not a regular file.
    #[error("the {what} {} is {kind}, not a regular file", path.display())]
    NotRegular {
        /// What the file was read as.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What it is ("a directory", "a FIFO", "a character device", …).
        kind: &'static str,
    },
    /// The file is larger than its kind may be.
    #[error("the {what} {} is {} bytes or more, over the {} limit for a {what}", path.display(), size, human(*limit))]
    TooLarge {
        /// What the file was read as.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Its size (or how much was read before giving up).
        size: u64,
        /// The limit.
        limit: u64,
    },
}

impl FileError {
    /// The OS error kind when the file could not be opened or read (`NotFound`, …).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            FileError::Io { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    fn io(what: &'static str, path: &Path, e: &std::io::Error) -> FileError {
        FileError::Io {
            what,
            path: path.to_path_buf(),
            reason: e.to_string(),
            kind: e.kind(),
        }
    }
}

/// `limit` bytes as a short size (`1 MiB`, `256 MiB`, or bytes).
fn human(limit: u64) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else if limit >= 1 << 10 && limit.is_multiple_of(1 << 10) {
        format!("{} KiB", limit >> 10)
    } else {
        format!("{limit} bytes")
    }
}

/// What a file that is not regular is, for messages.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading without blocking on a FIFO or device (`O_NONBLOCK`), and returns
/// the file with its metadata (of the opened descriptor, not of the path: no race between a
/// check and the open).
fn open_nonblocking(path: &Path, what: &'static str) -> Result<(File, Metadata), FileError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| FileError::io(what, path, &e))?;
    let meta = file.metadata().map_err(|e| FileError::io(what, path, &e))?;
    Ok((file, meta))
}

/// Reads a whole regular file of at most `limit` bytes; `what` names its kind in messages
/// ("configuration file", "model file", "image"). See the module notes.
///
/// # Errors
/// [`FileError::Io`] if it cannot be opened or read, [`FileError::NotRegular`] for anything
/// but a regular file, [`FileError::TooLarge`] over `limit`.
pub fn read_bounded(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    let (file, meta) = open_nonblocking(path, what)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            what,
            path: path.to_path_buf(),
            kind: kind_of(&meta),
        });
    }
    let too_large = |size| FileError::TooLarge {
        what,
        path: path.to_path_buf(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    // O_NONBLOCK means nothing to a regular file's reads. Read one byte past the limit, so a
    // file that grew since the fstat is caught too.
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| FileError::io(what, path, &e))?;
    if data.len() as u64 > limit {
        return Err(too_large(data.len() as u64));
    }
    Ok(data)
}

/// Reads a whole regular file as UTF-8 text, as [`read_bounded`].
///
/// # Errors
/// As [`read_bounded`]; bytes that are not UTF-8 are [`FileError::Io`] with kind
/// `InvalidData`.
pub fn read_bounded_text(path: &Path, limit: u64, what: &'static str) -> Result<String, FileError> {
    let bytes = read_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| FileError::Io {
        what,
        path: path.to_path_buf(),
        reason: format!("not UTF-8 text ({e})"),
        kind: std::io::ErrorKind::InvalidData,
    })
}

/// Opens a recording to be streamed: a regular file or a FIFO. A FIFO is opened blocking
/// (waiting for its writer, as a reader of a pipe does); anything else is refused at once.
///
/// # Errors
/// [`FileError::Io`] if it cannot be opened, [`FileError::NotRegular`] for a directory, a
/// device or a socket.
pub fn open_stream(path: &Path, what: &'static str) -> Result<File, FileError> {
    let (file, meta) = open_nonblocking(path, what)?;
    if meta.is_file() {
        return Ok(file);
    }
    if meta.file_type().is_fifo() {
        // A pipe is read as it is written: the same descriptor made blocking (a non-blocking
        // read of an empty pipe would end the recording at once). Never closed and opened
        // again: a writer already connected would see the pipe without a reader in between
        // (EPIPE). Until a writer comes, a read waits for it (the replay reads a FIFO through
        // a poll that a stop ends).
        rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty())
            .map_err(|e| FileError::io(what, path, &e.into()))?;
        return Ok(file);
    }
    Err(FileError::NotRegular {
        what,
        path: path.to_path_buf(),
        kind: kind_of(&meta),
    })
}

/// True when `path` is a regular file (symlinks followed), without opening it.
pub fn is_regular(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read_bounded(&p, 5, "test file").unwrap(), b"hello");
        let e = read_bounded(&p, 4, "test file").unwrap_err().to_string();
        assert!(e.contains("a.txt") && e.contains("4 bytes"), "{e}");
    }

    #[test]
    fn devices_directories_fifos_and_symlinks_to_them_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.jpg");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let link = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for (p, kind) in [
            (Path::new("/dev/zero"), "character device"),
            (link.as_path(), "character device"),
            (dir.path(), "directory"),
            (fifo.as_path(), "FIFO"),
        ] {
            let e = read_bounded(p, CONFIG_LIMIT, "configuration file")
                .unwrap_err()
                .to_string();
            assert!(e.contains(kind) && e.contains("configuration file"), "{e}");
        }
        assert!(open_stream(Path::new("/dev/zero"), "MJPEG recording").is_err());
        assert!(open_stream(dir.path(), "MJPEG recording").is_err());
    }

    #[test]
    fn limits_are_named_in_mib() {
        assert_eq!(human(CONFIG_LIMIT), "1 MiB");
        assert_eq!(human(MODEL_LIMIT), "256 MiB");
        assert_eq!(human(100), "100 bytes");
    }
}
