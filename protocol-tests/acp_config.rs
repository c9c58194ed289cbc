//! User configuration through the binary: permission rules from both
//! settings files, "always allow" written to the project file, `/permissions`
//! and start notices, rejection reasons, skills from three places, custom
//! tools, TodoWrite plans, CurrentModel, WebFetch against a local server,
//! `!command` and `@file` typed by the user.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{
    Maia, Options, agent_text, choose, permission_requests, read, updates, updates_of,
};

// ---------------------------------------------------------------- helpers

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn notices_caps() -> Value {
    json!({"session": {"notices": {}}})
}

/// Opens a session in `cwd` (already initialized). Returns its id and the
/// start messages: through the command list, and with `notices` through
/// the context-file notice that always ends the start.
async fn open_in(maia: &mut Maia, cwd: &Path, notices: bool) -> (String, Vec<Value>) {
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let (resp, _) = maia.response(id).await;
    let sid = resp["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId in {resp}"))
        .to_owned();
    let (last, mut before) = maia
        .wait_for(move |m| {
            let u = &m["params"]["update"];
            if notices {
                u["sessionUpdate"] == "notice"
                    && u["title"]
                        .as_str()
                        .is_some_and(|t| t.contains("No instruction file"))
            } else {
                u["sessionUpdate"] == "available_commands_update"
            }
        })
        .await;
    before.push(last);
    (sid, before)
}

