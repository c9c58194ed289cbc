//! Hooks (issue 44, docs/hooks.md) through the binary: real shell scripts
//! configured in Claude Code's format, for each event, blocking,
//! allowing, adding context, rewriting a call's input, timing out,
//! crashing, printing garbage; the `Stop` loop and its bound; a hook
//! under the sandbox; a project's hooks waiting for the user's trust;
//! every run shown as a card.

use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{
    Maia, Options, agent_text, alive, choose, content_text, eventually, last_tool_results,
    permission_requests, updates_of,
};

/// One hook entry of `event`: `matcher` and the script `name` (written in
/// the project's `.hooks` folder, run with `sh`).
fn entry(matcher: &str, name: &str, timeout: Option<u64>) -> Value {
    let mut hook = json!({"type": "command", "command": format!("sh .hooks/{name}")});
    if let Some(t) = timeout {
        hook["timeout"] = t.into();
    }
    json!({"matcher": matcher, "hooks": [hook]})
}

/// A session whose user settings have `hooks` (and `extra`), with the
/// `scripts` (name, text) written in the project before it opens.
async fn session(hooks: Value, extra: Value, scripts: &[(&str, &str)]) -> (Maia, String) {
    let mut settings = json!({"hooks": hooks});
    if let (Some(base), Some(more)) = (settings.as_object_mut(), extra.as_object()) {
        base.extend(more.clone());
    }
    let mut maia = Maia::start_with(Options {
        settings,
        ..Default::default()
    })
    .await;
    std::fs::create_dir_all(maia.path(".hooks")).unwrap();
    for (name, text) in scripts {
        std::fs::write(maia.path(&format!(".hooks/{name}")), text).unwrap();
    }
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// The hook cards among `messages` (tool calls named `hook`).
fn cards(messages: &[Value]) -> Vec<Value> {
    updates_of(messages, "tool_call")
        .into_iter()
        .filter(|u| u["_meta"]["maia"]["hook"].is_object())
        .collect()
}

/// One Bash call of `command`, then "done"; permission questions answered
/// "allow once". The messages before the prompt's response.
async fn bash(maia: &mut Maia, sid: &str, command: &str) -> Vec<Value> {
    let calls = [("c1", "Bash", json!({"command": command}))];
    let (resp, messages) = maia.tool_turn(sid, &calls, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    messages
}

#[tokio::test]
async fn pre_tool_use_exit_2_blocks_the_call_and_tells_the_model() {
    let script = "cat > .hooks/input.json\necho 'no touching here' >&2\nexit 2\n";
    let hooks = json!({"PreToolUse": [entry("Bash", "block.sh", None)]});
    let (mut maia, sid) = session(hooks, json!({}), &[("block.sh", script)]).await;
    let messages = bash(&mut maia, &sid, "touch ran").await;
    assert!(!maia.path("ran").exists(), "the blocked call ran");
    assert!(
        permission_requests(&messages).is_empty(),
        "a blocked call is not asked"
    );
    let result = last_tool_results(&maia).join("\n");
    assert!(result.contains("no touching here"), "{result}");
    let card = &cards(&messages)[0];
    assert_eq!(card["_meta"]["maia"]["hook"]["exitCode"], 2);
    assert_eq!(card["_meta"]["maia"]["hook"]["event"], "PreToolUse");
    assert!(card["title"].as_str().unwrap().contains("exit 2"), "{card}");
    // What the hook read on stdin: Claude Code's fields.
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(maia.path(".hooks/input.json")).unwrap())
            .unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["session_id"], sid.as_str());
    assert_eq!(input["tool_name"], "Bash");
    assert_eq!(input["tool_input"]["command"], "touch ran");
    assert_eq!(input["tool_use_id"], "c1");
    assert_eq!(input["permission_mode"], "default");
    let transcript = input["transcript_path"].as_str().unwrap();
    assert!(transcript.ends_with(".jsonl") && std::path::Path::new(transcript).is_file());
}

#[tokio::test]
async fn allow_skips_a_question_but_never_a_deny_rule() {
    let script = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'"#;
    let hooks = json!({"PreToolUse": [entry("Bash", "allow.sh", None)]});
    let deny = json!({"permissions": {"deny": ["Bash(touch denied*)"]}});
    let (mut maia, sid) = session(hooks, deny, &[("allow.sh", script)]).await;
    let messages = bash(&mut maia, &sid, "touch allowed").await;
    assert!(
        permission_requests(&messages).is_empty(),
        "the hook's allow was asked"
    );
    assert!(maia.path("allowed").exists());
    assert_eq!(cards(&messages).len(), 1);
    // A call the rules deny is refused before any hook runs.
    let messages = bash(&mut maia, &sid, "touch denied").await;
    assert!(!maia.path("denied").exists(), "a hook loosened a deny rule");
    assert!(cards(&messages).is_empty(), "a hook ran for a denied call");
}

