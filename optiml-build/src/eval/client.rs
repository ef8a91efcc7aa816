//! The parent's side of the evaluation worker: start it, send jobs, enforce deadlines, and replace it when a
//! candidate kills it.

use super::protocol::{self, Device, Job, JobResult, Request, Response};
use super::worker::WORKER_ENV;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// How to start a worker: a program that calls [`super::worker::serve_if_requested`] early, run with
/// [`WORKER_ENV`] set.
#[derive(Clone, Debug)]
pub struct WorkerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments (ignored by a worker; they only have to get the program to its `serve_if_requested`).
    pub args: Vec<OsString>,
}

impl WorkerCommand {
    /// This process's own executable: the build script or `cargo-optiml`, both of which serve when asked.
    ///
    /// # Errors
    /// When the OS cannot say which executable is running.
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: Vec::new(),
        })
    }
}

/// Why no worker could be used (as opposed to a candidate failing, which is a [`JobResult`]).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The process did not start.
    #[error("could not start the evaluation worker `{program}`: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// It started but did not set up (no GPU, no driver, the support module did not load).
    #[error("the evaluation worker did not start on device {device}: {reason}")]
    Setup {
        /// The device ordinal.
        device: usize,
        /// What happened.
        reason: String,
    },
    /// Sending to it failed.
    #[error("could not send a job to the evaluation worker: {0}")]
    Send(#[from] protocol::FrameError),
    /// Too many workers in a row died, hung or faulted: the device or driver is failing, not one candidate, and
    /// no further worker is started.
    #[error(
        "{faults} evaluation workers in a row died, hung or faulted (the last: {last}); no more are started: check \
         the GPU (`nvidia-smi`) and its driver"
    )]
    Failing {
        /// Consecutive faults.
        faults: usize,
        /// The last one.
        last: String,
    },
}

/// Faults in a row after which [`Client`] starts no further worker: a broken candidate costs one, a search
/// mixes them with working ones, and a device that fails every job would otherwise restart a worker (a CUDA
/// context, a few hundred milliseconds and the deadline of a hang) for every candidate of the search.
pub const MAX_FAULTS_IN_A_ROW: usize = 10;

struct Proc {
    child: Child,
    stdin: ChildStdin,
    responses: Receiver<Result<Response, String>>,
}

impl Proc {
    fn kill(mut self) -> String {
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        }
    }
}

/// A worker process, restarted as often as candidates kill it.
pub struct Client {
    command: WorkerCommand,
    support_cubin: Vec<u8>,
    ordinal: usize,
    proc: Option<Proc>,
    device: Option<Device>,
    restarts: usize,
    setup_timeout: Duration,
    /// Faults since the last job that ended otherwise, and the last one's words.
    faults_in_a_row: (usize, String),
}

impl Client {
    /// A client that will start `command` on device `ordinal` with this support module (started lazily).
    pub fn new(command: WorkerCommand, support_cubin: Vec<u8>, ordinal: usize) -> Self {
        Client {
            command,
            support_cubin,
            ordinal,
            proc: None,
            device: None,
            restarts: 0,
            setup_timeout: Duration::from_secs(120),
            faults_in_a_row: (0, String::new()),
        }
    }

    /// Workers started after the first (each one follows a candidate that killed its predecessor).
    pub fn restarts(&self) -> usize {
        self.restarts
    }

    /// Whether it has given up ([`ClientError::Failing`]): its device, not a candidate, is the likely cause.
    pub fn is_failing(&self) -> bool {
        self.faults_in_a_row.0 >= MAX_FAULTS_IN_A_ROW
    }

    /// The device, starting the worker if needed.
    ///
    /// # Errors
    /// [`ClientError`] when the worker cannot start.
    pub fn device(&mut self) -> Result<&Device, ClientError> {
        self.ensure()?;
        self.device.as_ref().ok_or_else(|| ClientError::Setup {
            device: self.ordinal,
            reason: "no device reported".into(),
        })
    }