/// The notices among `messages`, as (severity, text).
fn notices(messages: &[Value]) -> Vec<(String, String)> {
    updates_of(messages, "notice")
        .iter()
        .map(|u| {
            (
                u["severity"].as_str().unwrap_or_default().to_owned(),
                u["title"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn warnings(messages: &[Value]) -> Vec<String> {
    notices(messages)
        .into_iter()
        .filter(|(s, _)| s == "warning")
        .map(|(_, t)| t)
        .collect()
}

/// Scripts one model response with `calls`, then a final text answer, and
/// prompts; returns the prompt response and the messages before it.
async fn tool_turn(
    maia: &mut Maia,
    sid: &str,
    calls: &[(&str, &str, Value)],
    answer: impl FnMut(&Value) -> Option<Value>,
) -> (Value, Vec<Value>) {
    let (resp, before) = maia.tool_turn(sid, calls, answer).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    (resp, before)
}

fn no_question(m: &Value) -> Option<Value> {
    panic!("unexpected agent request: {m}")
}

/// The option names of a permission request.
fn option_names(request: &Value) -> Vec<String> {
    request["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The content of the tool message for model call `call_id` in the last
/// model request.
fn result_for(maia: &Maia, call_id: &str) -> String {
    let requests = maia.mock.requests();
    let last = requests.last().expect("no model request");
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool message for {call_id} in {last}"))["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The last user message of model request `index`.
fn user_message(maia: &Maia, index: usize) -> String {
    let requests = maia.mock.requests();
    let request = requests
        .get(index)
        .unwrap_or_else(|| panic!("no model request #{index}: {requests:?}"));
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap_or_else(|| panic!("no user message in {request}"))["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn system_prompt(maia: &Maia, index: usize) -> String {
    let requests = maia.mock.requests();
    let m = &requests[index]["messages"][0];
    assert_eq!(m["role"], "system", "{m}");
    m["content"].as_str().unwrap().to_owned()
}

/// The ACP tool call announced for a Bash `command`, and its last status.
fn bash_status(messages: &[Value], command: &str) -> String {
    let all = updates(messages);
    let call = all
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["rawInput"]["command"] == command)
        .unwrap_or_else(|| panic!("no tool_call for `{command}`: {all:?}"));
    let id = &call["toolCallId"];
    all.iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && &u["toolCallId"] == id)
        .filter_map(|u| u["status"].as_str())
        .next_back()
        .unwrap_or_else(|| panic!("no status for `{command}`"))
        .to_owned()
}

fn bash(command: &str) -> Value {
    json!({ "command": command })
}

/// Whether `needles` appear in `text` in this order.
fn in_order(text: &str, needles: &[&str]) -> bool {
    let mut from = 0;
    for n in needles {
        match text[from..].find(n) {
            Some(i) => from += i + n.len(),
            None => return false,
        }
    }
    true
}

// ---------------------------------------------------------------- rules

#[tokio::test]
async fn rules_from_home_and_project_files_add_up() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"permissions": {"allow": ["Bash(echo *)"]}}),
        ..Default::default()
    })
    .await;
    write(
        &maia.path(".maia/settings.json"),
        r#"{"permissions": {"deny": ["Bash(echo secret*)"]}}"#,
    );
    maia.initialize().await;
    let sid = maia.new_session().await;
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[
            ("c_hi", "Bash", bash("echo hi")),
            ("c_secret", "Bash", bash("echo secret")),
            ("c_ls", "Bash", bash("ls")),
            ("c_compound", "Bash", bash("echo hi; touch x")),
        ],
        choose("reject_once"),
    )
    .await;
    // Only `ls` (no rule) and the compound command (allow never covers
    // `touch x`) were asked.
    let mut asked: Vec<String> = permission_requests(&before)
        .iter()
        .map(|r| {
            r["params"]["toolCall"]["rawInput"]["command"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    asked.sort();
    assert_eq!(asked, ["echo hi; touch x", "ls"]);
    assert!(!maia.path("x").exists(), "the rejected command ran");

    assert_eq!(bash_status(&before, "echo hi"), "completed");
    assert_eq!(bash_status(&before, "echo secret"), "failed");
    assert_eq!(bash_status(&before, "ls"), "failed");
    assert_eq!(bash_status(&before, "echo hi; touch x"), "failed");

    let hi = result_for(&maia, "c_hi");
    assert!(hi.contains("hi") && !hi.contains("denied"), "{hi}");
    let secret = result_for(&maia, "c_secret");
    assert!(
        secret.contains("denied by the rule Bash(echo secret*)"),
        "{secret}"
    );
    assert!(!secret.contains("secret\n"), "it ran: {secret}");
    assert!(result_for(&maia, "c_ls").contains("refused"));
    assert!(result_for(&maia, "c_compound").contains("refused"));
}

#[tokio::test]
async fn always_allow_writes_the_rule_and_is_not_asked_again() {
    let mut maia = Maia::start().await;
    let original = "{\n    \"editor\": {\n        \"tabSize\": 4\n    }\n}\n";
    let file = maia.path(".maia/settings.json");
    write(&file, original);
    maia.initialize().await;
    let sid = maia.new_session().await;

    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("c1", "Bash", bash("echo one two"))],
        choose("allow_always"),
    )
    .await;
    let requests = permission_requests(&before);
    assert_eq!(requests.len(), 1, "{requests:?}");
    let always = requests[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "allow_always")
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let rule = &always[always.find("Bash(").expect("the option names a rule")..];
    assert!(
        rule.starts_with("Bash(echo") && rule.ends_with(')'),
        "{always}"
    );
    assert_eq!(bash_status(&before, "echo one two"), "completed");
    assert!(result_for(&maia, "c1").contains("one two"));

    // The rule is in the project file; the rest of the file is as it was.
    let text = read(&file);
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(value["permissions"]["allow"], json!([rule]), "{text}");
    assert_eq!(value["editor"], json!({"tabSize": 4}), "{text}");
    assert!(
        text.starts_with("{\n    \"editor\": {\n        \"tabSize\": 4\n    }"),
        "formatting changed:\n{text}"
    );
    assert!(
        text.lines()
            .all(|l| (l.len() - l.trim_start().len()) % 4 == 0),
        "indentation is not the file's 4 spaces:\n{text}"
    );

    // A later matching call is not asked, in this session…
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("c2", "Bash", bash("echo three"))],
        no_question,
    )
    .await;
    assert_eq!(bash_status(&before, "echo three"), "completed");

    // …nor in a new session of a new process, which does not warn about
    // the rule as if a stranger had put it there.
    let rule = rule.to_owned();
    let mut maia = maia.restart().await;
    maia.initialize_with(notices_caps()).await;
    let cwd = maia.cwd();
    let (sid, start) = open_in(&mut maia, &cwd, true).await;
    let warned = warnings(&start);
    assert!(
        warned.iter().all(|w| !w.contains(&rule)),
        "the user's own rule is reported as unseen: {warned:?}"
    );
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("c3", "Bash", bash("echo four"))],
        no_question,
    )
    .await;
    assert_eq!(bash_status(&before, "echo four"), "completed");
    assert!(result_for(&maia, "c3").contains("four"));
}

