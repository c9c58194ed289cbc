//! Steering's benchmark: what a steer adds to a tool round. A turn runs a
//! `sleep 0.2` command between two model requests; in half the rounds a
//! steer is sent while the command runs and goes into the second request.
//! Timed on the mock's clock alone (when each piece of an answer was handed
//! to the HTTP body): the last piece of the first answer → the first piece
//! of the second, with and without the steer; the difference is what taking
//! the steer at the tool-round boundary costs.

use maia_test_support as mock;
use serde_json::{Value, json};

use super::harness::{Maia, Table};
use super::setup;
use super::stats::{Stats, ms};

const ROUNDS: usize = 20;

pub(crate) fn bench_steer(table: &mut Table) {
    let s = setup();
    let cwd = s.cwd.path().canonicalize().unwrap();
    std::fs::write(
        s.home.path().join(".maia/settings.json"),
        json!({"LiteLLM_URL": s.mock.url(), "model": "mock-model",
               "permissions": {"allow": ["Bash(sleep *)"]}})
        .to_string(),
    )
    .unwrap();
    let (mut maia, _) = Maia::spawn(s.home.path());
    maia.initialize();
    let (sid, _) = maia.new_session(&cwd);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..2 * ROUNDS {
        let steer = round % 2 == 1;
        let before = s.mock.piece_log().len();
        s.mock.push(mock::tool_calls_reply(&[(
            "call_sleep",
            "Bash",
            json!({"command": "sleep 0.2"}),
        )]));
        s.mock.push(mock::text_reply("ok"));
        let (id, _) = maia.prompt(&sid, &format!("round {round}"));
        let text = format!("steer {round}");
        if steer {
            // The command runs: steer now.
            while maia.next().1["params"]["update"]["sessionUpdate"] != "tool_call" {}
            let (sent, _) = maia.request(
                "_session/steering",
                json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
            );
            let seen = maia.until_response(id);
            let answer: &Value = seen
                .iter()
                .map(|(_, m)| m)
                .find(|m| m.get("method").is_none() && m["id"] == json!(sent))
                .expect("the steer was answered");
            assert_eq!(answer["result"]["outcome"], "injected", "{answer}");
        } else {
            maia.until_response(id);
        }
        let request = s.mock.requests().pop().unwrap();
        assert_eq!(
            request["messages"].to_string().contains(&text),
            steer,
            "the second request holds the steer when one was sent"
        );
        // The two answers' pieces, split where the command's 200 ms passed.
        let times: Vec<_> = s.mock.piece_log()[before..]
            .iter()
            .map(|(at, _)| *at)
            .collect();
        let gap = times
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .expect("two answers");
        if steer { &mut with } else { &mut without }.push(ms(gap));
    }
    let (with, without) = (Stats::new(with), Stats::new(without));
    table.add(
        "steer → injected request: a 200 ms tool round (last piece of an answer → first piece of the next), with a steer taken at its end / without",
        format!(
            "p50 {:.1} / {:.1} ms (+{:.1} ms) · p95 {:.1} / {:.1} ms",
            with.pct(50.0),
            without.pct(50.0),
            with.pct(50.0) - without.pct(50.0),
            with.pct(95.0),
            without.pct(95.0)
        ),
    );
    maia.kill();
    drop(s.rt);
}
