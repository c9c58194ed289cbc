//! The managed policy (issue 44, docs/permissions.md "Managed policy")
//! through the binary: a deny rule of the policy blocks a call the user's
//! rules allow; the bypass mode is neither offered nor taken (ACP
//! `session/set_mode`, the mode config option, `maia exec --mode`); models
//! outside `availableModels` are neither listed nor taken (config option,
//! `/model`, the `model` setting, `--model`); the policy's hook runs while
//! the project's untrusted ones do not; the sandbox floor overrides the
//! user's `off`; `/context` and `maia doctor` show it; a malformed policy
//! keeps MAIA from starting. Every refusal names the policy file.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::cli_login::maia as run_maia;
use crate::harness::client::{Acp, Call, acp};
use crate::harness::flows::Flows;
use crate::harness::{MANAGED_FILE, Maia, Options};

/// Starts under `policy` with user `settings`, initialized (notices
/// taken), with `models` listed; opens a session.
async fn managed(policy: Value, settings: Value, models: &[&str]) -> (Maia, acp::SessionId, Value) {
    let mut maia = Maia::start_managed(
        Options {
            settings,
            ..Default::default()
        },
        &policy,
    )
    .await;
    maia.mock
        .set_models(models.iter().map(|m| json!({"id": m})).collect());
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let (sid, result) = maia.new_session_result().await;
    (maia, acp::SessionId::new(sid), result)
}

fn policy_file(maia: &Maia) -> String {
    maia.home.path().join(MANAGED_FILE).display().to_string()
}

/// Waits for a notice whose JSON holds every one of `parts` (it may have
/// come already).
async fn notice(maia: &mut Maia, parts: &[&str]) -> Value {
    let hit = |m: &Value| {
        m["params"]["update"]["sessionUpdate"] == "notice"
            && parts.iter().all(|p| m.to_string().contains(p))
    };
    if let Some(m) = maia.seen.iter().find(|m| hit(m)) {
        return m.clone();
    }
    maia.wait_for(hit).await.0
}

/// The error `request` is answered with, as JSON text; fails the test
/// when it succeeds.
async fn refusal<R: Call>(maia: &mut Maia, request: R) -> String {
    match maia.send_request(request).await {
        Ok(_) => panic!("{} was not refused", R::METHOD),
        Err(error) => serde_json::to_string(&error).unwrap(),
    }
}

/// One model turn calling `Bash` with `command` (id `call_id`), asking
/// nothing: the tool results of the model's last request.
async fn unasked_bash(
    maia: &mut Maia,
    sid: &acp::SessionId,
    call_id: &str,
    command: &str,
) -> Vec<String> {
    let calls = [(call_id, "Bash", json!({"command": command}))];
    let turn = maia
        .scripted_tools(sid, "go", &calls, |_: &acp::AgentRequest| None)
        .await;
    assert!(turn.permissions().is_empty(), "nothing is asked");
    crate::harness::last_tool_results(maia)
}

