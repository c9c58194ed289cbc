//! The file checkpoints' benchmark: what one snapshot costs on a project of
//! 10,000 files (`MAIA_BENCH_CHECKPOINT_FILES`), taken by the engine's own
//! [`maia_core::checkpoint::Checkpoints`] (the walk for the size bound and
//! modes, `git add -A`, `git write-tree`, the ref): the first snapshot of a
//! session (every file hashed into the store), a snapshot of an unchanged
//! tree (git's stat cache: the usual cost per mutating tool call) and one
//! after 10 files changed.

use std::time::Instant;

use maia_core::checkpoint::{Checkpoints, Settings};

use super::harness::{Table, env_usize};
use super::stats::{Stats, ms};

const ROUNDS: usize = 10;

pub(crate) fn bench_checkpoint(table: &mut Table) {
    let files = env_usize("MAIA_BENCH_CHECKPOINT_FILES", 10_000);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..files {
        let sub = root.join(format!("src/m{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(
            sub.join(format!("f{i}.rs")),
            format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n").repeat(20),
        )
        .unwrap();
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let settings = Settings::default();
    let mut ck = Checkpoints::new(&root.join(".maia/.sessions"), root, "bench");
    let started = Instant::now();
    rt.block_on(ck.snapshot(&settings)).unwrap();
    let first = started.elapsed();
    let mut unchanged = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        rt.block_on(ck.snapshot(&settings)).unwrap();
        unchanged.push(ms(started.elapsed()));
    }
    let mut changed = Vec::new();
    for round in 0..ROUNDS {
        for k in 0..10 {
            let path = root.join(format!("src/m{:03}/f{}.rs", k, k * 100));
            std::fs::write(&path, format!("// round {round}\n")).unwrap();
        }
        let started = Instant::now();
        rt.block_on(ck.snapshot(&settings)).unwrap();
        changed.push(ms(started.elapsed()));
    }
    let unchanged = Stats::new(unchanged);
    let changed = Stats::new(changed);
    table.check(
        format!("checkpoint snapshot, {files}-file project, unchanged tree (median of {ROUNDS})"),
        format!(
            "{:.1} ms (max {:.1} ms); first snapshot of a session {:.0} ms",
            unchanged.pct(50.0),
            unchanged.max(),
            ms(first)
        ),
        "< 250 ms",
        Some(unchanged.pct(50.0) < 250.0),
    );
    table.add(
        format!("checkpoint snapshot, {files}-file project, 10 files changed (median of {ROUNDS})"),
        format!("{:.1} ms (max {:.1} ms)", changed.pct(50.0), changed.max()),
    );
}