#[tokio::test]
async fn ask_asks_where_the_rules_allow() {
    let script = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask"}}'"#;
    let hooks = json!({"PreToolUse": [entry("Bash", "ask.sh", None)]});
    let rules = json!({"permissions": {"allow": ["Bash(*)"]}});
    let (mut maia, sid) = session(hooks, rules, &[("ask.sh", script)]).await;
    let calls = [("c1", "Bash", json!({"command": "touch refused"}))];
    let (_, messages) = maia.tool_turn(&sid, &calls, choose("reject_once")).await;
    assert_eq!(
        permission_requests(&messages).len(),
        1,
        "the hook's ask was not asked"
    );
    assert!(!maia.path("refused").exists());
}

#[tokio::test]
async fn updated_input_rewrites_the_call_within_the_rules() {
    let script = r#"if grep -q forbid; then c='touch forbidden'; else c='touch rewritten'; fi
printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"%s"}}}' "$c""#;
    let hooks = json!({"PreToolUse": [entry("Bash", "rewrite.sh", None)]});
    let rules =
        json!({"permissions": {"allow": ["Bash(touch *)"], "deny": ["Bash(touch forbidden*)"]}});
    let (mut maia, sid) = session(hooks, rules, &[("rewrite.sh", script)]).await;
    bash(&mut maia, &sid, "touch original").await;
    assert!(
        maia.path("rewritten").exists(),
        "the rewritten input did not run"
    );
    assert!(!maia.path("original").exists(), "the original input ran");
    // A rewrite into what the rules deny is refused.
    bash(&mut maia, &sid, "touch forbid-me").await;
    assert!(
        !maia.path("forbidden").exists(),
        "a rewrite escaped a deny rule"
    );
    assert!(!maia.path("forbid-me").exists());
    let result = last_tool_results(&maia).join("\n");
    assert!(result.to_lowercase().contains("denied"), "{result}");
}

#[tokio::test]
async fn post_tool_use_context_and_exit_2_reach_the_model() {
    let context = "cat > .hooks/post.json\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"formatted with fmt\"}}'\n";
    let lint = "echo 'lint: 3 warnings' >&2\nexit 2\n";
    let hooks = json!({"PostToolUse": [entry("Bash", "context.sh", None), entry("Write|Bash", "lint.sh", None)]});
    let rules = json!({"permissions": {"allow": ["Bash(*)"]}});
    let (mut maia, sid) =
        session(hooks, rules, &[("context.sh", context), ("lint.sh", lint)]).await;
    let messages = bash(&mut maia, &sid, "echo hello").await;
    let result = last_tool_results(&maia).join("\n");
    assert!(result.contains("hello"), "{result}");
    assert!(result.contains("formatted with fmt"), "{result}");
    assert!(result.contains("lint: 3 warnings"), "{result}");
    assert_eq!(cards(&messages).len(), 2);
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(maia.path(".hooks/post.json")).unwrap())
            .unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert!(
        input["tool_response"]["output"]
            .as_str()
            .unwrap()
            .contains("hello")
    );
}

