//! ACP v2 (the draft) beside v1 (issue 33): `maia acp --protocol-v2`
//! answers a client asking for v2 in v2 and every other client in v1.
//! Every v2 message MAIA sends or accepts here is validated against the
//! draft's JSON schema (`fixtures/acp-v2/`, a copy with its source commit).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, choose};

/// The draft schema's validator for its definition `def`.
fn validator(def: &str) -> Arc<jsonschema::Validator> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap().get(def) {
        return v.clone();
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../protocol-tests/fixtures/acp-v2/schema.json");
    let mut root: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let object = root.as_object_mut().unwrap();
    object.remove("anyOf");
    object.insert("$ref".into(), json!(format!("#/$defs/{def}")));
    let built = Arc::new(jsonschema::options().build(&root).unwrap());
    cache.lock().unwrap().insert(def.to_owned(), built.clone());
    built
}

/// Fails unless `value` is a valid `def` of the v2 draft.
pub(crate) fn check(def: &str, value: &Value) {
    let errors: Vec<String> = validator(def)
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a valid v2 {def}: {errors:#?}\n{value}"
    );
}

/// Validates a message MAIA sent that is not a response.
pub(crate) fn check_sent(m: &Value) {
    match m["method"].as_str() {
        Some("session/update") => check("UpdateSessionNotification", &m["params"]),
        Some("session/request_permission") => check("RequestPermissionRequest", &m["params"]),
        Some("$/cancel_request") => check("CancelRequestNotification", &m["params"]),
        Some("elicitation/create") => check("CreateElicitationRequest", &m["params"]),
        // MAIA's own extensions (`_…`) are outside the schema.
        Some(method) => assert!(method.starts_with('_'), "a v1-only message on v2: {m}"),
        None => {}
    }
}

fn v2_options() -> Options {
    Options {
        args: vec!["--protocol-v2".into()],
        ..Options::default()
    }
}

fn v2_initialize_params() -> Value {
    json!({"protocolVersion": 2, "info": {"name": "protocol-tests", "version": "1"}, "capabilities": {}})
}

/// A client of MAIA that speaks v2 and checks every message.
pub(crate) struct V2 {
    pub(crate) maia: Maia,
}

impl V2 {
    pub(crate) async fn start() -> V2 {
        Self::start_with(json!({})).await
    }

    /// Starts with the client capabilities `capabilities`.
    async fn start_with(capabilities: Value) -> V2 {
        Self::start_as(v2_options(), capabilities).await
    }

    /// Starts MAIA with `options` (and `--protocol-v2`) and the client
    /// capabilities `capabilities`.
    async fn start_as(mut options: Options, capabilities: Value) -> V2 {
        if !options.args.iter().any(|a| a == "--protocol-v2") {
            options.args.push("--protocol-v2".into());
        }
        let mut maia = Maia::start_with(options).await;
        let mut params = v2_initialize_params();
        params["capabilities"] = capabilities;
        check("InitializeRequest", &params);
        let id = maia.request("initialize", params).await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["result"]["protocolVersion"], 2, "{resp}");
        check("InitializeResponse", &resp["result"]);
        V2 { maia }
    }

    pub(crate) async fn call(&mut self, method: &str, params: Value, request_def: &str) -> u64 {
        check(request_def, &params);
        self.maia.request(method, params).await
    }

    /// The response to `id` (checked as `def`), answering permission
    /// questions with `answer`; the messages before it, each checked.
    pub(crate) async fn response(
        &mut self,
        id: u64,
        def: &str,
        mut answer: impl FnMut(&Value) -> Option<Value>,
    ) -> (Value, Vec<Value>) {
        let (resp, before) = self
            .maia
            .response_with(id, |m| {
                let result = answer(m)?;
                check("RequestPermissionResponse", &result);
                Some(result)
            })
            .await;
        before.iter().for_each(check_sent);
        if resp.get("error").is_none() {
            check(def, &resp["result"]);
        }
        (resp, before)
    }

    pub(crate) async fn new_session(&mut self) -> String {
        let cwd = self.maia.cwd();
        let id = self
            .call("session/new", json!({"cwd": cwd}), "NewSessionRequest")
            .await;
        let (resp, _) = self.response(id, "NewSessionResponse", |_| None).await;
        // The model and the mode, as config options.
        let options = &resp["result"]["configOptions"];
        assert_eq!(options[1]["configId"], "mode", "{resp}");
        resp["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {resp}"))
            .to_owned()
    }

    /// Waits for `state_update: idle` (answering permission questions with
    /// `answer`); the messages up to it, each checked.
    pub(crate) async fn until_idle(
        &mut self,
        answer: impl FnMut(&Value) -> Option<Value>,
    ) -> Vec<Value> {
        self.until(
            |m| {
                m["params"]["update"]["sessionUpdate"] == "state_update"
                    && m["params"]["update"]["state"] == "idle"
            },
            answer,
        )
        .await
    }

    /// Waits for the message matching `pred` (answering permission
    /// questions with `answer`); the messages up to it, each checked.
    pub(crate) async fn until(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        mut answer: impl FnMut(&Value) -> Option<Value>,
    ) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let m = self.maia.next().await;
            check_sent(&m);
            if m.get("id").is_some()
                && let Some(method) = m["method"].as_str()
                && let Some(result) = answer(&m)
            {
                let def = match method {
                    "elicitation/create" => "CreateElicitationResponse",
                    _ => "RequestPermissionResponse",
                };
                check(def, &result);
                self.maia.respond(&m["id"], result).await;
            }
            let found = pred(&m);
            seen.push(m);
            if found {
                return seen;
            }
        }
    }

    /// Prompts `sid` with `text` and follows the turn to `idle`: the
    /// messages from the prompt on (its response among them).
    pub(crate) async fn turn(
        &mut self,
        sid: &str,
        text: &str,
        answer: impl FnMut(&Value) -> Option<Value>,
    ) -> Vec<Value> {
        let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]});
        let id = self.call("session/prompt", params, "PromptRequest").await;
        let seen = self.until_idle(answer).await;
        let resp = seen
            .iter()
            .find(|m| m.get("method").is_none() && m["id"] == json!(id))
            .unwrap_or_else(|| panic!("the prompt was not answered before idle: {seen:#?}"));
        check("PromptResponse", &resp["result"]);
        seen
    }
}

