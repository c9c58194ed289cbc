//! `maia exec` (issue 25) run as a user or a script runs it: the real
//! binary with an isolated HOME, in a project folder, against the mock
//! LLM. The answer alone on stdout, tool calls on stderr; `--json` events;
//! a question nobody can answer refused and the run going on; `--allow`;
//! SIGINT → 130 with nothing left running; `--resume`/`--continue`; the
//! prompt from stdin; a failed model request → exit 1; the thread an
//! ordinary one an editor lists and loads; a spinner on a terminal only.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use maia_test_support::{self as mock, MockLlm};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::process::Command;

use crate::cli_login::{Run, maia};
use crate::harness::{Maia, Options, WAIT, alive, content_text, eventually};

/// A user's home with settings for `mock`, and a project folder.
struct Place {
    mock: MockLlm,
    home: TempDir,
    project: TempDir,
}

impl Place {
    async fn new() -> Place {
        let mock = MockLlm::start().await;
        let home = tempfile::tempdir().unwrap();
        write_settings(home.path(), &mock);
        Place {
            mock,
            home,
            project: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.project.path().join(rel)
    }

    async fn exec(&self, args: &[&str], stdin: &str) -> Run {
        let mut all = vec!["exec"];
        all.extend_from_slice(args);
        maia(self.home.path(), self.project.path(), &all, &[], stdin).await
    }
}

fn write_settings(home: &Path, mock: &MockLlm) {
    std::fs::create_dir_all(home.join(".maia")).unwrap();
    std::fs::write(
        home.join(".maia/settings.json"),
        json!({"LiteLLM_URL": mock.url(), "model": "mock-model",
               "llm_retry_base_ms": 10, "llm_max_retries": 0})
        .to_string(),
    )
    .unwrap();
}

/// The JSON events of a `--json` run (every stdout line must be one).
fn events(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{}", run.stderr)))
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The `tool` messages of request `n` the mock received.
fn tool_results(mock: &MockLlm, n: usize) -> Vec<String> {
    mock.requests()[n]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(content_text)
        .collect()
}

fn last_user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    content_text(user)
}

#[tokio::test]
async fn plain_output_is_the_answer_on_stdout_and_tools_on_stderr() {
    let place = Place::new().await;
    std::fs::write(place.path("notes.txt"), "hello from the file\n").unwrap();
    // Reading in the project needs no flag; outside it would ask.
    let outside = place.home.path().join("outside.txt");
    std::fs::write(&outside, "not for the model\n").unwrap();
    place.mock.push(mock::tool_calls_reply(&[
        ("c1", "Read", json!({"file_path": "notes.txt"})),
        ("c2", "Read", json!({"file_path": outside})),
    ]));
    place.mock.push(mock::text_chunks(
        &["The file ", "says hello."],
        Duration::ZERO,
    ));
    let run = place.exec(&["what is in notes.txt?"], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // stdout is the answer and nothing else (piped: no spinner, no colours).
    assert_eq!(run.stdout, "The file says hello.\n", "{}", run.stderr);
    assert!(run.stderr.contains("• Read"), "{}", run.stderr);
    assert!(run.stderr.contains("  ✓ Read"), "{}", run.stderr);
    assert!(!run.stderr.contains('\r'), "{:?}", run.stderr);
    assert!(!run.stderr.contains("\x1b["), "{:?}", run.stderr);
    // The model saw the file, and the user's words.
    let requests = place.mock.requests();
    assert!(last_user_text(&requests[0]).contains("what is in notes.txt?"));
    let results = tool_results(&place.mock, 1);
    assert!(results[0].contains("hello from the file"), "{results:?}");
    assert!(!results[1].contains("not for the model"), "{results:?}");
    assert!(
        run.stderr
            .contains("refused (no one to ask in maia exec): Read"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("go on with: maia exec --resume "),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn json_output_is_one_event_per_line() {
    let place = Place::new().await;
    std::fs::write(place.path("notes.txt"), "hello\n").unwrap();
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Read",
        json!({"file_path": "notes.txt"}),
    )]));
    place.mock.push(mock::text_reply("Done."));
    let run = place.exec(&["--json", "read notes.txt"], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let events = events(&run);
    let first = &events[0];
    assert_eq!(first["type"], "session_started", "{first}");
    assert_eq!(first["resumed"], false);
    assert_eq!(first["model"], "mock-model");
    let id = first["session_id"].as_str().unwrap().to_owned();
    let call = of_type(&events, "tool_call")[0];
    assert_eq!(call["name"], "Read");
    assert_eq!(call["kind"], "read");
    assert_eq!(call["raw_input"], json!({"file_path": "notes.txt"}));
    let done = of_type(&events, "tool_call_update")
        .into_iter()
        .find(|u| u["status"] == "completed")
        .expect("the call completes");
    assert_eq!(done["id"], call["id"]);
    let text: String = of_type(&events, "text")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Done.");
    let last = events.last().unwrap();
    assert_eq!(
        *last,
        json!({"type": "turn_ended", "session_id": id, "stop_reason": "end_turn",
               "unfinished": null, "exit_code": 0})
    );
    // The thread is saved in the project, as an editor's are.
    let saved = std::fs::read_dir(place.path(".maia/.sessions"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .any(|text| text.contains(&id));
    assert!(saved, "no journal names {id}");
}

#[tokio::test]
async fn a_question_nobody_can_answer_is_refused_and_the_run_goes_on() {
    let place = Place::new().await;
    place.mock.push(mock::tool_calls_reply(&[
        ("c1", "Bash", json!({"command": "touch made.txt"})),
        (
            "c2",
            "AskUser",
            json!({"question": "Which name?", "choices": ["a", "b"]}),
        ),
    ]));
    place.mock.push(mock::text_reply("I could not create it."));
    let run = place.exec(&["--json", "create made.txt"], "").await;
    // Nothing ran after the refusal: the task is undone, and the status says so.
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        of_type(&events(&run), "turn_ended")[0]["unfinished"],
        "refused"
    );
    assert!(!place.path("made.txt").exists(), "a refused call ran");
    let events = events(&run);
    let refused = of_type(&events, "permission_refused");
    assert_eq!(refused.len(), 1, "{events:#?}");
    let bash = of_type(&events, "tool_call")
        .into_iter()
        .find(|c| c["name"] == "Bash")
        .unwrap();
    assert_eq!(refused[0]["tool_call_id"], bash["id"]);
    assert_eq!(refused[0]["rule"], "Bash(touch *)");
    let declined = of_type(&events, "question_refused");
    assert_eq!(declined.len(), 1, "{events:#?}");
    assert_eq!(declined[0]["question"], "Which name?");
    assert_eq!(declined[0]["choices"], json!(["a", "b"]));
    // The model is told why, and answered.
    let results = tool_results(&place.mock, 1);
    assert!(results[0].contains("non-interactive"), "{results:?}");
    assert!(results[1].contains("declined"), "{results:?}");
    assert_eq!(events.last().unwrap()["stop_reason"], "end_turn");

    // In plain output the refusal names the rule that would allow it.
    place.mock.push(mock::tool_calls_reply(&[(
        "c3",
        "Bash",
        json!({"command": "touch made.txt"}),
    )]));
    place.mock.push(mock::text_reply("No."));
    let run = place.exec(&["create made.txt"], "").await;
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("nothing ran after it"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("refused (no one to ask in maia exec): ")
            && run.stderr.contains("--allow 'Bash(touch *)'"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "No.\n");
}

#[tokio::test]
async fn allow_and_mode_let_calls_run_without_a_question() {
    let place = Place::new().await;
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({"command": "touch made.txt"}),
    )]));
    place.mock.push(mock::text_reply("Created."));
    let run = place
        .exec(&["--allow", "Bash(touch *)", "create made.txt"], "")
        .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(place.path("made.txt").exists(), "{}", run.stderr);
    assert!(!run.stderr.contains("refused"), "{}", run.stderr);
    // The rule was for that run only: nothing was written to settings.
    assert!(!place.path(".maia/settings.json").exists());