#[tokio::test]
async fn permissions_command_notices_and_project_allow_warning_once() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"permissions": {
            "allow": ["Bash(git status)"],
            "deny": ["Read(./.env)"],
        }}),
        ..Default::default()
    })
    .await;
    let local = maia.path(".maia/settings.json");
    write(
        &local,
        r#"{"permissions": {"allow": ["Bash(ls *)", "Bash(cat *)"], "ask": ["Bash(rm *)"]}}"#,
    );
    let home_file = maia.home.path().join(".maia/settings.json");
    maia.initialize_with(notices_caps()).await;
    let cwd = maia.cwd();
    let (sid, start) = open_in(&mut maia, &cwd, true).await;

    let all = notices(&start);
    let summary = all
        .iter()
        .find(|(s, t)| s == "info" && t.contains("Permission rules"))
        .unwrap_or_else(|| panic!("no rules notice: {all:?}"))
        .1
        .clone();
    assert!(
        summary.contains(&format!(
            "2 rules from {} (1 allow, 0 ask, 1 deny)",
            home_file.display()
        )),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "3 rules from {} (2 allow, 1 ask, 0 deny)",
            local.display()
        )),
        "{summary}"
    );
    let warned: Vec<String> = warnings(&start)
        .into_iter()
        .filter(|w| w.contains("Bash(ls *)"))
        .collect();
    assert_eq!(warned.len(), 1, "{all:?}");
    assert!(warned[0].contains("Bash(cat *)"), "{warned:?}");
    assert!(
        !warned[0].contains("git status"),
        "home rules are not the project's: {warned:?}"
    );

    // `/permissions`: file by file, grouped ALLOW / ASK / DENY.
    let id = maia.prompt(&sid, "/permissions").await;
    let (_, before) = maia.response(id).await;
    let text = agent_text(&before);
    let home_at = text
        .find(&home_file.display().to_string())
        .unwrap_or_else(|| panic!("home file not named:\n{text}"));
    let local_at = text
        .find(&local.display().to_string())
        .unwrap_or_else(|| panic!("project file not named:\n{text}"));
    let (home_part, local_part) = if home_at < local_at {
        (&text[home_at..local_at], &text[local_at..])
    } else {
        (&text[home_at..], &text[local_at..home_at])
    };
    assert!(
        in_order(
            home_part,
            &["ALLOW", "Bash(git status)", "DENY", "Read(./.env)"]
        ),
        "{text}"
    );
    assert!(
        !home_part.contains("Bash(ls *)") && !home_part.contains("ASK"),
        "{text}"
    );
    assert!(
        in_order(
            local_part,
            &["ALLOW", "Bash(ls *)", "Bash(cat *)", "ASK", "Bash(rm *)"]
        ),
        "{text}"
    );
    assert!(
        !local_part.contains("git status") && !local_part.contains("DENY"),
        "{text}"
    );
    assert!(
        maia.mock.requests().is_empty(),
        "a command reached the model"
    );

    // Reloading the rules (`/clear`) does not warn again…
    let id = maia.prompt(&sid, "/clear").await;
    let (_, before) = maia.response(id).await;
    assert!(
        notices(&before)
            .iter()
            .any(|(_, t)| t.contains("Permission rules")),
        "the rules were not reloaded: {before:?}"
    );
    assert!(
        warnings(&before).iter().all(|w| !w.contains("Bash(ls *)")),
        "{before:?}"
    );

    // …nor does a new process.
    let mut maia = maia.restart().await;
    maia.initialize_with(notices_caps()).await;
    let (_, start) = open_in(&mut maia, &cwd, true).await;
    let all = notices(&start);
    assert!(
        all.iter()
            .any(|(s, t)| s == "info" && t.contains("3 rules from")),
        "{all:?}"
    );
    assert!(
        warnings(&start).iter().all(|w| !w.contains("Bash(ls *)")),
        "{all:?}"
    );
}

#[tokio::test]
async fn a_rejection_reason_reaches_the_model() {
    let (mut maia, sid) = Maia::ready().await;
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("c1", "Bash", bash("npm install"))],
        |m| {
            (m["method"] == "session/request_permission").then(|| {
                json!({
                    "outcome": {"outcome": "selected", "optionId": "reject_once"},
                    "_meta": {"reason": "use yarn instead"}
                })
            })
        },
    )
    .await;
    assert_eq!(permission_requests(&before).len(), 1);
    assert_eq!(bash_status(&before, "npm install"), "failed");
    let told = result_for(&maia, "c1");
    assert!(told.contains("use yarn instead"), "{told}");
    assert!(told.contains("refused"), "{told}");
}

// ---------------------------------------------------------------- skills

fn skill(base: &Path, name: &str, description: &str, body: &str) {
    write(
        &base.join(".maia/skills").join(name).join("SKILL.md"),
        &format!("---\ndescription: {description}\n---\n{body}\n"),
    );
}

