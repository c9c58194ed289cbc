//! The ACP Registry entry (`dist/acp-registry/agent.json` and its
//! `icon.svg`, issues 14 and 45): valid against the registry's schema
//! (`fixtures/acp-registry/`, a copy with its source and version noted) and
//! the checks the registry's CI adds (a binary distribution must cover
//! macOS, Linux and Windows; the icon is a square 16×16 SVG drawn in
//! `currentColor` only), the crate's version, repository and license, the
//! npm launcher package it installs, and `dist/release.sh`'s archive for
//! each platform of `dist/platforms`.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manifest() -> Value {
    let path = repo().join("dist/acp-registry/agent.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The Rust targets of `dist/platforms`.
fn release_targets() -> Vec<String> {
    std::fs::read_to_string(repo().join("dist/platforms"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

fn archive_name(target: &str) -> String {
    format!("maia-{}-{target}.tar.gz", env!("CARGO_PKG_VERSION"))
}

/// What the registry's CI checks beyond the schema
/// (`.github/workflows/build_registry.py` at the schema's commit): a
/// binary distribution has a build for each of darwin, linux and windows.
fn registry_ci_errors(agent: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(binary) = agent["distribution"]["binary"].as_object() {
        for os in ["darwin", "linux", "windows"] {
            if !binary.keys().any(|p| p.starts_with(&format!("{os}-"))) {
                errors.push(format!("binary distribution without a {os} build"));
            }
        }
    }
    errors
}

/// The registry CI's icon rules: width, height and view box 16, square,
/// `currentColor` used, no other colour in a fill or stroke.
fn icon_errors(svg: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let attribute = |name: &str| {
        let needle = format!(" {name}=\"");
        svg.find(&needle).map(|at| {
            let rest = &svg[at + needle.len()..];
            rest[..rest.find('"').unwrap_or(0)].to_owned()
        })
    };
    if attribute("width").as_deref() != Some("16") || attribute("height").as_deref() != Some("16") {
        errors.push("width and height must be 16".to_owned());
    }
    if attribute("viewBox").as_deref() != Some("0 0 16 16") {
        errors.push("viewBox must be 0 0 16 16".to_owned());
    }
    if !svg.contains("currentColor") {
        errors.push("currentColor is not used".to_owned());
    }
    for paint in ["fill", "stroke"] {
        for piece in svg.split(&format!("{paint}=\"")).skip(1) {
            let value = &piece[..piece.find('"').unwrap_or(0)];
            if !["currentcolor", "none", "inherit"].contains(&value.to_ascii_lowercase().as_str()) {
                errors.push(format!("{paint}=\"{value}\" is a fixed colour"));
            }
        }
        if svg.contains(&format!("{paint}:")) {
            errors.push(format!("a style sets {paint}"));
        }
    }
    errors
}

#[test]
fn the_manifest_validates_against_the_registry_schema() {
    let schema_path = repo().join("protocol-tests/fixtures/acp-registry/agent.schema.json");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(&schema_path)
            .unwrap_or_else(|e| panic!("{}: {e}", schema_path.display())),
    )
    .unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let agent = manifest();
    let errors: Vec<String> = validator
        .iter_errors(&agent)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The validator does catch mistakes.
    let mut broken = agent.clone();
    broken["distribution"]["npx"]
        .as_object_mut()
        .unwrap()
        .remove("package");
    broken["id"] = "MAIA".into();
    assert!(validator.iter_errors(&broken).count() >= 2);
    // The registry's CI rules hold too, and they catch a binary
    // distribution for macOS and Linux alone (what MAIA builds).
    assert_eq!(registry_ci_errors(&agent), Vec::<String>::new());
    let mut binary = agent.clone();
    binary["distribution"]["binary"] = serde_json::json!({
        "linux-x86_64": {"archive": "https://example.org/a.tar.gz", "cmd": "./maia"},
        "darwin-aarch64": {"archive": "https://example.org/b.tar.gz", "cmd": "./maia"},
    });
    assert!(validator.iter_errors(&binary).next().is_none());
    assert_eq!(
        registry_ci_errors(&binary),
        ["binary distribution without a windows build"]
    );
}

#[test]
fn the_icon_is_what_the_registry_accepts() {
    let svg = std::fs::read_to_string(repo().join("dist/acp-registry/icon.svg")).unwrap();
    assert_eq!(icon_errors(&svg), Vec::<String>::new(), "{svg}");
    // The rules do catch a coloured or wrongly sized icon.
    let red = svg.replace("fill=\"currentColor\"", "fill=\"#d00\"");
    assert_eq!(icon_errors(&red).len(), 2, "{:?}", icon_errors(&red));
    assert!(!icon_errors(&svg.replace("16 16", "24 24")).is_empty());
}

#[test]
fn the_manifest_matches_the_crate_and_the_npm_launcher() {
    let agent = manifest();
    assert_eq!(agent["id"], "maia");
    assert_eq!(agent["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(agent["repository"], env!("CARGO_PKG_REPOSITORY"));
    assert_eq!(agent["license"], env!("CARGO_PKG_LICENSE"));
    assert!(agent["authors"].as_array().is_some_and(|a| !a.is_empty()));
    let npx = &agent["distribution"]["npx"];
    assert_eq!(
        npx["package"],
        format!("@maia-editors/maia@{}", env!("CARGO_PKG_VERSION")),
        "the launcher package dist/npm/build.sh makes, at this version"
    );
    assert_eq!(npx["args"], serde_json::json!(["acp"]));
    let script = std::fs::read_to_string(repo().join("dist/npm/build.sh")).unwrap();
    assert!(script.contains("scope=\"@maia-editors\""), "the same scope");
    assert_eq!(
        release_targets(),
        [
            "x86_64-unknown-linux-gnu",
            "aarch64-unknown-linux-gnu",
            "aarch64-apple-darwin",
            "x86_64-apple-darwin"
        ]
    );
}

#[test]
fn the_release_script_packs_the_archive_of_a_release_platform() {
    let out = tempfile::tempdir().unwrap();
    let target = "x86_64-unknown-linux-gnu";
    let status = std::process::Command::new("bash")
        .arg(repo().join("dist/release.sh"))
        .arg(target)
        .env("MAIA_RELEASE_BINARY", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_RELEASE_OUT", out.path())
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let archive = out.path().join(archive_name(target));
    assert!(
        archive.exists(),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    let listing = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .unwrap();
    let names: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(names, ["LICENSE", "README.md", "maia"]);
    // A target dist/platforms does not list is refused.
    let refused = std::process::Command::new("bash")
        .arg(repo().join("dist/release.sh"))
        .arg("riscv64gc-unknown-linux-gnu")
        .env("MAIA_RELEASE_BINARY", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_RELEASE_OUT", out.path())
        .output()
        .unwrap();
    assert!(!refused.status.success());
}

/// The `(target, runner)` pairs of dist/platforms.
fn release_runners() -> Vec<(String, String)> {
    std::fs::read_to_string(repo().join("dist/platforms"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            (fields[0].to_owned(), fields[3].to_owned())
        })
        .collect()
}

#[test]
fn the_release_workflow_builds_every_platform_and_passes_actionlint() {
    let workflow = std::fs::read_to_string(repo().join(".github/workflows/release.yml")).unwrap();
    let lines: Vec<&str> = workflow.lines().map(str::trim).collect();
    let matrix: Vec<(String, String)> = lines
        .windows(2)
        .filter_map(|w| {
            let target = w[0].strip_prefix("- target: ")?;
            let runner = w[1].strip_prefix("runner: ")?;
            Some((target.to_owned(), runner.to_owned()))
        })
        .collect();
    assert_eq!(matrix, release_runners(), "the matrix is dist/platforms");
    assert!(workflow.contains("dist/release.sh \"${{ matrix.target }}\""));
    assert!(workflow.contains("SHA256SUMS"));
    assert!(workflow.contains("dist/npm/build.sh dist/out"));
    let Some(actionlint) = maia_test_support::env_path("MAIA_ACTIONLINT") else {
        maia_test_support::require(
            "actionlint: MAIA_ACTIONLINT, its path (.ci/run installs it from PyPI)",
            false,
        );
        return;
    };
    let lint = |files: &[PathBuf]| {
        std::process::Command::new(&actionlint)
            .args(["-shellcheck=", "-pyflakes="])
            .args(files)
            .current_dir(repo())
            .output()
            .unwrap()
    };
    let files = vec![
        repo().join(".github/workflows/release.yml"),
        repo().join("dist/github-action/examples/review.yml"),
        repo().join("dist/github-action/examples/fix.yml"),
    ];
    let output = lint(&files);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // It does find mistakes: an unknown context property.
    let scratch = tempfile::tempdir().unwrap();
    let broken = scratch.path().join("broken.yml");
    std::fs::write(&broken, workflow.replace("github.token", "github.tokn")).unwrap();
    let output = lint(&[broken]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("tokn"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
