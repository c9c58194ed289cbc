//! Context management under a real limit: the mock LLM enforces its context
//! window (HTTP 400 with LiteLLM's or OpenAI's body for any request over
//! it), and compaction must keep the user's words, size its own requests,
//! and leave the journal telling the whole story.

use std::time::Duration;

use maia_test_support::{self as mock, WindowError, estimate_tokens};
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, choose, content_text, session_files, updates_of};

async fn ready(settings: Value) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings,
        ..Default::default()
    })
    .await;
    maia.initialize_with(json!({"session": {"compaction": {}}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// [`ready`] with a model that answers at most 500 tokens (its
/// `/model/info`): the output reserve is 500, so automatic compaction fires
/// 5,000 tokens below the window, leaving these tests' windows to the
/// provider's rejections and the summary's sizing.
async fn ready_short_answers(settings: Value) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings,
        ..Default::default()
    })
    .await;
    maia.mock.set_model_info(json!({"data": [
        {"model_name": "mock-model", "model_info": {"max_output_tokens": 500}},
    ]}));
    maia.initialize_with(json!({"session": {"compaction": {}}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

fn journal(maia: &Maia, name: &str) -> Vec<Value> {
    std::fs::read_to_string(maia.path(&format!(".maia/.sessions/{name}.jsonl")))
        .unwrap_or_else(|e| panic!("no journal {name}: {e}"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn is_summary_request(request: &Value) -> bool {
    request["max_tokens"].is_u64()
        && request["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You summarise a coding session"))
}

/// A prompt of about `tokens` tokens (4 characters each) ending with `tag`.
fn long_prompt(tag: &str, tokens: usize) -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < tokens * 4 {
        text.push_str(&format!("line {i} of the notes for {tag}. "));
        i += 1;
    }
    text.push_str(&format!("QUESTION {tag}: what is the answer?"));
    text
}

#[tokio::test]
async fn reactive_compaction_keeps_the_prompt_verbatim_in_the_request_and_the_journal() {
    let (mut maia, sid) = ready_short_answers(json!({})).await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "remember the word banana").await;
    let id = maia.prompt(&sid, "/rename work").await;
    maia.response(id).await;
    let base = estimate_tokens(&maia.mock.requests()[0]);
    // MAIA believes the list's 32,768 tokens; the provider allows much less.
    maia.mock
        .enforce_context_window(base + 12_000, WindowError::LiteLlm);
    maia.mock.push(mock::text_reply("second answer"));
    let second = long_prompt("two", 6_500);
    maia.turn(&sid, &second).await;
    assert!(maia.mock.rejected().is_empty());

    let third = long_prompt("three", 6_500);
    maia.mock.push(mock::text_reply(
        "## Project context\nThe word is banana.\n## Current goal\n-\n## Relevant files\n-\n## Decisions and conclusions\n-\n## Next steps\n-",
    ));
    maia.mock.push(mock::text_reply("third answer"));
    let (resp, before) = maia.turn(&sid, &third).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&before), "third answer");
    let requests = maia.mock.requests();
    let rejected = maia.mock.rejected();
    assert_eq!(rejected.len(), 1, "one request over the window");
    let rejected_size = estimate_tokens(&requests[rejected[0]]);
    let summary = &requests[rejected[0] + 1];
    assert!(is_summary_request(summary), "{summary}");
    assert!(
        estimate_tokens(summary) < rejected_size,
        "the summary request ({}) is smaller than the rejected one ({rejected_size})",
        estimate_tokens(summary)
    );
    eprintln!(
        "reactive: rejected {rejected_size}, summary request {}",
        estimate_tokens(summary)
    );
    let summarised = summary.to_string();
    assert!(summarised.contains("banana") && summarised.contains("QUESTION two"));
    assert!(
        !summarised.contains("QUESTION three"),
        "the latest message is kept, not summarised"
    );
    // The request after compaction: the summary, then the prompt verbatim.
    let after = requests.last().unwrap();
    let messages = after["messages"].as_array().unwrap();
    assert!(
        content_text(&messages[0]).contains("The word is banana."),
        "{}",
        serde_json::to_string_pretty(
            &requests
                .iter()
                .map(|r| r["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| content_text(m).chars().take(150).collect::<String>())
                    .collect::<Vec<_>>())
                .collect::<Vec<_>>()
        )
        .unwrap()
    );
    assert_eq!(messages.len(), 2, "{after}");
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(content_text(&messages[1]), third);
    assert!(!after.to_string().contains("was compacted to fit"));

    // The continued journal holds the question and the answer.
    assert_eq!(session_files(&maia), ["work.jsonl", "work__1.jsonl"]);
    let records = journal(&maia, "work__1");
    let shown: Vec<_> = records
        .iter()
        .filter(|r| r["type"] == "user_display")
        .collect();
    assert_eq!(shown.len(), 1, "{records:?}");
    assert_eq!(shown[0]["text"], third);
    let saved = records
        .iter()
        .filter(|r| r["type"] == "message")
        .map(|r| r["message"].clone())
        .collect::<Vec<_>>();
    assert_eq!(saved.len(), 2, "{saved:?}");
    assert_eq!(saved[0]["role"], "user");
    assert_eq!(content_text(&saved[0]), third);
    assert_eq!(content_text(&saved[1]), "third answer");

    // After a restart, session/load shows the question before the answer.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, before) = maia.load(&sid).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let users: Vec<String> = updates_of(&before, "user_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(users.concat(), third);
    assert_eq!(agent_text(&before), "third answer");
}

/// A reply with `text` and the given `usage` object (OpenAI's shape).
fn reply_with_usage(text: &str, usage: Value) -> mock::Reply {
    mock::stream(vec![
        mock::sse_chunk(&mock::role_chunk()),
        mock::sse_chunk(&mock::chunk(json!({"content": text}), None)),
        mock::sse_chunk(&mock::chunk(json!({}), Some("stop"))),
        mock::sse_chunk(
            &json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
            "model": "mock-model", "choices": [], "usage": usage}),
        ),
        mock::DONE.to_owned(),
    ])
}

/// A turn whose model reads `file` (allowed once), then gets `replies`.
async fn read_turn(
    maia: &mut Maia,
    sid: &str,
    file: &str,
    text: &str,
    replies: Vec<mock::Reply>,
) -> (Value, Vec<Value>) {
    let path = maia.path(file);
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_read",
        "Read",
        json!({"file_path": path}),
    )]));
    for reply in replies {
        maia.mock.push(reply);
    }
    let id = maia.prompt(sid, text).await;
    maia.response_with(id, choose("allow_once")).await
}

