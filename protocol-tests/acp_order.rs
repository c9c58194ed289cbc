//! Requests to one session take effect in the order the client wrote
//! them: a `_session/rewind`, a `_session/files/revert` or a
//! `session/fork` written right after a prompt's response, with a prompt
//! pipelined behind it in the same write, is done (never refused as if a
//! turn ran) and before that prompt, which then starts (never refused);
//! a prompt right after a response is never refused either. Many rounds
//! each, on a multi-threaded runtime, with and without a Bash call in the
//! turn.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::*;

/// Rounds per test: the races are between two requests of one write.
const ROUNDS: usize = 200;

/// The text of round `n`'s prompt (unique: `#1#` is not in `#10#`).
fn tag(n: usize) -> String {
    format!("#{n}#")
}

fn message_id(response: &Value) -> String {
    response["result"]["_meta"]["maia"]["userMessageId"]
        .as_str()
        .unwrap_or_else(|| panic!("no userMessageId in {response}"))
        .to_owned()
}

fn prompt_params(sid: &str, n: usize) -> Value {
    json!({"sessionId": sid, "prompt": [{"type": "text", "text": tag(n)}]})
}

/// Scripts round `n`'s turn: a text answer, or a Bash call (the first
/// round's writes `f.txt`) and then the answer.
fn script(maia: &Maia, bash: bool, n: usize) {
    if bash {
        let command = match n {
            0 => "printf 0 >f.txt".to_owned(),
            n => format!("printf {n}"),
        };
        maia.mock.push(mock::tool_calls_reply(&[(
            &format!("call_{n}"),
            "Bash",
            json!({ "command": command }),
        )]));
    }
    maia.mock.push(mock::text_reply(&format!("answer {n}")));
}

/// Waits for the responses to `ids` (in whatever order they come),
/// allowing the turns' tool calls once; the responses in `ids`' order.
async fn responses(maia: &mut Maia, ids: &[u64]) -> Vec<Value> {
    let mut got: Vec<Option<Value>> = vec![None; ids.len()];
    while got.iter().any(Option::is_none) {
        let m = maia.next().await;
        if is_permission(&m) {
            let answer = choose("allow_once")(&m).unwrap();
            maia.respond(&m["id"].clone(), answer).await;
            continue;
        }
        if m.get("method").is_none()
            && let Some(at) = ids.iter().position(|id| m["id"] == json!(id))
        {
            got[at] = Some(m);
        }
    }
    got.into_iter().flatten().collect()
}

/// A first answered turn; its prompt response.
async fn first_turn(maia: &mut Maia, sid: &str, bash: bool) -> Value {
    script(maia, bash, 0);
    let id = maia.request("session/prompt", prompt_params(sid, 0)).await;
    responses(maia, &[id]).await.remove(0)
}

/// Settings that make a Bash round cheap: the call allowed without a
/// question, no file checkpoints around it.
fn quick() -> Options {
    Options {
        settings: json!({
            "permissions": {"allow": ["Bash(printf *)"]},
            "checkpoints.enabled": false,
        }),
        ..Options::default()
    }
}

/// Notes round `n` as failed when anything in it went `wrong`.
fn failed(failures: &mut Vec<String>, n: usize, wrong: Vec<String>) {
    if !wrong.is_empty() {
        failures.push(format!("round {n}: {}", wrong.join("; ")));
    }
}