/// The tool call ids, in the order of their first update.
pub(crate) fn call_ids(messages: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for u in messages.iter().map(|m| &m["params"]["update"]) {
        if u["sessionUpdate"] == "tool_call_update" {
            let id = u["toolCallId"].as_str().unwrap().to_owned();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

fn states(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "state_update")
        .map(|m| m["params"]["update"]["state"].as_str().unwrap().to_owned())
        .collect()
}

fn position(messages: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    messages
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("not found among {messages:#?}"))
}

pub(crate) fn tool_updates<'a>(messages: &'a [Value], call: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == call)
        .collect()
}

/// The file changes shown for `call`.
fn diffs(messages: &[Value], call: &str) -> Vec<Value> {
    tool_updates(messages, call)
        .into_iter()
        .filter_map(|u| u["content"].as_array())
        .flatten()
        .filter(|c| c["type"] == "diff")
        .cloned()
        .collect()
}

#[tokio::test]
async fn only_a_client_asking_for_v2_of_a_maia_offering_it_gets_v2() {
    // Offered and asked: v2.
    let v2 = V2::start().await;
    drop(v2);
    // Asked but not offered: v1, exactly as to a v1 client.
    let mut plain = Maia::start().await;
    let id = plain.request("initialize", v2_initialize_params()).await;
    let (asked_v2, _) = plain.response(id).await;
    assert_eq!(asked_v2["result"]["protocolVersion"], 1, "{asked_v2}");
    let v1_plain = plain.initialize().await;
    // Offered, not asked: the v1 answer of a MAIA that does not offer v2.
    let mut offered = Maia::start_with(v2_options()).await;
    let v1_offered = offered.initialize().await;
    assert_eq!(v1_offered["result"], v1_plain["result"]);
    assert_eq!(v1_offered["result"]["protocolVersion"], 1);
    assert!(v1_offered["result"]["agentCapabilities"]["loadSession"] == true);
    // The v1 session goes on in v1 shapes.
    let sid = offered.new_session().await;
    let (resp, seen) = offered.answered_turn(&sid, "hi", "hello").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(
        seen.iter()
            .all(|m| m["params"]["update"]["sessionUpdate"] != "state_update"),
        "{seen:#?}"
    );
}

#[tokio::test]
async fn a_v2_turn_is_acknowledged_then_reports_its_state_messages_and_file_changes() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    std::fs::write(client.maia.path("old.txt"), "alpha\nbeta\n").unwrap();
    client.maia.mock.push(mock::tool_calls_reply(&[
        ("call_r", "Read", json!({"file_path": "old.txt"})),
        (
            "call_w",
            "Write",
            json!({"file_path": "new.txt", "content": "fresh\n"}),
        ),
    ]));
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_e",
        "Edit",
        json!({"file_path": "old.txt", "old_string": "beta", "new_string": "BETA"}),
    )]));
    client.maia.mock.push(mock::text_reply("all done"));
    let mut asked = Vec::new();
    let seen = client
        .turn(&sid, "change the files", |m| {
            asked.push(m["params"].clone());
            choose("allow_once")(m)
        })
        .await;
    // Acknowledged with the message id, then the message, then running.
    let ack = position(&seen, |m| m.get("method").is_none());
    let user = position(&seen, |m| {
        m["params"]["update"]["sessionUpdate"] == "user_message"
    });
    let message_id = &seen[ack]["result"]["messageId"];
    assert!(message_id.is_string(), "{:?}", seen[ack]);
    assert_eq!(&seen[user]["params"]["update"]["messageId"], message_id);
    assert_eq!(
        seen[user]["params"]["update"]["content"],
        json!([{"type": "text", "text": "change the files"}])
    );
    assert!(ack < user, "{seen:#?}");
    let first_state = states(&seen);
    assert_eq!(
        first_state.first().map(String::as_str),
        Some("running"),
        "{seen:#?}"
    );
    // Each question is framed by requires_action and running; the turn
    // ends idle with its stop reason.
    let mut framed = vec!["running"];
    for _ in &asked {
        framed.extend(["requires_action", "running"]);
    }
    framed.push("idle");
    assert_eq!(first_state, framed, "{seen:#?}");
    let idle = &seen.last().unwrap()["params"]["update"];
    assert_eq!(idle["stopReason"], "end_turn", "{idle}");
    // Text as chunks of one message id.
    let chunks: Vec<&Value> = seen
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "all done");
    assert!(
        chunks
            .iter()
            .all(|u| u["messageId"] == chunks[0]["messageId"])
    );
    // Tool calls are upserts: the first carries title and kind.
    let ids = call_ids(&seen);
    assert_eq!(ids.len(), 3, "{seen:#?}");
    let read = tool_updates(&seen, &ids[0]);
    assert_eq!(read[0]["kind"], "read", "{read:?}");
    assert!(read[0]["title"].is_string(), "{read:?}");
    assert_eq!(read.last().unwrap()["status"], "completed", "{read:?}");
    assert!(
        seen.iter()
            .all(|m| m["params"]["update"]["sessionUpdate"] != "tool_call"),
        "v1's tool_call on v2"
    );
    // File changes: a new file is an `add`, an edit a `modify`, each with
    // its git patch.
    let new_path = client.maia.path("new.txt");
    let added = diffs(&seen, &ids[1]);
    assert!(!added.is_empty(), "{seen:#?}");
    let change = &added[0]["changes"][0];
    assert_eq!(change["operation"], "add", "{added:?}");
    assert_eq!(change["path"], json!(new_path));
    let patch = added[0]["patch"]["text"].as_str().unwrap();
    assert_eq!(added[0]["patch"]["format"], "git_patch");
    assert!(
        patch.contains("new file mode 100644") && patch.contains("+fresh"),
        "{patch}"
    );
    let modified = diffs(&seen, &ids[2]);
    assert_eq!(
        modified[0]["changes"][0]["operation"], "modify",
        "{modified:?}"
    );
    let patch = modified[0]["patch"]["text"].as_str().unwrap();
    assert!(patch.contains("-beta\n+BETA\n"), "{patch}");
    assert_eq!(std::fs::read_to_string(&new_path).unwrap(), "fresh\n");
    assert_eq!(
        std::fs::read_to_string(client.maia.path("old.txt")).unwrap(),
        "alpha\nBETA\n"
    );
    // The questions carry a title and their subject: the tool call.
    assert_eq!(asked.len(), 3, "{asked:#?}");
    for question in &asked {
        assert!(question["title"].is_string(), "{question}");
        assert_eq!(question["subject"]["type"], "tool_call", "{question}");
    }
    // One question per call (the batch's calls may be asked in any order).
    let mut subjects: Vec<String> = asked
        .iter()
        .map(|q| {
            q["subject"]["toolCall"]["toolCallId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    subjects.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(subjects, expected);
}

#[tokio::test]
async fn a_command_question_names_the_command_as_its_subject() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_b",
        "Bash",
        json!({"command": "echo hi > said.txt"}),
    )]));
    client.maia.mock.push(mock::text_reply("ran it"));
    let mut asked = Vec::new();
    let seen = client
        .turn(&sid, "run it", |m| {
            asked.push(m["params"].clone());
            choose("allow_once")(m)
        })
        .await;
    let subject = &asked[0]["subject"];
    assert_eq!(subject["type"], "command", "{subject}");
    assert_eq!(subject["command"], "echo hi > said.txt");
    assert_eq!(subject["toolCallId"], json!(call_ids(&seen)[0]));
    assert_eq!(subject["cwd"], json!(client.maia.cwd()));
    assert_eq!(
        std::fs::read_to_string(client.maia.path("said.txt")).unwrap(),
        "hi\n"
    );
}

