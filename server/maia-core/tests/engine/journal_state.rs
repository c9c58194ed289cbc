//! State derived from the journal (summary, title) and the history the
//! model is sent must match what a reload of the journal gives.

use maia_test_support as mock;
use serde_json::json;

use crate::harness::{Harness, agent_text, message_texts, stop_of};

const SUMMARY_HEADING: &str = "Summary of the conversation so far";

/// Whether any message of `request` contains `needle`.
fn carries(request: &serde_json::Value, needle: &str) -> bool {
    message_texts(request)
        .iter()
        .any(|(_, text)| text.contains(needle))
}

/// A prompt refused because it cannot fit, in a compacted thread, must not
/// take the summary away from the reloaded thread.
#[tokio::test]
async fn a_refused_prompt_keeps_the_summary_across_a_reload() {
    let mut h = Harness::start(json!({"contextWindows": {"mock-model": 20_000}})).await;
    h.mock.push(mock::text_reply("first answer"));
    h.prompt("remember the word banana").await;
    h.mock
        .push(mock::text_reply("The user's word is PAPAYA-SUMMARY."));
    let events = h.prompt("/compact").await;
    assert!(
        agent_text(&events).contains("__1"),
        "{}",
        agent_text(&events)
    );

    // Too large to send: refused without a request.
    let requests = h.mock.requests().len();
    let huge = "word ".repeat(20_000 * 4 / 5 + 100);
    let events = h.prompt(&huge).await;
    assert_eq!(stop_of(&events), maia_core::StopReason::EndTurn);
    assert!(
        agent_text(&events).contains("does not fit"),
        "{}",
        agent_text(&events)
    );
    assert_eq!(h.mock.requests().len(), requests);

    h.restart().await;
    h.mock.push(mock::text_reply("still here"));
    h.prompt("what was the word?").await;
    let last = h.mock.requests().last().cloned().unwrap();
    assert!(
        carries(&last, "PAPAYA-SUMMARY"),
        "the reloaded thread lost its summary: {:#?}",
        message_texts(&last)
    );
    assert!(!carries(&last, "word word word"));
}

/// `/clear` after `/compact`: the cleared conversation's summary is gone
/// and the context file is back in the system prompt, live and reloaded.
#[tokio::test]
async fn clear_forgets_the_summary_and_brings_the_context_file_back() {
    let mut h = Harness::start(json!({})).await;
    std::fs::write(h.path("MAIA.md"), "Project rule: CONTEXT-FILE-MARK.\n").unwrap();
    h.mock.push(mock::text_reply("first answer"));
    h.prompt("remember the word banana").await;
    h.mock
        .push(mock::text_reply("The user's word is PAPAYA-SUMMARY."));
    h.prompt("/compact").await;
    let events = h.prompt("/clear").await;
    assert!(agent_text(&events).contains("Context cleared"));

    h.mock.push(mock::text_reply("fresh"));
    h.prompt("hello again").await;
    let live = h.mock.requests().last().cloned().unwrap();
    assert!(
        !carries(&live, "PAPAYA-SUMMARY") && !carries(&live, SUMMARY_HEADING),
        "the cleared conversation's summary is still sent: {:#?}",
        message_texts(&live)
    );
    assert!(
        carries(&live, "CONTEXT-FILE-MARK"),
        "{:#?}",
        message_texts(&live)
    );
    assert!(!carries(&live, "banana"));

    // The reloaded thread agrees with the live one.
    h.restart().await;
    h.mock.push(mock::text_reply("again"));
    h.prompt("and now?").await;
    let reloaded = h.mock.requests().last().cloned().unwrap();
    assert!(!carries(&reloaded, "PAPAYA-SUMMARY"));
    assert!(carries(&reloaded, "CONTEXT-FILE-MARK"));
}

/// After a crash during a tool call the journal ends with a call that has
/// no result. The next turn's prompt is still the message an in-turn
/// compaction keeps verbatim.
#[tokio::test]
async fn a_crash_mid_tool_call_does_not_move_the_turns_prompt() {
    let mut h = Harness::start(json!({})).await;
    h.mock.push(mock::text_reply("hi"));
    h.prompt("hello").await;
    let journal = journal_path(&h);
    let id = h.stop().await;
    // What a crash while the tool ran leaves: the call, no result.
    append_line(
        &journal,
        &json!({"type": "message", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_crashed", "type": "function",
                "function": {"name": "Bash", "arguments": "{\"command\":\"sleep 100\"}"}}]
        }}),
    );

    // A window where the first request fits and the second, carrying a
    // large tool result, needs an in-turn compaction.
    h.set_settings(json!({"contextWindows": {"mock-model": 7_000}}));
    std::fs::write(
        h.path("big.txt"),
        "lorem ipsum dolor sit amet\n".repeat(2_000),
    )
    .unwrap();
    h.load(&id);
    h.session().set_mode(maia_core::Mode::Bypass).unwrap();
    // Realistic usage figures, so the meter measures what was sent.
    h.mock
        .enforce_context_window(7_000, mock::WindowError::LiteLlm);
    h.mock.push(mock::tool_calls_reply(&[(
        "call_read",
        "Read",
        json!({"file_path": "big.txt"}),
    )]));
    h.mock.push(mock::text_reply("SUMMARY-OF-THE-TURN"));
    h.mock.push(mock::text_reply("done"));
    h.prompt("MY-IMPORTANT-WORDS").await;

    let requests = h.mock.requests();
    eprintln!(
        "request sizes: {:?}",
        requests
            .iter()
            .map(mock::estimate_tokens)
            .collect::<Vec<_>>()
    );
    let summarised = requests
        .iter()
        .position(|r| carries(r, "SUMMARY-OF-THE-TURN") || r["max_tokens"].is_number())
        .expect("an in-turn compaction ran");
    let after = requests.last().unwrap();
    assert!(
        requests.len() > summarised + 1,
        "a request after the compaction"
    );
    assert!(
        message_texts(after)
            .iter()
            .any(|(role, text)| role == "user" && text.contains("MY-IMPORTANT-WORDS")),
        "the user's words were not kept by the compaction: {:#?}",
        message_texts(after)
    );
}

fn journal_path(h: &Harness) -> std::path::PathBuf {
    let id = h.session().id().to_owned();
    maia_core::store::find(h.cwd(), &id)
        .expect("the thread is saved")
        .path
}

fn append_line(path: &std::path::Path, value: &serde_json::Value) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(file, "{value}").unwrap();
}