#[tokio::test]
async fn a_huge_tool_result_is_cut_and_the_summary_request_is_never_over_the_window() {
    let (mut maia, sid) = ready_short_answers(json!({})).await;
    maia.mock.push(mock::text_reply("hello"));
    maia.turn(&sid, "hi").await;
    let base = estimate_tokens(&maia.mock.requests()[0]);
    let limit = base + 12_000;
    std::fs::write(
        maia.path(".maia/settings.json"),
        json!({"contextWindows": {"mock-model": limit}}).to_string(),
    )
    .unwrap();
    let sid = maia.new_session().await;
    maia.mock.enforce_context_window(limit, WindowError::OpenAi);
    // 1,500 lines of 60 characters: about 22,000 tokens, far over a quarter
    // of the window.
    let big: String = (0..1_500)
        .map(|i| format!("{i:05} the quick brown fox jumps over the lazy dog, again.\n"))
        .collect();
    std::fs::write(maia.path("big.txt"), &big).unwrap();
    let (resp, _) = read_turn(
        &mut maia,
        &sid,
        "big.txt",
        "read big.txt",
        vec![mock::text_reply("read it")],
    )
    .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let requests = maia.mock.requests();
    let after_tool = requests.last().unwrap();
    let result = after_tool["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let text = content_text(result);
    let share = (limit as f64 * 0.25 * 4.0) as usize;
    assert!(
        text.len() < share + 2_000,
        "cut to about a quarter of the window: {} chars",
        text.len()
    );
    assert!(text.contains("00000 the quick") && text.contains("01499 the quick"));
    assert!(
        text.contains("MAIA cut") && text.contains("offset"),
        "{text:.300}"
    );
    assert!(maia.mock.rejected().is_empty());

    // More reads grow the context past the window: compaction before a
    // request (estimate over window − reserve − 4,500), tool results shrunk for the
    // summary; no summary request is ever over the window.
    maia.mock.set_rule(|request| {
        is_summary_request(request).then(|| mock::text_reply("## Project context\nreading files\n## Current goal\n-\n## Relevant files\n-\n## Decisions and conclusions\n-\n## Next steps\n-"))
    });
    for i in 0..3 {
        std::fs::write(maia.path(&format!("b{i}.txt")), &big).unwrap();
        // Summaries (one or two parts) and the answer, in whatever order
        // the turn needs them: a summary request gets a summary.
        read_turn(
            &mut maia,
            &sid,
            &format!("b{i}.txt"),
            &format!("read b{i}"),
            vec![mock::text_reply(&format!("done {i}"))],
        )
        .await;
    }
    let requests = maia.mock.requests();
    let summaries: Vec<u64> = requests
        .iter()
        .filter(|r| is_summary_request(r))
        .map(estimate_tokens)
        .collect();
    assert!(!summaries.is_empty(), "a compaction happened");
    assert!(
        summaries.iter().all(|&t| t <= limit),
        "summary requests {summaries:?} within the window {limit}"
    );
    assert!(
        maia.mock.rejected().is_empty(),
        "nothing was sent over the window"
    );
    let shrunk = requests.iter().filter(|r| is_summary_request(r)).any(|r| {
        r.to_string()
            .contains("of this tool result cut for the summary")
    });
    assert!(shrunk, "old tool results were cut to head and tail");
    eprintln!("window {limit}, summary requests {summaries:?}");
}

#[tokio::test]
async fn a_latest_message_alone_over_the_window_is_refused_with_its_size() {
    let (mut maia, sid) = ready(json!({"contextWindows": {"mock-model": 20_000}})).await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "hello").await;
    let huge = "word ".repeat(20_000 * 4 / 5 + 100);
    let (resp, before) = maia.turn(&sid, &huge).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let text = agent_text(&before);
    assert!(
        text.contains("does not fit") && text.contains("20000 tokens"),
        "{text}"
    );
    assert_eq!(maia.mock.requests().len(), 1, "no request that must fail");
    assert!(updates_of(&before, "compaction_update").is_empty());
    // The conversation goes on without the refused message.
    maia.mock.push(mock::text_reply("still here"));
    maia.turn(&sid, "shorter then").await;
    let last = maia.mock.requests().last().unwrap().to_string();
    assert!(last.contains("hello") && last.contains("shorter then"));
    assert!(!last.contains("word word word"));
}

