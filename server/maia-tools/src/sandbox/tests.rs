//! Tests of the sandbox against the running kernel, through the Bash tool
//! (each skips, saying so, where the kernel lacks the layer it tests, or
//! fails there when `MAIA_REQUIRE_ALL=1`: see `maia_test_support::require`).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;

use maia_test_support::require;
use serde_json::json;

use super::*;
use crate::tools::test_util::{ctx, run};

/// A project `<tmp>/p` with `.git/hooks` and `.maia`, its session temp
/// folder `<tmp>/session-tmp`, and a home `<tmp>/p/home` (inside the
/// project so that only the secrets layer hides it).
fn setup_with(
    mode: SandboxMode,
    network: bool,
    edit: impl FnOnce(&mut SandboxPolicy),
) -> Option<(tempfile::TempDir, crate::ToolContext)> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(p.join(".maia")).unwrap();
    std::fs::write(p.join(".git/config"), "[core]\n").unwrap();
    let mut policy = SandboxPolicy {
        mode,
        roots: vec![p.canonicalize().unwrap()],
        temp_dir: Some(dir.path().join("session-tmp")),
        network,
        home: Some(p.join("home")),
        ..Default::default()
    };
    edit(&mut policy);
    let sandbox = match Sandbox::new(policy) {
        Ok(s) => s,
        Err(SandboxError::Unsupported) => {
            require(
                "Landlock (kernel ≥ 5.13 with the landlock LSM enabled)",
                false,
            );
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let mut ctx = ctx(&p);
    ctx.sandbox = Some(Arc::new(sandbox));
    Some((dir, ctx))
}

fn setup(mode: SandboxMode, network: bool) -> Option<(tempfile::TempDir, crate::ToolContext)> {
    setup_with(mode, network, |_| {})
}

async fn sh(ctx: &crate::ToolContext, command: &str) -> crate::ToolOutput {
    run(ctx, "Bash", json!({ "command": command })).await
}

fn namespaces() -> bool {
    let s = support();
    eprintln!("sandbox support here: {s:?}");
    require(
        "unprivileged mount and network namespaces",
        s.mount_namespace && s.network_namespace,
    )
}

#[tokio::test]
async fn workspace_write_allows_the_project_and_temp_only() {
    let Some((dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let out = sh(&ctx, "echo a > inside && mkdir -p sub/x && echo b > sub/x/f && echo t > \"$TMPDIR/t\" && cat inside").await;
    assert!(!out.is_error, "{}", out.content);
    assert!(dir.path().join("session-tmp/t").exists());
    // The parent of the project.
    // The parent of the project (private to the command when it is in
    // /tmp, as here; refused elsewhere).
    let _ = sh(&ctx, "echo x > ../outside").await;
    assert!(!dir.path().join("outside").exists());
    // The home folder.
    let probe = format!("maia-sandbox-probe-{}", std::process::id());
    let out = sh(&ctx, &format!("touch \"$HOME/{probe}\"")).await;
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let leaked = home.join(&probe).exists();
    let _ = std::fs::remove_file(home.join(&probe));
    assert!(out.is_error && !leaked, "{}", out.content);
    assert!(out.content.contains("MAIA sandbox"), "{}", out.content);
    if require("unprivileged mount namespaces", support().mount_namespace) {
        for cmd in [
            "echo x > .git/hooks/pre-commit",
            "echo x >> .git/config",
            "mkdir -p .maia/tools && echo x > .maia/settings.json",
        ] {
            let out = sh(&ctx, cmd).await;
            assert!(out.is_error, "{cmd}: {}", out.content);
        }
        assert!(!dir.path().join("p/.git/hooks/pre-commit").exists());
        assert!(!dir.path().join("p/.maia/settings.json").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("p/.git/config")).unwrap(),
            "[core]\n"
        );
        let out = sh(&ctx, "cat .git/config").await;
        assert!(!out.is_error, "{}", out.content);
    }
}

#[tokio::test]
async fn network_is_refused_unless_allowed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let datagram = format!("echo leak > /dev/udp/127.0.0.1/{udp_port}; echo sent");
    let Some((_dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let out = sh(&ctx, &connect).await;
    assert!(
        out.is_error && !out.content.contains("connected"),
        "{}",
        out.content
    );
    if namespaces() {
        let _ = sh(&ctx, &datagram).await;
        let mut buf = [0u8; 16];
        assert!(udp.recv(&mut buf).is_err(), "a datagram left the sandbox");
    }
    let Some((_dir, ctx)) = setup(SandboxMode::WorkspaceWrite, true) else {
        return;
    };
    let out = sh(&ctx, &connect).await;
    assert!(
        !out.is_error && out.content.contains("connected"),
        "{}",
        out.content
    );
    let out = sh(&ctx, &datagram).await;
    assert!(!out.is_error, "{}", out.content);
    let mut buf = [0u8; 16];
    let n = udp.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"leak\n");
}

#[tokio::test]
async fn signals_reach_only_the_commands_own_processes() {
    if !require(
        "Landlock ABI 6 (signal scoping, kernel ≥ 6.12)",
        support().landlock_abi.unwrap_or(0) >= 6,
    ) {
        return;
    }
    let Some((_dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let mut outside = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let out = sh(&ctx, &format!("kill -9 {}", outside.id())).await;
    let still = outside.try_wait().unwrap().is_none();
    let _ = outside.kill();
    let _ = outside.wait();
    assert!(out.is_error && still, "{}", out.content);
    let out = sh(&ctx, "sleep 30 & kill -9 $! && wait $!; echo \"status $?\"").await;
    assert!(out.content.contains("status 137"), "{}", out.content);
}

#[tokio::test]
async fn unix_sockets_outside_cannot_be_connected() {
    if !namespaces() {
        return;
    }
    // A socket in the real /tmp (the test's own folder there).
    let outside = tempfile::tempdir().unwrap();
    let path = outside.path().join("s");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let Some((_dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let out = sh(&ctx, &format!("test -e {} && echo visible", path.display())).await;
    assert!(!out.content.contains("visible"), "{}", out.content);
    if require("python3 on PATH", which("python3")) {
        let out = sh(
            &ctx,
            &format!(
                "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"connected\")'",
                path.display()
            ),
        )
        .await;
        assert!(!out.content.contains("connected\n"), "{}", out.content);
    }
}

fn which(program: &str) -> bool {
    crate::process::ensure_runnable(std::ffi::OsStr::new(program), None).is_ok()
}

#[tokio::test]
async fn secrets_are_hidden_and_deny_and_allow_read_apply() {
    if !namespaces() {
        return;
    }
    let Some((dir, ctx)) = setup_with(SandboxMode::WorkspaceWrite, false, |p| {
        p.deny_read = vec![p.roots[0].join("private.txt")];
        p.allow_read = vec![p.roots[0].join("home/.config/gh")];
    }) else {
        return;
    };
    let p = dir.path().join("p");
    for (file, text) in [
        ("home/.ssh/id_ed25519", "SSH-SECRET"),
        ("home/.maia/settings.json", "MAIA-KEY"),
        ("home/.aws/credentials", "AWS-SECRET"),
        ("home/.netrc", "NETRC-SECRET"),
        ("home/.config/gh/hosts.yml", "GH-ALLOWED"),
        ("private.txt", "DENIED-BY-SETTING"),
    ] {
        std::fs::create_dir_all(p.join(file).parent().unwrap()).unwrap();
        std::fs::write(p.join(file), text).unwrap();
    }
    let out = sh(
        &ctx,
        "cat home/.ssh/id_ed25519 home/.maia/settings.json home/.aws/credentials home/.netrc private.txt home/.config/gh/hosts.yml; ls -a home/.ssh",
    )
    .await;
    for secret in ["SSH-SECRET", "MAIA-KEY", "AWS-SECRET", "NETRC", "DENIED"] {
        assert!(!out.content.contains(secret), "{secret}: {}", out.content);
    }
    assert!(out.content.contains("GH-ALLOWED"), "{}", out.content);
    // Nor can a command write through the cover.
    let out = sh(&ctx, "echo x > home/.ssh/authorized_keys").await;
    assert!(out.is_error, "{}", out.content);
    assert!(!p.join("home/.ssh/authorized_keys").exists());
}

/// Each way to get a writable `.git/hooks`, `.git/config` or `.maia`.
#[tokio::test]
async fn git_and_maia_are_protected_as_wholes() {
    if !namespaces() {
        return;
    }
    let Some((dir, ctx)) = setup_with(SandboxMode::WorkspaceWrite, false, |p| {
        // A repository without hooks and a project without .maia.
        let root = &p.roots[0];
        std::fs::remove_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::remove_dir_all(root.join(".maia")).unwrap();
    }) else {
        return;
    };
    let p = dir.path().join("p");
    let attempts = [
        "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit",
        "mkdir -p .maia && echo '{}' > .maia/settings.json",
        "mv .git .git-aside",
        "mv .maia .maia-aside",
        "cp -r .git /tmp/g && rm -rf .git; mv /tmp/g .git",
        "rm -rf .git/hooks; mkdir .git/hooks",
        "mv .git/hooks .git/hooks-aside",
        "mv .git/config .git/config-aside; echo '[core] hooksPath = /x' > .git/config",
        "rm -rf .maia; mkdir .maia",
        "ln -sfn /tmp .git/hooks",
        "git init -q . 2>&1; git config core.hooksPath hooks",
    ];
    for cmd in attempts {
        let _ = sh(&ctx, cmd).await;
        assert!(p.join(".git").is_dir(), "{cmd}");
        assert!(p.join(".git/hooks").is_dir(), "{cmd}");
        assert_eq!(
            std::fs::read_dir(p.join(".git/hooks")).unwrap().count(),
            0,
            "{cmd}"
        );
        assert_eq!(
            std::fs::read_to_string(p.join(".git/config")).unwrap(),
            "[core]\n",
            "{cmd}"
        );
        assert!(p.join(".maia").is_dir(), "{cmd}");
        assert_eq!(
            std::fs::read_dir(p.join(".maia")).unwrap().count(),
            0,
            "{cmd}"
        );
        assert!(!p.join(".git-aside").exists() && !p.join(".maia-aside").exists());
    }
}

#[tokio::test]
async fn a_worktree_gitdir_file_is_read_only() {
    if !namespaces() {
        return;
    }
    let Some((dir, ctx)) = setup_with(SandboxMode::WorkspaceWrite, false, |p| {
        let root = &p.roots[0];
        std::fs::remove_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git"), "gitdir: /elsewhere\n").unwrap();
    }) else {
        return;
    };
    let out = sh(&ctx, "echo 'gitdir: ./evil' > .git").await;
    assert!(out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("p/.git")).unwrap(),
        "gitdir: /elsewhere\n"
    );
}

/// What a build needs keeps working inside the sandbox.
#[tokio::test]
async fn build_like_commands_keep_working() {
    let Some((dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let out = sh(
        &ctx,
        "ls /usr/bin > list && wc -l < list | tr -d ' ' > n && echo data > \"$TMPDIR/own\" && cat \"$TMPDIR/own\" && echo shm > /dev/shm/x && cat /dev/shm/x",
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("data\nshm"), "{}", out.content);
    assert!(dir.path().join("p/n").exists());
    if require("python3 on PATH", which("python3")) {
        let script = "import multiprocessing as m, socket\na, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\ndef sq(x): return x * x\nif __name__ == '__main__':\n    with m.Pool(2) as p: print(sum(p.map(sq, range(10))))\n    l = m.Lock(); l.acquire(); l.release()\n    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); c = socket.create_connection(s.getsockname()); print('loopback ok')\n";
        std::fs::write(dir.path().join("p/mp.py"), script).unwrap();
        let out = sh(&ctx, "python3 mp.py").await;
        assert!(
            !out.is_error && out.content.contains("285"),
            "{}",
            out.content
        );
        if namespaces() {
            assert!(out.content.contains("loopback ok"), "{}", out.content);
        }
    }
    if require("git on PATH", which("git")) {
        let p = dir.path().join("p");
        std::fs::remove_dir_all(p.join(".git")).unwrap();
        let git = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&p)
            .status()
            .unwrap();
        assert!(git.success());
        let Some((_d2, mut ctx)) = setup_with(SandboxMode::WorkspaceWrite, false, |pol| {
            pol.roots = vec![p.canonicalize().unwrap()];
        }) else {
            return;
        };
        ctx.cwd = p.clone();
        let out = sh(&ctx, "echo hi > f && git add f && git -c user.name=t -c user.email=t@t commit -qm m && git status --short && echo committed").await;
        assert!(out.content.contains("committed"), "{}", out.content);
    }
}

#[tokio::test]
async fn read_only_refuses_the_project_and_off_restores() {
    let Some((dir, ctx)) = setup(SandboxMode::ReadOnly, false) else {
        return;
    };
    let out = sh(&ctx, "echo a > inside").await;
    assert!(out.is_error, "{}", out.content);
    let out = sh(
        &ctx,
        "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && cat .git/config",
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let Some((dir2, ctx)) = setup(SandboxMode::Off, false) else {
        return;
    };
    let out = sh(
        &ctx,
        "echo a > inside && echo x > ../outside && echo y > .git/hooks/h",
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(dir2.path().join("outside").exists());
    drop(dir);
}

#[tokio::test]
async fn the_temp_folder_goes_with_the_sandbox() {
    let Some((dir, ctx)) = setup(SandboxMode::WorkspaceWrite, false) else {
        return;
    };
    let out = sh(&ctx, "echo t > \"$TMPDIR/t\"").await;
    assert!(!out.is_error, "{}", out.content);
    assert!(dir.path().join("session-tmp/t").exists());
    drop(ctx);
    assert!(!dir.path().join("session-tmp").exists());
}

/// A local HTTP server answering `body` to every request; counts them.
fn http_server(body: &'static str) -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (addr, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_domains_go_through_the_proxy_and_others_are_refused() {
    if !namespaces() || !require("curl (the HTTP client) on PATH", which("curl")) {
        return;
    }
    let (allowed, allowed_hits) = http_server("from-allowed");
    let (refused, refused_hits) = http_server("from-refused");
    let Some((_dir, ctx)) = setup_with(SandboxMode::WorkspaceWrite, false, |p| {
        p.allowed_domains = vec!["allowed.test".into(), "*.wild.test".into()];
        p.proxy_hosts = vec![
            ("allowed.test".into(), allowed),
            ("api.wild.test".into(), allowed),
            ("refused.test".into(), refused),
        ];
    }) else {
        return;
    };
    // Plain HTTP and a CONNECT tunnel (-p) to listed names.
    for cmd in [
        "curl -s http://allowed.test/",
        "curl -s -p http://allowed.test/",
        "curl -s http://api.wild.test/x",
    ] {
        let out = sh(&ctx, cmd).await;
        assert!(
            out.content.contains("from-allowed"),
            "{cmd}: {}",
            out.content
        );
    }
    let out = sh(&ctx, "curl -s http://refused.test/").await;
    assert!(
        out.content
            .contains("refused.test is not in sandbox.allowedDomains"),
        "{}",
        out.content
    );
    let out = sh(&ctx, "curl -s -p http://refused.test/; echo \"curl $?\"").await;
    assert!(!out.content.contains("from-refused"), "{}", out.content);
    // Around the proxy: nothing.
    let out = sh(
        &ctx,
        &format!("curl -s --noproxy '*' http://{refused}/; echo \"curl $?\""),
    )
    .await;
    assert!(!out.content.contains("from-refused"), "{}", out.content);
    assert_eq!(refused_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(allowed_hits.load(std::sync::atomic::Ordering::SeqCst) >= 3);
}