/// The values a select config option `id` offers.
fn option_values(result: &Value, id: &str) -> Vec<String> {
    result["configOptions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["id"] == id)
        .flat_map(|o| o["options"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v["value"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_policy_deny_rule_blocks_a_call_the_users_rules_allow() {
    let (mut maia, sid, _) = managed(
        json!({"permissions": {"deny": ["Bash(touch *)"]}}),
        json!({"permissions": {"allow": ["Bash(touch *)"]}}),
        &["mock-model"],
    )
    .await;
    let results = unasked_bash(&mut maia, &sid, "c1", "touch made.txt").await;
    assert!(!maia.path("made.txt").exists(), "the denied command ran");
    assert!(
        results.iter().any(|r| r.contains("Bash(touch *)")),
        "{results:?}"
    );
    // `/permissions` shows the rule under the policy file.
    let text = maia.prompt_turn(&sid, "/permissions").await.agent_text();
    assert!(text.contains(&policy_file(&maia)), "{text}");
}

#[tokio::test]
async fn the_bypass_mode_is_neither_offered_nor_taken() {
    let (mut maia, sid, result) = managed(
        json!({"permissions": {"disableBypassPermissionsMode": "disable"}}),
        json!({}),
        &["mock-model"],
    )
    .await;
    let file = policy_file(&maia);
    let modes: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(!modes.contains(&"bypass"), "{modes:?}");
    assert!(modes.contains(&"default"), "{modes:?}");
    assert!(!option_values(&result, "mode").contains(&"bypass".to_owned()));

    let error = refusal(
        &mut maia,
        acp::SetSessionModeRequest::new(sid.clone(), "bypass"),
    )
    .await;
    assert!(error.contains(&file), "{error}");
    let set = acp::SetSessionConfigOptionRequest::new(sid.clone(), "mode", "bypass");
    let error = refusal(&mut maia, set).await;
    assert!(error.contains(&file), "{error}");
    // Other modes still switch.
    let switched = maia
        .send_request(acp::SetSessionModeRequest::new(sid.clone(), "read-only"))
        .await;
    assert!(switched.is_ok(), "{switched:?}");
    // `/context` shows the policy.
    let text = maia.prompt_turn(&sid, "/context").await.agent_text();
    assert!(text.contains(&file), "{text}");
    assert!(text.contains("the bypass mode is disabled"), "{text}");
}

#[tokio::test]
async fn models_outside_available_models_are_neither_listed_nor_taken() {
    // The user's `model` setting names a model the policy refuses.
    let (mut maia, sid, result) = managed(
        json!({"availableModels": ["mock-model", "mini"]}),
        json!({"model": "big"}),
        &["big", "mock-model", "mini"],
    )
    .await;
    let file = policy_file(&maia);
    let offered = option_values(&result, "model");
    assert_eq!(offered, ["mock-model", "mini"], "{result}");
    // The session took the first allowed model, not the setting's.
    let current = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .map(|o| o["currentValue"].clone());
    assert_eq!(current, Some(json!("mock-model")), "{result}");
    // The refused setting is told.
    notice(&mut maia, &[&file, "`big`"]).await;

    let set = acp::SetSessionConfigOptionRequest::new(sid.clone(), "model", "big");
    let error = refusal(&mut maia, set).await;
    assert!(error.contains(&file), "{error}");
    let text = maia.prompt_turn(&sid, "/model big").await.agent_text();
    assert!(text.contains(&file), "{text}");
    // The request goes to the allowed model.
    maia.mock.push(mock::text_reply("hi"));
    maia.prompt_turn(&sid, "hello").await;
    let request = maia.mock.requests().last().cloned().unwrap();
    assert_eq!(request["model"], "mock-model");
}

#[tokio::test]
async fn the_policys_hook_runs_while_the_projects_untrusted_hook_does_not() {
    let (mut maia, sid, _) = managed(
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "echo blocked by the policy hook >&2; exit 2"}]}]}}),
        json!({"permissions": {"allow": ["Bash(touch *)"]}}),
        &["mock-model"],
    )
    .await;
    // The project's hook would write a file; it is not trusted.
    std::fs::create_dir_all(maia.path(".maia")).unwrap();
    std::fs::write(
        maia.path(".maia/settings.json"),
        json!({"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": "touch project-hook-ran"}]}]}})
        .to_string(),
    )
    .unwrap();
    let results = unasked_bash(&mut maia, &sid, "c1", "touch made.txt").await;
    assert!(
        !maia.path("made.txt").exists(),
        "the policy hook did not block"
    );
    assert!(
        results
            .iter()
            .any(|r| r.contains("blocked by the policy hook")),
        "{results:?}"
    );
    // A new session reads the project's hooks: still not run.
    let cwd = maia.cwd();
    let (sid, _) = maia.open_in(&cwd).await;
    unasked_bash(&mut maia, &sid, "c2", "touch other.txt").await;
    assert!(!maia.path("project-hook-ran").exists());
    assert!(!maia.path("other.txt").exists());
}

#[tokio::test]
async fn the_sandbox_floor_overrides_the_users_off_and_network() {
    let (mut maia, _, _) = managed(
        json!({"sandbox": {"mode": "workspace-write", "network": false}}),
        json!({"sandbox": {"mode": "off", "network": true}}),
        &["mock-model"],
    )
    .await;
    let file = policy_file(&maia);
    notice(
        &mut maia,
        &["off", "is refused by the managed policy", &file],
    )
    .await;
    notice(&mut maia, &["network", "true is refused", &file]).await;
}

#[tokio::test]
async fn a_malformed_policy_keeps_maia_from_starting_and_doctor_says_why() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let file = home.path().join(MANAGED_FILE);
    let env_file = file.display().to_string();
    let env = [("MAIA_MANAGED_SETTINGS", env_file.as_str())];
    for text in ["{not json", r#"{"permissions": {"deny": "Bash"}}"#] {
        std::fs::write(&file, text).unwrap();
        for args in [&["acp"][..], &["exec", "hello"][..]] {
            let run = run_maia(home.path(), cwd.path(), args, &env, "").await;
            assert_ne!(run.code, 0, "{args:?} started: {}", run.stdout);
            assert!(run.stderr.contains(&env_file), "{args:?}: {}", run.stderr);
            assert!(run.stdout.is_empty(), "{}", run.stdout);
        }
        let run = run_maia(home.path(), cwd.path(), &["doctor"], &env, "").await;
        assert_ne!(run.code, 0);
        assert!(
            run.stdout
                .contains(&format!("✗ the managed policy {env_file}")),
            "{}",
            run.stdout
        );
    }
    // A valid one is shown.
    std::fs::write(
        &file,
        json!({"disableBypassMode": true, "availableModels": ["m"]}).to_string(),
    )
    .unwrap();
    let run = run_maia(home.path(), cwd.path(), &["doctor"], &env, "").await;
    assert!(
        run.stdout
            .contains(&format!("✓ managed policy {env_file} in force"))
            && run.stdout.contains("the bypass mode is disabled")
            && run.stdout.contains("models allowed: m"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn exec_refuses_a_bypass_mode_and_a_model_the_policy_refuses() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let file = home.path().join(MANAGED_FILE);
    std::fs::write(
        &file,
        json!({"disableBypassMode": true, "availableModels": ["mock-model"]}).to_string(),
    )
    .unwrap();
    let env_file = file.display().to_string();
    let env = [("MAIA_MANAGED_SETTINGS", env_file.as_str())];
    let refused = async |args: &[&str], names: &str| {
        let run = run_maia(home.path(), cwd.path(), args, &env, "").await;
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(names) && run.stderr.contains(&env_file),
            "{}",
            run.stderr
        );
    };
    refused(&["exec", "--mode", "bypass", "hello"], "--mode bypass").await;
    refused(&["--model", "big", "exec", "hello"], "`big`").await;
}