#[tokio::test]
async fn a_hung_hook_is_killed_with_its_children_and_the_call_goes_on() {
    let script = "sleep 60 &\necho $! > .hooks/child.pid\nwait\n";
    let hooks = json!({"PreToolUse": [entry("Bash", "hang.sh", Some(1))]});
    let rules = json!({"permissions": {"allow": ["Bash(*)"]}});
    let (mut maia, sid) = session(hooks, rules, &[("hang.sh", script)]).await;
    let start = Instant::now();
    let messages = bash(&mut maia, &sid, "touch ran").await;
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert!(
        maia.path("ran").exists(),
        "a timed-out hook blocked the call"
    );
    let card = &cards(&messages)[0];
    assert_eq!(
        card["_meta"]["maia"]["hook"]["outcome"], "timeout",
        "{card}"
    );
    assert_eq!(card["status"], "failed");
    let pid: u32 = std::fs::read_to_string(maia.path(".hooks/child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || !alive(pid)).await,
        "the hook's child outlived its timeout"
    );
}

#[tokio::test]
async fn a_crash_and_garbage_are_reported_and_ignored() {
    let crash = "echo 'hook exploded' >&2\nkill -SEGV $$\n";
    let garbage = "printf 'not json {{{\\n\\001\\002'\nexit 0\n";
    let failing = "echo 'broken' >&2\nexit 1\n";
    let hooks = json!({"PreToolUse": [
        entry("Bash", "crash.sh", None),
        entry("Bash", "garbage.sh", None),
        entry("Bash", "failing.sh", None),
    ]});
    let rules = json!({"permissions": {"allow": ["Bash(*)"]}});
    let scripts = [
        ("crash.sh", crash),
        ("garbage.sh", garbage),
        ("failing.sh", failing),
    ];
    let (mut maia, sid) = session(hooks, rules, &scripts).await;
    let messages = bash(&mut maia, &sid, "touch ran").await;
    assert!(maia.path("ran").exists(), "a failing hook blocked the call");
    let outcomes: Vec<Value> = cards(&messages)
        .iter()
        .map(|c| c["_meta"]["maia"]["hook"]["outcome"].clone())
        .collect();
    assert_eq!(outcomes.len(), 3);
    assert_eq!(
        outcomes.iter().filter(|o| *o == "ok").count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.iter().filter(|o| *o == "error").count(),
        2,
        "{outcomes:?}"
    );
    let result = last_tool_results(&maia).join("\n");
    assert!(
        !result.contains("broken"),
        "an ignored hook's stderr reached the model"
    );
}

#[tokio::test]
async fn user_prompt_submit_refuses_or_adds_context() {
    let script = "if grep -q password; then echo 'no secrets in prompts' >&2; exit 2; fi\necho 'sprint 42 ends Friday'\n";
    let hooks = json!({"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "sh .hooks/prompt.sh"}]}]});
    let (mut maia, sid) = session(hooks, json!({}), &[("prompt.sh", script)]).await;
    let (resp, messages) = maia.turn(&sid, "my password is hunter2").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert!(agent_text(&messages).contains("no secrets in prompts"));
    assert!(
        maia.mock.requests().is_empty(),
        "a refused prompt reached the model"
    );
    maia.answered_turn(&sid, "what is due?", "ok").await;
    let request = &maia.mock.requests()[0];
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(content_text)
        .unwrap();
    assert!(
        user.contains("what is due?") && user.contains("sprint 42 ends Friday"),
        "{user}"
    );
}

#[tokio::test]
async fn a_stop_hook_that_fails_twice_then_passes_makes_the_model_go_on() {
    let script = "n=$(cat .hooks/count 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > .hooks/count\nif [ $n -le 2 ]; then echo \"tests fail: run $n\" >&2; exit 2; fi\n";
    let hooks = json!({"Stop": [{"hooks": [{"type": "command", "command": "sh .hooks/stop.sh"}]}]});
    let (mut maia, sid) = session(hooks, json!({}), &[("stop.sh", script)]).await;
    for text in ["first", "second", "third"] {
        maia.mock.push(mock::text_reply(text));
    }
    let (resp, messages) = maia.turn(&sid, "fix it").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 3, "one request per continuation");
    let last_user = |r: &Value| {
        r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(content_text)
            .unwrap()
    };
    assert!(last_user(&requests[1]).contains("tests fail: run 1"));
    assert!(last_user(&requests[2]).contains("tests fail: run 2"));
    assert_eq!(cards(&messages).len(), 3);
    assert!(agent_text(&messages).contains("third"));
}

#[tokio::test]
async fn a_stop_hook_that_always_blocks_is_bounded() {
    let script = "echo 'still failing' >&2\nexit 2\n";
    let hooks = json!({"Stop": [{"hooks": [{"type": "command", "command": "sh .hooks/stop.sh"}]}]});
    let (mut maia, sid) = session(hooks, json!({}), &[("stop.sh", script)]).await;
    for _ in 0..10 {
        maia.mock.push(mock::text_reply("trying"));
    }
    let (resp, messages) = maia.turn(&sid, "fix it").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(
        maia.mock.requests().len(),
        6,
        "1 answer and 5 continuations"
    );
    assert_eq!(cards(&messages).len(), 6);
}

#[tokio::test]
async fn session_start_context_reaches_the_first_prompt() {
    let script = "cat > .hooks/start.json\necho 'on branch feature/x'\n";
    let hooks = json!({"SessionStart": [{"hooks": [{"type": "command", "command": "sh .hooks/start.sh"}]}]});
    let (mut maia, sid) = session(hooks, json!({}), &[("start.sh", script)]).await;
    maia.answered_turn(&sid, "hello", "hi").await;
    let request = &maia.mock.requests()[0];
    let text: String = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(content_text)
        .collect();
    assert!(text.contains("on branch feature/x"), "{text}");
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(maia.path(".hooks/start.json")).unwrap())
            .unwrap();
    assert_eq!(input["source"], "startup");
    // `/clear` starts again, with the hook's context for the next prompt.
    maia.turn(&sid, "/clear").await;
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(maia.path(".hooks/start.json")).unwrap())
            .unwrap();
    assert_eq!(input["source"], "clear");
    maia.answered_turn(&sid, "again", "hi").await;
    let last = maia.mock.requests().last().unwrap().clone();
    let text: String = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(content_text)
        .collect();
    assert!(
        text.contains("on branch feature/x") && !text.contains("hello"),
        "{text}"
    );
}