#[test]
fn the_schema_fixture_rejects_what_is_not_v2() {
    // v1's chunk (no `messageId`) and v1's `tool_call` are not v2 updates.
    let v1_chunk = json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "x"}}});
    assert!(
        validator("UpdateSessionNotification")
            .iter_errors(&v1_chunk)
            .count()
            > 0
    );
    let v1_permission = json!({"sessionId": "s", "toolCall": {"toolCallId": "t"},
        "options": []});
    assert!(
        validator("RequestPermissionRequest")
            .iter_errors(&v1_permission)
            .count()
            > 0
    );
}

/// A model request with the folders of its run replaced by names, and
/// nothing of the session's own ids.
fn normalized(request: &Value, maia: &Maia) -> String {
    let home = maia.home.path().to_string_lossy().into_owned();
    let cwd = maia.cwd().to_string_lossy().into_owned();
    request["messages"]
        .to_string()
        .replace(&cwd, "<cwd>")
        .replace(&home, "<home>")
}

/// The scripted turn both clients run: read, write, edit, answer.
fn script(maia: &Maia) {
    std::fs::write(maia.path("old.txt"), "alpha\nbeta\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[
        ("call_r", "Read", json!({"file_path": "old.txt"})),
        (
            "call_w",
            "Write",
            json!({"file_path": "new.txt", "content": "fresh\n"}),
        ),
    ]));
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_e",
        "Edit",
        json!({"file_path": "old.txt", "old_string": "beta", "new_string": "BETA"}),
    )]));
    maia.mock.push(mock::text_reply("all done"));
}

fn files(maia: &Maia) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(maia.cwd())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn the_same_turn_over_v1_and_v2_changes_the_same_files_and_asks_the_model_the_same() {
    // Two clients of two processes of one MAIA offering v2: each gets its
    // own shapes.
    let mut v1 = Maia::start_with(v2_options()).await;
    v1.initialize().await;
    let v1_sid = v1.new_session().await;
    script(&v1);
    let id = v1.prompt(&v1_sid, "change the files").await;
    let (resp, v1_seen) = v1.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let v1_kinds: Vec<&str> = v1_seen
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(v1_kinds.contains(&"tool_call"), "{v1_kinds:?}");
    assert!(!v1_kinds.contains(&"state_update"), "{v1_kinds:?}");
    assert!(
        v1_seen
            .iter()
            .any(|m| m["params"]["toolCall"]["toolCallId"].is_string()),
        "v1's permission request has its toolCall"
    );

    let mut v2 = V2::start().await;
    let v2_sid = v2.new_session().await;
    script(&v2.maia);
    let v2_seen = v2
        .turn(&v2_sid, "change the files", choose("allow_once"))
        .await;
    let v2_kinds: Vec<&str> = v2_seen
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(v2_kinds.contains(&"state_update"), "{v2_kinds:?}");
    assert!(!v2_kinds.contains(&"tool_call"), "{v2_kinds:?}");

    assert_eq!(files(&v1), files(&v2.maia));
    assert_eq!(files(&v1).len(), 2);
    let (a, b) = (v1.mock.requests(), v2.maia.mock.requests());
    assert_eq!(a.len(), 3);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(normalized(x, &v1), normalized(y, &v2.maia));
        assert_eq!(x["tools"], y["tools"]);
        assert_eq!(x["model"], y["model"]);
    }
}

#[tokio::test]
async fn a_background_command_ending_between_turns_reaches_a_v2_client_with_no_prompt_open() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    let command = "until [ -e go ]; do sleep 0.02; done; echo done";
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_bg",
        "Bash",
        json!({"command": command, "run_in_background": true}),
    )]));
    client.maia.mock.push(mock::text_reply("started it"));
    let seen = client
        .turn(&sid, "run it in the background", choose("allow_once"))
        .await;
    let call = call_ids(&seen)[0].clone();
    let during = tool_updates(&seen, &call);
    assert!(
        during.iter().all(|u| u["status"] != "completed"),
        "{during:?}"
    );
    // The turn is over (idle); the command ends now.
    std::fs::write(client.maia.path("go"), "").unwrap();
    let (done, between) = client
        .maia
        .wait_for(|m| {
            m["params"]["update"]["toolCallId"] == json!(call)
                && m["params"]["update"]["status"] == "completed"
        })
        .await;
    check_sent(&done);
    between.iter().for_each(check_sent);
    assert_eq!(done["params"]["sessionId"], json!(sid));
    // No prompt was open, and the session did not leave idle.
    assert!(
        between
            .iter()
            .chain([&done])
            .all(|m| m["params"]["update"]["sessionUpdate"] != "state_update"),
        "{between:#?}"
    );
    // The command was a terminal, its output and exit told while idle; the
    // call keeps showing it, the text the model is told in its raw output.
    let terminal = format!("term-{call}");
    assert_eq!(
        done["params"]["update"]["content"],
        json!([{"type": "terminal", "terminalId": terminal}]),
        "{done}"
    );
    let text = done["params"]["update"]["rawOutput"]["output"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("exited with code 0"), "{done}");
    assert_eq!(terminal_bytes(&between, &terminal), b"done\n");
    let exited = updates_of(&between, "terminal_update")
        .into_iter()
        .find(|u| u["terminalId"] == json!(terminal) && u["exitStatus"].is_object())
        .unwrap_or_else(|| panic!("no exit status: {between:#?}"));
    assert_eq!(exited["exitStatus"]["exitCode"], 0, "{exited}");
}