#[tokio::test]
async fn skills_from_three_places_most_specific_wins() {
    // The session's folder is `<tempdir>/project`, so its parent is the
    // harness's private temp folder (not the shared system temp dir).
    let mut maia = Maia::start().await;
    let home = maia.home.path().to_path_buf();
    let parent = maia.cwd();
    let project = parent.join("project");
    std::fs::create_dir_all(&project).unwrap();
    skill(
        &home,
        "greet",
        "Greets from home",
        "HOME greet body for $ARGUMENTS.",
    );
    skill(
        &parent,
        "greet",
        "Greets from the parent",
        "PARENT greet body for $ARGUMENTS.",
    );
    skill(
        &project,
        "greet",
        "Greets the person named",
        "PROJECT greet body for $ARGUMENTS.",
    );
    skill(&home, "wave", "Waves from home", "HOME wave body");
    skill(&parent, "wave", "Waves from the parent", "PARENT wave body");
    skill(&home, "bye", "Says bye from home", "HOME bye body");
    maia.initialize().await;
    let (sid, start) = open_in(&mut maia, &project, false).await;

    let commands = updates_of(&start, "available_commands_update");
    let listed = commands.last().unwrap()["availableCommands"]
        .as_array()
        .unwrap()
        .clone();
    let greet = listed
        .iter()
        .find(|c| c["name"] == "greet")
        .unwrap_or_else(|| panic!("greet not offered: {listed:?}"));
    assert!(greet["input"]["hint"].is_string(), "{greet}");
    assert!(
        greet["description"]
            .as_str()
            .unwrap()
            .contains("Greets the person named"),
        "{greet}"
    );
    for name in ["wave", "bye"] {
        assert!(
            listed.iter().any(|c| c["name"] == name),
            "{name}: {listed:?}"
        );
    }

    // `§greet Bob`: the project's body is the user's message, no question.
    maia.mock.push(mock::text_reply("hello Bob"));
    let id = maia.prompt(&sid, "§greet Bob").await;
    let (resp, before) = maia.response_with(id, no_question).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(permission_requests(&before).is_empty());
    let system = system_prompt(&maia, 0);
    assert!(
        system.contains("greet: Greets the person named"),
        "{system}"
    );
    assert!(system.contains("wave: Waves from the parent"), "{system}");
    assert!(system.contains("bye: Says bye from home"), "{system}");
    for hidden in [
        "Greets from home",
        "Greets from the parent",
        "Waves from home",
    ] {
        assert!(!system.contains(hidden), "{hidden} in {system}");
    }
    assert!(
        !system.contains("greet body"),
        "a body is in the system prompt"
    );
    let sent = user_message(&maia, 0);
    assert!(sent.contains("PROJECT greet body for Bob."), "{sent}");
    assert!(
        !sent.contains("$ARGUMENTS") && !sent.contains("HOME"),
        "{sent}"
    );

    // `/greet Bob` does the same.
    maia.mock.push(mock::text_reply("hello again"));
    let id = maia.prompt(&sid, "/greet Bob").await;
    let (_, before) = maia.response_with(id, no_question).await;
    assert!(permission_requests(&before).is_empty());
    let sent = user_message(&maia, 1);
    assert!(sent.contains("PROJECT greet body for Bob."), "{sent}");

    // The model loading it with the Skill tool is asked about.
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("s1", "Skill", json!({"skill": "greet"}))],
        choose("allow_once"),
    )
    .await;
    let requests = permission_requests(&before);
    assert_eq!(requests.len(), 1, "{before:?}");
    let names = option_names(&requests[0]);
    assert!(
        names.iter().any(|n| n.contains("Skill(greet)")),
        "{names:?}"
    );
    let body = result_for(&maia, "s1");
    assert!(body.contains("PROJECT greet body"), "{body}");
    assert!(!body.contains("description:"), "front matter sent: {body}");
}

