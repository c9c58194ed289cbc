//! The one rule for tests that need something the machine may lack (a
//! program such as `curl` or pyright, a kernel feature such as Landlock):
//! [`require`]. Without it the test is skipped, saying so on stderr; with
//! `MAIA_REQUIRE_ALL=1` (which `.ci/run` exports) the test fails instead,
//! naming what is missing, so that CI never passes a test it did not run.

/// The environment switch that turns a skip into a failure.
pub const REQUIRE_ALL: &str = "MAIA_REQUIRE_ALL";

/// Whether every test must run (`MAIA_REQUIRE_ALL=1`).
pub fn require_all() -> bool {
    std::env::var(REQUIRE_ALL).as_deref() == Ok("1")
}

/// `true` when `available`: the test (or the part of it) runs. Otherwise
/// `false` with a skip message naming `what` on stderr, or, with
/// `MAIA_REQUIRE_ALL=1`, a panic naming it.
///
/// ```ignore
/// if !maia_test_support::require("curl (the HTTP client) on PATH", on_path("curl")) {
///     return;
/// }
/// ```
///
/// # Panics
/// When `available` is false and `MAIA_REQUIRE_ALL=1`.
pub fn require(what: &str, available: bool) -> bool {
    if available {
        return true;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    assert!(
        !require_all(),
        "{test}: missing {what}, and {REQUIRE_ALL}=1 forbids skipping it"
    );
    eprintln!("\n!!! SKIPPED {test}: missing {what} ({REQUIRE_ALL}=1 makes this a failure) !!!\n");
    false
}

/// Whether `program` is an executable file in a folder of `PATH`.
pub fn on_path(program: &str) -> bool {
    which(program).is_some()
}

/// The path of `program` in `PATH`, if any.
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A path named by environment variable `var`, when set and not empty.
pub fn env_path(var: &str) -> Option<std::path::PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_runs_and_path_lookup_finds_sh() {
        assert!(require("nothing", true));
        assert!(on_path("sh"));
        assert!(!on_path("maia-no-such-program-anywhere"));
    }
}
