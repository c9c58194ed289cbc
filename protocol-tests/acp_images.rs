//! Images over ACP: `promptCapabilities.image`, image blocks reaching a
//! vision model as `image_url` parts with the exact bytes, for their turn
//! only; a model without vision told and the user too; `session/load`
//! replaying the image from beside the journal; `Read` of an image; and
//! files attached to a prompt counting as read for `Edit`.

use base64::Engine;
use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, choose, content_text, read, updates_of};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn png() -> Vec<u8> {
    maia_tools::image::test_png(640, 480)
}

/// `/model/info` saying whether `mock-model` accepts images.
fn vision(maia: &Maia, supports: bool) {
    maia.mock.set_model_info(json!({"data": [
        {"model_name": "mock-model", "model_info": {"supports_vision": supports}}
    ]}));
}

/// Every `image_url` URL in a request, with the role of its message.
fn image_urls(request: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in request["messages"].as_array().unwrap() {
        if let Some(parts) = m["content"].as_array() {
            for p in parts {
                if p["type"] == "image_url" {
                    out.push((
                        m["role"].as_str().unwrap().to_owned(),
                        p["image_url"]["url"].as_str().unwrap().to_owned(),
                    ));
                }
            }
        }
    }
    out
}

fn image_block(bytes: &[u8]) -> Value {
    json!({"type": "image", "data": b64(bytes), "mimeType": "image/png"})
}

/// Prompts `sid` with `text` followed by the PNG `bytes`; returns the
/// prompt response and the messages before it.
async fn prompt_with_image(
    maia: &mut Maia,
    sid: &str,
    text: &str,
    bytes: &[u8],
) -> (Value, Vec<Value>) {
    let blocks = json!([{"type": "text", "text": text}, image_block(bytes)]);
    let id = maia.prompt_blocks(sid, blocks).await;
    maia.response(id).await
}

#[tokio::test]
async fn an_image_reaches_a_vision_model_for_its_turn_only() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"], true,
        "{init}"
    );
    let sid = maia.new_session().await;
    vision(&maia, true);
    let bytes = png();
    maia.mock.push(mock::text_reply("a login form"));
    let (resp, _) = prompt_with_image(&mut maia, &sid, "what is this?", &bytes).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let first = &maia.mock.requests()[0];
    assert_eq!(
        image_urls(first),
        [(
            "user".to_owned(),
            format!("data:image/png;base64,{}", b64(&bytes))
        )]
    );
    let user = first["messages"].as_array().unwrap().last().unwrap();
    assert!(content_text(user).starts_with("what is this?"), "{user}");
    assert!(content_text(user).contains("640×480"), "{user}");

    // The next turn sees the stand-in, not the image.
    maia.mock.push(mock::text_reply("still a form"));
    let id = maia.prompt(&sid, "and now?").await;
    maia.response(id).await;
    let second = &maia.mock.requests()[1];
    assert!(image_urls(second).is_empty(), "resent: {second}");
    let earlier = content_text(&second["messages"][1]);
    assert!(
        earlier.contains("shown in turn 1") && earlier.contains("image/png, 640×480"),
        "{earlier}"
    );
    assert!(!second.to_string().contains(&b64(&bytes)));
}

#[tokio::test]
async fn a_model_without_vision_gets_a_note_and_the_user_is_told() {
    let (mut maia, sid) = Maia::ready().await;
    vision(&maia, false);
    maia.mock.push(mock::text_reply("I cannot see images"));
    let (resp, before) = prompt_with_image(&mut maia, &sid, "look", &png()).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let said = agent_text(&before);
    assert!(
        said.contains("The image was not sent") && said.contains("does not accept images"),
        "{said}"
    );
    let request = &maia.mock.requests()[0];
    assert!(image_urls(request).is_empty());
    let user = request["messages"].as_array().unwrap().last().unwrap();
    assert!(
        content_text(user).contains("not shown: the model mock-model does not accept images"),
        "{user}"
    );
}

#[tokio::test]
async fn unknown_vision_is_no_and_vision_models_setting_says_yes() {
    // Nothing says whether the model sees images: not sent.
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt_blocks(&sid, json!([image_block(&png())])).await;
    let (_, before) = maia.response(id).await;
    assert!(agent_text(&before).contains("visionModels"));
    assert!(image_urls(&maia.mock.requests()[0]).is_empty());

    // The setting decides, over /model/info.
    let (mut maia, sid) = Maia::ready_with(Options {
        settings: json!({"visionModels": ["mock-model"]}),
        ..Options::default()
    })
    .await;
    vision(&maia, false);
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt_blocks(&sid, json!([image_block(&png())])).await;
    maia.response(id).await;
    assert_eq!(image_urls(&maia.mock.requests()[0]).len(), 1);
}

