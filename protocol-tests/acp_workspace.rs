//! Multi-root workspaces: `additionalDirectories` on `session/new`, `load`
//! and `resume`. The session's cwd is `<tmp>/proj`, the additional root
//! `<tmp>/lib`, and `<tmp>/out` lies outside every root.

use std::path::{Path, PathBuf};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{
    Maia, Options, agent_text, choose, last_tool_result, permission_requests, updates_of,
};

struct Layout {
    proj: PathBuf,
    lib: PathBuf,
    out: PathBuf,
}

fn layout(maia: &Maia) -> Layout {
    let l = Layout {
        proj: maia.path("proj"),
        lib: maia.path("lib"),
        out: maia.path("out"),
    };
    for (dir, file) in [
        (&l.proj, "src/mine.txt"),
        (&l.lib, "src/a.txt"),
        (&l.out, "b.txt"),
    ] {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("content of {file}\n")).unwrap();
    }
    l
}

/// Read rules relative to the project, as a user writes them.
fn options() -> Options {
    Options {
        settings: json!({"permissions": {"allow": ["Read(src/**)", "Glob(**)"]}}),
        ..Default::default()
    }
}

async fn open(maia: &mut Maia, cwd: &Path, roots: &[&Path]) -> String {
    let (resp, _) = maia
        .call(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [], "additionalDirectories": roots}),
        )
        .await;
    let sid = resp["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId in {resp}"))
        .to_owned();
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .await;
    sid
}

/// One tool turn with `calls`, rejecting every permission request; returns
/// the prompt response and the messages before it.
async fn turn_rejecting(
    maia: &mut Maia,
    sid: &str,
    calls: &[(&str, &str, Value)],
) -> (Value, Vec<Value>) {
    maia.tool_turn(sid, calls, choose("reject_once")).await
}

fn read(path: &Path) -> (&'static str, &'static str, Value) {
    ("r1", "Read", json!({ "file_path": path }))
}

#[tokio::test]
async fn an_additional_root_is_part_of_the_project() {
    let mut maia = Maia::start_with(options()).await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"],
        json!({}),
        "{init}"
    );
    let l = layout(&maia);
    let sid = open(&mut maia, &l.proj, &[&l.lib]).await;

    // `Read(src/**)` applies in the additional root: no question.
    let (resp, before) = turn_rejecting(&mut maia, &sid, &[read(&l.lib.join("src/a.txt"))]).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(permission_requests(&before).is_empty(), "{before:?}");
    assert!(last_tool_result(&maia).contains("content of src/a.txt"));

    // Outside every root the same rule does not apply: asked.
    let (_, before) = turn_rejecting(&mut maia, &sid, &[read(&l.out.join("b.txt"))]).await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");
    // `..` out of the root is outside too.
    let sneaky = l.lib.join("src/../../out/b.txt");
    let (_, before) = turn_rejecting(&mut maia, &sid, &[read(&sneaky)]).await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");

    // A symlink inside the root that leads out of it is outside.
    std::os::unix::fs::symlink(&l.out, l.lib.join("src/escape")).unwrap();
    let (_, before) =
        turn_rejecting(&mut maia, &sid, &[read(&l.lib.join("src/escape/b.txt"))]).await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");

    // Glob searches a root named by its absolute path.
    let (_, before) = turn_rejecting(
        &mut maia,
        &sid,
        &[("g1", "Glob", json!({"pattern": "**/*.txt", "path": l.lib}))],
    )
    .await;
    assert!(permission_requests(&before).is_empty(), "{before:?}");
    assert!(
        last_tool_result(&maia).contains(&l.lib.join("src/a.txt").display().to_string()),
        "{}",
        last_tool_result(&maia)
    );

    // accept-edits: writes in the additional root go through unasked,
    // outside every root they are asked.
    let (resp, _) = maia
        .call(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "accept-edits"}),
        )
        .await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let write = |path: &Path| {
        (
            "w1",
            "Write",
            json!({"file_path": path, "content": "new\n"}),
        )
    };
    let (_, before) = turn_rejecting(&mut maia, &sid, &[write(&l.lib.join("new.txt"))]).await;
    assert!(permission_requests(&before).is_empty(), "{before:?}");
    assert_eq!(
        std::fs::read_to_string(l.lib.join("new.txt")).unwrap(),
        "new\n"
    );
    let (_, before) = turn_rejecting(&mut maia, &sid, &[write(&l.out.join("new.txt"))]).await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");
    assert!(!l.out.join("new.txt").exists());
    // A protected path inside the root is still asked.
    let (_, before) = turn_rejecting(&mut maia, &sid, &[write(&l.lib.join(".git/config"))]).await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");

    // The model is told about the root; /context shows it.
    let system = maia.mock.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains(&l.lib.display().to_string()), "{system}");
    let id = maia.prompt(&sid, "/context").await;
    let (_, before) = maia.response(id).await;
    let text = agent_text(&before);
    assert!(text.contains(&format!("`{}`", l.lib.display())), "{text}");
}

#[tokio::test]
async fn at_references_name_files_of_a_root() {
    let mut maia = Maia::start_with(options()).await;
    maia.initialize().await;
    let l = layout(&maia);
    let sid = open(&mut maia, &l.proj, &[&l.lib]).await;
    maia.mock.push(mock::text_reply("seen"));
    let id = maia.prompt(&sid, "look at @lib/src/a.txt").await;
    maia.response(id).await;
    let requests = maia.mock.requests();
    let user = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .to_string();
    assert!(user.contains("content of src/a.txt"), "{user}");
}