    // accept-edits lets a Write in the project through.
    place.mock.push(mock::tool_calls_reply(&[(
        "c2",
        "Write",
        json!({"file_path": "w.txt", "content": "written\n"}),
    )]));
    place.mock.push(mock::text_reply("Written."));
    let run = place
        .exec(&["--mode", "accept-edits", "write w.txt"], "")
        .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        std::fs::read_to_string(place.path("w.txt")).unwrap(),
        "written\n"
    );
    // A rule that does not parse is a usage error, before anything runs.
    let run = place.exec(&["--allow", "Bash(", "x"], "").await;
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("Tool(pattern)"), "{}", run.stderr);
}

#[tokio::test]
async fn sigint_cancels_the_turn_exits_130_and_leaves_nothing_running() {
    let place = Place::new().await;
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({"command": "sleep 30 & echo $! > bg.pid; echo $$ > fg.pid; exec sleep 30"}),
    )]));
    let child = Command::new(env!("CARGO_BIN_EXE_maia"))
        .args(["exec", "--mode", "bypass", "--json", "run the sleeper"])
        .env("HOME", place.home.path())
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .current_dir(place.project.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = |name: &str| {
        std::fs::read_to_string(place.path(name))
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
    };
    assert!(
        eventually(WAIT, || pid("fg.pid").is_some() && pid("bg.pid").is_some()).await,
        "the command did not start"
    );
    let (fg, bg) = (pid("fg.pid").unwrap(), pid("bg.pid").unwrap());
    assert!(alive(fg) && alive(bg));
    let maia_pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(maia_pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("maia exec did not exit after SIGINT")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["stop_reason"], "cancelled", "{stdout}");
    assert_eq!(last["exit_code"], 130);
    assert!(
        eventually(Duration::from_secs(3), || !alive(fg) && !alive(bg)).await,
        "processes left behind: fg {fg} alive {}, bg {bg} alive {}",
        alive(fg),
        alive(bg)
    );
}