#[tokio::test]
async fn a_rejected_summary_request_is_retried_smaller_once_then_the_conversation_stays() {
    let (mut maia, sid) = ready(json!({})).await;
    for i in 0..3 {
        maia.mock.push(mock::text_reply(&format!("answer {i}")));
        maia.turn(&sid, &long_prompt(&format!("p{i}"), 2_000)).await;
    }
    // The provider now takes only small requests: the summary of 6,000
    // tokens is rejected, then its retry at 60 %, then the model is told.
    maia.mock
        .enforce_context_window(1_500, WindowError::LiteLlm);
    let (resp, before) = maia.turn(&sid, "/compact").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let requests = maia.mock.requests();
    let summaries: Vec<u64> = requests[3..].iter().map(estimate_tokens).collect();
    eprintln!("rejected summary then its retry: {summaries:?}");
    assert_eq!(summaries.len(), 2, "one retry: {summaries:?}");
    assert!(summaries[1] < summaries[0], "{summaries:?}");
    assert_eq!(maia.mock.rejected().len(), 2);
    let text = agent_text(&before);
    assert!(
        text.contains("Not compacted") && text.contains("even when made smaller"),
        "{text}"
    );
    let failed = updates_of(&before, "compaction_update");
    assert_eq!(failed.last().unwrap()["status"], "failed");
    assert_eq!(session_files(&maia).len(), 1, "no __1 file");
    maia.mock
        .enforce_context_window(1_000_000, WindowError::LiteLlm);
    maia.mock.push(mock::text_reply("fine"));
    maia.turn(&sid, "next").await;
    let last = maia.mock.requests().last().unwrap().to_string();
    assert!(
        last.contains("QUESTION p0") && last.contains("QUESTION p2"),
        "history unchanged"
    );
}