#[tokio::test]
async fn bad_roots_are_refused_with_a_clear_error() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let l = layout(&maia);
    let home = maia.home.path().to_path_buf();
    let file = l.lib.join("src/a.txt");
    let cases: Vec<(Value, &str)> = vec![
        (json!(["relative/dir"]), "absolute"),
        (json!([l.lib.join("missing")]), "not an existing folder"),
        (json!([file]), "not an existing folder"),
        (json!(["/"]), "home folder"),
        (json!([home]), "home folder"),
        (json!([home.parent().unwrap()]), "home folder"),
        (json!("/not/a/list"), "invalid params"),
    ];
    for (roots, expected) in cases {
        for method in ["session/new", "session/resume"] {
            let (resp, _) = maia.call(
                method,
                json!({"sessionId": "x", "cwd": l.proj, "mcpServers": [], "additionalDirectories": roots}),
            )
            .await;
            assert_eq!(resp["error"]["code"], -32602, "{roots}: {resp}");
            let message = resp["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(expected), "{roots}: {resp}");
        }
    }
    // A null list is no list (the schema's default).
    let (resp, _) = maia
        .call(
            "session/new",
            json!({"cwd": l.proj, "mcpServers": [], "additionalDirectories": null}),
        )
        .await;
    assert!(resp["result"]["sessionId"].is_string(), "{resp}");
}

#[tokio::test]
async fn roots_are_saved_listed_and_the_load_request_decides() {
    let mut maia = Maia::start_with(options()).await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let l = layout(&maia);
    let sid = open(&mut maia, &l.proj, &[&l.lib]).await;
    let mut maia = maia.restart().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;

    // session/list reports the roots the thread was opened with.
    let (resp, _) = maia.call("session/list", json!({"cwd": l.proj})).await;
    let listed = &resp["result"]["sessions"][0];
    assert_eq!(listed["sessionId"], sid, "{resp}");
    assert_eq!(listed["additionalDirectories"], json!([l.lib]), "{resp}");

    // Loading with the listed roots restores them: the rule applies there.
    let (resp, _) = maia.call(
        "session/load",
        json!({"sessionId": sid, "cwd": l.proj, "mcpServers": [], "additionalDirectories": [l.lib]}),
    )
    .await;
    assert!(resp["error"].is_null(), "{resp}");
    let (_, before) = turn_rejecting(&mut maia, &sid, &[read(&l.lib.join("src/a.txt"))]).await;
    assert!(permission_requests(&before).is_empty(), "{before:?}");

    // Resuming without them: no additional root (ACP: the request's list is
    // the complete list), and the user is told.
    let (resp, before) = maia
        .call(
            "session/resume",
            json!({"sessionId": sid, "cwd": l.proj, "mcpServers": []}),
        )
        .await;
    assert!(resp["error"].is_null(), "{resp}");
    let told = updates_of(&before, "notice").iter().any(|u| {
        u["title"]
            .as_str()
            .is_some_and(|t| t.contains(&l.lib.display().to_string()) && t.contains("not part"))
    });
    assert!(told, "{before:?}");
    let (_, before) = turn_rejecting(&mut maia, &sid, &[read(&l.lib.join("src/a.txt"))]).await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");
    let (resp, _) = maia.call("session/list", json!({"cwd": l.proj})).await;
    assert!(
        resp["result"]["sessions"][0]["additionalDirectories"].is_null(),
        "{resp}"
    );
}

#[tokio::test]
async fn sandboxed_commands_may_write_in_an_additional_root_only() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let l = layout(&maia);
    let sid = open(&mut maia, &l.proj, &[&l.lib]).await;
    let (resp, _) = maia
        .call(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "bypass"}),
        )
        .await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let echo = |id: &'static str, path: PathBuf| {
        (
            id,
            "Bash",
            json!({"command": format!("echo x > {}", path.display())}),
        )
    };
    let (_, before) = turn_rejecting(
        &mut maia,
        &sid,
        &[
            echo("b1", l.lib.join("in-root.txt")),
            echo("b2", l.out.join("outside.txt")),
        ],
    )
    .await;
    assert!(permission_requests(&before).is_empty(), "{before:?}");
    assert_eq!(
        std::fs::read_to_string(l.lib.join("in-root.txt")).unwrap(),
        "x\n"
    );
    assert!(
        !l.out.join("outside.txt").exists(),
        "the sandbox let a write out of every root"
    );
}

/// A root named through a symlink is the folder it pointed to when the
/// session opened: re-pointing the link later does not move the root.
#[tokio::test]
async fn a_root_given_by_a_symlink_stays_where_it_was() {
    let mut maia = Maia::start_with(options()).await;
    maia.initialize().await;
    let l = layout(&maia);
    std::fs::create_dir_all(l.out.join("src")).unwrap();
    std::fs::write(l.out.join("src/secret.txt"), "secret\n").unwrap();
    let link = maia.path("link");
    std::os::unix::fs::symlink(&l.lib, &link).unwrap();
    let sid = open(&mut maia, &l.proj, &[&link]).await;
    let (_, before) = turn_rejecting(&mut maia, &sid, &[read(&link.join("src/a.txt"))]).await;
    assert!(permission_requests(&before).is_empty(), "{before:?}");
    // What a command could do: point the link elsewhere.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&l.out, &link).unwrap();
    let (_, before) = turn_rejecting(&mut maia, &sid, &[read(&link.join("src/secret.txt"))]).await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");
    // The session reports the real folder.
    let (resp, _) = maia.call("session/list", json!({"cwd": l.proj})).await;
    assert_eq!(
        resp["result"]["sessions"][0]["additionalDirectories"],
        json!([l.lib]),
        "{resp}"
    );
}