#[tokio::test]
async fn resuming_leaves_the_threads_prompt_queue_to_the_editor() {
    let place = Place::new().await;
    place.mock.push(mock::text_reply("First answer."));
    let first = place.exec(&["--json", "start a thread"], "").await;
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let id = events(&first)[0]["session_id"].as_str().unwrap().to_owned();
    // An editor queued a prompt on this thread (`_session/queue` add).
    let queue = place
        .project
        .path()
        .join(".maia/.sessions/.queue")
        .join(format!("{id}.json"));
    std::fs::create_dir_all(queue.parent().unwrap()).unwrap();
    let saved = r#"[{"id":"q1","input":[{"type":"text","text":"queued by the editor"}],"clientUserMessageId":"m1"}]"#;
    std::fs::write(&queue, saved).unwrap();

    place.mock.push(mock::text_reply("Second answer."));
    place.mock.push(mock::text_reply("The queued prompt ran."));
    let run = place.exec(&["--resume", &id, "go on"], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "Second answer.\n");
    // exec neither ran the queued prompt (its process ends with its turn:
    // the queued turn would be cut short) nor took it off the queue.
    let requests = place.mock.requests();
    assert_eq!(requests.len(), 2, "the queued prompt was sent");
    assert_eq!(std::fs::read_to_string(&queue).unwrap(), saved);
}

#[tokio::test]
async fn continue_and_resume_go_on_with_a_saved_thread() {
    let place = Place::new().await;
    place.mock.push(mock::text_reply("First answer."));
    let first = place
        .exec(&["--json", "remember the word kumquat"], "")
        .await;
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let id = events(&first)[0]["session_id"].as_str().unwrap().to_owned();

    place.mock.push(mock::text_reply("Kumquat."));
    let second = place
        .exec(&["--json", "--continue", "which word?"], "")
        .await;
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    let started = &events(&second)[0];
    assert_eq!(started["session_id"], id.as_str());
    assert_eq!(started["resumed"], true);
    let request = place.mock.requests()[1].to_string();
    assert!(request.contains("remember the word kumquat"), "{request}");
    assert!(request.contains("First answer."), "{request}");

    place.mock.push(mock::text_reply("Still kumquat."));
    let third = place.exec(&["--resume", &id, "and now?"], "").await;
    assert_eq!(third.code, 0, "{}{}", third.stdout, third.stderr);
    assert_eq!(third.stdout, "Still kumquat.\n");
    let request = place.mock.requests()[2].to_string();
    assert!(
        request.contains("which word?") && request.contains("Kumquat."),
        "{request}"
    );

    // An unknown thread, or nothing to continue, is an error before any request.
    let run = place.exec(&["--resume", "nope", "x"], "").await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("no saved session `nope`"),
        "{}",
        run.stderr
    );
    let empty = tempfile::tempdir().unwrap();
    let run = maia(
        place.home.path(),
        empty.path(),
        &["exec", "--continue", "x"],
        &[],
        "",
    )
    .await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("no saved thread in"), "{}", run.stderr);
    assert_eq!(place.mock.requests().len(), 3);
}

