//! The map of the context on `usage_update` (`_meta.maia.contextMap`), the
//! output reserve in the compaction trigger, and the `autoCompact` setting.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, updates_of};

/// The mock's model information: `mock-model` answers at most `max_output` tokens.
fn max_output(maia: &Maia, max_output: u64) {
    maia.mock.set_model_info(json!({"data": [
        {"model_name": "mock-model", "model_info": {"max_output_tokens": max_output}},
    ]}));
}

/// A session whose first request measured what every request carries
/// (system prompt, tools): a new session in the same folder then uses
/// `settings` (`mock-model`'s window among them). Returns the base size.
async fn measured(maia: &mut Maia) -> u64 {
    maia.initialize_with(json!({"session": {"compaction": {}}}))
        .await;
    let sid = maia.new_session().await;
    maia.mock
        .enforce_context_window(1_000_000, mock::WindowError::LiteLlm);
    maia.mock.push(mock::text_reply("measure"));
    maia.turn(&sid, "hi").await;
    mock::estimate_tokens(&maia.mock.requests()[0])
}

async fn session_with(maia: &mut Maia, settings: Value) -> String {
    std::fs::create_dir_all(maia.path(".maia")).unwrap();
    std::fs::write(maia.path(".maia/settings.json"), settings.to_string()).unwrap();
    maia.new_session().await
}

fn map_of(update: &Value) -> Value {
    update["_meta"]["maia"]["contextMap"].clone()
}