#[tokio::test]
async fn a_hook_cannot_write_outside_the_project_under_the_sandbox() {
    let elsewhere = tempfile::tempdir().unwrap();
    let outside = elsewhere.path().join("escaped");
    let script = format!(
        "echo inside > .hooks/inside\necho x > {}\necho $? > .hooks/rc\n",
        outside.display()
    );
    let hooks = json!({"PreToolUse": [entry("Bash", "escape.sh", None)]});
    let rules = json!({"permissions": {"allow": ["Bash(*)"]}});
    let (mut maia, sid) = session(hooks, rules, &[("escape.sh", &script)]).await;
    let messages = bash(&mut maia, &sid, "touch ran").await;
    assert!(maia.path(".hooks/inside").exists(), "the hook did not run");
    assert!(!outside.exists(), "a hook wrote outside the project");
    let rc = std::fs::read_to_string(maia.path(".hooks/rc")).unwrap();
    assert_ne!(rc.trim(), "0", "the write outside did not fail");
    assert!(maia.path("ran").exists(), "the call did not run");
    assert_eq!(cards(&messages).len(), 1);
}

#[tokio::test]
async fn a_projects_hooks_wait_for_the_users_trust() {
    let mut maia = Maia::start().await;
    std::fs::create_dir_all(maia.path(".maia")).unwrap();
    std::fs::create_dir_all(maia.path(".hooks")).unwrap();
    std::fs::write(maia.path(".hooks/mark.sh"), "touch .hooks/ran\n").unwrap();
    let command = json!({"type": "command", "command": "sh .hooks/mark.sh"});
    std::fs::write(
        maia.path(".maia/settings.json"),
        json!({"hooks": {"UserPromptSubmit": [{"hooks": [command]}]}}).to_string(),
    )
    .unwrap();
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    let told = |m: &Value| {
        m["params"]["update"]["sessionUpdate"] == "notice" && m.to_string().contains("/hooks trust")
    };
    if !maia.seen.iter().any(told) {
        maia.wait_for(told).await;
    }
    maia.answered_turn(&sid, "hello", "hi").await;
    assert!(
        !maia.path(".hooks/ran").exists(),
        "an untrusted project hook ran"
    );
    let (_, messages) = maia.turn(&sid, "/hooks trust").await;
    let said = agent_text(&messages);
    assert!(said.contains("run from now on"), "{said}");
    maia.answered_turn(&sid, "again", "hi").await;
    assert!(
        maia.path(".hooks/ran").exists(),
        "the trusted project hook did not run"
    );
}

#[tokio::test]
async fn continue_false_ends_the_turn_after_the_batch() {
    let script = r#"echo '{"continue": false, "stopReason": "budget reached"}'"#;
    let hooks = json!({"PostToolUse": [entry("Bash", "stop.sh", None)]});
    let rules = json!({"permissions": {"allow": ["Bash(*)"]}});
    let (mut maia, sid) = session(hooks, rules, &[("stop.sh", script)]).await;
    let calls = [("c1", "Bash", json!({"command": "echo hi"}))];
    maia.mock.push(mock::tool_calls_reply(&calls));
    let id = maia.prompt(&sid, "go").await;
    let (resp, messages) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(maia.mock.requests().len(), 1, "the model was asked again");
    let told = updates_of(&messages, "notice")
        .iter()
        .any(|n| n.to_string().contains("budget reached"));
    assert!(told, "the user was not told why");
}