#[tokio::test]
async fn the_prompt_comes_from_stdin() {
    let place = Place::new().await;
    place.mock.push(mock::text_reply("From stdin."));
    place.mock.push(mock::text_reply("Dash too."));
    let run = place.exec(&[], "explain\nthis diff\n").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "From stdin.\n");
    assert!(last_user_text(&place.mock.requests()[0]).contains("explain\nthis diff"));
    let run = place.exec(&["-"], "with a dash").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(last_user_text(&place.mock.requests()[1]).contains("with a dash"));
    // Nothing at all is refused.
    let run = place.exec(&[], "  \n").await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("the prompt is empty"), "{}", run.stderr);
}

#[tokio::test]
async fn a_failed_model_request_exits_1() {
    let place = Place::new().await;
    place
        .mock
        .push(mock::error_reply(400, "the model is not available"));
    let run = place.exec(&["--json", "hello"], "").await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let events = events(&run);
    let failed = of_type(&events, "turn_failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert!(
        failed[0]["message"]
            .as_str()
            .unwrap()
            .contains("Model request failed"),
        "{failed:?}"
    );
    let last = events.last().unwrap();
    assert_eq!(last["stop_reason"], "failed");
    assert_eq!(last["exit_code"], 1);
    // A proxy nobody listens on stops the run before a session, with the fix.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".maia")).unwrap();
    let port = crate::cli_login::dead_port().await;
    std::fs::write(
        home.path().join(".maia/settings.json"),
        json!({"LiteLLM_URL": format!("http://127.0.0.1:{port}"), "model": "m"}).to_string(),
    )
    .unwrap();
    let run = maia(home.path(), home.path(), &["exec", "hi"], &[], "").await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("Fix:"), "{}", run.stderr);
    assert_eq!(run.stdout, "");
}

#[tokio::test]
async fn an_editor_lists_and_loads_a_thread_made_by_exec() {
    let mut editor = Maia::start_with(Options::default()).await;
    editor.initialize().await;
    editor.mock.push(mock::text_reply("Made in a terminal."));
    let run = maia(
        editor.home.path(),
        &editor.cwd(),
        &["exec", "--json", "hello from exec"],
        &[],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let id = events(&run)[0]["session_id"].as_str().unwrap().to_owned();
    let cwd = editor.cwd();
    let list = editor.request("session/list", json!({"cwd": cwd})).await;
    let (listed, _) = editor.response(list).await;
    let sessions = listed["result"]["sessions"].as_array().unwrap();
    assert!(
        sessions.iter().any(|s| s["sessionId"] == id.as_str()),
        "{listed}"
    );
    let (loaded, replay) = editor.load(&id).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed = replay.iter().map(Value::to_string).collect::<String>();
    assert!(replayed.contains("hello from exec"), "{replayed}");
    assert!(replayed.contains("Made in a terminal."), "{replayed}");
}

#[tokio::test]
async fn on_a_terminal_a_spinner_names_the_running_tool() {
    use std::io::Read;
    let place = Place::new().await;
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({"command": "sleep 2"}),
    )]));
    place.mock.push(mock::text_reply("Slept."));
    // stderr on a terminal, stdout piped.
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_maia"));
    command
        .args(["exec", "--mode", "bypass", "sleep a second"])
        .env("HOME", place.home.path())
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .current_dir(place.project.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::from(pty.slave)))
        .kill_on_drop(true);
    let child = command.spawn().unwrap();
    // Only the child holds the terminal now: its end ends the reads.
    drop(command);
    let mut master = std::fs::File::from(pty.master);
    let terminal = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = master.read(&mut chunk) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("maia exec did not finish")
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // The answer alone on stdout.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Slept.\n");
    let terminal = tokio::task::spawn_blocking(move || terminal.join().unwrap())
        .await
        .unwrap();
    // Redrawn in place, naming the tool while it runs, and cleared before
    // the lines that stay.
    let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let spinning = frames
        .iter()
        .filter(|f| terminal.contains(&format!("\r\x1b[2K{f} Run `sleep 2`")))
        .count();
    assert!(spinning >= 2, "{terminal:?}");
    assert!(
        terminal.contains("\r\x1b[2K  ✓ Run `sleep 2`"),
        "{terminal:?}"
    );
}

