//! `maia lsp`'s `maia.undo`: the hunks the last answer applied are reverted
//! through one `workspace/applyEdit` (a file it created is removed), hunks
//! the user changed since are kept and named, a second undo reaches the
//! answer before, and an undo during a turn is refused.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::lsp::{
    Lsp, apply_edits, edits_of, is_request, notification, range, read, response, vscode_caps,
};

const OLD: &str = "one\ntwo\nthree\nfour\nfive\n";

/// An editor's buffer of `a.txt`: applies what the server sends (the first
/// `take` edits of each applyEdit) and reports it with `didChange`.
struct Buffer {
    uri: String,
    text: String,
    version: i32,
    take: usize,
    applies: Vec<Value>,
}

impl Buffer {
    fn new(lsp: &Lsp, take: usize) -> Buffer {
        Buffer {
            uri: lsp.uri("a.txt"),
            text: OLD.to_owned(),
            version: 1,
            take,
            applies: Vec::new(),
        }
    }

    fn answer(&mut self, m: &Value) -> Option<Vec<Value>> {
        if !is_request(m, "workspace/applyEdit") {
            return None;
        }
        self.applies.push(m.clone());
        let edits = edits_of(m);
        let take = self.take.min(edits.len());
        self.text = apply_edits(&self.text, &edits[..take]);
        Some(vec![
            self.did_change(),
            response(&m["id"], json!({"applied": true})),
        ])
    }

    /// The user types: the buffer becomes `text`.
    fn did_change(&mut self) -> Value {
        self.version += 1;
        notification(
            "textDocument/didChange",
            json!({"textDocument": {"uri": self.uri, "version": self.version},
                   "contentChanges": [{"text": self.text}]}),
        )
    }
}

/// A turn that reads `a.txt`, edits two separate lines of it, then writes
/// the new file `b.txt` (when `create`).
async fn answer_with_edits(lsp: &mut Lsp, buffer: &mut Buffer, create: bool) {
    let path = lsp.path("a.txt").display().to_string();
    lsp.mock.push(mock::tool_calls_reply(&[(
        "r1",
        "Read",
        json!({"file_path": path}),
    )]));
    lsp.mock.push(mock::tool_calls_reply(&[(
        "e1",
        "Edit",
        json!({"file_path": path, "old_string": "two\nthree\nfour", "new_string": "TWO\nthree\nFOUR"}),
    )]));
    if create {
        let new = lsp.path("b.txt").display().to_string();
        lsp.mock.push(mock::tool_calls_reply(&[(
            "w1",
            "Write",
            json!({"file_path": new, "content": "created\n"}),
        )]));
    }
    lsp.mock.push(mock::text_reply("Done."));
    lsp.ask_turn("a.txt", range(1, 0, 4, 0), "fix", &mut |m| buffer.answer(m))
        .await;
}

/// Runs `maia.undo` for `a.txt`'s folder; returns its response and the
/// `window/showMessage` notifications on the way, waiting for `messages`
/// of them (they may come after the response).
async fn undo(lsp: &mut Lsp, buffer: &mut Buffer, messages: usize) -> (Value, Vec<Value>) {
    let uri = lsp.uri("a.txt");
    let id = lsp
        .request(
            "workspace/executeCommand",
            json!({"command": "maia.undo", "arguments": [{"uri": uri}]}),
        )
        .await;
    let is_shown = |m: &Value| m["method"] == "window/showMessage";
    let mut seen = lsp
        .until(|m| m.get("method").is_none() && m["id"] == id, &mut |m| {
            buffer.answer(m)
        })
        .await;
    let response = seen.last().unwrap().clone();
    while seen.iter().filter(|m| is_shown(m)).count() < messages {
        seen.extend(lsp.until(is_shown, &mut |m| buffer.answer(m)).await);
    }
    let shown = seen.into_iter().filter(is_shown).collect();
    (response, shown)
}