#[tokio::test]
async fn session_resume_with_replay_sends_the_history_in_v2_shapes() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    script(&client.maia);
    let first = client
        .turn(&sid, "change the files", choose("allow_once"))
        .await;
    let ids = call_ids(&first);
    let cwd = client.maia.cwd();
    let id = client
        .call(
            "session/resume",
            json!({"sessionId": sid, "cwd": cwd, "replayFrom": {"type": "start"}}),
            "ResumeSessionRequest",
        )
        .await;
    let (resp, replay) = client.response(id, "ResumeSessionResponse", |_| None).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let user: String = replay
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(user, "change the files");
    let answer: String = replay
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(answer, "all done");
    assert_eq!(call_ids(&replay), ids);
    let replayed = diffs(&replay, &ids[1]);
    assert_eq!(
        replayed[0]["changes"][0]["operation"], "add",
        "{replayed:?}"
    );
    // Resumed without replay: nothing of the history.
    let id = client
        .call(
            "session/resume",
            json!({"sessionId": sid, "cwd": cwd}),
            "ResumeSessionRequest",
        )
        .await;
    let (resp, quiet) = client.response(id, "ResumeSessionResponse", |_| None).await;
    assert!(resp.get("error").is_none(), "{resp}");
    assert!(
        quiet
            .iter()
            .all(|m| m["params"]["update"]["sessionUpdate"] != "user_message_chunk"),
        "{quiet:#?}"
    );
    // The session goes on.
    client.maia.mock.push(mock::text_reply("again"));
    client.turn(&sid, "more", |_| None).await;
}

#[tokio::test]
async fn v2_requests_answered_as_in_v1_are_valid_v2_and_the_rest_is_refused() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    let cwd = client.maia.cwd();
    let id = client
        .call("session/list", json!({"cwd": cwd}), "ListSessionsRequest")
        .await;
    let (resp, _) = client.response(id, "ListSessionsResponse", |_| None).await;
    assert_eq!(
        resp["result"]["sessions"][0]["sessionId"],
        json!(sid),
        "{resp}"
    );
    let id = client
        .call(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "mode", "type": "id", "value": "plan"}),
            "SetSessionConfigOptionRequest",
        )
        .await;
    let (resp, _) = client
        .response(id, "SetSessionConfigOptionResponse", |_| None)
        .await;
    assert!(resp.get("error").is_none(), "{resp}");
    // v1's `session/load` is not a v2 method; a bad prompt is refused and
    // loses nothing.
    let id = client
        .maia
        .request(
            "session/load",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    let (resp, _) = client.maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32601, "{resp}");
    let id = client
        .maia
        .request("session/prompt", json!({"sessionId": sid}))
        .await;
    let (resp, _) = client.maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    client.maia.mock.push(mock::text_reply("still here"));
    client.turn(&sid, "hello", |_| None).await;
    let id = client
        .call(
            "session/close",
            json!({"sessionId": sid}),
            "CloseSessionRequest",
        )
        .await;
    let (resp, _) = client.response(id, "CloseSessionResponse", |_| None).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let id = client
        .call(
            "session/delete",
            json!({"sessionId": sid}),
            "DeleteSessionRequest",
        )
        .await;
    let (resp, _) = client.response(id, "DeleteSessionResponse", |_| None).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let id = client
        .call("session/list", json!({"cwd": cwd}), "ListSessionsRequest")
        .await;
    let (resp, _) = client.response(id, "ListSessionsResponse", |_| None).await;
    assert_eq!(resp["result"]["sessions"], json!([]), "{resp}");
}

/// Waits for the message matching `pred`, checking it and those before it.
async fn checked_wait(client: &mut V2, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
    let (found, before) = client.maia.wait_for(pred).await;
    before.iter().for_each(check_sent);
    check_sent(&found);
    (found, before)
}

#[tokio::test]
async fn a_cancelled_v2_turn_ends_idle_cancelled() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_b",
        "Bash",
        json!({"command": "echo never > never.txt"}),
    )]));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]});
    let id = client.call("session/prompt", params, "PromptRequest").await;
    let (question, before) = checked_wait(&mut client, crate::harness::is_permission).await;
    assert!(
        before
            .iter()
            .any(|m| m["id"] == json!(id) && m["result"]["messageId"].is_string()),
        "the prompt was not acknowledged before the question: {before:#?}"
    );
    let cancel = json!({"sessionId": sid});
    check("CancelSessionNotification", &cancel);
    client.maia.notify("session/cancel", cancel).await;
    let seen = client.until_idle(|_| None).await;
    let idle = &seen.last().unwrap()["params"]["update"];
    assert_eq!(idle["stopReason"], "cancelled", "{idle}");
    assert!(!client.maia.path("never.txt").exists());
    drop(question);
}

#[tokio::test]
async fn a_queued_prompt_starting_is_announced_with_no_prompt_open() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_b",
        "Bash",
        json!({"command": "true"}),
    )]));
    client.maia.mock.push(mock::text_reply("first"));
    client.maia.mock.push(mock::text_reply("second"));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]});
    client.call("session/prompt", params, "PromptRequest").await;
    let (question, _) = checked_wait(&mut client, crate::harness::is_permission).await;
    // Queued while the turn waits for the answer.
    let add = client
        .maia
        .request(
            "_session/queue",
            json!({"sessionId": sid, "action": "add",
                   "input": [{"type": "text", "text": "two"}],
                   "clientUserMessageId": "client-two"}),
        )
        .await;
    let (added, _) = checked_wait(&mut client, |m| crate::harness::is_response(m, add)).await;
    assert_eq!(added["result"]["status"], "ok", "{added}");
    let allow = choose("allow_once")(&question).unwrap();
    client.maia.respond(&question["id"], allow).await;
    let first = client.until_idle(|_| None).await;
    assert_eq!(
        first.last().unwrap()["params"]["update"]["stopReason"],
        "end_turn"
    );
    // The queued prompt's turn: no request to answer, the same states.
    let second = client.until_idle(|_| None).await;
    assert!(
        second.iter().all(|m| m.get("result").is_none()),
        "{second:#?}"
    );
    let updates: Vec<&Value> = second.iter().map(|m| &m["params"]["update"]).collect();
    let user = position(&second, |m| {
        m["params"]["update"]["sessionUpdate"] == "user_message"
    });
    assert!(updates[user]["messageId"].is_string());
    assert_eq!(states(&second), ["running", "idle"], "{second:#?}");
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "second");
}