    fn ensure(&mut self) -> Result<(), ClientError> {
        if self.proc.is_some() {
            return Ok(());
        }
        if self.device.is_some() {
            self.restarts += 1;
        }
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .env(WORKER_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| ClientError::Spawn {
                program: self.command.program.clone(),
                source,
            })?;
        let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(ClientError::Setup {
                device: self.ordinal,
                reason: "no pipes to the worker".into(),
            });
        };
        let (tx, responses) = mpsc::channel();
        // A reader thread turns the blocking pipe into a channel the parent can wait on with a deadline.
        std::thread::spawn(move || {
            loop {
                let msg = match protocol::read::<Response>(&mut stdout) {
                    Ok(Some(r)) => Ok(r),
                    Ok(None) => Err("the worker exited".to_string()),
                    Err(e) => Err(e.to_string()),
                };
                let end = msg.is_err();
                if tx.send(msg).is_err() || end {
                    return;
                }
            }
        });
        protocol::write(
            &mut stdin,
            &Request::Setup {
                support_cubin: self.support_cubin.clone(),
                device: self.ordinal,
            },
        )?;
        let proc = Proc {
            child,
            stdin,
            responses,
        };
        match proc.responses.recv_timeout(self.setup_timeout) {
            Ok(Ok(Response::Ready(device))) => {
                self.device = Some(device);
                self.proc = Some(proc);
                Ok(())
            }
            other => {
                let status = proc.kill();
                Err(ClientError::Setup {
                    device: self.ordinal,
                    reason: match other {
                        Ok(Ok(r)) => format!("unexpected answer {r:?}"),
                        Ok(Err(e)) => format!("{e} ({status})"),
                        Err(RecvTimeoutError::Timeout) => {
                            "no answer within the setup timeout".into()
                        }
                        Err(RecvTimeoutError::Disconnected) => {
                            format!("the worker exited ({status})")
                        }
                    },
                })
            }
        }
    }

    /// Runs `job`, waiting at most `deadline` for its answer. A worker that faults, dies or overruns is
    /// stopped and reported as a [`JobResult::Fault`]; the next call starts a fresh one, up to
    /// [`MAX_FAULTS_IN_A_ROW`] faults in a row.
    ///
    /// # Errors
    /// [`ClientError`] when no worker can be started or reached at all, [`ClientError::Failing`] after
    /// [`MAX_FAULTS_IN_A_ROW`] faults in a row.
    pub fn evaluate(&mut self, job: &Job, deadline: Duration) -> Result<JobResult, ClientError> {
        let (faults, last) = &self.faults_in_a_row;
        if *faults >= MAX_FAULTS_IN_A_ROW {
            return Err(ClientError::Failing {
                faults: *faults,
                last: last.clone(),
            });
        }
        let result = self.evaluate_once(job, deadline)?;
        self.faults_in_a_row = match &result {
            JobResult::Fault { during, error } => {
                (self.faults_in_a_row.0 + 1, format!("{during}: {error}"))
            }
            _ => (0, String::new()),
        };
        Ok(result)
    }

    fn evaluate_once(&mut self, job: &Job, deadline: Duration) -> Result<JobResult, ClientError> {
        self.ensure()?;
        let Some(mut proc) = self.proc.take() else {
            return Err(ClientError::Setup {
                device: self.ordinal,
                reason: "no worker".into(),
            });
        };
        if let Err(e) = protocol::write(&mut proc.stdin, &Request::Evaluate(Box::new(job.clone())))
        {
            // The previous candidate may have killed it between jobs: try once more with a fresh one.
            proc.kill();
            if matches!(e, protocol::FrameError::Io(_)) {
                self.ensure()?;
                let Some(mut fresh) = self.proc.take() else {
                    return Err(e.into());
                };
                protocol::write(&mut fresh.stdin, &Request::Evaluate(Box::new(job.clone())))?;
                proc = fresh;
            } else {
                return Err(e.into());
            }
        }
        match proc.responses.recv_timeout(deadline) {
            Ok(Ok(Response::Done(result))) => {
                if matches!(result, JobResult::Fault { .. }) {
                    proc.kill();
                } else {
                    self.proc = Some(proc);
                }
                Ok(result)
            }
            Ok(Ok(Response::Ready(_))) => {
                let status = proc.kill();
                Ok(JobResult::Fault {
                    during: format!("evaluating `{}`", job.name),
                    error: format!("the worker answered out of turn ({status})"),
                })
            }
            Ok(Err(e)) => {
                let status = proc.kill();
                Ok(JobResult::Fault {
                    during: format!("evaluating `{}`", job.name),
                    error: format!("the worker died: {e} ({status})"),
                })
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = proc.kill();
                Ok(JobResult::Fault {
                    during: format!("evaluating `{}`", job.name),
                    error: format!("the worker died ({status})"),
                })
            }
            Err(RecvTimeoutError::Timeout) => {
                let status = proc.kill();
                Ok(JobResult::Fault {
                    during: format!("evaluating `{}`", job.name),
                    error: format!(
                        "no answer within {:.1} s: the worker was killed ({status})",
                        deadline.as_secs_f64()
                    ),
                })
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(p) = self.proc.take() {
            // Closing stdin ends a healthy worker; the kill covers one stuck in a kernel.
            drop(p.stdin);
            let mut child = p.child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::eval::plan::{TestPlan, Tolerance};
    use crate::eval::protocol::{Ceilings, Problem, TimingPlan};
    use optiml_runtime::{Arch, Launch};

    /// A worker that sets up (answers `Ready`), then runs the shell commands `then`: a shell script printing a
    /// real `Ready` frame after reading the `Setup` one.
    fn scripted_worker(then: &str) -> WorkerCommand {
        let mut ready = Vec::new();
        protocol::write(
            &mut ready,
            &Response::Ready(Device {
                name: "fake".into(),
                arch: Arch::new(9, 0),
                sm_count: 1,
                ceilings: Ceilings {
                    copy_tbps: 1.0,
                    fp32_tflops: 1.0,
                },
            }),
        )
        .unwrap();
        let mut setup = Vec::new();
        protocol::write(
            &mut setup,
            &Request::Setup {
                support_cubin: Vec::new(),
                device: 0,
            },
        )
        .unwrap();
        let octal: String = ready.iter().map(|b| format!("\\{b:03o}")).collect();
        WorkerCommand {
            program: "sh".into(),
            args: vec![
                "-c".into(),
                format!(
                    "head -c {} >/dev/null; printf '{octal}'; {then}",
                    setup.len()
                )
                .into(),
            ],
        }
    }

    /// A worker that sets up, then dies on the first byte of every job.
    pub(crate) fn dying_worker() -> WorkerCommand {
        scripted_worker("head -c 1 >/dev/null; exit 1")
    }

    /// A worker that sets up, then never answers (as one stuck in a kernel); `exec`, so killing it ends it.
    pub(crate) fn hanging_worker() -> WorkerCommand {
        scripted_worker("exec sleep 60")
    }

    /// A job for a fake worker (it never looks inside).
    pub(crate) fn sample_job() -> Job {
        Job {
            name: "doomed".into(),
            cubin: Vec::new(),
            entry: "k".into(),
            launch: Launch::Matmul {
                bm: 16,
                bn: 16,
                threads: 256,
                smem_bytes: 0,
                split_k: 1,
            },
            problem: Problem {
                family: "matmul".into(),
                payload: Vec::new(),
            },
            plan: TestPlan::new(Vec::new(), Tolerance::F32),
            timing: TimingPlan::default(),
            seed: 1,
        }
    }

    #[test]
    fn workers_that_die_on_every_job_are_restarted_a_bounded_number_of_times() {
        let mut client = Client::new(dying_worker(), Vec::new(), 0);
        let job = sample_job();
        let deadline = Duration::from_secs(20);
        for i in 0..MAX_FAULTS_IN_A_ROW {
            let result = client.evaluate(&job, deadline).unwrap();
            assert!(
                matches!(result, JobResult::Fault { .. }),
                "job {i}: {result:?}"
            );
        }
        assert_eq!(client.restarts(), MAX_FAULTS_IN_A_ROW - 1);
        let e = client.evaluate(&job, deadline).unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::Failing {
                    faults: MAX_FAULTS_IN_A_ROW,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("the worker died"), "{e}");
        // No further worker was started.
        assert_eq!(client.restarts(), MAX_FAULTS_IN_A_ROW - 1);
    }
}