#[tokio::test]
async fn a_tool_call_written_as_a_fenced_json_block_runs_as_that_call() {
    let place = Place::new().await;
    std::fs::write(place.path("notes.txt"), "hello from the file\n").unwrap();
    // As Qwen2.5-Coder writes it: the whole reply one fenced call.
    place.mock.push(mock::text_chunks(
        &[
            "```json\n{\n  \"name\": \"Read\",\n",
            "  \"arguments\": {\"file_path\": \"notes.txt\"}\n}\n```",
        ],
        Duration::ZERO,
    ));
    place.mock.push(mock::text_reply("It says hello."));
    let run = place.exec(&["--json", "what is in notes.txt?"], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let events = events(&run);
    let calls = of_type(&events, "tool_call");
    assert_eq!(calls.len(), 1, "{}", run.stdout);
    assert_eq!(calls[0]["name"], "Read");
    // Shown as a call, never as JSON in the answer.
    let text: String = of_type(&events, "text")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "It says hello.");
    // The next request carries a real call and its result.
    let requests = place.mock.requests();
    let messages = requests[1]["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["tool_calls"][0]["function"]["name"], "Read");
    assert!(messages[n - 2]["content"].is_null(), "{}", messages[n - 2]);
    assert!(tool_results(&place.mock, 1)[0].contains("hello from the file"));
}

#[tokio::test]
async fn a_turn_that_did_not_do_its_job_exits_3_with_the_reason() {
    // An empty answer.
    let place = Place::new().await;
    place.mock.push(mock::text_reply(""));
    let run = place.exec(&["--json", "fix the bug"], "").await;
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let events = events(&run);
    assert_eq!(
        of_type(&events, "turn_unfinished")[0]["reason"],
        "empty_answer"
    );
    let ended = of_type(&events, "turn_ended")[0];
    assert_eq!(ended["unfinished"], "empty_answer");
    assert_eq!(ended["exit_code"], 3);

    // A refused call after which nothing ran.
    let place = Place::new().await;
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({"command": "touch made"}),
    )]));
    place
        .mock
        .push(mock::text_reply("I could not run the command."));
    let run = place.exec(&["create the file"], "").await;
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("nothing ran after it"),
        "{}",
        run.stderr
    );
    assert!(!place.path("made").exists());

    // A refused call the model worked around: done.
    let place = Place::new().await;
    std::fs::write(place.path("a.txt"), "x").unwrap();
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({"command": "cat a.txt"}),
    )]));
    place.mock.push(mock::tool_calls_reply(&[(
        "c2",
        "Read",
        json!({"file_path": "a.txt"}),
    )]));
    place.mock.push(mock::text_reply("It holds x."));
    let run = place.exec(&["what is in a.txt?"], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

#[tokio::test]
async fn in_text_mode_the_named_files_are_shown_and_blocks_are_applied_as_edits() {
    let place = Place::new().await;
    std::fs::write(
        place.home.path().join(".maia/settings.json"),
        json!({"LiteLLM_URL": place.mock.url(), "model": "mock-model",
               "llm_retry_base_ms": 10, "llm_max_retries": 0, "textEdits": true})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        place.path("greet.py"),
        "GREETING = \"Hello\"\nprint(GREETING)\n",
    )
    .unwrap();
    place.mock.push(mock::text_reply(
        "path/to/greet.py\n```python\nGREETING = \"Hi\"\nprint(GREETING)\n```\n\nI changed the greeting.",
    ));
    let run = place
        .exec(
            &[
                "--json",
                "--mode",
                "accept-edits",
                "In greet.py, say Hi instead of Hello.",
            ],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        std::fs::read_to_string(place.path("greet.py")).unwrap(),
        "GREETING = \"Hi\"\nprint(GREETING)\n"
    );
    let events = events(&run);
    let calls = of_type(&events, "tool_call");
    assert_eq!(calls.len(), 1, "{}", run.stdout);
    assert_eq!(calls[0]["name"], "Write");
    assert_eq!(calls[0]["kind"], "edit");
    // One request: no tools offered, the file shown, the format told.
    let requests = place.mock.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .get("tools")
            .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty))
    );
    assert!(requests[0].to_string().contains("GREETING = \\\"Hello\\\""));
    assert!(content_text(&requests[0]["messages"][0]).contains("# How to change a file"));
}