#[tokio::test]
async fn ask_user_reaches_a_v2_client_with_forms_as_a_v2_elicitation() {
    let mut client = V2::start_with(json!({"elicitation": {"form": {}}})).await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_q",
        "AskUser",
        json!({"question": "Which database?", "choices": ["sqlite", "postgres"]}),
    )]));
    client.maia.mock.push(mock::text_reply("thanks"));
    let mut asked = Vec::new();
    client
        .turn(&sid, "set it up", |m| {
            assert_eq!(m["method"], "elicitation/create", "{m}");
            asked.push(m["params"].clone());
            Some(json!({"action": "accept", "content": {"choice": "postgres"}}))
        })
        .await;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["mode"], "form");
    assert_eq!(asked[0]["sessionId"], json!(sid));
    let result = crate::harness::tool_results(&client.maia, 1).remove(0);
    assert!(result.contains("postgres"), "{result}");
}

#[tokio::test]
async fn a_steer_taken_into_the_running_turn_is_a_v2_user_message_in_its_place() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "hello"}),
    )]));
    client.maia.mock.push(mock::text_reply("done, and noted"));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "write it"}]});
    client.call("session/prompt", params, "PromptRequest").await;
    let (question, _) = checked_wait(&mut client, crate::harness::is_permission).await;
    let steer = client
        .maia
        .request(
            "_session/steering",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "also the weather"}]}),
        )
        .await;
    let allow = choose("allow_once")(&question).unwrap();
    client.maia.respond(&question["id"], allow).await;
    let seen = client.until_idle(|_| None).await;
    let updates: Vec<&Value> = seen.iter().map(|m| &m["params"]["update"]).collect();
    let steered = position(&seen, |m| {
        m["params"]["update"]["sessionUpdate"] == "user_message"
            && m["params"]["update"]["_meta"]["steering"] == true
    });
    assert_eq!(
        updates[steered]["content"],
        json!([{"type": "text", "text": "also the weather"}])
    );
    // After the tool's end, before the answer that follows it.
    let tool_done = position(&seen, |m| m["params"]["update"]["status"] == "completed");
    let answer = position(&seen, |m| {
        m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    });
    assert!(tool_done < steered && steered < answer, "{seen:#?}");
    let taken = match seen.iter().find(|m| crate::harness::is_response(m, steer)) {
        Some(m) => m.clone(),
        None => {
            checked_wait(&mut client, |m| crate::harness::is_response(m, steer))
                .await
                .0
        }
    };
    assert_eq!(taken["result"]["outcome"], "injected", "{taken}");
    // Replayed in its place with the same id.
    let cwd = client.maia.cwd();
    let id = client
        .call(
            "session/resume",
            json!({"sessionId": sid, "cwd": cwd, "replayFrom": {"type": "start"}}),
            "ResumeSessionRequest",
        )
        .await;
    let (_, replay) = client.response(id, "ResumeSessionResponse", |_| None).await;
    assert!(
        replay.iter().any(
            |m| m["params"]["update"]["messageId"] == updates[steered]["messageId"]
                && m["params"]["update"]["_meta"]["steering"] == true
        ),
        "{replay:#?}"
    );
}

#[tokio::test]
async fn v2_stdio_and_http_mcp_servers_serve_their_tools() {
    let mut client = V2::start().await;
    let cwd = client.maia.cwd();
    let log = client.maia.path("mcp.log");
    let url = mock::mock_mcp::spawn_http().await.unwrap();
    // v2's spelling: a stdio server tagged, empty lists left out.
    let stdio = json!({"type": "stdio", "name": "mock", "command": crate::acp_mcp::mock_mcp(),
        "env": [{"name": "MOCK_MCP_LOG", "value": log}]});
    let http = json!({"type": "http", "name": "web", "url": url});
    let id = client
        .call(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [stdio, http]}),
            "NewSessionRequest",
        )
        .await;
    let (resp, _) = client.response(id, "NewSessionResponse", |_| None).await;
    let sid = resp["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{resp}"))
        .to_owned();
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_1",
        "mcp__mock__echo",
        json!({"text": "hello"}),
    )]));
    client.maia.mock.push(mock::text_reply("done"));
    client.turn(&sid, "echo hello", choose("allow_once")).await;
    let results = crate::harness::tool_results(&client.maia, 1);
    assert_eq!(results, ["echo: hello"]);
    assert!(std::fs::read_to_string(&log).unwrap().contains("\"hello\""));
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_2",
        "mcp__web__echo",
        json!({"text": "over http"}),
    )]));
    client.maia.mock.push(mock::text_reply("done"));
    client.turn(&sid, "go", choose("allow_once")).await;
    let results = crate::harness::tool_results(&client.maia, 3);
    assert_eq!(results.last().map(String::as_str), Some("echo: over http"));
}

#[tokio::test]
async fn v2_login_and_logout_are_v1_authenticate_and_logout() {
    let options = Options {
        settings: json!({"LiteLLM_API_Key": "sk-saved"}),
        ..Options::default()
    };
    let mut client = V2::start_as(options, json!({})).await;
    client.maia.mock.require_key(Some("sk-saved"));
    let id = client
        .call(
            "auth/login",
            json!({"methodId": "agent"}),
            "LoginAuthRequest",
        )
        .await;
    let (resp, _) = client.response(id, "LoginAuthResponse", |_| None).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let id = client
        .call(
            "auth/login",
            json!({"methodId": "nope"}),
            "LoginAuthRequest",
        )
        .await;
    let (resp, _) = client.response(id, "LoginAuthResponse", |_| None).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    client.new_session().await;
    let id = client
        .call("auth/logout", json!({}), "LogoutAuthRequest")
        .await;
    let (resp, _) = client.response(id, "LogoutAuthResponse", |_| None).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let cwd = client.maia.cwd();
    let id = client
        .call("session/new", json!({"cwd": cwd}), "NewSessionRequest")
        .await;
    let (resp, _) = client.response(id, "NewSessionResponse", |_| None).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
}

