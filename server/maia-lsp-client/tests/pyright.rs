//! Against a real language server: pyright (`MAIA_PYRIGHT`, the path of
//! `pyright-langserver`; `.ci/run` installs it from npm). Skipped, loudly,
//! when the variable is unset; a failure instead with `MAIA_REQUIRE_ALL=1`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use maia_lsp_client::config::{LspSettings, ServerConfig};
use maia_lsp_client::{EditReport, LspManager, LspPool};

fn pyright() -> Option<PathBuf> {
    let path = maia_test_support::env_path("MAIA_PYRIGHT");
    maia_test_support::require(
        "pyright: MAIA_PYRIGHT, the path of pyright-langserver (.ci/run installs it from npm)",
        path.is_some(),
    );
    path
}

fn manager(command: PathBuf, dir: &std::path::Path) -> Arc<LspManager> {
    manager_in(command, dir, &LspPool::new(), &[])
}

fn manager_in(
    command: PathBuf,
    dir: &std::path::Path,
    pool: &Arc<LspPool>,
    env: &[(&str, &str)],
) -> Arc<LspManager> {
    let settings = LspSettings {
        servers: vec![ServerConfig {
            name: "pyright".into(),
            command: command.display().to_string(),
            args: vec!["--stdio".into()],
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            file_types: vec!["py".into()],
            root_markers: vec!["pyproject.toml".into()],
            init_options: None,
        }],
        wait: Duration::from_secs(8),
    };
    Arc::new(LspManager::new(
        settings,
        dir.to_path_buf(),
        None,
        Arc::new(|_| {}),
        pool.clone(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_reports_what_it_broke_and_fixed() {
    let Some(command) = pyright() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    std::fs::write(dir.join("pyproject.toml"), "").unwrap();
    let file = dir.join("a.py");
    let good = "def f(x: int) -> int:\n    return x + 1\n\ny: int = f(2)\n";
    std::fs::write(&file, good).unwrap();
    let m = manager(command, &dir);
    // Started and warm (a cold start on a loaded machine takes seconds).
    let known = m.file_diagnostics(&file, good).await.unwrap();
    assert!(known.is_empty(), "{known:?}");

    let bad = good.replace("f(2)", "f(\"two\")");
    let report = m.after_edit(&file, Some(good), &bad).await.unwrap();
    let EditReport::Checked {
        introduced,
        resolved,
        ..
    } = &report
    else {
        panic!("{report:?}")
    };
    assert_eq!(introduced.len(), 1, "{report:?}");
    assert_eq!(introduced[0].line, 4);
    assert!(resolved.is_empty());

    let report = m.after_edit(&file, Some(&bad), good).await.unwrap();
    let EditReport::Checked {
        introduced,
        resolved,
        ..
    } = &report
    else {
        panic!("{report:?}")
    };
    assert!(introduced.is_empty() && resolved.len() == 1, "{report:?}");

    let harmless = good.replace("y: int", "z: int");
    let report = m.after_edit(&file, Some(good), &harmless).await.unwrap();
    assert!(!report.worth_telling(), "{report:?}");

    let refs = m.places(&file, &harmless, (1, 5), true).await.unwrap();
    assert_eq!(refs.len(), 2, "{refs:?}");
    let def = m.places(&file, &harmless, (4, 10), false).await.unwrap();
    assert_eq!(
        (def.len(), def[0].line, def[0].column),
        (1, 1, 5),
        "{def:?}"
    );
    let symbols = m.symbols("f").await.unwrap();
    assert!(
        symbols
            .iter()
            .any(|p| p.label.as_deref() == Some("function f") && p.line == 1),
        "{symbols:?}"
    );

    // A command that changes the open file on disk: its new error is told.
    std::fs::write(&file, &harmless).unwrap();
    assert_eq!(m.after_command().await, None, "nothing changed on disk");
    std::fs::write(&file, harmless.replace("f(2)", "f(None)")).unwrap();
    let report = m.after_command().await.unwrap();
    let EditReport::Checked { introduced, .. } = &report else {
        panic!("{report:?}")
    };
    assert_eq!(introduced.len(), 1, "{report:?}");
    m.shutdown();
}

/// The processes (Linux) started for `dir`: those with
/// `MAIA_TEST_ROOT=dir` in their environment (pyright changes its
/// working folder).
fn processes_in(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mark = format!("MAIA_TEST_ROOT={}", dir.display());
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == mark.as_bytes()))
        })
        .count()
}

/// Waits (at most 20 s) until `check` holds.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_on_one_root_share_one_server_until_the_last_one_ends() {
    let Some(command) = pyright() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    std::fs::write(dir.join("pyproject.toml"), "").unwrap();
    let (file, other) = (dir.join("a.py"), dir.join("b.py"));
    let good = "def f(x: int) -> int:\n    return x + 1\n\ny: int = f(2)\n";
    std::fs::write(&file, good).unwrap();
    std::fs::write(&other, "z = 1\n").unwrap();
    let pool = LspPool::new();
    let root = dir.display().to_string();
    let mark = [("MAIA_TEST_ROOT", root.as_str())];
    let a = manager_in(command.clone(), &dir, &pool, &mark);
    let b = manager_in(command.clone(), &dir, &pool, &mark);

    assert!(a.file_diagnostics(&file, good).await.unwrap().is_empty());
    assert!(
        a.file_diagnostics(&other, "z = 1\n")
            .await
            .unwrap()
            .is_empty()
    );
    let servers = processes_in(&dir);
    assert!(servers >= 1, "pyright runs in {}", dir.display());
    assert_eq!(pool.running(), 1);

    // The other session's edit goes to the same server, and both see it.
    let bad = good.replace("f(2)", "f(\"two\")");
    let report = b.after_edit(&file, Some(good), &bad).await.unwrap();
    let EditReport::Checked { introduced, .. } = &report else {
        panic!("{report:?}")
    };
    assert_eq!(introduced.len(), 1, "{report:?}");
    let seen = a.file_diagnostics(&file, &bad).await.unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].line, 4);
    assert_eq!((pool.running(), pool.slots()), (1, 1));
    assert_eq!(processes_in(&dir), servers, "no second server");
    assert_eq!(pool.documents().await, 2);

    // Other settings: another server.
    let other_settings = [mark[0], ("MAIA_TEST_OTHER", "1")];
    let c = manager_in(command, &dir, &pool, &other_settings);
    assert_eq!(c.file_diagnostics(&file, &bad).await.unwrap().len(), 1);
    assert_eq!(pool.running(), 2);
    until("a second pyright", async || processes_in(&dir) > servers).await;
    c.shutdown();
    until("the other settings' server stopped", async || {
        pool.running() == 1 && processes_in(&dir) == servers
    })
    .await;

    // The first session ends: its own document is closed, the shared one
    // and the server stay for the other session.
    a.shutdown();
    until("b.py closed", async || pool.documents().await == 1).await;
    assert_eq!(pool.running(), 1);
    let report = b.after_edit(&file, Some(&bad), good).await.unwrap();
    let EditReport::Checked { resolved, .. } = &report else {
        panic!("{report:?}")
    };
    assert_eq!(resolved.len(), 1, "{report:?}");

    // The last one ends: the server stops.
    b.shutdown();
    assert_eq!((pool.running(), pool.slots()), (0, 0));
    until("pyright exited", async || processes_in(&dir) == 0).await;
}