#[tokio::test]
async fn an_image_by_file_uri_and_bad_images() {
    let (mut maia, sid) = Maia::ready().await;
    vision(&maia, true);
    let bytes = png();
    let path = maia.path("shot.png");
    std::fs::write(&path, &bytes).unwrap();
    maia.mock.push(mock::text_reply("ok"));
    let id = maia
        .prompt_blocks(
            &sid,
            json!([
                {"type": "image", "data": "", "mimeType": "image/png", "uri": format!("file://{}", path.display())},
                {"type": "image", "data": b64(b"<svg/>"), "mimeType": "image/svg+xml"}
            ]),
        )
        .await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let urls = image_urls(&maia.mock.requests()[0]);
    assert_eq!(urls.len(), 1);
    assert_eq!(urls[0].1, format!("data:image/png;base64,{}", b64(&bytes)));
    assert!(
        agent_text(&before).contains("not a supported image"),
        "{}",
        agent_text(&before)
    );

    // A typed @path to an image attaches it too.
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "what about @shot.png").await;
    maia.response(id).await;
    let urls = image_urls(&maia.mock.requests()[1]);
    assert_eq!(urls.len(), 1, "only this turn's image");
    assert_eq!(urls[0].1, format!("data:image/png;base64,{}", b64(&bytes)));

    // Invalid base64 is the client's error; the session goes on.
    let id = maia
        .prompt_blocks(
            &sid,
            json!([{"type": "image", "data": "###", "mimeType": "image/png"}]),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    assert_eq!(maia.mock.requests().len(), 2);
}

#[tokio::test]
async fn load_replays_the_image_from_beside_the_journal() {
    let (mut maia, sid) = Maia::ready().await;
    vision(&maia, true);
    let bytes = png();
    maia.mock.push(mock::text_reply("seen"));
    prompt_with_image(&mut maia, &sid, "look", &bytes).await;
    // The journal names the image; its bytes are stored apart.
    let sessions = maia.cwd().join(".maia/.sessions");
    let journal: String = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| read(&e.path()))
        .collect();
    assert!(journal.contains("\"user_image\""), "{journal}");
    assert!(!journal.contains(&b64(&bytes)));
    let stored: Vec<_> = std::fs::read_dir(sessions.join("images"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(stored.len(), 1);
    assert_eq!(std::fs::read(stored[0].path()).unwrap(), bytes);

    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, before) = maia.load(&sid).await;
    assert!(resp["result"].is_object(), "{resp}");
    let chunks = updates_of(&before, "user_message_chunk");
    let text = chunks
        .iter()
        .find(|c| c["content"]["type"] == "text")
        .expect("the text");
    let image = chunks
        .iter()
        .find(|c| c["content"]["type"] == "image")
        .expect("the image");
    assert_eq!(image["content"]["data"], b64(&bytes));
    assert_eq!(image["content"]["mimeType"], "image/png");
    assert_eq!(image["messageId"], text["messageId"], "one message");

    // Continuing the loaded session does not resend it.
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "again").await;
    maia.response(id).await;
    let last = maia.mock.requests().last().cloned().unwrap();
    assert!(image_urls(&last).is_empty());
}

#[tokio::test]
async fn read_of_an_image_shows_it_to_a_vision_model_for_the_turn() {
    let (mut maia, sid) = Maia::ready().await;
    vision(&maia, true);
    let bytes = png();
    std::fs::write(maia.path("ui.png"), &bytes).unwrap();
    let (resp, _) = maia
        .tool_turn(
            &sid,
            &[("call_r", "Read", json!({"file_path": "ui.png"}))],
            choose("allow_once"),
        )
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let after_read = &maia.mock.requests()[1];
    let messages = after_read["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        content_text(tool).contains("is an image (image/png, 640×480"),
        "{tool}"
    );
    assert!(!content_text(tool).contains("binary"));
    // The image follows the tool results as a user message.
    assert_eq!(
        image_urls(after_read),
        [(
            "user".to_owned(),
            format!("data:image/png;base64,{}", b64(&bytes))
        )]
    );
    assert_eq!(messages.last().unwrap()["role"], "user");

    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "next").await;
    maia.response(id).await;
    assert!(image_urls(maia.mock.requests().last().unwrap()).is_empty());
}