#[tokio::test]
async fn the_command_list_and_the_task_list_are_v2_updates() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "t1",
        "TodoWrite",
        json!({"todos": [
            {"content": "look around", "status": "completed"},
            {"content": "write it", "activeForm": "writing it", "status": "in_progress"}
        ]}),
    )]));
    client.maia.mock.push(mock::text_reply("planned"));
    let seen = client.turn(&sid, "plan it", |_| None).await;
    let updates: Vec<&Value> = seen.iter().map(|m| &m["params"]["update"]).collect();
    // The commands (sent after session/new) are all there, tagged.
    let commands = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "available_commands_update")
        .unwrap_or_else(|| panic!("{seen:#?}"));
    let list = commands["availableCommands"].as_array().unwrap();
    assert!(list.iter().any(|c| c["name"] == "compact"), "{commands}");
    assert!(list.iter().all(|c| c["type"] == "command"), "{commands}");
    assert!(
        list.iter()
            .filter(|c| !c["input"].is_null())
            .all(|c| c["input"]["type"] == "text"),
        "{commands}"
    );
    let plan = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "plan_update")
        .unwrap_or_else(|| panic!("{seen:#?}"));
    assert_eq!(plan["plan"]["type"], "items", "{plan}");
    let entries = plan["plan"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["content"], "writing it");
    assert_eq!(entries[1]["status"], "in_progress");
}

#[tokio::test]
async fn the_message_id_a_v2_prompt_is_answered_with_names_it_for_a_rewind() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::text_reply("first answer"));
    let first = client.turn(&sid, "first", |_| None).await;
    let message_id = first
        .iter()
        .find_map(|m| m["result"]["messageId"].as_str())
        .unwrap()
        .to_owned();
    client.maia.mock.push(mock::text_reply("second answer"));
    client.turn(&sid, "second", |_| None).await;
    let id = client
        .maia
        .request(
            "_session/rewind",
            json!({"sessionId": sid, "beforeMessage": {"messageId": message_id}}),
        )
        .await;
    let (resp, _) = checked_wait(&mut client, |m| crate::harness::is_response(m, id)).await;
    assert_eq!(resp["result"]["rewound"], true, "{resp}");
    // The next request starts afresh: neither message is in it.
    client.maia.mock.push(mock::text_reply("third answer"));
    client.turn(&sid, "third", |_| None).await;
    // The conversation, without the system prompt.
    let messages = client.maia.mock.requests().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let last = Value::Array(messages[1..].to_vec()).to_string();
    assert!(
        !last.contains("first") && !last.contains("second"),
        "{last}"
    );
    assert!(last.contains("third"), "{last}");
}

/// The updates named `kind` among `messages`.
pub(crate) fn updates_of<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// The bytes of `terminal`'s output chunks, decoded one by one.
fn terminal_bytes(messages: &[Value], terminal: &str) -> Vec<u8> {
    use base64::Engine;
    updates_of(messages, "terminal_output_chunk")
        .into_iter()
        .filter(|u| u["terminalId"] == terminal)
        .flat_map(|u| {
            base64::engine::general_purpose::STANDARD
                .decode(u["data"].as_str().unwrap())
                .unwrap()
        })
        .collect()
}

/// A command that prints in parts is an agent-owned terminal: created with
/// its command and folder, shown by its tool call, its first part arriving
/// while the command still runs, then its exit status; the model gets the
/// same result as before (the terminal is display only).
#[tokio::test]
async fn a_command_is_an_agent_owned_terminal_streamed_while_it_runs() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    let command = "echo one; until [ -e go ]; do sleep 0.02; done; echo two; exit 3";
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_t",
        "Bash",
        json!({ "command": command }),
    )]));
    client.maia.mock.push(mock::text_reply("it failed"));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "run it"}]});
    client.call("session/prompt", params, "PromptRequest").await;
    // The first part, while the command waits for `go`.
    let mut seen = client
        .until(
            |m| {
                m["params"]["update"]["sessionUpdate"] == "terminal_output_chunk"
                    && terminal_bytes(
                        std::slice::from_ref(m),
                        m["params"]["update"]["terminalId"].as_str().unwrap_or(""),
                    )
                    .ends_with(b"one\n")
            },
            choose("allow_once"),
        )
        .await;
    let created = updates_of(&seen, "terminal_update")[0].clone();
    let terminal = created["terminalId"].as_str().unwrap().to_owned();
    assert_eq!(created["command"], command, "{created}");
    assert_eq!(created["cwd"], json!(client.maia.cwd()), "{created}");
    let call = call_ids(&seen)[0].clone();
    assert!(
        tool_updates(&seen, &call)
            .iter()
            .any(|u| u["content"] == json!([{"type": "terminal", "terminalId": terminal}])),
        "{seen:#?}"
    );
    // Not ended yet: no exit status, the call not finished.
    assert!(
        updates_of(&seen, "terminal_update")
            .iter()
            .all(|u| u.get("exitStatus").is_none()),
        "{seen:#?}"
    );
    assert!(
        tool_updates(&seen, &call)
            .iter()
            .all(|u| u["status"] != "completed" && u["status"] != "failed"),
        "{seen:#?}"
    );
    assert!(!client.maia.path("go").exists());
    std::fs::write(client.maia.path("go"), "").unwrap();
    seen.extend(client.until_idle(|_| None).await);
    assert_eq!(terminal_bytes(&seen, &terminal), b"one\ntwo\n");
    let exited = position(&seen, |m| {
        m["params"]["update"]["sessionUpdate"] == "terminal_update"
            && m["params"]["update"]["exitStatus"].is_object()
    });
    assert_eq!(
        seen[exited]["params"]["update"]["exitStatus"]["exitCode"], 3,
        "{}",
        seen[exited]
    );
    // The output came before the exit, the exit before the call's end.
    let last_chunk = seen
        .iter()
        .rposition(|m| m["params"]["update"]["sessionUpdate"] == "terminal_output_chunk")
        .unwrap();
    let failed = position(&seen, |m| {
        m["params"]["update"]["toolCallId"] == json!(call)
            && m["params"]["update"]["status"] == "failed"
    });
    assert!(last_chunk < exited && exited < failed, "{seen:#?}");
    // The call still shows its terminal; the text the model saw is its raw output.
    let end = &seen[failed]["params"]["update"];
    assert_eq!(
        end["content"],
        json!([{"type": "terminal", "terminalId": terminal}]),
        "{end}"
    );
    assert_eq!(
        end["rawOutput"]["output"], "one\ntwo\nExit code: 3",
        "{end}"
    );
    // The model's request holds the result as before.
    let requests = client.maia.mock.requests();
    let result = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(result["content"], "one\ntwo\nExit code: 3", "{result}");
}