#[tokio::test]
async fn undo_reverts_the_applied_hunks_and_removes_a_created_file() {
    let mut lsp = Lsp::start(json!({"permissions": {"allow": ["Read", "Edit", "Write"]}})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", OLD).await;
    // The user applies only the first hunk.
    let mut buffer = Buffer::new(&lsp, 1);
    answer_with_edits(&mut lsp, &mut buffer, true).await;
    assert_eq!(buffer.text, "one\nTWO\nthree\nfour\nfive\n");
    assert_eq!(read(&lsp.path("b.txt")), "created\n");

    buffer.take = usize::MAX;
    let (r, shown) = undo(&mut lsp, &mut buffer, 0).await;
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(r["result"]["undone"], 2, "{r}");
    assert_eq!(r["result"]["conflicts"], json!([]), "{r}");
    assert!(shown.is_empty(), "{shown:?}");
    // One plain edit of the buffer, versioned, restores the applied hunk.
    let request = buffer.applies.last().unwrap();
    assert_eq!(request["params"]["label"], "MAIA: undo the last answer");
    let change = &request["params"]["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], buffer.version - 1);
    assert_eq!(edits_of(request).len(), 1, "{request}");
    assert_eq!(buffer.text, OLD);
    assert!(!lsp.path("b.txt").exists(), "the created file is removed");

    // Nothing left: said so, and nothing is sent.
    let applies = buffer.applies.len();
    let (r, shown) = undo(&mut lsp, &mut buffer, 1).await;
    assert_eq!(r["result"]["undone"], 0, "{r}");
    assert_eq!(buffer.applies.len(), applies);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["params"]["message"], "MAIA: nothing to undo");
}

#[tokio::test]
async fn undo_keeps_the_hunks_the_user_changed_since_and_names_them() {
    let mut lsp = Lsp::start(json!({"permissions": {"allow": ["Read", "Edit"]}})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", OLD).await;
    let mut buffer = Buffer::new(&lsp, usize::MAX);
    answer_with_edits(&mut lsp, &mut buffer, false).await;
    assert_eq!(buffer.text, "one\nTWO\nthree\nFOUR\nfive\n");
    // A second answer that changes nothing: undo reaches past it.
    lsp.mock.push(mock::text_reply("Nothing to change."));
    lsp.ask_turn("a.txt", range(0, 0, 1, 0), "explain", &mut |m| {
        buffer.answer(m)
    })
    .await;
    // The user adds a line on top and changes the answer's FOUR.
    buffer.text = "zero\none\nTWO\nthree\nFOUR!\nfive\n".to_owned();
    let typed = buffer.did_change();
    lsp.send(&typed).await;

    let (r, shown) = undo(&mut lsp, &mut buffer, 1).await;
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(buffer.text, "zero\none\ntwo\nthree\nFOUR!\nfive\n");
    assert_eq!(r["result"]["undone"], 1, "{r}");
    let conflicts = r["result"]["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{r}");
    assert_eq!(conflicts[0]["line"], 4, "{r}");
    assert_eq!(
        conflicts[0]["path"],
        lsp.path("a.txt").display().to_string()
    );
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["params"]["type"], 2, "a warning: {shown:?}");
    let message = shown[0]["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("kept 1 hunk(s) you changed") && message.contains("a.txt line 4"),
        "{message}"
    );
}

#[tokio::test]
async fn undo_during_a_turn_is_refused() {
    let mut lsp = Lsp::start(json!({"permissions": {"allow": ["Read", "Edit"]}})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", OLD).await;
    let mut buffer = Buffer::new(&lsp, usize::MAX);
    answer_with_edits(&mut lsp, &mut buffer, false).await;
    // A second turn waits on a permission question (a write of a file
    // that is not open).
    let closed = lsp.path("c.txt").display().to_string();
    lsp.mock.push(mock::tool_calls_reply(&[(
        "w1",
        "Write",
        json!({"file_path": closed, "content": "c\n"}),
    )]));
    lsp.mock.push(mock::text_reply("Done."));
    lsp.start_ask("a.txt", range(0, 0, 1, 0), "fix").await;
    let seen = lsp
        .until(|m| is_request(m, "window/showMessageRequest"), &mut |m| {
            is_request(m, "window/showMessageRequest").then(Vec::new)
        })
        .await;
    let question = seen.last().unwrap().clone();
    let uri = lsp.uri("a.txt");
    let id = lsp
        .request(
            "workspace/executeCommand",
            json!({"command": "maia.undo", "arguments": [{"uri": uri}]}),
        )
        .await;
    let r = lsp.response(id, &mut |m| buffer.answer(m)).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maia.cancel"),
        "{r}"
    );
    assert_eq!(
        buffer.text, "one\nTWO\nthree\nFOUR\nfive\n",
        "nothing changed"
    );
    lsp.send(&response(&question["id"], json!({"title": "Deny"})))
        .await;
    lsp.turn(&mut |m| buffer.answer(m)).await;
    // The answer's hunks are still there to undo.
    let (r, _) = undo(&mut lsp, &mut buffer, 0).await;
    assert_eq!(r["result"]["undone"], 2, "{r}");
    assert_eq!(buffer.text, OLD);
}
