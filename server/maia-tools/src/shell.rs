//! The shell that runs `Bash` commands and `!command`: `bash` when it is
//! installed (the tool is called Bash, and the permission checker reads
//! commands with a bash grammar), `/bin/sh` otherwise (then the checker
//! switches to a POSIX grammar). Found once per process.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// The shell commands run with.
#[derive(Debug, Clone)]
pub struct Shell {
    pub path: PathBuf,
    /// True when only a POSIX `sh` was found.
    pub posix: bool,
}

const BASH: &[&str] = &["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"];

static SHELL: LazyLock<Shell> =
    LazyLock::new(|| match BASH.iter().map(Path::new).find(|p| p.is_file()) {
        Some(bash) => Shell {
            path: bash.to_path_buf(),
            posix: false,
        },
        None => {
            tracing::warn!(
                "bash not found: commands run with /bin/sh, checked with a POSIX grammar"
            );
            Shell {
                path: PathBuf::from("/bin/sh"),
                posix: true,
            }
        }
    });

/// The shell of this process.
pub fn shell() -> &'static Shell {
    &SHELL
}