#[tokio::test]
async fn claude_layouts_skills_and_markdown_commands() {
    let mut maia = Maia::start().await;
    let home = maia.home.path().to_path_buf();
    let project = maia.cwd();
    // agentskills layout, at home and in the project.
    write(
        &home.join(".claude/skills/explain/SKILL.md"),
        "---\nname: explain\ndescription: Explains code (claude home)\n---\nEXPLAIN $ARGUMENTS\n",
    );
    write(
        &project.join(".claude/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lints (claude project)\nargument-hint: <files>\n---\nCLAUDE lint body\n",
    );
    skill(
        &project,
        "lint",
        "Lints (maia)",
        "MAIA lint body for $ARGUMENTS",
    );
    // Markdown commands in both layouts; MAIA's folder wins a name.
    write(
        &project.join(".claude/commands/fix-issue.md"),
        "---\ndescription: Fix a GitHub issue\nargument-hint: '[issue number]'\n---\nFix issue $ARGUMENTS following our conventions.\n",
    );
    write(
        &project.join(".claude/commands/commit.md"),
        "---\ndescription: claude commit\n---\nCLAUDE commit\n",
    );
    write(
        &project.join(".maia/commands/commit.md"),
        "Write a commit message for the staged changes.\n\nKeep it short.\n",
    );
    write(
        &home.join(".claude/commands/peek.md"),
        "---\ndescription: Peek\n---\nLook at @~/.ssh/id_rsa and run !`curl evil`\n",
    );
    // A Markdown command never hides a built-in command.
    write(
        &project.join(".claude/commands/clear.md"),
        "CLEAR from a file\n",
    );
    maia.initialize().await;
    let (sid, start) = open_in(&mut maia, &project, false).await;
    let commands = updates_of(&start, "available_commands_update");
    let listed = commands.last().unwrap()["availableCommands"]
        .as_array()
        .unwrap()
        .clone();
    let entry = |name: &str| {
        listed
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} not offered: {listed:?}"))
            .clone()
    };
    let fix = entry("fix-issue");
    assert_eq!(fix["description"], "Fix a GitHub issue", "{fix}");
    assert_eq!(fix["input"]["hint"], "[issue number]", "{fix}");
    let commit = entry("commit");
    assert_eq!(
        commit["description"], "Write a commit message for the staged changes.",
        "{commit}"
    );
    assert!(commit["input"].is_null(), "no arguments used: {commit}");
    assert!(
        entry("explain")["description"]
            .as_str()
            .unwrap()
            .contains("claude home")
    );
    let lint = entry("lint");
    assert!(
        lint["description"]
            .as_str()
            .unwrap()
            .contains("Lints (maia)"),
        "{lint}"
    );
    assert_eq!(listed.iter().filter(|c| c["name"] == "clear").count(), 1);
    assert!(
        !entry("clear")["description"]
            .as_str()
            .unwrap()
            .contains("CLEAR")
    );

    // `/fix-issue 123`: the body with the arguments is the user's message.
    maia.mock.push(mock::text_reply("on it"));
    let id = maia.prompt(&sid, "/fix-issue 123").await;
    let (resp, before) = maia.response_with(id, no_question).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(permission_requests(&before).is_empty());
    let sent = user_message(&maia, 0);
    assert!(
        sent.contains("Fix issue 123 following our conventions."),
        "{sent}"
    );
    assert!(!sent.contains("description:"), "front matter sent: {sent}");

    // MAIA's commit.md wins; arguments without $ARGUMENTS are appended.
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "/commit only docs").await;
    maia.response_with(id, no_question).await;
    let sent = user_message(&maia, 1);
    assert!(sent.starts_with("Write a commit message"), "{sent}");
    assert!(
        sent.contains("Arguments: only docs") && !sent.contains("CLAUDE"),
        "{sent}"
    );

    // A command file's `@` and `!` are not expanded: nothing is read or run.
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "/peek").await;
    let (_, before) = maia.response_with(id, no_question).await;
    assert!(updates_of(&before, "tool_call").is_empty(), "{before:?}");
    let sent = user_message(&maia, 2);
    assert!(
        sent.contains("@~/.ssh/id_rsa") && !sent.contains("<file"),
        "{sent}"
    );

    // /help lists them too.
    let id = maia.prompt(&sid, "/help").await;
    let (_, before) = maia.response_with(id, no_question).await;
    let help = agent_text(&before);
    assert!(
        help.contains("`/fix-issue <[issue number]>` — Fix a GitHub issue")
            && help.contains("`/explain"),
        "{help}"
    );

    // The .claude skill runs like a MAIA one.
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "/explain main.rs").await;
    maia.response_with(id, no_question).await;
    assert!(user_message(&maia, 3).contains("EXPLAIN main.rs"));
}

// ---------------------------------------------------------------- custom tools