/// A command that deletes, renames, makes executable and writes a binary
/// file: its call gets the file states, with git's patch, paths absolute.
#[tokio::test]
async fn a_commands_deletes_renames_modes_and_binaries_are_file_states() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    let cwd = client.maia.cwd();
    let lines: String = (1..=20).map(|n| format!("line {n}\n")).collect();
    std::fs::write(client.maia.path("gone.txt"), "bye\n").unwrap();
    std::fs::write(client.maia.path("old.txt"), &lines).unwrap();
    std::fs::write(client.maia.path("run.sh"), "echo run\n").unwrap();
    std::fs::write(client.maia.path("secret.txt"), "s\n").unwrap();
    let command = "rm gone.txt && mv old.txt new.txt && chmod +x run.sh && chmod 600 secret.txt \
                   && printf 'a\\000b\\001' > blob.bin";
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_f",
        "Bash",
        json!({ "command": command }),
    )]));
    client.maia.mock.push(mock::text_reply("done"));
    let seen = client.turn(&sid, "tidy up", choose("allow_once")).await;
    assert!(client.maia.path("blob.bin").exists());
    let call = call_ids(&seen)[0].clone();
    let chunks: Vec<&Value> = updates_of(&seen, "tool_call_content_chunk")
        .into_iter()
        .filter(|u| u["toolCallId"] == json!(call) && u["content"]["type"] == "diff")
        .collect();
    assert_eq!(chunks.len(), 1, "{seen:#?}");
    let diff = &chunks[0]["content"];
    let at = |rel: &str| cwd.join(rel).to_string_lossy().into_owned();
    let mut changes: Vec<Value> = diff["changes"].as_array().unwrap().clone();
    changes.sort_by_key(|c| c["path"].as_str().unwrap().to_owned());
    assert_eq!(
        changes,
        vec![
            json!({"operation": "add", "path": at("blob.bin"), "fileType": "binary"}),
            json!({"operation": "delete", "path": at("gone.txt"), "fileType": "text"}),
            json!({"operation": "move", "oldPath": at("old.txt"), "path": at("new.txt"), "fileType": "text"}),
            json!({"operation": "modify", "path": at("run.sh"), "fileType": "text"}),
            json!({"operation": "modify", "path": at("secret.txt"), "fileType": "text"}),
        ],
        "{diff}"
    );
    assert_eq!(diff["patch"]["format"], "git_patch", "{diff}");
    let patch = diff["patch"]["text"].as_str().unwrap();
    let root = cwd.to_string_lossy().trim_start_matches('/').to_owned();
    for expected in [
        format!("diff --git a/{root}/gone.txt b/{root}/gone.txt\ndeleted file mode 100644\n"),
        format!(
            "diff --git a/{root}/old.txt b/{root}/new.txt\nsimilarity index 100%\nrename from {root}/old.txt\nrename to {root}/new.txt\n"
        ),
        format!("diff --git a/{root}/run.sh b/{root}/run.sh\nold mode 100644\nnew mode 100755\n"),
        format!("Binary files /dev/null and b/{root}/blob.bin differ\n"),
        // A mode git does not keep, from the checkpoints' own record.
        format!(
            "diff --git a/{root}/secret.txt b/{root}/secret.txt\nold mode 100644\nnew mode 100600\n"
        ),
    ] {
        assert!(patch.contains(&expected), "{expected}\nnot in\n{patch}");
    }
    // Nothing of MAIA's own bookkeeping.
    assert!(!patch.contains(".maia/"), "{patch}");
}

/// A v1 client of the same MAIA sees a command as before: its output in
/// the tool call's text at its end, no terminal and no file states.
#[tokio::test]
async fn a_v1_client_sees_a_command_as_before() {
    let (mut maia, sid) = Maia::ready_with(v2_options()).await;
    std::fs::write(maia.path("gone.txt"), "bye\n").unwrap();
    let (resp, seen) = maia
        .tool_turn(
            &sid,
            &[(
                "call_v1",
                "Bash",
                json!({"command": "echo one; rm gone.txt; echo two"}),
            )],
            choose("allow_once"),
        )
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(!maia.path("gone.txt").exists());
    let kinds: Vec<&str> = seen
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(
        kinds.iter().all(|k| !k.starts_with("terminal_")
            && *k != "tool_call_content_chunk"
            && *k != "state_update"),
        "{kinds:?}"
    );
    let done = seen
        .iter()
        .map(|m| &m["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .unwrap_or_else(|| panic!("{seen:#?}"));
    assert_eq!(
        done["content"][0]["content"]["text"], "one\ntwo\nExit code: 0",
        "{done}"
    );
}

#[tokio::test]
async fn v1s_unstable_fork_title_and_archive_are_served_on_v2_in_v2_shapes() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::text_reply("first answer"));
    client.turn(&sid, "first words", |_| None).await;
    let cwd = client.maia.cwd();
    // A v2 client spells an MCP server's lists as v2 does (left out).
    let id = client
        .maia
        .request(
            "session/fork",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    let (resp, before) = client.maia.response(id).await;
    before.iter().for_each(check_sent);
    check("NewSessionResponse", &resp["result"]);
    let fork = resp["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fork, sid);
    assert_eq!(
        resp["result"]["configOptions"][1]["configId"], "mode",
        "{resp}"
    );
    // The fork holds the source's history.
    client.maia.mock.push(mock::text_reply("fork answer"));
    client.turn(&fork, "on the fork", |_| None).await;
    let last = client.maia.mock.requests().last().unwrap()["messages"].to_string();
    assert!(
        last.contains("first words") && last.contains("on the fork"),
        "{last}"
    );
    let id = client
        .maia
        .request(
            "session/set_title",
            json!({"sessionId": fork, "title": "A fork"}),
        )
        .await;
    // The answer and the title's update, in either order.
    let is_info = |m: &Value| m["params"]["update"]["sessionUpdate"] == "session_info_update";
    let (first, before) = checked_wait(&mut client, |m| {
        is_info(m) || crate::harness::is_response(m, id)
    })
    .await;
    assert!(!before.iter().any(is_info), "{before:?}");
    let (second, _) = if is_info(&first) {
        checked_wait(&mut client, |m| crate::harness::is_response(m, id)).await
    } else {
        checked_wait(&mut client, is_info).await
    };
    let (info, resp) = if is_info(&first) {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(info["params"]["update"]["title"], "A fork", "{info}");
    assert!(resp.get("error").is_none(), "{resp}");
    let id = client
        .maia
        .request("session/archive", json!({"sessionId": sid}))
        .await;
    let (resp, _) = checked_wait(&mut client, |m| crate::harness::is_response(m, id)).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let id = client
        .call("session/list", json!({"cwd": cwd}), "ListSessionsRequest")
        .await;
    let (resp, _) = client.response(id, "ListSessionsResponse", |_| None).await;
    let listed: Vec<&str> = resp["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(listed, [fork.as_str()], "{resp}");
}

#[tokio::test]
async fn a_v2_initialize_advertises_the_unstable_session_methods_it_serves() {
    let mut maia = Maia::start_with(v2_options()).await;
    let id = maia.request("initialize", v2_initialize_params()).await;
    let (resp, _) = maia.response(id).await;
    check("InitializeResponse", &resp["result"]);
    let methods = &resp["result"]["_meta"]["unstableSessionMethods"]["methods"];
    for method in [
        "session/fork",
        "session/set_title",
        "session/archive",
        "session/unarchive",
    ] {
        assert!(
            methods.as_array().unwrap().contains(&json!(method)),
            "{resp}"
        );
    }
}

/// The answer to request `id`: among `seen`, or the next one to come.
async fn answer_to(client: &mut V2, seen: &[Value], id: u64) -> Value {
    match seen.iter().find(|m| crate::harness::is_response(m, id)) {
        Some(m) => m.clone(),
        None => {
            checked_wait(client, |m| crate::harness::is_response(m, id))
                .await
                .0
        }
    }
}

/// The text of the last user message of the model's request `index`.
fn asked_last(maia: &Maia, index: usize) -> String {
    let requests = maia.mock.requests();
    let messages = requests[index]["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"].to_string()
}

#[tokio::test]
async fn a_v2_prompt_sent_while_the_session_works_joins_that_work() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "hello"}),
    )]));
    client.maia.mock.push(mock::text_reply("done, and noted"));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "write it"}]});
    client.call("session/prompt", params, "PromptRequest").await;
    let (question, _) = checked_wait(&mut client, crate::harness::is_permission).await;
    // Not refused busy: it contributes to the running work.
    let params =
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "also the weather"}]});
    let joined = client.call("session/prompt", params, "PromptRequest").await;
    let allow = choose("allow_once")(&question).unwrap();
    client.maia.respond(&question["id"], allow).await;
    let seen = client.until_idle(|_| None).await;
    let answer = answer_to(&mut client, &seen, joined).await;
    check("PromptResponse", &answer["result"]);
    // Answered with the id of the user message it became, in its place:
    // after the tool's end, before the answer the model gave with it.
    let steered = position(&seen, |m| {
        m["params"]["update"]["sessionUpdate"] == "user_message"
            && m["params"]["update"]["_meta"]["steering"] == true
    });
    let update = &seen[steered]["params"]["update"];
    assert_eq!(
        answer["result"]["messageId"], update["messageId"],
        "{answer}"
    );
    assert_eq!(
        update["content"],
        json!([{"type": "text", "text": "also the weather"}])
    );
    // One turn, whose second model request holds it.
    assert_eq!(
        states(&seen).iter().filter(|s| *s == "idle").count(),
        1,
        "{seen:#?}"
    );
    assert_eq!(client.maia.mock.requests().len(), 2);
    assert!(asked_last(&client.maia, 1).contains("also the weather"));
}

