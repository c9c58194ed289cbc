//! Against a real language server: pyright (`MAIA_PYRIGHT`, the path of
//! `pyright-langserver`; `.ci/run` installs it from npm). Skipped, loudly,
//! when the variable is unset; a failure instead with `MAIA_REQUIRE_ALL=1`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use maia_lsp_client::config::{LspSettings, ServerConfig};
use maia_lsp_client::{EditReport, LspManager};

fn pyright() -> Option<PathBuf> {
    let path = maia_test_support::env_path("MAIA_PYRIGHT");
    maia_test_support::require(
        "pyright: MAIA_PYRIGHT, the path of pyright-langserver (.ci/run installs it from npm)",
        path.is_some(),
    );
    path
}

fn manager(command: PathBuf, dir: &std::path::Path) -> Arc<LspManager> {
    let settings = LspSettings {
        servers: vec![ServerConfig {
            name: "pyright".into(),
            command: command.display().to_string(),
            args: vec!["--stdio".into()],
            env: Vec::new(),
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
