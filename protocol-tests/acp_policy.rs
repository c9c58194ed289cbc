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
use crate::harness::{MANAGED_FILE, Maia, Options, agent_text, permission_requests};

/// Starts under `policy` with user `settings`, initialized (notices
/// taken), with `models` listed; opens a session.
async fn managed(policy: Value, settings: Value, models: &[&str]) -> (Maia, String, Value) {
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
    (maia, sid, result)
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

fn error_text(response: &Value) -> String {
    response["error"].to_string()
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
    let (_, messages) = maia
        .tool_turn(
            &sid,
            &[("c1", "Bash", json!({"command": "touch made.txt"}))],
            |_| None,
        )
        .await;
    assert!(
        permission_requests(&messages).is_empty(),
        "nothing is asked"
    );
    assert!(!maia.path("made.txt").exists(), "the denied command ran");
    let results = crate::harness::last_tool_results(&maia);
    assert!(
        results.iter().any(|r| r.contains("Bash(touch *)")),
        "{results:?}"
    );
    // `/permissions` shows the rule under the policy file.
    let (_, messages) = maia.turn(&sid, "/permissions").await;
    let text = agent_text(&messages);
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

    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "bypass"}),
        )
        .await;
    let (response, _) = maia.response(id).await;
    assert!(error_text(&response).contains(&file), "{response}");
    let id = maia
        .request(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "mode", "value": "bypass"}),
        )
        .await;
    let (response, _) = maia.response(id).await;
    assert!(error_text(&response).contains(&file), "{response}");
    // Other modes still switch.
    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "read-only"}),
        )
        .await;
    let (response, _) = maia.response(id).await;
    assert!(response["error"].is_null(), "{response}");
    // `/context` shows the policy.
    let (_, messages) = maia.turn(&sid, "/context").await;
    let text = agent_text(&messages);
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

    let id = maia
        .request(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "value": "big"}),
        )
        .await;
    let (response, _) = maia.response(id).await;
    assert!(error_text(&response).contains(&file), "{response}");
    let (_, messages) = maia.turn(&sid, "/model big").await;
    let text = agent_text(&messages);
    assert!(text.contains(&file), "{text}");
    // The request goes to the allowed model.
    maia.mock.push(mock::text_reply("hi"));
    maia.turn(&sid, "hello").await;
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
    let (_, messages) = maia
        .tool_turn(
            &sid,
            &[("c1", "Bash", json!({"command": "touch made.txt"}))],
            |_| None,
        )
        .await;
    assert!(permission_requests(&messages).is_empty());
    assert!(
        !maia.path("made.txt").exists(),
        "the policy hook did not block"
    );
    let results = crate::harness::last_tool_results(&maia);
    assert!(
        results
            .iter()
            .any(|r| r.contains("blocked by the policy hook")),
        "{results:?}"
    );
    // A new session reads the project's hooks: still not run.
    let sid = maia.new_session().await;
    maia.tool_turn(
        &sid,
        &[("c2", "Bash", json!({"command": "touch other.txt"}))],
        |_| None,
    )
    .await;
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
    let run = run_maia(
        home.path(),
        cwd.path(),
        &["exec", "--mode", "bypass", "hello"],
        &env,
        "",
    )
    .await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("--mode bypass") && run.stderr.contains(&env_file),
        "{}",
        run.stderr
    );
    let run = run_maia(
        home.path(),
        cwd.path(),
        &["--model", "big", "exec", "hello"],
        &env,
        "",
    )
    .await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("`big`") && run.stderr.contains(&env_file),
        "{}",
        run.stderr
    );
}