#[tokio::test]
async fn read_of_an_image_by_a_model_without_vision_says_so() {
    let (mut maia, sid) = Maia::ready().await;
    vision(&maia, false);
    std::fs::write(maia.path("ui.png"), png()).unwrap();
    maia.tool_turn(
        &sid,
        &[("call_r", "Read", json!({"file_path": "ui.png"}))],
        choose("allow_once"),
    )
    .await;
    let request = &maia.mock.requests()[1];
    assert!(image_urls(request).is_empty());
    let tool = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        content_text(tool).contains("not shown: the model mock-model does not accept images"),
        "{tool}"
    );
}

/// Prompts with `blocks`, then the model edits `f.txt` at once; returns
/// the Edit's result.
async fn edit_after(maia: &mut Maia, sid: &str, blocks: Value) -> String {
    let edit = json!({"file_path": "f.txt", "old_string": "beta", "new_string": "BETA"});
    maia.mock
        .push(mock::tool_calls_reply(&[("call_e", "Edit", edit)]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt_blocks(sid, blocks).await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let request = maia.mock.requests().last().cloned().unwrap();
    let tool = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    content_text(&tool)
}

/// A ready session whose cwd holds `f.txt` with `text`; returns the
/// session, the file's path and its `file://` URI.
async fn ready_with_file(text: &str) -> (Maia, String, std::path::PathBuf, String) {
    let (maia, sid) = Maia::ready().await;
    let path = maia.path("f.txt");
    std::fs::write(&path, text).unwrap();
    let uri = format!("file://{}", path.display());
    (maia, sid, path, uri)
}

#[tokio::test]
async fn attached_files_count_as_read_for_edit() {
    let text = "alpha\nbeta\n";
    // A resource link.
    let (mut maia, sid, path, uri) = ready_with_file(text).await;
    let result = edit_after(
        &mut maia,
        &sid,
        json!([{"type": "text", "text": "fix it"}, {"type": "resource_link", "uri": uri, "name": "f.txt"}]),
    )
    .await;
    assert!(result.starts_with("Edited"), "{result}");
    assert_eq!(read(&path), "alpha\nBETA\n");

    // An embedded resource with what is on disk.
    let (mut maia, sid, _, uri) = ready_with_file(text).await;
    let result = edit_after(
        &mut maia,
        &sid,
        json!([{"type": "resource", "resource": {"uri": uri, "text": text}}]),
    )
    .await;
    assert!(result.starts_with("Edited"), "{result}");

    // A typed @path.
    let (mut maia, sid, path, _) = ready_with_file(text).await;
    let result = edit_after(
        &mut maia,
        &sid,
        json!([{"type": "text", "text": "fix @f.txt please"}]),
    )
    .await;
    assert!(result.starts_with("Edited"), "{result}");
    assert_eq!(read(&path), "alpha\nBETA\n");
}

#[tokio::test]
async fn an_attachment_that_differs_from_the_file_edits_on_top_with_a_note() {
    let (mut maia, sid, path, uri) = ready_with_file("alpha\nbeta\nchanged on disk\n").await;
    let result = edit_after(
        &mut maia,
        &sid,
        json!([{"type": "resource", "resource": {"uri": uri, "text": "alpha\nbeta\n"}}]),
    )
    .await;
    // The match is still unique: applied, and the model told what changed.
    assert!(result.starts_with("Edited"), "{result}");
    assert!(
        result.contains("changed outside") && result.contains("line 3 new or changed"),
        "{result}"
    );
    assert_eq!(read(&path), "alpha\nBETA\nchanged on disk\n");
}

#[tokio::test]
async fn two_sessions_send_the_same_image_at_once() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    vision(&maia, true);
    let a = maia.new_session().await;
    let b = maia.new_session().await;
    let bytes = png();
    maia.mock.push(mock::text_reply("one"));
    maia.mock.push(mock::text_reply("two"));
    // Pipelined: the second prompt is sent before the first is answered.
    let first = maia.prompt_blocks(&a, json!([image_block(&bytes)])).await;
    let second = maia.prompt_blocks(&b, json!([image_block(&bytes)])).await;
    // The answers come in either order.
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let m = maia.next().await;
        if let Some(id) = m["id"].as_u64().filter(|id| [first, second].contains(id)) {
            answers.insert(id, m);
        }
    }
    for answer in answers.values() {
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    for request in maia.mock.requests() {
        assert_eq!(image_urls(&request).len(), 1);
    }
    let sessions = maia.cwd().join(".maia/.sessions");
    let stored: Vec<_> = std::fs::read_dir(sessions.join("images"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(stored.len(), 1, "stored once: {stored:?}");
    let journals = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file() && read(&e.path()).contains("\"user_image\""))
        .count();
    assert_eq!(journals, 2);
}

#[tokio::test]
async fn a_cancelled_turn_does_not_keep_its_image() {
    let (mut maia, sid) = Maia::ready().await;
    vision(&maia, true);
    maia.mock.push(mock::Reply::Hang);
    let id = maia
        .prompt_blocks(
            &sid,
            json!([{"type": "text", "text": "look"}, image_block(&png())]),
        )
        .await;
    // Cancelled once the request with the image is out.
    let mock = maia.mock.clone();
    assert!(crate::harness::eventually(crate::harness::WAIT, || mock.requests().len() == 1).await);
    assert_eq!(image_urls(&maia.mock.requests()[0]).len(), 1);
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "again").await;
    maia.response(id).await;
    let last = maia.mock.requests().last().cloned().unwrap();
    assert!(image_urls(&last).is_empty(), "{last}");
}

#[tokio::test]
async fn images_count_in_the_context_estimate_and_survive_a_compaction() {
    // A window 10,000 tokens above the 4,500 kept free for a summary: the
    // text of a turn fits; ten 768×2048 images (1,445 tokens each, at the
    // tile price) do not.
    let (mut maia, sid) = Maia::ready_with(Options {
        settings: json!({"contextWindows": {"mock-model": 14_500}}),
        ..Options::default()
    })
    .await;
    vision(&maia, true);
    maia.mock.push(mock::text_reply("hello"));
    let id = maia.prompt(&sid, "hi").await;
    maia.response(id).await;
    assert_eq!(maia.mock.requests().len(), 1, "no compaction for text");

    let tall = maia_tools::image::test_png(768, 2048);
    assert_eq!(maia_tools::image::token_cost(768, 2048), 1_445);
    let mut blocks = vec![json!({"type": "text", "text": "compare these"})];
    blocks.extend((0..10).map(|_| image_block(&tall)));
    maia.mock.push(mock::text_reply("the summary"));
    maia.mock.push(mock::text_reply("they match"));
    let id = maia.prompt_blocks(&sid, Value::Array(blocks)).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 3, "summary, then the answer");
    // Compacted first (the summary may take a quarter of this small window).
    assert_eq!(requests[1]["max_tokens"], 14_500 / 4, "compacted first");
    assert!(
        image_urls(&requests[1]).is_empty(),
        "the summary is asked without images"
    );
    // The images go on with the turn after the compaction.
    assert_eq!(image_urls(&requests[2]).len(), 10);

    // The next turn: the images left with their turn; no compaction.
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "thanks").await;
    maia.response(id).await;
    assert_eq!(maia.mock.requests().len(), 4);
    assert!(image_urls(&maia.mock.requests()[3]).is_empty());
}

