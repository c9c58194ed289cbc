//! The benchmark's harness: the results table and a `maia acp` process
//! driven synchronously, its stdout lines timestamped as they arrive.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) struct Row {
    pub(crate) measure: String,
    pub(crate) result: String,
    pub(crate) target: &'static str,
    pub(crate) verdict: &'static str,
}

#[derive(Default)]
pub(crate) struct Table(pub(crate) Vec<Row>);

impl Table {
    pub(crate) fn add(&mut self, measure: impl Into<String>, result: impl Into<String>) {
        self.check(measure, result, "", None);
    }

    pub(crate) fn check(
        &mut self,
        measure: impl Into<String>,
        result: impl Into<String>,
        target: &'static str,
        met: Option<bool>,
    ) {
        let row = Row {
            measure: measure.into(),
            result: result.into(),
            target,
            verdict: match met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "",
            },
        };
        eprintln!("  {} = {}", row.measure, row.result);
        self.0.push(row);
    }

    pub(crate) fn print(&self) {
        println!("| measure | result | target | |");
        println!("| --- | --- | --- | --- |");
        for r in &self.0 {
            println!(
                "| {} | {} | {} | {} |",
                r.measure, r.result, r.target, r.verdict
            );
        }
    }
}

/// A `maia acp` process driven synchronously; stdout lines are read on a
/// thread and timestamped there as they arrive.
pub(crate) struct Maia {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) rx: mpsc::Receiver<(Instant, Value)>,
    pub(crate) next_id: u64,
}

impl Maia {
    pub(crate) fn spawn(home: &Path) -> (Maia, Instant) {
        Self::spawn_with(home, &["acp"], &[])
    }

    /// `maia ARGS` with `env` added, driven like `maia acp`.
    pub(crate) fn spawn_with(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (Maia, Instant) {
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_maia"))
            .args(args)
            .envs(env.iter().copied())
            .env("HOME", home)
            .env_remove("LITELLM_API_KEY")
            .env_remove("MAIA_MODEL")
            .env("MAIA_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn maia");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(Ok(line)) = lines.next() {
                let at = Instant::now();
                let value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if tx.send((at, value)).is_err() {
                    return;
                }
            }
        });
        (
            Maia {
                child,
                stdin,
                rx,
                next_id: 1,
            },
            started,
        )
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn send(&mut self, v: &Value) -> Instant {
        let line = format!("{v}\n");
        let at = Instant::now();
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        at
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> (u64, Instant) {
        let id = self.next_id;
        self.next_id += 1;
        let at =
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        (id, at)
    }

    pub(crate) fn next(&mut self) -> (Instant, Value) {
        self.rx.recv_timeout(WAIT).expect("no message from maia")
    }

    /// Messages up to and including the response to `id`.
    pub(crate) fn until_response(&mut self, id: u64) -> Vec<(Instant, Value)> {
        let mut out = Vec::new();
        loop {
            let (at, m) = self.next();
            let done = m.get("method").is_none() && m["id"] == json!(id);
            out.push((at, m));
            if done {
                return out;
            }
        }
    }

    pub(crate) fn initialize(&mut self) -> Instant {
        let (id, _) = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        self.until_response(id).last().unwrap().0
    }

    /// Opens a session; returns its id and the request → response time.
    pub(crate) fn new_session(&mut self, cwd: &Path) -> (String, Duration) {
        let (id, sent) = self.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let (at, resp) = self.until_response(id).pop().unwrap();
        (
            resp["result"]["sessionId"].as_str().unwrap().to_owned(),
            at - sent,
        )
    }

    pub(crate) fn prompt(&mut self, sid: &str, text: &str) -> (u64, Instant) {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    pub(crate) fn cancel(&mut self, sid: &str) -> Instant {
        self.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                          "params": {"sessionId": sid}}))
    }

    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn text_of(m: &Value) -> Option<&str> {
    let u = &m["params"]["update"];
    (m["method"] == "session/update" && u["sessionUpdate"] == "agent_message_chunk")
        .then(|| u["content"]["text"].as_str())
        .flatten()
}

/// `VmHWM` / `VmRSS` of a process, in kB.
pub(crate) fn proc_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

pub(crate) fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
