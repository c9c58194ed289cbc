//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the
//! same functions the cargo-fuzz targets call (`fuzz/src/lib.rs`), so a
//! crash once found stays fixed without a nightly toolchain.

#[allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
#[path = "../fuzz/src/lib.rs"]
mod bodies;

use std::path::PathBuf;

#[test]
fn fuzz_corpus_replays_without_panics() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (name, target) in bodies::TARGETS {
        let dir = corpus.join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "empty corpus for {name}");
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name} panicked on {}", file.display());
        }
    }
}