/// `--export PATH` writes the finished thread there (Markdown, or JSON for
/// `.json`), says where, and keeps an existing file unless
/// `--export-force` (exit 1, the file untouched).
#[tokio::test]
async fn export_writes_the_thread_after_the_run() {
    let place = Place::new().await;
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Read",
        json!({"file_path": "notes.txt"}),
    )]));
    place.mock.push(mock::text_reply("It says hello."));
    std::fs::write(place.path("notes.txt"), "hello\n").unwrap();
    let run = place
        .exec(&["--export", "run.md", "what does notes.txt say?"], "")
        .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "It says hello.\n", "stdout stays the answer");
    let md_path = place.path("run.md");
    assert!(
        run.stderr.contains("exported the thread to"),
        "{}",
        run.stderr
    );
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.contains("## User\n\nwhat does notes.txt say?"), "{md}");
    assert!(md.contains("<details><summary>Read: "), "{md}");
    assert!(md.contains("### Answer\n\nIt says hello."), "{md}");

    place.mock.push(mock::text_reply("again"));
    let run = place.exec(&["--export", "run.md", "again"], "").await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&md_path).unwrap(), md, "kept");

    place.mock.push(mock::text_reply("forced"));
    let run = place
        .exec(
            &[
                "--json",
                "--export",
                "run.json",
                "--export-force",
                "json please",
            ],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let exported = of_type(&events(&run), "exported")
        .first()
        .map(|e| e["path"].clone())
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert_eq!(exported, json!(place.path("run.json")));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(place.path("run.json")).unwrap()).unwrap();
    assert_eq!(doc["maia_export"], 1);
    assert_eq!(doc["entries"][0]["text"], "json please");
}

#[tokio::test]
async fn a_budget_crossed_mid_run_stops_it_with_exit_4() {
    let place = Place::new().await;
    // Tiny per-token prices (the estimate is far below a cent); every
    // response costs 0.25 by the proxy's header.
    place
        .mock
        .set_model_info(json!({"data": [{"model_name": "mock-model", "model_info": {
            "max_input_tokens": 100_000, "input_cost_per_token": 1e-9, "output_cost_per_token": 1e-9
        }}]}));
    place.mock.set_stream_headers(vec![(
        "x-litellm-response-cost".to_owned(),
        "0.25".to_owned(),
    )]);
    std::fs::write(place.path("a.txt"), "x").unwrap();
    place.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Read",
        json!({"file_path": "a.txt"}),
    )]));
    place.mock.push(mock::text_reply("It holds x."));
    let run = place
        .exec(
            &["--json", "--max-budget-usd", "0.20", "what is in a.txt?"],
            "",
        )
        .await;
    assert_eq!(run.code, 4, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        place.mock.requests().len(),
        1,
        "stopped before the second request"
    );
    let events = events(&run);
    let unfinished = of_type(&events, "turn_unfinished");
    assert_eq!(unfinished[0]["reason"], "budget", "{events:?}");
    assert!(
        unfinished[0]["text"]
            .as_str()
            .unwrap()
            .contains("session budget ($0.25 spent of $0.20"),
        "{events:?}"
    );
    let ended = of_type(&events, "turn_ended")[0];
    assert_eq!(ended["unfinished"], "budget");
    assert_eq!(ended["exit_code"], 4);

    // Plain output says so on stderr; within the budget the run ends 0.
    let place_ok = Place::new().await;
    place_ok.mock.push(mock::text_reply("fine"));
    let run = place_ok.exec(&["--max-budget-usd", "5", "hello"], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let bad = place_ok
        .exec(&["--max-budget-usd", "-1", "hello"], "")
        .await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

/// `--json`'s usage events carry the context map ACP clients get in
/// `_meta`: its segments add up to the window.
#[tokio::test]
async fn usage_events_carry_the_context_map() {
    let place = Place::new().await;
    std::fs::create_dir_all(place.path(".maia")).unwrap();
    std::fs::write(
        place.path(".maia/settings.json"),
        json!({"contextWindows": {"mock-model": 100_000}}).to_string(),
    )
    .unwrap();
    place.mock.push(mock::text_reply("mapped"));
    let run = place.exec(&["--json", "hello"], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let events = events(&run);
    let usage = of_type(&events, "usage");
    let map = &usage.last().expect("no usage event")["context_map"];
    assert_eq!(map["window"], 100_000, "{usage:?}");
    let segments = map["segments"].as_array().expect("segments");
    let kinds: Vec<&str> = segments.iter().filter_map(|s| s["kind"].as_str()).collect();
    assert!(
        kinds.contains(&"systemPrompt") && kinds.contains(&"free"),
        "{kinds:?}"
    );
    let sum: u64 = segments.iter().filter_map(|s| s["tokens"].as_u64()).sum();
    assert_eq!(sum, 100_000, "{map}");
}
