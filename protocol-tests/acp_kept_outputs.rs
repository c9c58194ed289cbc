//! Big outputs kept, through the binary: a Bash output over its cap is
//! streamed whole to the thread's outputs folder (memory stays bounded for
//! 200 MB), the model gets a stub with head, tail, size and path, and
//! `Read` and `Grep` of that path run without asking.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options};

fn tool_contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The peak resident memory of process `pid`, in kB.
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_200_mb_output_is_kept_whole_in_a_file_the_model_can_read_and_grep() {
    let (mut maia, sid) = Maia::ready_with(Options {
        settings: json!({"permissions": {"allow": ["Bash"]}}),
        ..Options::default()
    })
    .await;
    // 200 MB: numbered lines of 40 bytes, a shorter marker in the middle.
    let command = "seq -f '%039g' 1 5242880 | sed '2621440s/.*/THE-NEEDLE-LINE/'";
    maia.mock.push(mock::tool_calls_reply(&[(
        "b",
        "Bash",
        json!({ "command": command, "timeout": 600000 }),
    )]));
    maia.mock.push(mock::text_reply("seen"));
    let (resp, _) = maia.turn(&sid, "run it").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let pid = maia.child.id().unwrap();
    let peak = peak_kb(pid);
    assert!(
        peak < 200 * 1024,
        "the output was not streamed: peak {peak} kB"
    );

    let stub = tool_contents(&maia.mock.requests()[1]).pop().unwrap();
    assert!(stub.len() < 20_000, "{}", stub.len());
    assert!(
        stub.contains("209715176 bytes, 5242880 lines"),
        "{}",
        &stub[..400]
    );
    assert!(stub.contains(&format!("{:039}", 1)), "the head");
    let path = stub
        .split(" at ")
        .nth(1)
        .and_then(|s| s.split(". Its first").next())
        .unwrap()
        .to_owned();
    let home = maia.home.path().canonicalize().unwrap();
    assert!(
        path.starts_with(&format!("{}/.cache/maia/outputs/{sid}/", home.display())),
        "{path}"
    );
    assert!(!path.starts_with(&maia.cwd().display().to_string()));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 209_715_176);
    let kept = std::fs::read(&path).unwrap();
    let last = String::from_utf8_lossy(&kept[kept.len() - 40..]).into_owned();
    drop(kept);
    assert!(stub.contains(&last), "the tail: {last}");

    // Read (with an offset) and Grep of the kept file: not asked.
    maia.mock.push(mock::tool_calls_reply(&[
        (
            "r",
            "Read",
            json!({"file_path": path, "offset": 2621440, "limit": 1}),
        ),
        (
            "g",
            "Grep",
            json!({"pattern": "THE-NEEDLE", "path": path, "output_mode": "content"}),
        ),
    ]));
    maia.mock.push(mock::text_reply("found"));
    let (resp, _) = maia.turn(&sid, "look").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let results = tool_contents(maia.mock.requests().last().unwrap());
    let n = results.len();
    assert!(
        results[n - 2].contains("THE-NEEDLE-LINE"),
        "{}",
        results[n - 2]
    );
    assert!(
        results[n - 1].contains("THE-NEEDLE-LINE"),
        "{}",
        results[n - 1]
    );
}
