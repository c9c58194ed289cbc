//! `maia serve`: per-delta latency of one stream through the daemon, with
//! the editor on the `maia acp --connect` bridge (stdio → WebSocket →
//! daemon → WebSocket → stdio: two hops more than the WebSocket alone),
//! against the same stream over stdio.

use std::time::Duration;

use maia_test_support as mock;

use crate::harness::{Maia, Table, env_usize, text_of};
use crate::remote_clients::start_daemon;
use crate::stats::{Stats, ms};

/// The per-delta latencies (ms) of `n` deltas 1 ms apart, as `maia` sees
/// them.
fn stream(maia: &mut Maia, mock: &mock::MockLlm, sid: &str, n: usize) -> Stats {
    let words: Vec<String> = (0..n).map(|i| format!("r{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    mock.push(mock::text_chunks(&refs, Duration::from_millis(1)));
    let before = mock.piece_times().len();
    let (id, _) = maia.prompt(sid, "stream");
    let messages = maia.until_response(id);
    let times = mock.piece_times();
    let mut lat = Vec::with_capacity(n);
    let mut next = 0;
    for (at, m) in &messages {
        if let Some(text) = text_of(m)
            && next < n
            && text == words[next]
        {
            lat.push(ms(*at - times[before + 1 + next]));
            next += 1;
        }
    }
    assert_eq!(next, n, "every delta forwarded once, in order");
    Stats::new(lat)
}

pub(crate) fn bench_remote(table: &mut Table) {
    let s = crate::setup();
    let cwd = s.cwd.path().canonicalize().unwrap();
    let n = env_usize("MAIA_BENCH_CHUNKS", 2000);
    let home = s.home.path();
    let daemon = start_daemon(home, &[("bench", false)], &[]);
    let addr = daemon.addr.clone();
    let token = daemon.tokens["bench"].clone();

    let (mut local, _) = Maia::spawn(home);
    local.initialize();
    let (sid, _) = local.new_session(&cwd);
    let direct = stream(&mut local, &s.mock, &sid, n);
    local.kill();

    let url = format!("ws://{addr}/acp");
    let (mut remote, _) =
        Maia::spawn_with(home, &["acp", "--connect", &url], &[("MAIA_TOKEN", &token)]);
    remote.initialize();
    let (sid, _) = remote.new_session(&cwd);
    let bridged = stream(&mut remote, &s.mock, &sid, n);
    remote.kill();
    drop(daemon);

    let row = |stats: &Stats| {
        format!(
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            stats.pct(50.0),
            stats.pct(99.0),
            stats.max()
        )
    };
    table.add(
        format!("per-delta latency over stdio ({n} deltas, 1 ms apart)"),
        row(&direct),
    );
    table.add(
        format!("per-delta latency through `maia serve` and the `--connect` bridge ({n} deltas)"),
        row(&bridged),
    );
    let added = bridged.pct(50.0) - direct.pct(50.0);
    table.check(
        "added by the daemon + bridge at p50 (an upper bound of WebSocket's own)",
        format!("{added:.3} ms"),
        "< 0.2 ms",
        Some(added < 0.2),
    );
}
