//! A FIFO recording read so that a stalled writer never holds up the end of a run.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsFd;

use crate::interrupt::Interrupt;

/// How long one wait for the writer lasts before the run's interrupt is looked at.
const POLL_MS: u8 = 250;

/// A FIFO whose reads wait for data in slices of [`POLL_MS`], giving up with
/// [`std::io::ErrorKind::TimedOut`] once the run's interrupt is raised: a writer that stalls
/// (a recorder hung, a pipe held open with nothing in it) cannot keep a stop or a reload
/// waiting. A slow writer is waited for as long as it takes otherwise.
pub(super) struct Pipe {
    file: File,
    interrupt: Interrupt,
}

impl Pipe {
    pub(super) fn new(file: File, interrupt: Interrupt) -> Pipe {
        Pipe { file, interrupt }
    }
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        loop {
            if self.interrupt.is_raised() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the run ended while waiting for the writer",
                ));
            }
            let fd = self.file.as_fd();
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            let slice = Timespec {
                tv_sec: 0,
                tv_nsec: i64::from(POLL_MS) * 1_000_000,
            };
            match poll(&mut fds, Some(&slice)) {
                // Readable, or the writer closed it (a read then returns 0: the end).
                Ok(n) if n > 0 => return self.file.read(buf),
                Ok(_) => continue,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A FIFO cannot seek (looping it fails as it would on the file itself).
impl Seek for Pipe {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.file.seek(pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_stalled_writer_gives_way_to_the_interrupt_and_data_flows_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success());
        let p2 = path.clone();
        // The writer sends 3 bytes, then holds the pipe open with nothing more in it.
        let writer = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(&p2).unwrap();
            std::io::Write::write_all(&mut w, b"abc").unwrap();
            std::thread::sleep(Duration::from_secs(3));
        });
        let interrupt = Interrupt::new();
        let mut pipe = Pipe::new(File::open(&path).unwrap(), interrupt.clone());
        let mut buf = [0u8; 8];
        let n = pipe.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"abc");
        let i2 = interrupt.clone();
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            i2.raise();
        });
        let t0 = Instant::now();
        let e = pipe.read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        raiser.join().unwrap();
        writer.join().unwrap();
    }
}
