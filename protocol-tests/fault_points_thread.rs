//! The named fault points of a thread's own writes, driven through the
//! binary (`docs/architecture.md`, "Fault points"): a file revert killed
//! at each of its steps, a rewind killed between its journal record and
//! its files, and a journal record that is never written. Each checks what
//! the next start finds: nothing left half-done, and the operation can be
//! finished.

use serde_json::{Value, json};

use crate::harness::{Maia, WAIT, read};
use crate::timeline_files::{bash_turn, revert, write};

/// The replay's user and agent texts, in order.
fn replayed_texts(replay: &[Value]) -> String {
    replay
        .iter()
        .filter_map(|m| {
            let update = &m["params"]["update"];
            matches!(
                update["sessionUpdate"].as_str(),
                Some("user_message_chunk" | "agent_message_chunk")
            )
            .then(|| {
                update["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Whether anything of an interrupted revert is left: a name beside the
/// project's files, or a staging folder.
fn revert_leftovers(maia: &Maia) -> Vec<String> {
    let aside = std::fs::read_dir(maia.cwd())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("maia-restore"));
    let staged = std::fs::read_dir(maia.path(".maia/.sessions/.checkpoints/restore"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().display().to_string());
    aside.chain(staged).collect()
}

/// A dry run of the revert before `message`: its token and whether every
/// file is revertible without a conflict.
async fn preview(maia: &mut Maia, sid: &str, message: &str) -> (String, bool) {
    let preview = revert(
        maia,
        json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": true}),
    )
    .await;
    let files = preview["result"]["_meta"]["maia"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{preview}"))
        .clone();
    let token = preview["result"]["previewToken"]
        .as_str()
        .unwrap_or_else(|| panic!("{preview}"))
        .to_owned();
    (token, files.iter().all(|f| f["conflict"] == false))
}

async fn reopened(maia: Maia, fault: Option<&str>, sid: &str) -> (Maia, Vec<Value>) {
    let mut maia = maia.restart_with_fault(fault).await;
    maia.initialize().await;
    let (resp, replay) = maia.load(sid).await;
    assert!(resp.get("result").is_some(), "{resp}");
    (maia, replay)
}

#[tokio::test]
async fn a_revert_killed_at_each_of_its_steps_is_finished_after_a_restart() {
    for point in ["restore.staging.made", "restore.staged", "revert.file.put"] {
        let (mut maia, sid) = Maia::ready().await;
        write(&maia, "a.txt", "a0\n", 0o644);
        write(&maia, "b.txt", "b0\n", 0o644);
        let (message, _) = bash_turn(
            &mut maia,
            &sid,
            "printf 'a1\\n' > a.txt && printf 'b1\\n' > b.txt",
        )
        .await;
        let (mut maia, _) = reopened(maia, Some(point), &sid).await;
        let (token, clean) = preview(&mut maia, &sid, &message).await;
        assert!(clean, "{point}");
        maia.request(
            "_session/files/revert",
            json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": false, "previewToken": token}),
        )
        .await;
        eprintln!("revert to be killed at {point}");
        let status = maia.wait_exit(WAIT).await;
        assert!(!status.success(), "not killed at {point}: {status:?}");
        // Each file is whole: as the turn left it or as it was before.
        for (name, before, after) in [("a.txt", "a0\n", "a1\n"), ("b.txt", "b0\n", "b1\n")] {
            let now = read(&maia.path(name));
            assert!(now == before || now == after, "{point}: {name} is {now:?}");
        }
        let (mut maia, _) = reopened(maia, None, &sid).await;
        // The next start sweeps what the cut revert left.
        let swept = crate::harness::eventually(WAIT, || revert_leftovers(&maia).is_empty()).await;
        assert!(swept, "{point}: left behind {:?}", revert_leftovers(&maia));
        // What is left to revert is revertible, and the revert finishes.
        let (token, clean) = preview(&mut maia, &sid, &message).await;
        assert!(
            clean,
            "{point}: a file the cut revert put back is a conflict"
        );
        let applied = revert(
            &mut maia,
            json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": false, "previewToken": token}),
        )
        .await;
        assert_eq!(applied["result"]["reverted"], true, "{point}: {applied}");
        assert_eq!(read(&maia.path("a.txt")), "a0\n", "{point}");
        assert_eq!(read(&maia.path("b.txt")), "b0\n", "{point}");
    }
}

#[tokio::test]
async fn a_rewind_killed_before_its_files_are_restored_leaves_them_to_a_revert() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a0\n", 0o644);
    bash_turn(&mut maia, &sid, "printf 'a1\\n' > a.txt").await;
    let (second, _) = bash_turn(&mut maia, &sid, "printf 'a2\\n' > a.txt").await;
    let (mut maia, _) = reopened(maia, Some("rewind.recorded"), &sid).await;
    maia.request(
        "_session/rewind",
        json!({"sessionId": sid, "beforeMessage": {"messageId": second}, "restoreFiles": true}),
    )
    .await;
    let status = maia.wait_exit(WAIT).await;
    assert!(!status.success(), "not killed: {status:?}");
    let (mut maia, _) = reopened(maia, None, &sid).await;
    // The thread is rewound; the files are as the turn left them.
    let id = maia
        .request(
            "_session/rewind",
            json!({"sessionId": sid, "beforeMessage": {"messageId": second}}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    let gone = resp["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("no user message"));
    assert!(gone, "the rewind was not recorded: {resp}");
    assert_eq!(read(&maia.path("a.txt")), "a2\n");
    // A revert from the dropped message restores them.
    let (token, clean) = preview(&mut maia, &sid, &second).await;
    assert!(clean);
    let applied = revert(
        &mut maia,
        json!({"sessionId": sid, "beforeMessage": {"messageId": second}, "dryRun": false, "previewToken": token}),
    )
    .await;
    assert_eq!(applied["result"]["reverted"], true, "{applied}");
    assert_eq!(read(&maia.path("a.txt")), "a1\n");
}

#[tokio::test]
async fn a_journal_record_cut_before_it_is_written_leaves_the_thread_whole() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "alpha", "Alpha done.").await;
    let (mut maia, _) = reopened(maia, Some("journal.append"), &sid).await;
    maia.prompt(&sid, "beta").await;
    let status = maia.wait_exit(WAIT).await;
    assert!(!status.success(), "not killed: {status:?}");
    let (mut maia, replay) = reopened(maia, None, &sid).await;
    let texts = replayed_texts(&replay);
    assert!(
        texts.contains("alpha") && texts.contains("Alpha done."),
        "{texts}"
    );
    assert!(!texts.contains("beta"), "{texts}");
    // The thread goes on from what was written.
    let (resp, _) = maia.answered_turn(&sid, "gamma", "Gamma done.").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let history = crate::harness::history(&maia).join("|");
    assert!(
        history.contains("alpha") && history.contains("gamma"),
        "{history}"
    );
    assert!(!history.contains("beta"), "{history}");
}

#[tokio::test]
async fn a_journal_that_cannot_be_written_is_said_once_and_the_turn_goes_on() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "alpha", "Alpha done.").await;
    let mut maia = maia.restart_with_fault(Some("journal.append=error")).await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let (resp, _) = maia.load(&sid).await;
    assert!(resp.get("result").is_some(), "{resp}");
    let (resp, before) = maia.answered_turn(&sid, "beta", "Beta done.").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    // Told once, as a warning, however many records failed.
    let notices: Vec<&Value> = before
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "notice")
        .filter(|u| u.to_string().contains("not being saved"))
        .collect();
    assert_eq!(notices.len(), 1, "{before:?}");
    assert!(notices[0].to_string().contains("warning"), "{notices:?}");
    // What was saved before is whole.
    let (mut maia, replay) = reopened(maia, None, &sid).await;
    let texts = replayed_texts(&replay);
    assert!(texts.contains("Alpha done."), "{texts}");
    let (resp, _) = maia.answered_turn(&sid, "gamma", "Gamma done.").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
}
