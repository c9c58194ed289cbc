//! Blocking file work done from async code without stalling a runtime
//! worker: on a multi-thread runtime the worker hands its other tasks over
//! while the closure runs (`block_in_place`); elsewhere (single-thread test
//! runtimes, no runtime) the closure just runs.

/// Runs `f`, which may block on file I/O, without holding up other tasks.
pub(crate) fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