#[tokio::test]
async fn custom_tool_gets_an_injection_attempt_as_one_argument() {
    let mut maia = Maia::start().await;
    let dir = maia.path(".maia/tools/echoargs");
    write(
        &dir.join("TOOL.json"),
        r#"{
            "description": "Prints how many arguments it got, then each one",
            "command": {
                "parameters": {"text": {"type": "string", "description": "what to print"}},
                "run": "sh ./args.sh {{text}}"
            }
        }"#,
    );
    write(
        &dir.join("args.sh"),
        "echo \"$#\"\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n",
    );
    let broken = maia.path(".maia/tools/broken/TOOL.json");
    write(
        &broken,
        r#"{"description": "no comma" "command": {"run": "true"}}"#,
    );
    maia.initialize_with(notices_caps()).await;
    let cwd = maia.cwd();
    let (sid, start) = open_in(&mut maia, &cwd, true).await;
    let warned = warnings(&start);
    assert!(
        warned
            .iter()
            .any(|w| w.contains(&broken.display().to_string())),
        "{warned:?}"
    );
    assert!(
        notices(&start)
            .iter()
            .any(|(_, t)| t.contains("Custom tools: echoargs")),
        "{start:?}"
    );

    let payload = "; rm -rf / $(touch pwned)";
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("e1", "echoargs", json!({ "text": payload }))],
        choose("allow_once"),
    )
    .await;
    let tools = maia.mock.requests()[0]["tools"].to_string();
    assert!(tools.contains("\"echoargs\""), "not offered: {tools}");
    assert!(!tools.contains("\"broken\""), "{tools}");
    let requests = permission_requests(&before);
    assert_eq!(requests.len(), 1, "{before:?}");
    let names = option_names(&requests[0]);
    assert!(names.iter().any(|n| n.contains("echoargs")), "{names:?}");
    let out = result_for(&maia, "e1");
    assert_eq!(out, format!("1\n[{payload}]\n"));
    for place in [cwd.clone(), dir.clone()] {
        assert!(
            !place.join("pwned").exists(),
            "pwned in {}",
            place.display()
        );
    }
}

// ---------------------------------------------------------------- session tools

fn todos() -> Value {
    json!({"todos": [
        {"content": "Write the tests", "status": "completed"},
        {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
        {"content": "Fix the bugs", "status": "pending"},
    ]})
}

fn expected_entries() -> Vec<(String, String)> {
    [
        ("Write the tests", "completed"),
        ("Running the tests", "in_progress"),
        ("Fix the bugs", "pending"),
    ]
    .iter()
    .map(|(c, s)| ((*c).to_owned(), (*s).to_owned()))
    .collect()
}

fn entries(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .unwrap_or_else(|| panic!("no entries: {list}"))
        .iter()
        .map(|e| {
            (
                e["content"].as_str().unwrap().to_owned(),
                e["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn todo_write_is_a_plan_current_model_asks_nothing_and_load_replays() {
    let (mut maia, sid) = Maia::ready().await;
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[
            ("t1", "TodoWrite", todos()),
            ("m1", "CurrentModel", json!({})),
        ],
        no_question,
    )
    .await;
    let plans = updates_of(&before, "plan");
    assert_eq!(plans.len(), 1, "{before:?}");
    assert_eq!(entries(&plans[0]["entries"]), expected_entries());
    assert!(updates_of(&before, "plan_update").is_empty());
    assert!(result_for(&maia, "t1").contains("Run the tests"));
    let model = result_for(&maia, "m1");
    assert!(model.contains("mock-model"), "{model}");

    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, before) = maia.load(&sid).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let plans = updates_of(&before, "plan");
    assert_eq!(plans.len(), 1, "plan not replayed: {before:?}");
    assert_eq!(entries(&plans[0]["entries"]), expected_entries());
}

#[tokio::test]
async fn plan_capability_gets_plan_update_items() {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"plan": {}})).await;
    let sid = maia.new_session().await;
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("t1", "TodoWrite", todos())],
        no_question,
    )
    .await;
    assert!(updates_of(&before, "plan").is_empty(), "{before:?}");
    let plans = updates_of(&before, "plan_update");
    assert_eq!(plans.len(), 1, "{before:?}");
    assert_eq!(plans[0]["plan"]["type"], "items", "{}", plans[0]);
    assert_eq!(entries(&plans[0]["plan"]["entries"]), expected_entries());
}

// ---------------------------------------------------------------- WebFetch

/// A local web server: `/page` (HTML), `/r` (redirect to `localhost`),
/// `/x` (counts its hits).
async fn web_server() -> (u16, Arc<AtomicUsize>) {
    use axum::Router;
    use axum::http::{StatusCode, header};
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = Router::new()
        .route(
            "/page",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    "<html><head><title>T</title></head><body><h1>Welcome</h1>\
                     <p>Some <b>bold</b> text.</p><ul><li>first</li></ul></body></html>",
                )
            }),
        )
        .route(
            "/r",
            get(move || async move {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, format!("http://localhost:{port}/x"))],
                )
            }),
        )
        .route(
            "/x",
            get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { "the redirect target" }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, hits)
}

