//! The file checkpoints' benchmark: what checkpoints add to one batch of
//! tool calls, taken by the engine's own
//! [`maia_core::checkpoint::Checkpoints`] as a session takes them (the
//! snapshot before, the batch, the snapshot after, the paths changed), on
//! projects of 1,000, 10,000 and 50,000 files
//! (`MAIA_BENCH_CHECKPOINT_SIZES`). The batch is one `sh -c true` (a Bash
//! call that changes nothing); each row measures it with checkpoints off,
//! on (the file-system watch), and on with every snapshot a full rescan
//! (`checkpoints.watch: false`, what every snapshot cost before the
//! watch), in the same run. Also: a batch that changes 10 files (off, on:
//! only the changed paths walked and staged again, and full rescans), and the
//! first snapshot of a session (every file hashed into the store; taken in
//! the background from the first turn's start).

use std::path::Path;
use std::time::Instant;

use maia_core::checkpoint::{Checkpoints, Settings, walk};

use super::harness::Table;
use super::stats::{Stats, ms};

const ROUNDS: usize = 15;

fn make_tree(root: &Path, files: usize) {
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
}

/// The tool batch: one process that changes nothing.
fn batch() {
    let status = std::process::Command::new("sh")
        .args(["-c", "true"])
        .status()
        .unwrap();
    assert!(status.success());
}

/// One batch with checkpoints as a session takes them; its milliseconds.
fn checkpointed(
    rt: &tokio::runtime::Runtime,
    ck: &mut Checkpoints,
    settings: &Settings,
    work: impl FnOnce(),
) -> f64 {
    let started = Instant::now();
    ck.begin_turn();
    let before = rt.block_on(ck.before(settings)).unwrap();
    work();
    let after = rt.block_on(ck.snapshot(settings)).unwrap();
    if settings.watch {
        rt.block_on(ck.changed(&before, &after)).unwrap();
    } else {
        // As before the watch: the trees were always compared by git.
        rt.block_on(ck.repo().diff(&before.tree, &after.tree))
            .unwrap();
    }
    ms(started.elapsed())
}

fn sizes() -> Vec<usize> {
    std::env::var("MAIA_BENCH_CHECKPOINT_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 50_000])
}

pub(crate) fn bench_checkpoint(table: &mut Table) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for files in sizes() {
        bench_size(&rt, table, files);
    }
}

fn bench_size(rt: &tokio::runtime::Runtime, table: &mut Table, files: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    make_tree(&root, files);
    let sessions = root.join(".maia/.sessions");
    let watched = Settings::default();
    let rescan = Settings {
        watch: false,
        ..Settings::default()
    };

    // The first snapshot of a session, started in the background as a
    // session starts it, waited for by the first batch.
    let mut ck = Checkpoints::new(&sessions, &root, "watched");
    let started = Instant::now();
    rt.block_on(async {
        ck.start(&watched);
        ck.snapshot(&watched).await.unwrap();
    });
    let first = ms(started.elapsed());
    let mut full = Checkpoints::new(&sessions, &root, "rescan");
    rt.block_on(full.snapshot(&rescan)).unwrap();

    let (mut off, mut on, mut old) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let started = Instant::now();
        batch();
        off.push(ms(started.elapsed()));
        on.push(checkpointed(rt, &mut ck, &watched, batch));
        old.push(checkpointed(rt, &mut full, &rescan, batch));
    }
    let (off, on, old) = (Stats::new(off), Stats::new(on), Stats::new(old));
    let target = match files {
        10_000 => Some(20.0),
        50_000 => Some(60.0),
        _ => None,
    };
    // Where a full snapshot's time goes: MAIA's own walk alone.
    let walk: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let seen = walk::walk(&root, &sessions, u64::MAX, usize::MAX);
            assert!(seen.files >= files);
            ms(started.elapsed())
        })
        .collect();
    let walk = Stats::new(walk);
    let added = on.pct(50.0) - off.pct(50.0);
    let result = format!(
        "off {:.1} ms · on {:.1} ms (p90 {:.1}) · ratio {:.2} · added {:.1} ms · every snapshot a rescan (as before) {:.1} ms · the walk alone {:.1} ms",
        off.pct(50.0),
        on.pct(50.0),
        on.pct(90.0),
        on.pct(50.0) / off.pct(50.0),
        added,
        old.pct(50.0),
        walk.pct(50.0),
    );
    let measure = format!("checkpoints, no-op batch, {files} files (p50 of {ROUNDS})");
    match target {
        Some(t) => table.check(
            measure,
            result,
            if t < 30.0 {
                "added < 20 ms"
            } else {
                "added < 60 ms"
            },
            Some(added < t),
        ),
        None => table.add(measure, result),
    }

    let change = |tag: &'static str, round: usize| {
        let root = root.clone();
        move || {
            for k in 0..10 {
                let path = root.join(format!("src/m{:03}/f{}.rs", k, k * 100));
                std::fs::write(&path, format!("// {tag} {round}\n")).unwrap();
            }
        }
    };
    // Each taker's rounds together: the other's writes are changes too.
    let off10: Vec<f64> = (0..ROUNDS)
        .map(|round| {
            let started = Instant::now();
            change("off", round)();
            ms(started.elapsed())
        })
        .collect();
    let updated = ck.updated_answers();
    let on10: Vec<f64> = (0..ROUNDS)
        .map(|round| checkpointed(rt, &mut ck, &watched, change("watched", round)))
        .collect();
    // Every batch's snapshot after updated only the changed paths (and the
    // first one before: the "off" rounds' writes).
    assert!(ck.updated_answers() - updated >= ROUNDS as u64);
    let old10: Vec<f64> = (0..ROUNDS)
        .map(|round| checkpointed(rt, &mut full, &rescan, change("rescan", round)))
        .collect();
    let (off10, on10, old10) = (Stats::new(off10), Stats::new(on10), Stats::new(old10));
    table.add(
        format!("checkpoints, batch changing 10 files, {files} files (p50 of {ROUNDS})"),
        format!(
            "off {:.1} ms · on {:.1} ms (p90 {:.1}) · added {:.1} ms · every snapshot a rescan (as before) {:.1} ms",
            off10.pct(50.0),
            on10.pct(50.0),
            on10.pct(90.0),
            on10.pct(50.0) - off10.pct(50.0),
            old10.pct(50.0)
        ),
    );
    table.add(
        format!("checkpoints, first snapshot of a session, {files} files"),
        format!("{first:.0} ms, taken in the background from the first turn's start"),
    );
}