#[tokio::test]
async fn a_v2_prompt_the_running_turn_cannot_take_starts_the_next_turn() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client
        .maia
        .mock
        .push(mock::slow_text(10, std::time::Duration::from_millis(20)));
    client.maia.mock.push(mock::text_reply("second answer"));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]});
    client.call("session/prompt", params, "PromptRequest").await;
    checked_wait(&mut client, |m| {
        m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    })
    .await;
    // The turn ends with a final answer, so no tool round takes it.
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]});
    let second = client.call("session/prompt", params, "PromptRequest").await;
    let mut seen = client.until_idle(|_| None).await;
    seen.extend(client.until_idle(|_| None).await);
    let answer = answer_to(&mut client, &seen, second).await;
    check("PromptResponse", &answer["result"]);
    let message = seen
        .iter()
        .map(|m| &m["params"]["update"])
        .rfind(|u| u["sessionUpdate"] == "user_message")
        .unwrap();
    assert_eq!(
        answer["result"]["messageId"], message["messageId"],
        "{seen:#?}"
    );
    assert_eq!(
        states(&seen).iter().filter(|s| *s == "idle").count(),
        2,
        "{seen:#?}"
    );
    assert_eq!(client.maia.mock.requests().len(), 2);
    assert!(asked_last(&client.maia, 1).contains("two"));
}

#[tokio::test]
async fn a_v2_prompt_joined_to_a_turn_that_is_cancelled_never_reaches_the_model() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_b",
        "Bash",
        json!({"command": "echo never > never.txt"}),
    )]));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]});
    client.call("session/prompt", params, "PromptRequest").await;
    checked_wait(&mut client, crate::harness::is_permission).await;
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "and this"}]});
    let joined = client.call("session/prompt", params, "PromptRequest").await;
    client
        .maia
        .notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let seen = client.until_idle(|_| None).await;
    let answer = answer_to(&mut client, &seen, joined).await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cancelled")),
        "{answer}"
    );
    // Nothing more runs, and the session takes the next prompt.
    client.maia.mock.push(mock::text_reply("after"));
    client.turn(&sid, "next", |_| None).await;
    assert_eq!(client.maia.mock.requests().len(), 2);
    assert!(asked_last(&client.maia, 1).contains("next"));
}

#[tokio::test]
async fn two_v2_prompts_sent_back_to_back_are_both_answered_and_both_run() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::text_reply("first answer"));
    client.maia.mock.push(mock::text_reply("second answer"));
    // The second before a byte of the first's answer is read.
    let one = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]});
    let one = client.call("session/prompt", one, "PromptRequest").await;
    let two = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]});
    let two = client.call("session/prompt", two, "PromptRequest").await;
    let mut seen = client.until_idle(|_| None).await;
    seen.extend(client.until_idle(|_| None).await);
    let mut ids = Vec::new();
    for id in [one, two] {
        let answer = answer_to(&mut client, &seen, id).await;
        check("PromptResponse", &answer["result"]);
        ids.push(answer["result"]["messageId"].clone());
    }
    assert_ne!(ids[0], ids[1]);
    // Each id names a user message the client was told.
    for id in &ids {
        assert!(
            seen.iter()
                .any(|m| m["params"]["update"]["sessionUpdate"] == "user_message"
                    && m["params"]["update"]["messageId"] == *id),
            "{id}: {seen:#?}"
        );
    }
    assert_eq!(client.maia.mock.requests().len(), 2);
    assert!(asked_last(&client.maia, 0).contains("one"));
    assert!(asked_last(&client.maia, 1).contains("two"));
}
