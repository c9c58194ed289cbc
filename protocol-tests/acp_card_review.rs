//! "Review in editor" on a permission card (issue 34): the answer that
//! allows a Write carries the text the user kept
//! (`_meta.maia.reviewedText`); MAIA writes only that, and the tool's
//! result tells the model which hunks were kept and which were not (LSP
//! mode's per-hunk report); the card's diff, once the call is done, is the
//! change written, not the proposal.

use maia_test_support as mock;
use serde_json::json;

use crate::harness::{Maia, choose, is_permission, last_tool_results, updates_of};

const OLD: &str = "one\ntwo\nthree\nfour\nfive\nsix\n";
const NEW: &str = "one\nTWO\nthree\nfour\nfive\nsix\nseven\n";
/// The first hunk undone in the editor, the second kept.
const KEPT: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";

async fn proposed_write(maia: &mut Maia, sid: &str) -> (u64, serde_json::Value) {
    std::fs::write(maia.path("a.txt"), OLD).unwrap();
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "a.txt", "content": NEW}),
    )]));
    maia.mock.push(mock::text_reply("ok"));
    let prompt = maia.prompt(sid, "edit a.txt").await;
    let (permission, _) = maia.wait_for(is_permission).await;
    (prompt, permission)
}

#[tokio::test]
async fn initialize_advertises_the_card_review() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["_meta"]["permissionReview"]["meta"], "maia.reviewedText",
        "{init}"
    );
}

#[tokio::test]
async fn only_the_kept_hunks_are_written_and_the_model_hears_which_were_not() {
    let (mut maia, sid) = Maia::ready().await;
    let (prompt, permission) = proposed_write(&mut maia, &sid).await;
    let mut answer = choose("allow_once")(&permission).unwrap();
    answer["_meta"] = json!({"maia": {"reviewedText": KEPT}});
    maia.respond(&permission["id"], answer).await;
    let (resp, _) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(std::fs::read_to_string(maia.path("a.txt")).unwrap(), KEPT);
    let results = last_tool_results(&maia);
    let result = results.last().unwrap();
    assert!(
        result.contains("the user applied 1 of 2 hunks and rejected the others"),
        "{result}"
    );
    assert!(
        result.contains("Applied: #2 (insert 1 line before line 7)"),
        "{result}"
    );
    assert!(
        result.contains("Rejected: #1 (replace line 2 with 1 line)"),
        "{result}"
    );
}

#[tokio::test]
async fn a_reviewed_text_on_a_rejection_writes_nothing() {
    let (mut maia, sid) = Maia::ready().await;
    let (prompt, permission) = proposed_write(&mut maia, &sid).await;
    let mut answer = choose("reject_once")(&permission).unwrap();
    answer["_meta"] = json!({"maia": {"reviewedText": KEPT}});
    maia.respond(&permission["id"], answer).await;
    let (resp, _) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(std::fs::read_to_string(maia.path("a.txt")).unwrap(), OLD);
}

/// The diff contents of the updates that end a call (the turn has one).
fn final_diffs(messages: &[serde_json::Value]) -> Vec<serde_json::Value> {
    updates_of(messages, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed")
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "diff")
        .collect()
}

#[tokio::test]
async fn the_finished_card_shows_the_change_written_not_the_proposal() {
    let (mut maia, sid) = Maia::ready().await;
    let (prompt, permission) = proposed_write(&mut maia, &sid).await;
    let mut answer = choose("allow_once")(&permission).unwrap();
    answer["_meta"] = json!({"maia": {"reviewedText": KEPT}});
    maia.respond(&permission["id"], answer).await;
    let (_, messages) = maia.response(prompt).await;
    let diffs = final_diffs(&messages);
    assert_eq!(diffs.len(), 1, "{messages:?}");
    assert_eq!(diffs[0]["oldText"], OLD);
    assert_eq!(
        diffs[0]["newText"], KEPT,
        "the undone hunk is not shown as written"
    );
    // As replayed by a later load.
    let (_, replay) = maia.load(&sid).await;
    let shown: Vec<_> = updates_of(&replay, "tool_call")
        .into_iter()
        .chain(updates_of(&replay, "tool_call_update"))
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "diff")
        .collect();
    assert!(!shown.is_empty(), "{replay:?}");
    assert!(shown.iter().all(|d| d["newText"] == KEPT), "{shown:?}");
}

#[tokio::test]
async fn a_change_kept_whole_shows_the_proposal() {
    let (mut maia, sid) = Maia::ready().await;
    let (prompt, permission) = proposed_write(&mut maia, &sid).await;
    let mut answer = choose("allow_once")(&permission).unwrap();
    answer["_meta"] = json!({"maia": {"reviewedText": NEW}});
    maia.respond(&permission["id"], answer).await;
    let (_, messages) = maia.response(prompt).await;
    let diffs = final_diffs(&messages);
    assert_eq!(diffs.len(), 1, "{messages:?}");
    assert_eq!(diffs[0]["newText"], NEW);
    assert_eq!(std::fs::read_to_string(maia.path("a.txt")).unwrap(), NEW);
}
