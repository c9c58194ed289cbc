//! The start-up cost of the command sandbox: spawns `/bin/true` N times
//! (`SANDBOX_START_RUNS`, default 300) bare and in the workspace-write
//! sandbox, and prints p50/p99 of spawn-to-exit for each.
//! `cargo run --release -p maia-tools --example sandbox_start`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use maia_tools::sandbox::{Sandbox, SandboxMode, SandboxPolicy};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Spawn-to-exit times, and the part spent before the child runs
/// (preparing the rules in MAIA and entering the sandbox in the child).
async fn measure(runs: usize, sandbox: Option<&Sandbox>) -> (Vec<Duration>, Vec<Duration>) {
    let mut times = Vec::with_capacity(runs);
    let mut spawns = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let mut command = tokio::process::Command::new("/bin/true");
        if let Some(sandbox) = sandbox {
            sandbox.attach(&mut command).expect("sandbox");
        }
        let mut child = command.spawn().expect("spawn");
        spawns.push(start.elapsed());
        let status = child.wait().await.expect("wait");
        assert!(status.success());
        times.push(start.elapsed());
    }
    times.sort();
    spawns.sort();
    (times, spawns)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let runs: usize = std::env::var("SANDBOX_START_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p");
    std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
    std::fs::write(project.join(".git/config"), "").unwrap();
    let policy = SandboxPolicy {
        mode: SandboxMode::WorkspaceWrite,
        roots: vec![project.canonicalize().unwrap()],
        temp_dir: Some(dir.path().join("session-tmp")),
        home: std::env::var_os("HOME").map(Into::into),
        ..Default::default()
    };
    println!("support: {:?}", maia_tools::sandbox::support());
    let sandbox = Sandbox::new(policy).expect("sandbox");
    let networked = Sandbox::new(SandboxPolicy {
        network: true,
        temp_dir: Some(dir.path().join("session-tmp2")),
        ..sandbox.policy().clone()
    })
    .expect("sandbox");
    // Warm-up (probes, page cache).
    measure(20, Some(&sandbox)).await;
    for (name, sandbox) in [
        ("bare", None),
        ("sandbox, network off", Some(&sandbox)),
        ("sandbox, network on", Some(&networked)),
    ] {
        let (t, s) = measure(runs, sandbox).await;
        println!(
            "{name}: p50 {:.2} ms, p99 {:.2} ms ({runs} runs; until the program runs: p50 {:.2} ms)",
            percentile(&t, 0.5),
            percentile(&t, 0.99),
            percentile(&s, 0.5),
        );
    }
}
