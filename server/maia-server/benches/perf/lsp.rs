//! The language-client part of the benchmark suite (`-- lsp`).

use std::time::{Duration, Instant};

use super::stats::{Stats, ms};
use super::{Table, setup};

/// The latency an Edit gains from its diagnostics on a warm pyright
/// (`MAIA_PYRIGHT`): `LspManager::after_edit` (didChange, didSave, the
/// diagnostics pulled or waited for, compared with the file's before) on a
/// small project, 30 edits alternating a type error, its fix and a
/// harmless rename, after one warm-up edit.
pub(crate) fn bench_lsp(table: &mut Table) {
    use maia_lsp_client::{LspManager, LspSettings, ServerConfig};
    let Ok(pyright) = std::env::var("MAIA_PYRIGHT") else {
        eprintln!("  lsp: skipped (MAIA_PYRIGHT is not set)");
        return;
    };
    let s = setup();
    let root = s.cwd.path().canonicalize().unwrap();
    std::fs::write(root.join("pyproject.toml"), "").unwrap();
    let file = root.join("a.py");
    let good = "def double(x: int) -> int:\n    return x * 2\n\n\ntotal: int = double(2)\n";
    let texts = [
        good.to_owned(),
        good.replace("double(2)", "double(\"two\")"),
        good.to_owned(),
        good.replace("total", "grand_total"),
    ];
    std::fs::write(&file, good).unwrap();
    let settings = LspSettings {
        servers: vec![ServerConfig {
            name: "pyright".into(),
            command: pyright,
            args: vec!["--stdio".into()],
            env: Vec::new(),
            file_types: vec!["py".into()],
            root_markers: vec!["pyproject.toml".into()],
            init_options: None,
        }],
        wait: Duration::from_secs(10),
    };
    let lsp = LspManager::new(
        settings,
        root.clone(),
        None,
        std::sync::Arc::new(|_| {}),
        maia_lsp_client::LspPool::new(),
    );
    let samples: Vec<f64> = s.rt.block_on(async {
        let mut out = Vec::new();
        for i in 0..=30 {
            let (old, new) = (&texts[i % 4], &texts[(i + 1) % 4]);
            let started = Instant::now();
            let report = lsp.after_edit(&file, Some(old), new).await;
            assert!(
                matches!(report, Some(maia_lsp_client::EditReport::Checked { .. })),
                "{report:?}"
            );
            if i > 0 {
                out.push(ms(started.elapsed()));
            }
        }
        lsp.shutdown();
        out
    });
    let stats = Stats::new(samples);
    table.add(
        "Edit + diagnostics, warm pyright (added latency)",
        format!(
            "p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
            stats.pct(50.0),
            stats.pct(90.0),
            stats.max()
        ),
    );
}