fn tokens_of(map: &Value, kind: &str) -> u64 {
    map["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == kind)
        .map(|s| s["tokens"].as_u64().unwrap())
        .sum()
}

#[tokio::test]
async fn usage_updates_carry_the_map_of_the_context() {
    let mut maia = Maia::start().await;
    max_output(&maia, 4_096);
    std::fs::write(
        maia.path("MAIA.md"),
        "Project rule: answer briefly.\n".repeat(40),
    )
    .unwrap();
    maia.initialize().await;
    std::fs::create_dir_all(maia.path(".maia")).unwrap();
    std::fs::write(
        maia.path(".maia/settings.json"),
        json!({"contextWindows": {"mock-model": 100_000}}).to_string(),
    )
    .unwrap();
    let sid = maia.new_session().await;
    // The mock reports the size of each request, as a provider does.
    maia.mock
        .enforce_context_window(1_000_000, mock::WindowError::LiteLlm);
    maia.mock.push(mock::text_reply("brief"));
    let (_, messages) = maia.turn(&sid, "hello").await;
    let usage = updates_of(&messages, "usage_update");
    let last = usage.last().expect("a usage_update");
    let map = map_of(last);
    assert_eq!(map["window"], 100_000, "{map}");
    assert_eq!(map["used"], last["used"]);
    assert_eq!(map["reserve"], 4_096, "the model's maximum output");
    assert_eq!(map["autoCompactAt"], 100_000 - 4_096 - 4_500);
    assert_eq!(map["source"], "measured");
    let kinds: Vec<&str> = map["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "systemPrompt",
            "instructions",
            "skills",
            "tools",
            "mcpTools",
            "conversation",
            "reserve",
            "free"
        ]
    );
    let file = &map["segments"][1];
    assert!(
        file["path"].as_str().unwrap().ends_with("MAIA.md"),
        "{file}"
    );
    // 1,240 characters: about 310 tokens, scaled to what the server measured.
    assert!(
        (150..600).contains(&file["tokens"].as_u64().unwrap()),
        "{file}"
    );
    let used = last["used"].as_u64().unwrap();
    let content: u64 = map["segments"].as_array().unwrap()[..6]
        .iter()
        .map(|s| s["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(content, used, "the segments add up to the meter's total");
    assert_eq!(tokens_of(&map, "reserve"), 4_096);
    assert_eq!(tokens_of(&map, "free"), 100_000 - used - 4_096);
    assert!(tokens_of(&map, "tools") > 0);
    assert_eq!(tokens_of(&map, "mcpTools"), 0, "no MCP server");

    // `/context` says the same numbers.
    let (_, messages) = maia.turn(&sid, "/context").await;
    let text = agent_text(&messages);
    assert!(text.contains("output reserve: 4096 tokens"), "{text}");
    assert!(
        text.contains(&format!(
            "automatic compaction: at {} tokens",
            100_000 - 4_096 - 4_500
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("~{} tokens", file["tokens"])),
        "the instruction file's segment: {text}"
    );

    // The map is for the client: the requests never carry it.
    for request in maia.mock.requests() {
        let body = request.to_string();
        assert!(!body.contains("contextMap") && !body.contains("autoCompactAt"));
    }
}

/// The trigger keeps the output reserve free: a context that fits under
/// `window − 4,500` but not under `window − reserve − 4,500` is compacted
/// before the request.
#[tokio::test]
async fn compaction_fires_earlier_by_the_output_reserve() {
    let mut maia = Maia::start_with(Options::default()).await;
    max_output(&maia, 800);
    let base = measured(&mut maia).await;
    // Without a reserve the trigger would be 1,400 tokens above the base;
    // with it, 600.
    let window = base + 4_500 + 1_400;
    let sid = session_with(
        &mut maia,
        json!({"contextWindows": {"mock-model": window}, "localModels": false}),
    )
    .await;
    maia.mock.push(mock::text_reply("first answer"));
    // About 400 tokens each: the two prompts pass the trigger only when it
    // keeps the reserve, and the second alone is under it.
    let first = format!("first: {}", "long words ".repeat(145));
    let (_, messages) = maia.turn(&sid, &first).await;
    assert!(updates_of(&messages, "compaction_update").is_empty());
    let map = map_of(updates_of(&messages, "usage_update").last().unwrap());
    let prompt = format!("{} What now?", "more words ".repeat(145));
    maia.mock.push(mock::text_reply("auto summary"));
    maia.mock.push(mock::text_reply("answer"));
    let (resp, messages) = maia.turn(&sid, &prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let statuses: Vec<_> = updates_of(&messages, "compaction_update")
        .iter()
        .map(|u| u["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("in_progress"), json!("completed")]);
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 4, "measure, first, summary, answer");
    assert!(requests[2].to_string().contains("first answer"));
    // The map told where it would fire.
    assert_eq!(map["reserve"], 800);
    assert_eq!(map["autoCompactAt"], window - 800 - 4_500);
}

#[tokio::test]
async fn with_auto_compaction_off_only_compact_compacts() {
    let mut maia = Maia::start_with(Options::default()).await;
    let base = measured(&mut maia).await;
    let window = base + 4_500 + 1_000;
    let sid = session_with(
        &mut maia,
        json!({
            "contextWindows": {"mock-model": window},
            "localModels": false,
            "autoCompact": {"enabled": false},
        }),
    )
    .await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "first").await;
    // Far over where compaction would fire, still inside the window.
    let prompt = format!("{} What now?", "more words ".repeat(900));
    maia.mock.push(mock::text_reply("answer"));
    let (resp, messages) = maia.turn(&sid, &prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&messages), "answer");
    assert!(updates_of(&messages, "compaction_update").is_empty());
    assert_eq!(maia.mock.requests().len(), 3, "no summary request");
    let map = map_of(updates_of(&messages, "usage_update").last().unwrap());
    assert_eq!(map["autoCompactAt"], Value::Null, "{map}");
    assert!(
        map["used"].as_u64().unwrap() > window - map["reserve"].as_u64().unwrap() - 4_500,
        "past the default trigger: {map}"
    );
    // `/context` says it is off; `/compact` still works.
    let (_, messages) = maia.turn(&sid, "/context").await;
    assert!(
        agent_text(&messages).contains("automatic compaction: off"),
        "{}",
        agent_text(&messages)
    );
    maia.mock.push(mock::text_reply("manual summary"));
    let (_, messages) = maia.turn(&sid, "/compact").await;
    let statuses: Vec<_> = updates_of(&messages, "compaction_update")
        .iter()
        .map(|u| u["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("in_progress"), json!("completed")]);
}

#[tokio::test]
async fn with_auto_compaction_off_a_rejected_request_asks_for_compact() {
    let mut maia = Maia::start_with(Options::default()).await;
    let base = measured(&mut maia).await;
    let sid = session_with(
        &mut maia,
        json!({"localModels": false, "autoCompact": false}),
    )
    .await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "first").await;
    // The provider holds less than the next request.
    maia.mock
        .enforce_context_window(base + 300, mock::WindowError::LiteLlm);
    let prompt = format!("{} What now?", "more words ".repeat(400));
    let (_, messages) = maia.turn(&sid, &prompt).await;
    assert!(updates_of(&messages, "compaction_update").is_empty());
    let text = agent_text(&messages);
    assert!(
        text.contains("Automatic compaction is off") && text.contains("/compact"),
        "{text}"
    );
}
