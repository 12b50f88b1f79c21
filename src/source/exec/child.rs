//! One run of an `exec:` command: spawned in its own process group with stdin from
//! `/dev/null` and stdout and stderr piped, read through [`ChildPipe`], and ended —
//! SIGTERM to the group, SIGKILL after [`GRACE`], then reaped — when the pipe is dropped, so
//! no path (a restart, a reload, a stop, a thread unwinding) leaves a zombie or an orphan.
//!
//! Reads wait for output in slices of [`SLICE`], draining stderr into the log meanwhile (no
//! thread), and give up with [`std::io::ErrorKind::TimedOut`] when the run's interrupt is
//! raised or nothing came for the read timeout. When the command's first process exits, the
//! rest of its group is killed and the reads return what is left in the pipe, then the end.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, waitid, Pid, Signal, WaitId, WaitIdOptions};

use super::stderr::StderrLines;
use crate::interrupt::Interrupt;

/// How long a stopped command may take to end after SIGTERM before its group gets SIGKILL.
pub const GRACE: Duration = Duration::from_millis(400);
/// The longest a read waits without looking at the interrupt and the command's exit.
pub const SLICE: Duration = Duration::from_millis(100);
/// The most stderr read per wake-up (the rest waits for the next one).
const STDERR_BURST: usize = 64 << 10;

/// What is known about a command run after it ended (shared with the source, which no
/// longer holds the pipe once a reader owns it).
#[derive(Debug, Default)]
pub struct ChildReport {
    /// How it ended (`exit status: 1`, `signal: 9 (SIGKILL)`), once reaped.
    pub status: Option<String>,
    /// The last non-blank line it wrote to stderr.
    pub last_line: Option<String>,
}

/// How long a program that is open for writing elsewhere (`ETXTBSY`: being installed or
/// updated, or written by a process that has just forked) is tried again before its start fails.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// Starts `program args` in a new process group with piped stdout and stderr, trying again
/// while the executable is busy (see [`BUSY_RETRY`]).
fn spawn_retrying_busy(program: &str, args: &[String]) -> io::Result<Child> {
    let t0 = Instant::now();
    loop {
        let started = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn();
        match started {
            Err(e)
                if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error())
                    && t0.elapsed() < BUSY_RETRY =>
            {
                std::thread::sleep(Duration::from_millis(20)); // retry interval
            }
            other => return other,
        }
    }
}

/// A running command and its output pipes; dropping it ends and reaps the command.
pub struct ChildPipe {
    child: Child,
    pid: Pid,
    stdout: File,
    /// `None` once the command closed it.
    stderr: Option<File>,
    lines: StderrLines,
    /// `program[pid]`, the prefix of its logged stderr lines.
    who: String,
    interrupt: Interrupt,
    timeout: Duration,
    /// Bytes read ahead to recognize the stream, handed out before the pipe's.
    prefix: Vec<u8>,
    prefix_at: usize,
    report: Arc<Mutex<ChildReport>>,
    last_check: Instant,
    /// The first process exited (its group has been killed; what is left is read).
    exited: bool,
    /// Its stdout reached end of file: the command closed it, so it is ending by itself.
    output_ended: bool,
    reaped: bool,
}