#[tokio::test]
async fn notification_and_pre_compact_hooks_get_their_fields() {
    let hooks = json!({
        "Notification": [{"hooks": [{"type": "command", "command": "cat > .hooks/notification.json"}]}],
        "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": "cat > .hooks/compact.json"}]}],
    });
    let (mut maia, sid) = session(hooks, json!({}), &[]).await;
    // A question (Bash in the default mode) notifies.
    bash(&mut maia, &sid, "touch asked").await;
    assert!(maia.path("asked").exists());
    let path = maia.path(".hooks/notification.json");
    assert!(eventually(Duration::from_secs(10), || path.is_file()).await);
    let read = |p: &std::path::Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    assert!(
        eventually(Duration::from_secs(10), || {
            std::fs::read_to_string(&path).is_ok_and(|t| t.ends_with('\n'))
        })
        .await
    );
    let notification = read(&path);
    assert_eq!(notification["hook_event_name"], "Notification");
    assert!(notification["message"].as_str().unwrap().contains("Bash"));
    // `/compact` is a manual compaction.
    maia.mock.push(mock::text_reply("the summary"));
    maia.turn(&sid, "/compact").await;
    let compact = read(&maia.path(".hooks/compact.json"));
    assert_eq!(compact["hook_event_name"], "PreCompact");
    assert_eq!(compact["trigger"], "manual");
}

#[tokio::test]
async fn subagent_stop_runs_when_a_child_is_done() {
    let hooks = json!({
        "SubagentStop": [{"hooks": [{"type": "command", "command": "cat > .hooks/subagent.json"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "cat > .hooks/stop.json"}]}],
    });
    let (mut maia, sid) = session(hooks, json!({}), &[]).await;
    let task = json!({"description": "look", "prompt": "look around"});
    maia.mock
        .push(mock::tool_calls_reply(&[("t1", "Task", task)]));
    maia.mock.push(mock::text_reply("child done"));
    maia.mock.push(mock::text_reply("parent done"));
    let (resp, _) = maia.turn(&sid, "delegate").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(maia.path(name)).unwrap()).unwrap()
    };
    assert_eq!(
        read(".hooks/subagent.json")["hook_event_name"],
        "SubagentStop"
    );
    let stop = read(".hooks/stop.json");
    assert_eq!(stop["hook_event_name"], "Stop");
    assert_eq!(stop["stop_hook_active"], false);
}

#[tokio::test]
async fn exec_json_shows_each_hook_run_and_session_end_runs() {
    let mock = mock::MockLlm::start().await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".maia")).unwrap();
    let hooks = json!({
        "PreToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": "echo checked"}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "cat > session-end.json"}]}],
    });
    std::fs::write(
        home.path().join(".maia/settings.json"),
        json!({"LiteLLM_URL": mock.url(), "model": "mock-model", "llm_max_retries": 0,
               "hooks": hooks})
        .to_string(),
    )
    .unwrap();
    std::fs::write(project.path().join("notes.txt"), "hello\n").unwrap();
    mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Read",
        json!({"file_path": "notes.txt"}),
    )]));
    mock.push(mock::text_reply("Done."));
    let run = crate::cli_login::maia(
        home.path(),
        project.path(),
        &["exec", "--json", "read notes.txt"],
        &[],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let hook: Value = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "hook")
        .unwrap_or_else(|| panic!("no hook line in {}", run.stdout));
    assert_eq!(hook["event"], "PreToolUse");
    assert_eq!(hook["matched"], "Read");
    assert_eq!(hook["exit_code"], 0);
    assert_eq!(hook["outcome"], "ok");
    assert_eq!(hook["output"], "checked");
    assert!(hook["duration_ms"].is_u64());
    let end = project.path().join("session-end.json");
    assert!(
        eventually(Duration::from_secs(10), || end.is_file()).await,
        "SessionEnd did not run when exec ended"
    );
}

#[tokio::test]
async fn a_hook_cannot_reach_the_network_under_the_sandbox() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo reached; else echo refused; fi > .hooks/net\n"
    );
    let hooks = json!({"PreToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": "bash .hooks/net.sh"}]}]});
    let rules = json!({"permissions": {"allow": ["Bash(*)"]}});
    let (mut maia, sid) = session(hooks, rules, &[("net.sh", &script)]).await;
    bash(&mut maia, &sid, "touch ran").await;
    let said = std::fs::read_to_string(maia.path(".hooks/net")).unwrap();
    assert_eq!(said.trim(), "refused", "a hook reached the network");
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "a connection from the hook arrived");
    assert!(maia.path("ran").exists());
}