/// Fails with how many of `rounds` rounds went wrong and the first few.
fn assert_no_failures(failures: &[String], rounds: usize) {
    assert!(
        failures.is_empty(),
        "{} of {rounds} rounds failed; the first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
}

/// Each round: right after the last prompt's response, a rewind before its
/// message and the next prompt in one write. The rewind is done, and the
/// prompt's model request holds its own message but not the rewound one.
async fn rewind_then_prompt(bash: bool) {
    let (mut maia, sid) = Maia::ready_with(quick()).await;
    let mut last = first_turn(&mut maia, &sid, bash).await;
    let mut failures = Vec::new();
    for n in 1..=ROUNDS {
        let before = message_id(&last);
        script(&maia, bash, n);
        let asked = maia.mock.requests().len();
        let ids = maia
            .pipeline(&[
                (
                    "_session/rewind",
                    json!({"sessionId": sid, "beforeMessage": {"messageId": before}}),
                ),
                ("session/prompt", prompt_params(&sid, n)),
            ])
            .await;
        let [rewound, prompted] = <[Value; 2]>::try_from(responses(&mut maia, &ids).await).unwrap();
        let mut wrong = Vec::new();
        if rewound["result"]["rewound"] != true {
            wrong.push(format!("the rewind answered {rewound}"));
        }
        assert_eq!(
            prompted["result"]["stopReason"], "end_turn",
            "round {n}: {prompted}"
        );
        let requests = maia.mock.requests();
        let sent = requests
            .get(asked)
            .map(|r| r["messages"].to_string())
            .unwrap_or_default();
        if !sent.contains(&tag(n)) || sent.contains(&tag(n - 1)) {
            wrong.push(format!("the prompt's model request was {sent}"));
        }
        failed(&mut failures, n, wrong);
        last = prompted;
    }
    assert_no_failures(&failures, ROUNDS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_written_with_a_prompt_behind_it_is_done_first() {
    rewind_then_prompt(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_after_a_bash_turn_written_with_a_prompt_behind_it_is_done_first() {
    rewind_then_prompt(true).await;
}

/// A first turn whose Bash call writes `f.txt`; then each round, right
/// after the last prompt's response (of a turn with a Bash call or
/// without), a revert preview of the files changed since the first
/// message and the next prompt in one write. The preview is answered (not
/// refused as if a turn ran), and the prompt runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revert_preview_written_with_a_prompt_behind_it_is_done_first() {
    let (mut maia, sid) = Maia::ready_with(Options {
        settings: json!({"permissions": {"allow": ["Bash(printf *)"]}}),
        ..Options::default()
    })
    .await;
    let before = message_id(&first_turn(&mut maia, &sid, true).await);
    let mut failures = Vec::new();
    for n in 1..=ROUNDS {
        let bash = n % 2 == 1;
        script(&maia, bash, n);
        let ids = maia
            .pipeline(&[
                (
                    "_session/files/revert",
                    json!({"sessionId": sid, "beforeMessage": {"messageId": before}, "dryRun": true}),
                ),
                ("session/prompt", prompt_params(&sid, n)),
            ])
            .await;
        let [preview, prompted] = <[Value; 2]>::try_from(responses(&mut maia, &ids).await).unwrap();
        let mut wrong = Vec::new();
        if preview["result"]["canRevert"] != true {
            wrong.push(format!("the preview answered {preview}"));
        }
        if prompted["result"]["stopReason"] != "end_turn" {
            // Refused: the replies scripted for it are taken by the next.
            wrong.push(format!("the prompt answered {prompted}"));
            let id = maia.request("session/prompt", prompt_params(&sid, n)).await;
            responses(&mut maia, &[id]).await;
        }
        failed(&mut failures, n, wrong);
    }
    assert_no_failures(&failures, ROUNDS);
}

/// Each round: the next prompt written as soon as the last one's response
/// arrives, after a turn with a Bash call or without; never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_right_after_a_response_is_never_refused() {
    let (mut maia, sid) = Maia::ready_with(quick()).await;
    let mut failures = Vec::new();
    for n in 0..ROUNDS {
        script(&maia, n % 2 == 1, n);
        let ids = maia
            .pipeline(&[("session/prompt", prompt_params(&sid, n))])
            .await;
        let prompted = responses(&mut maia, &ids).await.remove(0);
        if prompted["result"]["stopReason"] != "end_turn" {
            failed(
                &mut failures,
                n,
                vec![format!("the prompt answered {prompted}")],
            );
        }
    }
    assert_no_failures(&failures, ROUNDS);
}

/// A fork written right after a rewind (in one write) is made from the
/// rewound thread: a prompt on the fork does not carry the dropped
/// message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_written_right_after_a_rewind_sees_it() {
    let (mut maia, sid) = Maia::ready().await;
    let cwd = maia.cwd();
    let mut failures = Vec::new();
    // Forks open sessions: fewer rounds.
    let rounds = ROUNDS / 10;
    first_turn(&mut maia, &sid, false).await;
    for n in 1..=rounds {
        script(&maia, false, n);
        let id = maia.request("session/prompt", prompt_params(&sid, n)).await;
        let dropped = responses(&mut maia, &[id]).await.remove(0);
        let ids = maia
            .pipeline(&[
                (
                    "_session/rewind",
                    json!({"sessionId": sid, "beforeMessage": {"messageId": message_id(&dropped)}}),
                ),
                (
                    "session/fork",
                    json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
                ),
            ])
            .await;
        let [rewound, forked] = <[Value; 2]>::try_from(responses(&mut maia, &ids).await).unwrap();
        assert_eq!(rewound["result"]["rewound"], true, "round {n}: {rewound}");
        let fork = forked["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("round {n}: {forked}"))
            .to_owned();
        maia.mock.push(mock::text_reply("forked"));
        let asked = maia.mock.requests().len();
        let id = maia
            .request("session/prompt", prompt_params(&fork, 1000 + n))
            .await;
        responses(&mut maia, &[id]).await;
        let sent = maia.mock.requests()[asked]["messages"].to_string();
        if sent.contains(&tag(n)) {
            failed(
                &mut failures,
                n,
                vec![format!("the fork's model request was {sent}")],
            );
        }
        let id = maia
            .request("session/close", json!({"sessionId": fork}))
            .await;
        responses(&mut maia, &[id]).await;
    }
    assert_no_failures(&failures, rounds);
}