#[tokio::test]
async fn the_name_wrap_never_overwrites_an_existing_file() {
    let (mut maia, sid) = ready(json!({})).await;
    std::fs::create_dir_all(maia.path(".maia/.sessions")).unwrap();
    let existing = "{\"type\":\"header\"}\n";
    std::fs::write(maia.path(".maia/.sessions/x__1.jsonl"), existing).unwrap();
    let before = maia.compact_renamed(&sid, "x__1000").await;
    assert!(
        agent_text(&before).contains("`x__2`"),
        "{}",
        agent_text(&before)
    );
    assert_eq!(
        std::fs::read_to_string(maia.path(".maia/.sessions/x__1.jsonl")).unwrap(),
        existing,
        "x__1 untouched"
    );
}

#[tokio::test]
async fn usage_excludes_reasoning_tokens() {
    let (mut maia, sid) = ready(json!({"contextWindows": {"mock-model": 100_000}})).await;
    maia.mock.push(reply_with_usage(
        "answer",
        json!({"prompt_tokens": 3517, "completion_tokens": 158, "total_tokens": 3675,
               "completion_tokens_details": {"reasoning_tokens": 100},
               "prompt_tokens_details": {"cached_tokens": 3000}}),
    ));
    let (_, before) = maia.turn(&sid, "think hard").await;
    let usage = updates_of(&before, "usage_update");
    assert_eq!(usage.last().unwrap()["used"], 3575, "{usage:?}");
    assert_eq!(usage.last().unwrap()["size"], 100_000);
    // /context shows the same number, its source, and the cached tokens.
    let (_, before) = maia.turn(&sid, "/context").await;
    let text = agent_text(&before);
    assert!(text.contains("3575 of 100000 tokens"), "{text}");
    assert!(
        text.contains("measured") && text.contains("calibration"),
        "{text}"
    );
    assert!(
        text.contains("100 of them reasoning") && text.contains("3000 read"),
        "{text}"
    );
    assert!(text.contains("(from manual)"), "{text}");
}

fn marked(request: &Value) -> Vec<usize> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m.to_string()
                .contains("\"cache_control\":{\"type\":\"ephemeral\"}")
        })
        .map(|(i, _)| i)
        .collect()
}

#[tokio::test]
async fn prompt_caching_marks_for_anthropic_models_only() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"model": "claude"}),
        ..Default::default()
    })
    .await;
    maia.mock
        .set_models(vec![json!({"id": "claude"}), json!({"id": "gpt"})]);
    maia.mock.set_model_info(json!({"data": [
        {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-sonnet-4-5"},
         "model_info": {"max_input_tokens": 200000, "litellm_provider": "anthropic"}},
        {"model_name": "gpt", "litellm_params": {"model": "openai/gpt-4o"},
         "model_info": {"max_input_tokens": 128000, "litellm_provider": "openai"}},
    ]}));
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("one"));
    maia.turn(&sid, "first").await;
    maia.mock.push(mock::text_reply("two"));
    maia.turn(&sid, "second").await;
    let requests = maia.mock.requests();
    let last = requests.last().unwrap();
    assert_eq!(last["messages"].as_array().unwrap().len(), 4);
    // The system message and the last two messages, nothing else.
    assert_eq!(marked(last), [0, 2, 3], "{last}");
    assert_eq!(
        last["messages"][3]["content"],
        json!([{"type": "text", "text": "second", "cache_control": {"type": "ephemeral"}}])
    );
    let id = maia.prompt(&sid, "/model gpt").await;
    maia.response(id).await;
    maia.mock.push(mock::text_reply("three"));
    maia.turn(&sid, "third").await;
    let last = maia.mock.requests().last().unwrap().clone();
    assert_eq!(last["model"], "gpt");
    assert!(marked(&last).is_empty(), "{last}");
    assert!(!last.to_string().contains("cache_control"));
}

#[tokio::test]
async fn small_model_writes_the_summary() {
    let (mut maia, sid) = ready(json!({"smallModel": "mini"})).await;
    maia.mock
        .set_models(vec![json!({"id": "mock-model"}), json!({"id": "mini"})]);
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "hello").await;
    maia.mock
        .push(mock::text_reply("## Project context\nsmall"));
    maia.turn(&sid, "/compact").await;
    let requests = maia.mock.requests();
    assert_eq!(requests[0]["model"], "mock-model");
    assert!(is_summary_request(&requests[1]));
    assert_eq!(requests[1]["model"], "mini");
    maia.mock.push(mock::text_reply("ok"));
    maia.turn(&sid, "go on").await;
    assert_eq!(maia.mock.requests()[2]["model"], "mock-model");
}

