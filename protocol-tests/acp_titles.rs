//! Thread titles written by a labelling call after the first answer: sent
//! as `session_info_update` after the turn's answer, saved (listed and
//! reloaded), charged to the thread; a failed or answer-shaped reply leaves
//! the prompt's title and is retried once at the next turn; a rename, before
//! or during the call, wins; `titles: false` makes no call.

use std::time::Duration;

use maia_test_support::{self as mock, Gate, Reply};
use serde_json::{Value, json};

use crate::harness::{Maia, Options, eventually, updates_of};

const WAIT: Duration = Duration::from_secs(20);

async fn open(settings: Value) -> (Maia, String) {
    Maia::ready_with(Options {
        settings,
        ..Options::default()
    })
    .await
}

/// One prompt answered `reply`; the messages up to and including its
/// response.
async fn turn(maia: &mut Maia, sid: &str, text: &str, reply: &str) -> Vec<Value> {
    maia.mock.push(mock::text_reply(reply));
    let id = maia.prompt(sid, text).await;
    let (resp, mut before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    before.push(resp);
    before
}

/// The titles of the `session_info_update`s among `messages`.
fn titles(messages: &[Value]) -> Vec<String> {
    updates_of(messages, "session_info_update")
        .iter()
        .filter_map(|u| u["title"].as_str().map(str::to_owned))
        .collect()
}

/// Waits until the mock got `n` labelling requests.
async fn title_requests(maia: &Maia, n: usize) {
    let mock = maia.mock.clone();
    assert!(
        eventually(WAIT, || mock.title_requests().len() >= n).await,
        "{n} title requests expected, got {}",
        maia.mock.title_requests().len()
    );
}

/// The title `session/list` shows for `sid`.
async fn listed_title(maia: &mut Maia, sid: &str) -> Option<String> {
    let cwd = maia.cwd();
    let id = maia.request("session/list", json!({"cwd": cwd})).await;
    let (resp, _) = maia.response(id).await;
    resp["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions in {resp}"))
        .iter()
        .find(|s| s["sessionId"] == sid)
        .and_then(|s| s["title"].as_str().map(str::to_owned))
}

/// The journal lines of the thread's only file.
fn journal(maia: &Maia) -> Vec<Value> {
    let dir = maia.path(".maia/.sessions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    crate::harness::read(&files.remove(0))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The text of a labelling request's last message.
fn instruction_message(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_labelled_title_is_sent_after_the_answer_saved_listed_charged_and_reloaded() {
    let settings = json!({
        "smallModel": "mini",
        "prices": {"mini": {"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}},
    });
    let (mut maia, sid) = open(settings).await;
    maia.mock
        .push_title_answer(mock::text_reply("\"Login fails after token expiry.\""));
    let prompt = format!(
        "the login fails after the token expires, can you fix it? {}",
        "context ".repeat(400)
    );
    let first = turn(&mut maia, &sid, &prompt, "I found the cause in auth.rs.").await;
    // The turn's answer never waits for the title: the prompt's text first.
    assert!(
        titles(&first)[0].starts_with("the login fails"),
        "{first:?}"
    );
    let (info, _) = maia
        .wait_for(|m| {
            m["params"]["update"]["sessionUpdate"] == "session_info_update"
                && m["params"]["update"]["title"] == "Login fails after token expiry"
        })
        .await;
    assert_eq!(info["params"]["sessionId"], sid);

    // The request: the small model, the transcript delimited, bounded, the
    // instruction last, no tools.
    let requests = maia.mock.title_requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request["model"], "mini");
    assert!(
        request
            .get("tools")
            .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty))
    );
    let text = instruction_message(request);
    assert!(
        text.starts_with("<conversation>\nUser: the login fails"),
        "{text}"
    );
    assert!(
        text.contains("Assistant: I found the cause in auth.rs."),
        "{text}"
    );
    assert!(
        text.trim_end().ends_with("do not answer the user."),
        "{text}"
    );
    assert!(text.len() < 3500, "bounded: {} bytes", text.len());
    assert_eq!(maia.mock.requests().len(), 1, "the turn's request only");

    // Saved: first in the journal, charged to the thread, listed.
    let lines = journal(&maia);
    assert_eq!(
        lines[1],
        json!({"type": "title", "title": "Login fails after token expiry", "source": "label"})
    );
    assert_eq!(
        lines.iter().filter(|l| l["type"] == "title").count(),
        1,
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "usage" && l["charge"]["model"] == "mini"),
        "the title call is charged: {lines:?}"
    );
    assert_eq!(
        listed_title(&mut maia, &sid).await.as_deref(),
        Some("Login fails after token expiry")
    );

    // A later turn makes no other request; the title stays.
    let later = turn(&mut maia, &sid, "and the logout?", "Also fixed.").await;
    assert!(titles(&later).is_empty(), "{later:?}");

    // After a restart: listed and replayed.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    assert_eq!(
        listed_title(&mut maia, &sid).await.as_deref(),
        Some("Login fails after token expiry")
    );
    let (resp, replay) = maia.load(&sid).await;
    assert!(resp.get("result").is_some(), "{resp}");
    assert_eq!(titles(&replay), ["Login fails after token expiry"]);
    assert_eq!(maia.mock.title_requests().len(), 1);
}

