//! The search tools' benchmark: Grep and Glob over a generated tree,
//! against ripgrep when it is installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

use super::harness::{Table, env_usize};
use super::stats::best_of;

/// A tree of `count` small source files, 100 per folder; every 100th file
/// holds a `needle_<n>` line.
fn make_tree(root: &Path, count: usize) {
    let body: String = (0..12)
        .map(|i| format!("fn function_{i}(value: usize) -> usize {{ value * {i} + 1 }}\n"))
        .collect();
    for i in 0..count {
        let dir = root.join(format!("d{}/e{}", i / 1000, (i / 100) % 10));
        if i.is_multiple_of(100) {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let ext = ["rs", "txt", "md", "json"][i % 4];
        let mut text = body.clone();
        if i % 100 == 7 {
            text.push_str(&format!("// needle_{i} here\n"));
        }
        std::fs::write(dir.join(format!("f{i}.{ext}")), text).unwrap();
    }
}

fn run_tool(rt: &tokio::runtime::Runtime, root: &Path, name: &str, args: Value) -> String {
    rt.block_on(async {
        let ctx = maia_tools::ToolContext::local(root);
        let input = maia_tools::ToolInput::parse(name, &args.to_string()).unwrap();
        let prepared = maia_tools::prepare(input, &ctx).await.unwrap();
        let out = maia_tools::execute(prepared, &ctx).await;
        assert!(!out.is_error, "{}", out.content);
        out.content
    })
}

fn rg(args: &[&str], root: &Path) -> Option<String> {
    let out = Command::new("rg").args(args).arg(root).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn bench_search(table: &mut Table) {
    let count = env_usize("MAIA_BENCH_FILES", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().canonicalize().unwrap();
    let started = Instant::now();
    make_tree(&root, count);
    eprintln!(
        "  (tree of {count} files written in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rg_version = Command::new("rg").arg("--version").output().ok().map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    });

    let cases: [(&str, &str, Value, Vec<&str>); 3] = [
        (
            "Grep `needle_[0-9]+`, files_with_matches",
            "Grep",
            json!({"pattern": "needle_[0-9]+"}),
            vec!["-l", "needle_[0-9]+"],
        ),
        (
            "Grep `needle_[0-9]+`, content",
            "Grep",
            json!({"pattern": "needle_[0-9]+", "output_mode": "content"}),
            vec!["-n", "needle_[0-9]+"],
        ),
        (
            "Glob `**/*.rs`",
            "Glob",
            json!({"pattern": "**/*.rs"}),
            vec!["--files", "-g", "*.rs"],
        ),
    ];
    for (label, tool, args, rg_args) in cases {
        // Warm the page cache once.
        let out = run_tool(&rt, &root, tool, args.clone());
        assert!(!out.starts_with("No matches"), "{label}: {out}");
        let maia = best_of(5, || {
            run_tool(&rt, &root, tool, args.clone());
        });
        let measure = format!("{label}, {count} files (best of 5)");
        match &rg_version {
            Some(version) => {
                rg(&rg_args, &root);
                let rg_ms = best_of(5, || {
                    rg(&rg_args, &root).unwrap();
                });
                let ratio = maia / rg_ms;
                let is_grep = tool == "Grep";
                table.check(
                    measure,
                    format!("MAIA {maia:.1} ms, {version} {rg_ms:.1} ms: {ratio:.2}×"),
                    if is_grep { "≤ 1.2× ripgrep" } else { "" },
                    is_grep.then_some(ratio <= 1.2),
                );
            }
            None => table.add(
                measure,
                format!("MAIA {maia:.1} ms (ripgrep not installed: no ratio)"),
            ),
        }
    }
}