#[tokio::test]
async fn a_tool_call_written_as_text_runs_and_one_mixed_with_prose_is_corrected() {
    let (mut maia, sid) = ready(json!({})).await;
    std::fs::write(maia.path("a.txt"), "alpha").unwrap();
    let written =
        "<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.txt\"}}</tool_call>";
    // A reply that is nothing but a call runs as that call, shown as a
    // tool call and never as text.
    maia.mock.push(mock::text_chunks(
        &[&written[..12], &written[12..]],
        Duration::ZERO,
    ));
    maia.mock.push(mock::text_reply("it says alpha"));
    let id = maia.prompt(&sid, "read a.txt").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(updates_of(&before, "tool_call").len(), 1);
    assert!(
        !agent_text(&before).contains("tool_call"),
        "{}",
        agent_text(&before)
    );
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 2);
    // The next request carries it as a real call and its result.
    let messages = requests[1]["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["tool_calls"][0]["function"]["name"], "Read");
    assert_eq!(messages[n - 1]["role"], "tool");
    assert!(content_text(&messages[n - 1]).contains("alpha"));

    // A call mixed with prose: corrected once; mixed again, the model is
    // switched to text edits (no tools offered) and its answer ends the turn.
    let mixed = "Let me read it: default_api:Read(file_path=\"a.txt\")";
    maia.mock.push(mock::text_reply(mixed));
    maia.mock.push(mock::text_reply(mixed));
    maia.mock.push(mock::text_reply("It says alpha."));
    let (resp, before) = maia.turn(&sid, "again").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 5);
    let retry = requests[3]["messages"].as_array().unwrap();
    assert!(content_text(retry.last().unwrap()).contains("tool-calling interface"));
    assert!(
        requests[3]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    assert!(
        requests[4]
            .get("tools")
            .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)),
        "{}",
        requests[4]
    );
    assert!(content_text(&requests[4]["messages"][0]).contains("# How to change a file"));
    assert!(agent_text(&before).contains("edits with text blocks"));
    assert_eq!(maia.mock.pending_replies(), 0);
    let (_, before) = maia.turn(&sid, "/context").await;
    assert!(
        agent_text(&before).contains(
            "tool calls written as text: 1 run as calls, 1 corrections sent, 0 shown as text"
        ),
        "{}",
        agent_text(&before)
    );
}

#[tokio::test]
async fn with_text_edits_off_a_mixed_call_is_corrected_twice_then_said_unfinished() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"textEdits": false}),
        ..Default::default()
    })
    .await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    let mixed = "I will call {\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.txt\"}} now.";
    for _ in 0..3 {
        maia.mock.push(mock::text_reply(mixed));
    }
    let (resp, before) = maia.turn(&sid, "read a.txt").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(maia.mock.requests().len(), 3);
    assert!(agent_text(&before).contains(mixed));
    let notices: Vec<_> = updates_of(&before, "notice");
    assert!(
        notices
            .iter()
            .any(|n| n["severity"] == "warning" && n.to_string().contains("after 2 corrections")),
        "{notices:?}"
    );
}

#[tokio::test]
async fn a_window_known_only_by_asking_is_asked_once_and_cached_on_disk() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"model": "mystery"}),
        ..Default::default()
    })
    .await;
    maia.mock.set_models(vec![json!({"id": "mystery"})]);
    maia.mock.push_window_answer(mock::text_reply("65536"));
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("answer"));
    let (resp, _) = maia.turn(&sid, "hi").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let cache = maia.home.path().join(".maia/cache/windows.json");
    assert!(
        crate::harness::eventually(Duration::from_secs(10), || cache.exists()).await,
        "the answer is cached on disk"
    );
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    let entry = &saved["windows"][0];
    assert_eq!(saved["version"], 1);
    assert_eq!(entry["model"], "mystery");
    assert_eq!(entry["tokens"], 65536);
    assert_eq!(entry["source"], "askedModel");
    assert!(entry["date"].as_str().unwrap().ends_with('Z'));
    assert_eq!(maia.mock.window_questions(), 1);

    // The next process uses the cached answer from its first turn, without asking.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("again"));
    let (_, before) = maia.turn(&sid, "hi").await;
    let usage = updates_of(&before, "usage_update");
    assert_eq!(usage.last().unwrap()["size"], 65536, "{usage:?}");
    assert_eq!(maia.mock.window_questions(), 1, "asked once, ever");
}