#[tokio::test]
async fn a_failing_title_request_is_silent_and_retried_at_the_next_turn() {
    let (mut maia, sid) = open(json!({})).await;
    maia.mock
        .push_title_answer(mock::error_reply(400, "the small model is unavailable"));
    let first = turn(&mut maia, &sid, "rename the config loader", "Done.").await;
    title_requests(&maia, 1).await;
    assert_eq!(titles(&first), ["rename the config loader"]);
    maia.mock
        .push_title_answer(mock::text_reply("Config loader rename"));
    let second = turn(&mut maia, &sid, "also the tests", "Done too.").await;
    // Nothing of the failure reached the user.
    let text = serde_json::to_string(&second).unwrap();
    assert!(
        !text.contains("unavailable"),
        "no word of the failure: {text}"
    );
    let (info, _) = maia
        .wait_for(|m| m["params"]["update"]["title"] == "Config loader rename")
        .await;
    assert_eq!(info["params"]["sessionId"], sid);
    assert_eq!(maia.mock.title_requests().len(), 2);
    assert_eq!(
        listed_title(&mut maia, &sid).await.as_deref(),
        Some("Config loader rename")
    );
}

#[tokio::test]
async fn a_chatbot_shaped_reply_is_refused_and_retried_once_only() {
    let (mut maia, sid) = open(json!({})).await;
    maia.mock.push_title_answer(mock::text_reply(
        "Sure! Here is a title for your conversation: Config loader",
    ));
    turn(&mut maia, &sid, "rename the config loader", "Done.").await;
    title_requests(&maia, 1).await;
    maia.mock
        .push_title_answer(mock::text_reply("What would you like to call it?"));
    let second = turn(&mut maia, &sid, "also the tests", "Done too.").await;
    title_requests(&maia, 2).await;
    maia.mock
        .push_title_answer(mock::text_reply("Never asked for"));
    let third = turn(&mut maia, &sid, "and the docs", "Done as well.").await;
    let fourth = turn(&mut maia, &sid, "thanks", "You are welcome.").await;
    for messages in [&second, &third, &fourth] {
        assert!(titles(messages).is_empty(), "{messages:?}");
    }
    assert_eq!(maia.mock.title_requests().len(), 2, "one retry only");
    assert_eq!(
        listed_title(&mut maia, &sid).await.as_deref(),
        Some("rename the config loader")
    );
}

#[tokio::test]
async fn a_rename_before_the_first_answer_means_no_title_call() {
    let (mut maia, sid) = open(json!({})).await;
    let id = maia
        .request(
            "session/set_title",
            json!({"sessionId": sid, "title": "my own name"}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["title"], "my own name", "{resp}");
    maia.mock
        .push_title_answer(mock::text_reply("Never asked for"));
    for prompt in ["first", "second", "third"] {
        let messages = turn(&mut maia, &sid, prompt, "ok").await;
        // The rename's own update may come after its answer.
        assert!(
            titles(&messages).iter().all(|t| t == "my own name"),
            "{messages:?}"
        );
    }
    assert!(maia.mock.title_requests().is_empty());
    assert_eq!(
        listed_title(&mut maia, &sid).await.as_deref(),
        Some("my own name")
    );
}

#[tokio::test]
async fn a_rename_during_the_title_call_wins() {
    let (mut maia, sid) = open(json!({})).await;
    let gate = Gate::default();
    maia.mock.push_title_answer(Reply::Gated {
        gate: gate.clone(),
        reply: Box::new(mock::text_reply("Config loader rename")),
    });
    turn(&mut maia, &sid, "rename the config loader", "Done.").await;
    title_requests(&maia, 1).await;
    let id = maia
        .request(
            "session/set_title",
            json!({"sessionId": sid, "title": "loader work"}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["title"], "loader work", "{resp}");
    gate.open();
    // The call's answer arrived and was charged (its usage told)…
    let (_, between) = maia
        .wait_for(|m| m["params"]["update"]["sessionUpdate"] == "usage_update")
        .await;
    // … and dropped: the rename is the title, now and after a turn (the
    // rename's own update may come after its answer).
    assert!(
        titles(&between).iter().all(|t| t == "loader work"),
        "{between:?}"
    );
    let later = turn(&mut maia, &sid, "and the tests", "ok").await;
    assert!(titles(&later).is_empty(), "{later:?}");
    assert_eq!(
        listed_title(&mut maia, &sid).await.as_deref(),
        Some("loader work")
    );
    assert_eq!(maia.mock.title_requests().len(), 1);
}

#[tokio::test]
async fn titles_off_makes_no_call() {
    let (mut maia, sid) = open(json!({"titles": false})).await;
    maia.mock
        .push_title_answer(mock::text_reply("Never asked for"));
    for prompt in ["rename the config loader", "second", "third"] {
        turn(&mut maia, &sid, prompt, "ok").await;
    }
    assert!(maia.mock.title_requests().is_empty());
    assert_eq!(
        listed_title(&mut maia, &sid).await.as_deref(),
        Some("rename the config loader")
    );
}

#[tokio::test]
async fn a_v2_client_gets_the_label_as_a_v2_session_info_update() {
    let mut client = crate::acp_v2::V2::start().await;
    let sid = client.new_session().await;
    client
        .maia
        .mock
        .push_title_answer(mock::text_reply("Config loader rename"));
    client.maia.mock.push(mock::text_reply("Done."));
    client
        .turn(&sid, "rename the config loader", |_| None)
        .await;
    let (info, _) = client
        .maia
        .wait_for(|m| m["params"]["update"]["title"] == "Config loader rename")
        .await;
    crate::acp_v2::check_sent(&info);
    assert_eq!(
        info["params"]["update"]["sessionUpdate"],
        "session_info_update"
    );
    assert_eq!(info["params"]["sessionId"], sid);
}
