//! Named fault points: a place between two steps of an operation that must
//! be safe to interrupt, where a test can kill the process or make the step
//! fail, by name, instead of hoping a kill lands at the right instant.
//!
//! A point is written `fault_point!("worktree.add.recorded")` and is an
//! expression of type `std::io::Result<()>`. Without the `faults` cargo
//! feature it is `Ok(())` and its name is not even compiled in (release
//! builds carry nothing). With it (the protocol tests turn it on through
//! `maia-server`'s dev-dependencies), the environment variable
//! `MAIA_FAULT` names the points that fire and what they do:
//! `MAIA_FAULT=<name>[=kill|error][,<name>…]`. `kill` (the default) sends
//! the process SIGKILL (no destructor, no flush: as a crash or an editor's
//! kill); `error` makes the point return an error, as a failed step would.
//! The points and what each one proves are listed in
//! `docs/architecture.md` ("Fault points").

/// A named fault point: `Ok(())`, or, in a build with the `faults`
/// feature, what `MAIA_FAULT` asks for at this name.
#[cfg(feature = "faults")]
#[macro_export]
macro_rules! fault_point {
    ($name:literal) => {
        $crate::fault::hit($name)
    };
}

/// A named fault point: `Ok(())` (this build has no fault points).
#[cfg(not(feature = "faults"))]
#[macro_export]
macro_rules! fault_point {
    ($name:literal) => {
        ::std::io::Result::<()>::Ok(())
    };
}

/// The variable naming the points that fire.
pub const VARIABLE: &str = "MAIA_FAULT";

/// What a point does when `MAIA_FAULT` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL the process.
    Kill,
    /// Return an error from the point.
    Error,
}

/// What `spec` (a `MAIA_FAULT` value) asks of the point `name`, if
/// anything. An unknown action is read as `kill`.
pub fn action(spec: &str, name: &str) -> Option<Action> {
    spec.split(',').find_map(|item| {
        let (point, action) = item.split_once('=').unwrap_or((item, "kill"));
        (point.trim() == name).then(|| match action.trim() {
            "error" => Action::Error,
            _ => Action::Kill,
        })
    })
}

/// The point `name` is reached: does what `MAIA_FAULT` asks of it.
#[cfg(feature = "faults")]
#[allow(
    clippy::disallowed_methods,
    reason = "test-only builds: a fault is armed per process, before anything else reads settings"
)]
pub fn hit(name: &'static str) -> std::io::Result<()> {
    let Ok(spec) = std::env::var(VARIABLE) else {
        return Ok(());
    };
    match action(&spec, name) {
        None => Ok(()),
        Some(Action::Error) => {
            tracing::warn!(point = name, "fault injected: failing the step");
            Err(std::io::Error::other(format!("fault injected at {name}")))
        }
        Some(Action::Kill) => {
            tracing::warn!(point = name, "fault injected: killing the process");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            std::process::abort()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_points_and_their_actions() {
        let spec = "a.b, c.d=error,e=kill";
        assert_eq!(action(spec, "a.b"), Some(Action::Kill));
        assert_eq!(action(spec, "c.d"), Some(Action::Error));
        assert_eq!(action(spec, "e"), Some(Action::Kill));
        assert_eq!(action(spec, "a"), None);
        assert_eq!(action("", "a"), None);
    }
}