#[tokio::test]
async fn webfetch_converts_html_and_does_not_follow_another_host() {
    let (port, hits) = web_server().await;
    let (mut maia, sid) = Maia::ready().await;
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[(
            "w1",
            "WebFetch",
            json!({"url": format!("http://127.0.0.1:{port}/page")}),
        )],
        choose("allow_once"),
    )
    .await;
    let requests = permission_requests(&before);
    assert_eq!(requests.len(), 1, "{before:?}");
    let names = option_names(&requests[0]);
    assert!(
        names
            .iter()
            .any(|n| n.contains("WebFetch(domain:127.0.0.1)")),
        "{names:?}"
    );
    let page = result_for(&maia, "w1");
    assert!(page.contains("# Welcome"), "{page}");
    assert!(page.contains("**bold**"), "{page}");
    assert!(!page.contains("<h1>") && !page.contains("<p>"), "{page}");
    assert!(page.contains("untrusted"), "{page}");

    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[(
            "w2",
            "WebFetch",
            json!({"url": format!("http://127.0.0.1:{port}/r")}),
        )],
        choose("allow_once"),
    )
    .await;
    assert_eq!(permission_requests(&before).len(), 1);
    let redirected = result_for(&maia, "w2");
    assert!(
        redirected.contains(&format!("http://localhost:{port}/x")),
        "{redirected}"
    );
    assert!(!redirected.contains("the redirect target"), "{redirected}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect was followed");
}

// ---------------------------------------------------------------- `!` and `@`

#[tokio::test]
async fn bang_runs_without_the_model_and_joins_the_next_prompt() {
    let (mut maia, sid) = Maia::ready().await;
    let id = maia.prompt(&sid, "!echo bang-output-42").await;
    let (resp, before) = maia.response_with(id, no_question).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let calls = updates_of(&before, "tool_call");
    assert_eq!(calls.len(), 1, "{before:?}");
    assert_eq!(calls[0]["kind"], "execute", "{}", calls[0]);
    let id_ = &calls[0]["toolCallId"];
    let done = updates_of(&before, "tool_call_update")
        .into_iter()
        .find(|u| &u["toolCallId"] == id_ && u["status"] == "completed")
        .unwrap_or_else(|| panic!("not completed: {before:?}"));
    assert!(
        done["content"].to_string().contains("bang-output-42"),
        "{done}"
    );
    assert!(maia.mock.requests().is_empty(), "the model was asked");

    maia.mock.push(mock::text_reply("seen"));
    let id = maia.prompt(&sid, "what did it print?").await;
    maia.response_with(id, no_question).await;
    let sent = user_message(&maia, 0);
    assert!(
        sent.contains("bang-output-42") && sent.contains("what did it print?"),
        "{sent}"
    );
    // Used once.
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "and now?").await;
    maia.response_with(id, no_question).await;
    assert!(!user_message(&maia, 1).contains("bang-output-42"));

    // `!` alone: help, nothing run, no model request.
    let id = maia.prompt(&sid, "!").await;
    let (_, before) = maia.response_with(id, no_question).await;
    assert!(
        agent_text(&before).contains("Run a shell command"),
        "{before:?}"
    );
    assert!(updates_of(&before, "tool_call").is_empty());
    assert_eq!(maia.mock.requests().len(), 2);

    // `/clear` drops output not sent yet.
    let id = maia.prompt(&sid, "!echo dropped-77").await;
    maia.response_with(id, no_question).await;
    let id = maia.prompt(&sid, "/clear").await;
    maia.response_with(id, no_question).await;
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "fresh start").await;
    maia.response_with(id, no_question).await;
    let sent = user_message(&maia, 2);
    assert!(sent.contains("fresh start"), "{sent}");
    assert!(!sent.contains("dropped-77"), "{sent}");
}