impl ChildPipe {
    /// Starts `argv` in a new process group. `timeout`: how long a read waits for output.
    ///
    /// # Errors
    /// The OS error of the spawn (the program missing or not executable, no memory…).
    pub fn spawn(
        argv: &[String],
        interrupt: Interrupt,
        timeout: Duration,
        report: Arc<Mutex<ChildReport>>,
    ) -> io::Result<ChildPipe> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
        let mut child = spawn_retrying_busy(program, args)?;
        let pid = Pid::from_child(&child);
        let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
            let mut pipe_less = child;
            let _ = pipe_less.kill();
            let _ = pipe_less.wait();
            return Err(io::Error::other("the command's pipes were not created"));
        };
        let stdout = File::from(OwnedFd::from(out));
        let stderr = File::from(OwnedFd::from(err));
        // Drained between stdout reads: never block on it.
        rustix::io::ioctl_fionbio(&stderr, true)?;
        let name = std::path::Path::new(program)
            .file_name()
            .map_or(program.clone(), |n| n.to_string_lossy().into_owned());
        Ok(ChildPipe {
            who: format!("{name}[{}]", child.id()),
            child,
            pid,
            stdout,
            stderr: Some(stderr),
            lines: StderrLines::new(),
            interrupt,
            timeout,
            prefix: Vec::new(),
            prefix_at: 0,
            report,
            last_check: Instant::now(),
            exited: false,
            output_ended: false,
            reaped: false,
        })
    }

    /// The command's process id (its process group's id too).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads ahead until `n` bytes are there or the output ended; the bytes are handed out
    /// again by the reads that follow. Keeps what it has when it times out.
    ///
    /// # Errors
    /// [`io::ErrorKind::TimedOut`] (see the module documentation), or a read error.
    pub fn read_ahead(&mut self, n: usize) -> io::Result<&[u8]> {
        let mut chunk = [0u8; 64];
        while self.prefix.len() < n {
            let want = (n - self.prefix.len()).min(chunk.len());
            let got = self.read_pipe(&mut chunk[..want])?;
            if got == 0 {
                break;
            }
            self.prefix.extend_from_slice(&chunk[..got]);
        }
        Ok(&self.prefix)
    }

    /// One read of the command's stdout: waits (see the module documentation), drains stderr.
    fn read_pipe(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let deadline = Instant::now() + self.timeout;
        loop {
            if self.interrupt.is_raised() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the run ended while waiting for the command's output",
                ));
            }
            if !self.exited && self.last_check.elapsed() >= SLICE {
                self.last_check = Instant::now();
                if self.leader_exited() {
                    self.exited = true;
                    // The rest of its group (a shell's children) would keep the pipe open.
                    let _ = kill_process_group(self.pid, Signal::KILL);
                }
            }
            let now = Instant::now();
            let wait = if self.exited {
                Duration::ZERO
            } else {
                deadline.saturating_duration_since(now).min(SLICE)
            };
            let slice = Timespec {
                tv_sec: 0,
                tv_nsec: i64::try_from(wait.as_nanos()).unwrap_or(0),
            };
            let (out_ready, err_ready) = {
                let out_fd = self.stdout.as_fd();
                let err_fd = self.stderr.as_ref().map(|f| f.as_fd());
                let mut fds = [
                    PollFd::new(&out_fd, PollFlags::IN),
                    PollFd::new(err_fd.as_ref().unwrap_or(&out_fd), PollFlags::IN),
                ];
                let n = if err_fd.is_some() { 2 } else { 1 };
                match poll(&mut fds[..n], Some(&slice)) {
                    Ok(_) => (
                        !fds[0].revents().is_empty(),
                        n == 2 && !fds[1].revents().is_empty(),
                    ),
                    Err(rustix::io::Errno::INTR) => (false, false),
                    Err(e) => return Err(e.into()),
                }
            };
            if err_ready {
                self.drain_stderr();
            }
            if out_ready {
                let n = self.stdout.read(buf)?;
                if n == 0 && !buf.is_empty() {
                    self.output_ended = true;
                }
                return Ok(n);
            }
            if self.exited {
                // Nothing left in the pipe (or only a writer outside its group holds it).
                return Ok(0);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the command wrote nothing for {:?}", self.timeout),
                ));
            }
        }
    }

    /// True once the first process has exited (it stays a zombie until reaped, so its
    /// process group id cannot be reused while the group is signalled).
    fn leader_exited(&self) -> bool {
        let opts = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        match waitid(WaitId::Pid(self.pid), opts) {
            Ok(Some(_)) => true,
            Ok(None) => false,
            // ECHILD: already reaped (cannot happen here) or not ours: treat as gone.
            Err(_) => true,
        }
    }

    /// Logs what the command wrote to stderr (bounded work per call).
    fn drain_stderr(&mut self) {
        let Some(err) = self.stderr.as_mut() else {
            return;
        };
        let mut buf = [0u8; 4096];
        let mut taken = 0;
        while taken < STDERR_BURST {
            match err.read(&mut buf) {
                Ok(0) => {
                    self.stderr = None;
                    break;
                }
                Ok(n) => {
                    taken += n;
                    for line in self.lines.feed(&buf[..n], Instant::now()) {
                        log::info!(LOOKOUT_EVENT = "source_stderr"; "{}: {line}", self.who);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        if let Ok(mut r) = self.report.lock() {
            r.last_line = self.lines.last_line().map(str::to_string);
        }
    }

    /// Ends the command: SIGTERM to its group, SIGKILL after [`GRACE`] (or at once when
    /// the first process has ended), then reaps it and logs the rest of its stderr. A command
    /// whose output already ended is first given [`GRACE`] to exit by itself, so the status
    /// reported is its own (`exit status: 0`), not the signal that would otherwise race its
    /// exit (a program closes its stdout a moment before it exits).
    pub fn stop(&mut self) {
        if self.reaped {
            return;
        }
        if self.output_ended {
            let until = Instant::now() + GRACE;
            while !self.leader_exited() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5)); // polling the child's exit
            }
        }
        let _ = kill_process_group(self.pid, Signal::TERM);
        let until = Instant::now() + GRACE;
        while !self.leader_exited() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5)); // polling the child's exit
        }
        // Before reaping: the zombie keeps the group id from being reused.
        let _ = kill_process_group(self.pid, Signal::KILL);
        let status = self.child.wait();
        self.reaped = true;
        self.drain_stderr();
        for line in self.lines.finish(Instant::now()) {
            log::info!(LOOKOUT_EVENT = "source_stderr"; "{}: {line}", self.who);
        }
        if let Ok(mut r) = self.report.lock() {
            r.status = status.ok().map(|s| s.to_string());
            r.last_line = self.lines.last_line().map(str::to_string);
        }
    }
}