#[tokio::test]
async fn a_rejected_summary_request_is_retried_smaller_in_parts_that_fit() {
    let (mut maia, sid) = ready(json!({})).await;
    for i in 0..3 {
        maia.mock.push(mock::text_reply(&format!("answer {i}")));
        maia.turn(&sid, &long_prompt(&format!("p{i}"), 2_000)).await;
    }
    // MAIA believes 32,768 tokens; the provider takes 4,000.
    maia.mock.enforce_context_window(4_000, WindowError::OpenAi);
    let parts = std::sync::Arc::new(std::sync::Mutex::new(0));
    let seen = parts.clone();
    maia.mock.set_rule(move |request| {
        is_summary_request(request).then(|| {
            let mut n = seen.lock().unwrap();
            *n += 1;
            mock::text_reply(&format!("## Project context\nsummary {n}"))
        })
    });
    let (_, before) = maia.turn(&sid, "/compact").await;
    let text = agent_text(&before);
    assert!(text.contains("continues as"), "{text}");
    let requests = maia.mock.requests();
    let summaries: Vec<u64> = requests[3..].iter().map(estimate_tokens).collect();
    let rejected = maia.mock.rejected();
    assert_eq!(
        rejected,
        [3],
        "only the first, whole summary request: {summaries:?}"
    );
    assert!(summaries.len() >= 3, "{summaries:?}");
    assert!(
        summaries[1..]
            .iter()
            .all(|&t| t <= 4_000 && t < summaries[0]),
        "{summaries:?}"
    );
    // Oldest first, each part with the summary so far.
    assert!(requests[4].to_string().contains("QUESTION p0"));
    assert!(requests.last().unwrap().to_string().contains("QUESTION p2"));
    for (i, r) in requests[5..].iter().enumerate() {
        assert!(
            r.to_string().contains(&format!("summary {}", i + 1)),
            "merged: {r}"
        );
    }
    eprintln!("rejected {} then parts {:?}", summaries[0], &summaries[1..]);
    assert_eq!(*parts.lock().unwrap(), summaries.len() - 1);
}

#[tokio::test]
async fn absurd_usage_numbers_from_the_proxy_are_not_believed() {
    let (mut maia, sid) = ready(json!({"contextWindows": {"mock-model": 100_000}})).await;
    // Numbers past u64 (no total): no crash, and the meter stays sane.
    maia.mock.push(reply_with_usage(
        "first",
        json!({"prompt_tokens": 1e30, "completion_tokens": 18446744073709551615u64}),
    ));
    let (resp, before) = maia.turn(&sid, "one").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let used = updates_of(&before, "usage_update").last().unwrap()["used"].clone();
    assert!(used.as_u64().is_some_and(|u| u < 100_000), "{used}");
    // A prompt of a trillion tokens in a 100,000 window: not a reason to
    // compact every turn.
    maia.mock.push(reply_with_usage(
        "second",
        json!({"prompt_tokens": 1_000_000_000_000u64, "completion_tokens": 5}),
    ));
    let (_, before) = maia.turn(&sid, "two").await;
    let used = updates_of(&before, "usage_update").last().unwrap()["used"].clone();
    assert!(used.as_u64().is_some_and(|u| u < 100_000), "{used}");
    // No prompt tokens (null): the answer's 5 tokens are not the context.
    maia.mock.push(reply_with_usage(
        "third",
        json!({"prompt_tokens": null, "completion_tokens": 5}),
    ));
    let (_, before) = maia.turn(&sid, "three").await;
    let used = updates_of(&before, "usage_update").last().unwrap()["used"].clone();
    assert!(used.as_u64().is_some_and(|u| u > 100), "{used}");
    maia.mock.push(mock::text_reply("fourth"));
    let (_, before) = maia.turn(&sid, "four").await;
    assert!(updates_of(&before, "compaction").is_empty(), "{before:?}");
    assert_eq!(maia.mock.requests().len(), 4, "no summary request");
    assert!(agent_text(&before).contains("fourth"));
}
