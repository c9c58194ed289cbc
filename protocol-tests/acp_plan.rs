//! Plan mode (`ExitPlanMode` and its question), "Reject and tell MAIA why"
//! through a form, and `/review`: read-only tool sets, mode switches and
//! reasons that reach the model.

use std::path::Path;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, content_text, tool_results, updates_of};

/// The names of the tools offered in model request `index`.
fn offered(maia: &Maia, index: usize) -> Vec<String> {
    maia.mock.requests()[index]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn set_mode(maia: &mut Maia, sid: &str, mode: &str) {
    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": mode}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
}

/// A session in the plan mode of a client with `caps`.
async fn planning(caps: Value) -> (Maia, String) {
    let mut maia = Maia::start().await;
    maia.initialize_with(caps).await;
    let sid = maia.new_session().await;
    set_mode(&mut maia, &sid, "plan").await;
    (maia, sid)
}

const PLAN: &str = "## Plan\n\n1. Write `a.txt` with `hello`.\n2. Check it.";

/// Scripts: `ExitPlanMode {PLAN}`, then a Write of `a.txt`, then "done";
/// prompts and answers the plan question with `option` (other agent
/// requests are recorded and left unanswered). Returns the response, what
/// came before, and the agent requests seen.
async fn plan_turn(
    maia: &mut Maia,
    sid: &str,
    option: &'static str,
) -> (Value, Vec<Value>, Vec<Value>) {
    let file = maia.path("a.txt");
    maia.mock.push(mock::tool_calls_reply(&[(
        "p1",
        "ExitPlanMode",
        json!({"plan": PLAN}),
    )]));
    maia.mock.push(mock::tool_calls_reply(&[(
        "w1",
        "Write",
        json!({"file_path": file, "content": "hello\n"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(sid, "add a.txt").await;
    let mut asked = Vec::new();
    let (resp, before) = maia
        .response_with(id, |m| {
            asked.push(m.clone());
            let is_plan = m["params"]["toolCall"]["title"] == "Ready to code?";
            (m["method"] == "session/request_permission" && is_plan)
                .then(|| json!({"outcome": {"outcome": "selected", "optionId": option}}))
        })
        .await;
    (resp, before, asked)
}

#[tokio::test]
async fn an_approved_plan_switches_the_mode_and_the_next_edit_runs() {
    let (mut maia, sid) = planning(json!({"plan": {}})).await;
    let (resp, before, asked) = plan_turn(&mut maia, &sid, "accept-edits").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");

    // Planning offers the read-only tools (a read-only Task too) and
    // ExitPlanMode only.
    assert_eq!(
        offered(&maia, 0),
        [
            "Read",
            "Glob",
            "Grep",
            "WebFetch",
            "TodoWrite",
            "AskUser",
            "TaskOutput",
            "ExitPlanMode",
            // A subagent, read-only like its parent.
            "Task"
        ]
    );
    let system = content_text(&maia.mock.requests()[0]["messages"][0]);
    assert!(system.contains("plan mode"), "{system}");

    // One question: the whole plan, the three answers of claude-agent-acp.
    assert_eq!(asked.len(), 1, "the Write was not asked: {asked:?}");
    let question = &asked[0]["params"];
    assert_eq!(question["toolCall"]["content"][0]["content"]["text"], PLAN);
    let options: Vec<(String, String, String)> = question["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["optionId"].as_str().unwrap().to_owned(),
                o["name"].as_str().unwrap().to_owned(),
                o["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("accept-edits", "Yes, and accept edits", "allow_always"),
        ("default", "Yes, ask before edits", "allow_once"),
        ("plan", "No, keep planning", "reject_once"),
    ]
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()));
    assert_eq!(options, expected);

    // The plan as Markdown for a client that takes plans.
    let plans = updates_of(&before, "plan_update");
    assert_eq!(plans.len(), 1, "{before:?}");
    assert_eq!(plans[0]["plan"]["type"], "markdown");
    assert_eq!(plans[0]["plan"]["content"], PLAN);

    // The mode switched, both ways the client tracks it.
    let modes = updates_of(&before, "current_mode_update");
    assert_eq!(modes.len(), 1, "{before:?}");
    assert_eq!(modes[0]["currentModeId"], "accept-edits");
    let options = updates_of(&before, "config_option_update");
    assert!(
        options.last().unwrap()["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["id"] == "mode" && o["currentValue"] == "accept-edits"),
        "{options:?}"
    );

    // The turn went on with every tool, and the edit ran.
    assert!(tool_results(&maia, 1)[0].contains("approved the plan"));
    assert!(offered(&maia, 1).contains(&"Write".to_owned()));
    assert!(!offered(&maia, 1).contains(&"ExitPlanMode".to_owned()));
    assert_eq!(
        std::fs::read_to_string(maia.path("a.txt")).unwrap(),
        "hello\n"
    );
}

#[tokio::test]
async fn keep_planning_keeps_the_mode_and_nothing_is_written() {
    let (mut maia, sid) = planning(json!({})).await;
    let (resp, before, asked) = plan_turn(&mut maia, &sid, "plan").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    // Without the `plan` capability the plan is in the question only.
    assert!(updates_of(&before, "plan_update").is_empty());
    assert!(updates_of(&before, "current_mode_update").is_empty());
    assert!(tool_results(&maia, 1)[0].contains("keep planning"));
    // The Write the model tried anyway is not offered and does not run.
    assert!(!offered(&maia, 1).contains(&"Write".to_owned()));
    assert!(!maia.path("a.txt").exists());
    maia.mock.push(mock::text_reply("still planning"));
    maia.turn(&sid, "again").await;
    assert!(offered(&maia, 3).contains(&"ExitPlanMode".to_owned()));
}

/// A Bash call asked in the default mode of a client with `caps`, answered
/// with `option`; the form (if any) answered with `form`. Returns the
/// permission options, the forms asked and the model's tool result.
async fn rejected_with(
    caps: Value,
    option: &'static str,
    form: Value,
) -> (Vec<String>, Vec<Value>, String) {
    let mut maia = Maia::start().await;
    maia.initialize_with(caps).await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({"command": "npm install"}),
    )]));
    maia.mock.push(mock::text_reply("I will use yarn"));
    let id = maia.prompt(&sid, "install").await;
    let mut options = Vec::new();
    let mut forms = Vec::new();
    let mut call_id = Value::Null;
    let (resp, _) = maia
        .response_with(id, |m| {
            if m["method"] == "elicitation/create" {
                let mut params = m["params"].clone();
                params["sameCall"] = json!(params["toolCallId"] == call_id);
                forms.push(params);
                return Some(form.clone());
            }
            call_id = m["params"]["toolCall"]["toolCallId"].clone();
            options = m["params"]["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["optionId"].as_str().unwrap().to_owned())
                .collect();
            Some(json!({"outcome": {"outcome": "selected", "optionId": option}}))
        })
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(maia.mock.requests().len(), 2, "the turn goes on");
    (options, forms, tool_results(&maia, 1).remove(0))
}

#[tokio::test]
async fn reject_with_a_reason_through_a_form_reaches_the_model() {
    let (options, forms, told) = rejected_with(
        json!({"elicitation": {"form": {}}}),
        "reject_with_reason",
        json!({"action": "accept", "content": {"reason": "use yarn instead"}}),
    )
    .await;
    assert_eq!(
        options,
        [
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_with_reason",
            "reject_always"
        ],
    );
    assert_eq!(forms.len(), 1);
    assert_eq!(forms[0]["mode"], "form");
    assert_eq!(forms[0]["sameCall"], true, "{}", forms[0]);
    assert_eq!(forms[0]["requestedSchema"]["required"], json!(["reason"]));
    assert!(
        told.starts_with("The user rejected this: use yarn instead."),
        "{told}"
    );

    // A declined form is a plain rejection.
    let (_, forms, told) = rejected_with(
        json!({"elicitation": {"form": {}}}),
        "reject_with_reason",
        json!({"action": "decline"}),
    )
    .await;
    assert_eq!(forms.len(), 1);
    assert!(told.starts_with("The user refused"), "{told}");
}

#[tokio::test]
async fn without_forms_no_reason_option_and_plain_reject_is_unchanged() {
    let (options, forms, told) = rejected_with(json!({}), "reject_once", json!({})).await;
    assert!(
        !options.contains(&"reject_with_reason".to_owned()),
        "{options:?}"
    );
    assert!(forms.is_empty());
    assert!(told.starts_with("The user refused"), "{told}");
}

fn git(cwd: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(cwd)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[tokio::test]
async fn review_sends_staged_unstaged_and_new_files_with_read_only_tools() {
    let (mut maia, sid) = Maia::ready().await;
    let cwd = maia.cwd();
    git(&cwd, &["init", "-q"]);
    std::fs::write(cwd.join("staged.txt"), "one\n").unwrap();
    std::fs::write(cwd.join("unstaged.txt"), "alpha\n").unwrap();
    std::fs::write(cwd.join(".gitignore"), ".maia/\n").unwrap();
    git(&cwd, &["add", "."]);
    git(&cwd, &["commit", "-q", "-m", "base"]);
    std::fs::write(cwd.join("staged.txt"), "one\nSTAGED_LINE\n").unwrap();
    git(&cwd, &["add", "staged.txt"]);
    std::fs::write(cwd.join("unstaged.txt"), "alpha\nUNSTAGED_LINE\n").unwrap();
    std::fs::write(cwd.join("brand_new.txt"), "NEW_FILE_LINE\n").unwrap();

    maia.mock.push(mock::text_reply(
        "- [staged.txt:2](staged.txt#L2) **low** — fine",
    ));
    let (resp, before) = maia.turn(&sid, "/review").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let request = &maia.mock.requests()[0];
    let sent = content_text(request["messages"].as_array().unwrap().last().unwrap());
    for line in [
        "+STAGED_LINE",
        "+UNSTAGED_LINE",
        "+NEW_FILE_LINE",
        "brand_new.txt",
    ] {
        assert!(sent.contains(line), "{line} missing from {sent}");
    }
    assert!(
        sent.contains("#LLINE"),
        "findings as openable locations: {sent}"
    );
    assert_eq!(
        offered(&maia, 0),
        [
            "Read",
            "Glob",
            "Grep",
            "WebFetch",
            "TodoWrite",
            "AskUser",
            "TaskOutput",
            "Task"
        ]
    );
    assert!(crate::harness::agent_text(&before).contains("staged.txt:2"));
    // The finding as a location the editor can open.
    let found: Vec<Value> = updates_of(&before, "tool_call")
        .into_iter()
        .filter(|c| c["title"] == "Review findings (1)")
        .collect();
    assert_eq!(found.len(), 1, "{before:?}");
    assert_eq!(found[0]["status"], "completed");
    assert_eq!(
        found[0]["locations"],
        json!([{"path": cwd.join("staged.txt"), "line": 2}])
    );

    // The next turn has every tool again.
    maia.mock.push(mock::text_reply("ok"));
    maia.turn(&sid, "thanks").await;
    assert!(offered(&maia, 1).contains(&"Bash".to_owned()));

    // `/review main` against a branch: the commits since the base.
    git(&cwd, &["branch", "-M", "main"]);
    git(&cwd, &["checkout", "-q", "-b", "feature"]);
    git(&cwd, &["add", "."]);
    git(&cwd, &["commit", "-q", "-m", "feature work"]);
    maia.mock.push(mock::text_reply("no findings"));
    maia.turn(&sid, "/review main").await;
    let sent = content_text(
        maia.mock.requests()[2]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
    );
    assert!(
        sent.contains("against `main`") && sent.contains("+NEW_FILE_LINE"),
        "{sent}"
    );
}
