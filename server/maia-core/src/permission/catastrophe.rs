//! Catastrophic commands: refused in every mode (`bypass` included),
//! whatever the rules say. They are found on the simple commands the shell
//! parser yields ([`super::shell`]), so quoting, wrappers and nesting do not
//! hide them: `rm -r` of `/`, `~`, `$HOME` or a parent of the project,
//! `mkfs*`, `dd` or a redirection onto a device, `shutdown`/`reboot`/
//! `halt`/`poweroff`, recursive `chmod`/`chown` of `/` or the home folder,
//! and fork bombs (found by the walker).

use std::path::{Path, PathBuf};

/// Where a command runs, for the paths it names.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
}

impl Place {
    /// A command run in `cwd` for a user whose home folder is `home` (the
    /// engine's, never read from the environment).
    pub(crate) fn new(cwd: &Path, home: Option<&Path>) -> Self {
        Place {
            cwd: maia_tools::path::normalize(cwd),
            home: home
                .filter(|h| !h.as_os_str().is_empty())
                .map(maia_tools::path::normalize),
        }
    }
}

/// Why `program args…` is catastrophic, or `None`. `program` is the base
/// name; `computed` is true when the program itself is computed at run
/// time (then any recursive removal-like call of a vital folder counts).
pub(crate) fn check(
    program: &str,
    args: &[String],
    place: &Place,
    computed: bool,
) -> Option<String> {
    let recursive = args.iter().any(|a| {
        a == "--recursive" || (a.starts_with('-') && !a.starts_with("--") && a.contains(['r', 'R']))
    });
    let vital = || {
        args.iter()
            .filter(|a| !a.starts_with('-'))
            .find(|a| vital_target(a, place))
    };
    match program {
        _ if computed => {
            if recursive && let Some(t) = vital() {
                return Some(format!("a computed command that recursively acts on `{t}`"));
            }
            None
        }
        "rm" | "rmdir" | "unlink" | "shred" if recursive || program == "shred" => {
            vital().map(|t| {
                format!(
                    "`{program}` of `{t}` (the root, the home folder or a parent of the project)"
                )
            })
        }
        "chmod" | "chown" | "chgrp" | "chattr" | "setfacl" if recursive => {
            vital().map(|t| format!("recursive `{program}` of `{t}`"))
        }
        p if p.starts_with("mkfs")
            || matches!(
                p,
                "mke2fs" | "mkswap" | "wipefs" | "fdisk" | "sfdisk" | "parted" | "sgdisk"
            ) =>
        {
            Some(format!("`{program}` formats or repartitions a disk"))
        }
        "dd" => args
            .iter()
            .filter_map(|a| a.strip_prefix("of="))
            .find(|t| is_device(t))
            .map(|t| format!("`dd` onto the device `{t}`")),
        "shutdown" | "reboot" | "halt" | "poweroff" | "kexec" => {
            Some(format!("`{program}` stops the machine"))
        }
        "systemctl"
            if args.iter().any(|a| {
                matches!(
                    a.as_str(),
                    "poweroff"
                        | "reboot"
                        | "halt"
                        | "kexec"
                        | "suspend"
                        | "hibernate"
                        | "emergency"
                        | "rescue"
                )
            }) =>
        {
            Some("`systemctl` stops the machine".to_owned())
        }
        "init" | "telinit" if args.iter().any(|a| a == "0" || a == "6") => {
            Some(format!("`{program}` stops the machine"))
        }
        _ => None,
    }
}

/// A write onto a block or character device other than the harmless ones.
pub(crate) fn is_device(target: &str) -> bool {
    let Some(dev) = target.strip_prefix("/dev/") else {
        return false;
    };
    !matches!(
        dev,
        "null" | "zero" | "stdout" | "stderr" | "stdin" | "tty" | "full" | "random" | "urandom"
    ) && !dev.starts_with("fd/")
        && !dev.starts_with("pts/")
        && !dev.starts_with("shm/")
}

/// `/`, the home folder, a folder above either, or a strict parent of the
/// project; a glob target counts by its literal leading folder (`/*`).
pub(crate) fn vital_target(target: &str, place: &Place) -> bool {
    let home = place.home.as_deref();
    let expanded: PathBuf = if target == "~" || target.starts_with("~/") {
        match home {
            Some(h) => h.join(target.trim_start_matches('~').trim_start_matches('/')),
            None => return true,
        }
    } else if let Some(rest) = target
        .strip_prefix("$HOME")
        .or_else(|| target.strip_prefix("${HOME}"))
    {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return false;
        }
        match home {
            Some(h) => h.join(rest.trim_start_matches('/')),
            None => return true,
        }
    } else if target.contains('$') || target.starts_with('~') {
        return false;
    } else {
        place.cwd.join(target)
    };
    // The literal part before the first glob.
    let mut literal = PathBuf::new();
    for c in expanded.components() {
        if c.as_os_str().to_string_lossy().contains(['*', '?', '[']) {
            break;
        }
        literal.push(c.as_os_str());
    }
    let t = maia_tools::path::normalize(&literal);
    if t == Path::new("/") {
        return true;
    }
    if let Some(h) = home
        && h.starts_with(&t)
    {
        return true;
    }
    place.cwd.starts_with(&t) && place.cwd != t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place() -> Place {
        Place {
            cwd: PathBuf::from("/home/u/p"),
            home: Some(PathBuf::from("/home/u")),
        }
    }

    #[test]
    fn vital_targets() {
        let p = place();
        for t in [
            "/",
            "/*",
            "//",
            "/.",
            "~",
            "~/",
            "$HOME",
            "${HOME}/",
            "..",
            "../..",
            "../*",
            "/home",
            "/home/u/*",
        ] {
            assert!(vital_target(t, &p), "{t}");
        }
        for t in [
            "build",
            "./target",
            "../sibling",
            "/tmp/x",
            "$X",
            "~/p/x",
            "*",
        ] {
            assert!(!vital_target(t, &p), "{t}");
        }
    }
}