impl Read for ChildPipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(rest) = self.prefix.get(self.prefix_at..).filter(|r| !r.is_empty()) {
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.prefix_at += n;
            return Ok(n);
        }
        self.read_pipe(buf)
    }
}

/// A pipe cannot seek (a reader that loops would fail here; the source never loops one).
impl Seek for ChildPipe {
    fn seek(&mut self, _: SeekFrom) -> io::Result<u64> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a command's output cannot be rewound",
        ))
    }
}

impl Drop for ChildPipe {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    #[cfg_attr(
        not(target_arch = "x86_64"),
        ignore = "the ARM tests run under qemu-user, whose exec errors and ETXTBSY differ from a kernel's"
    )]
    fn a_program_still_open_for_writing_starts_once_the_writer_closes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy");
        let mut f = File::create(&path).unwrap();
        f.write_all(b"#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let program = path.to_string_lossy().into_owned();
        // While the writer holds it, the kernel refuses to run it.
        let refused = Command::new(&program).status().unwrap_err();
        assert_eq!(
            refused.raw_os_error(),
            Some(rustix::io::Errno::TXTBSY.raw_os_error())
        );
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(f);
        });
        let mut child = spawn_retrying_busy(&program, &[]).unwrap();
        assert!(child.wait().unwrap().success());
        writer.join().unwrap();
    }

    #[test]
    #[cfg_attr(
        not(target_arch = "x86_64"),
        ignore = "the ARM tests run under qemu-user, whose exec errors and ETXTBSY differ from a kernel's"
    )]
    fn a_missing_program_fails_at_once() {
        let t0 = Instant::now();
        let e = spawn_retrying_busy("/nonexistent/lookout-test", &[]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(t0.elapsed() < BUSY_RETRY);
    }
}