#[tokio::test]
async fn a_turn_of_many_screenshots_sends_at_most_twenty_per_request() {
    let (mut maia, sid) = Maia::ready().await;
    vision(&maia, true);
    let bytes = png();
    for step in 0..25 {
        let file = format!("shot{step}.png");
        std::fs::write(maia.path(&file), &bytes).unwrap();
        maia.mock.push(mock::tool_calls_reply(&[(
            &format!("call_{step}"),
            "Read",
            json!({"file_path": file}),
        )]));
    }
    maia.mock.push(mock::text_reply("seen them all"));
    let id = maia.prompt(&sid, "look at each screenshot").await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 26);
    let counts: Vec<usize> = requests.iter().map(|r| image_urls(r).len()).collect();
    assert!(counts.iter().all(|&n| n <= 20), "{counts:?}");
    assert_eq!(counts.last(), Some(&20), "{counts:?}");
}

/// `/model/info` is read once per process: the vision decision uses the copy the window
/// discovery already has (a text turn first makes sure it has it).
#[tokio::test]
async fn vision_comes_from_the_model_info_already_read() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    vision(&maia, true);
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("hello"));
    let id = maia.prompt(&sid, "hi").await;
    maia.response(id).await;
    let asked = maia.mock.model_info_requests();
    assert!(asked >= 1, "the window discovery read /model/info");
    let bytes = png();
    maia.mock.push(mock::text_reply("a login form"));
    let id = maia
        .prompt_blocks(
            &sid,
            json!([{"type": "text", "text": "what is this?"}, image_block(&bytes)]),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(image_urls(&maia.mock.requests()[1]).len(), 1);
    assert_eq!(
        maia.mock.model_info_requests(),
        asked,
        "asked again for vision"
    );
}