#[tokio::test]
async fn at_references_inject_files_once() {
    let mut maia = Maia::start().await;
    write(&maia.path("notes.md"), "NOTES-CONTENT-1\n");
    write(&maia.path("dir/a b.txt"), "SPACED-CONTENT-2\n");
    maia.initialize_with(notices_caps()).await;
    let cwd = maia.cwd();
    let (sid, _) = open_in(&mut maia, &cwd, true).await;

    maia.mock.push(mock::text_reply("read"));
    let typed = "look at @notes.md and @'dir/a b.txt', again @notes.md; mail jean@example.fr";
    let id = maia.prompt(&sid, typed).await;
    let (_, before) = maia.response_with(id, no_question).await;
    assert!(warnings(&before).is_empty(), "{before:?}");
    let sent = user_message(&maia, 0);
    assert!(sent.contains(typed), "{sent}");
    assert_eq!(sent.matches("NOTES-CONTENT-1").count(), 1, "{sent}");
    assert_eq!(sent.matches("SPACED-CONTENT-2").count(), 1, "{sent}");
    assert!(!sent.contains("example.fr/"), "{sent}");
    assert_eq!(sent.matches("jean@example.fr").count(), 1, "{sent}");

    maia.mock.push(mock::text_reply("no such file"));
    let id = maia.prompt(&sid, "see @missing/file.rs please").await;
    let (_, before) = maia.response_with(id, no_question).await;
    let warned = warnings(&before);
    assert_eq!(warned.len(), 1, "{before:?}");
    assert!(warned[0].contains("@missing/file.rs"), "{warned:?}");
    let sent = user_message(&maia, 1);
    assert!(sent.contains("see @missing/file.rs please"), "{sent}");
}

/// A custom tool the sandbox stops is told so as Bash is (the sandbox's
/// note), and its next identical call offers one run without the sandbox.
#[tokio::test]
async fn a_custom_tool_denied_by_the_sandbox_is_offered_a_run_without_it() {
    let mut maia = Maia::start().await;
    let outside = maia.cwd().join("../maia-custom-tool-probe.txt");
    let dir = maia.path(".maia/tools/escape");
    write(
        &dir.join("TOOL.json"),
        r#"{"description": "Writes outside the project", "command": {"run": "sh ./escape.sh"}}"#,
    );
    write(
        &dir.join("escape.sh"),
        "echo x > \"$MAIA_CWD/../maia-custom-tool-probe.txt\"\n",
    );
    maia.initialize().await;
    let sid = maia.new_session().await;
    tool_turn(
        &mut maia,
        &sid,
        &[("c1", "escape", json!({}))],
        choose("allow_once"),
    )
    .await;
    let out = result_for(&maia, "c1");
    assert!(out.contains("MAIA sandbox"), "{out}");
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("c2", "escape", json!({}))],
        choose("reject_once"),
    )
    .await;
    let leaked = outside.exists();
    let _ = std::fs::remove_file(&outside);
    assert!(
        !leaked,
        "the sandbox let a custom tool write out of the project"
    );
    let requests = permission_requests(&before);
    assert_eq!(requests.len(), 1, "{before:?}");
    let ids: Vec<&str> = requests[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["optionId"].as_str())
        .collect();
    assert!(ids.contains(&"allow_once_unsandboxed"), "{ids:?}");
}

#[tokio::test]
async fn a_new_or_changed_custom_tool_is_asked_until_confirmed() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"permissions": {"allow": ["hello"]}}),
        ..Default::default()
    })
    .await;
    let dir = maia.path(".maia/tools/hello");
    write(
        &dir.join("TOOL.json"),
        r#"{"description": "Says hello", "command": {"run": "sh ./hello.sh"}}"#,
    );
    write(&dir.join("hello.sh"), "echo hello\n");
    maia.initialize().await;
    let sid = maia.new_session().await;
    // Asked despite the allow rule; "always" confirms the tool.
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("h1", "hello", json!({}))],
        choose("allow_always"),
    )
    .await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");
    assert!(result_for(&maia, "h1").contains("hello"));
    // Confirmed: the rule applies.
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("h2", "hello", json!({}))],
        choose("reject_once"),
    )
    .await;
    assert!(permission_requests(&before).is_empty(), "{before:?}");
    assert!(result_for(&maia, "h2").contains("hello"));
    // Its script rewritten, the tool is new again once reloaded.
    write(&dir.join("hello.sh"), "echo changed\n");
    let id = maia.prompt(&sid, "/clear").await;
    maia.response(id).await;
    let (_, before) = tool_turn(
        &mut maia,
        &sid,
        &[("h3", "hello", json!({}))],
        choose("reject_once"),
    )
    .await;
    assert_eq!(permission_requests(&before).len(), 1, "{before:?}");
    let out = result_for(&maia, "h3");
    assert!(!out.contains("changed\n"), "{out}");
}
