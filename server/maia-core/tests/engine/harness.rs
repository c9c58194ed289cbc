//! The in-process engine harness: an [`Engine`] with an isolated home and
//! project folder whose settings point at the scripted mock LLM; `prompt`
//! sends one prompt and collects the session's events until the turn ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use maia_core::{
    ChoiceKind, Engine, EngineOptions, Event, PermissionReply, PromptPart, SessionHandle,
    StopReason,
};
use maia_test_support::MockLlm;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// How long any single wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(30);

pub struct Harness {
    pub mock: MockLlm,
    pub engine: Engine,
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    session: Option<SessionHandle>,
    pub events: UnboundedReceiver<Event>,
}

impl Harness {
    /// A new session in a fresh project, with `settings` added to the
    /// user's settings (which already name the mock and `mock-model`).
    pub async fn start(settings: Value) -> Harness {
        let mock = MockLlm::start().await;
        let home = tempfile::tempdir().expect("home");
        let cwd = tempfile::tempdir().expect("cwd");
        write_settings(home.path(), &mock, &settings);
        let engine = engine_for(home.path());
        let (session, events) =
            engine.start_session(cwd.path().to_path_buf(), Arc::new(maia_tools::LocalFs));
        Harness {
            mock,
            engine,
            home,
            cwd,
            session: Some(session),
            events,
        }
    }

    pub fn cwd(&self) -> &Path {
        self.cwd.path()
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.cwd.path().join(relative)
    }

    /// Replaces the user's settings (the mock's URL and model stay).
    pub fn set_settings(&self, settings: Value) {
        write_settings(self.home.path(), &self.mock, &settings);
    }

    /// Sends `text` and returns the turn's events, the last being
    /// [`Event::TurnEnded`].
    pub async fn prompt(&mut self, text: &str) -> Vec<Event> {
        self.prompt_parts(vec![PromptPart::Text(text.to_owned())])
            .await
    }

    pub async fn prompt_parts(&mut self, parts: Vec<PromptPart>) -> Vec<Event> {
        self.session().prompt(parts).expect("session not busy");
        self.until_turn_ended().await
    }

    /// Sends `text` and answers each permission question with the option
    /// of kind `choice`; returns the turn's events.
    pub async fn prompt_answering(&mut self, text: &str, choice: ChoiceKind) -> Vec<Event> {
        self.session()
            .prompt(vec![PromptPart::Text(text.to_owned())])
            .expect("session not busy");
        let mut seen = Vec::new();
        loop {
            let event = self.next_event(&seen).await;
            let event = match event {
                Event::Permission(request) => {
                    let option = request
                        .options
                        .iter()
                        .find(|o| o.kind == choice)
                        .unwrap_or_else(|| panic!("no {choice:?} option: {:?}", request.options))
                        .id
                        .clone();
                    let shown = request.tool_call.clone();
                    let _ = request.reply.send(PermissionReply::Selected {
                        option,
                        reason: None,
                    });
                    Event::ToolCall(shown)
                }
                other => other,
            };
            let ended = matches!(event, Event::TurnEnded(_));
            seen.push(event);
            if ended {
                return seen;
            }
        }
    }

    async fn next_event(&mut self, seen: &[Event]) -> Event {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .unwrap_or_else(|_| panic!("no TurnEnded within {WAIT:?}; saw {seen:#?}"))
            .expect("the session's events ended before its turn")
    }

    /// Collects events until the turn's last one.
    pub async fn until_turn_ended(&mut self) -> Vec<Event> {
        let mut seen = Vec::new();
        loop {
            let event = self.next_event(&seen).await;
            let ended = matches!(event, Event::TurnEnded(_));
            seen.push(event);
            if ended {
                return seen;
            }
        }
    }

    /// The open session.
    pub fn session(&self) -> &SessionHandle {
        self.session.as_ref().expect("a session is open")
    }

    /// Ends the session and waits until its journal is released; returns
    /// the thread's id (see [`Harness::load`]).
    pub async fn stop(&mut self) -> String {
        let old = self.session.take().expect("a session is open");
        let id = old.id().to_owned();
        let ended = old.ended();
        // Dropping the only handle stops the session task.
        drop(old);
        tokio::time::timeout(WAIT, ended.cancelled())
            .await
            .expect("the session did not end");
        id
    }

    /// Opens thread `id` from its journal in a new engine, as a restart of
    /// MAIA would. Returns the replayed events.
    pub fn load(&mut self, id: &str) -> Vec<Event> {
        let engine = engine_for(self.home.path());
        let ((session, events), replay) = engine
            .load_session_with_mcp(
                self.cwd.path().to_path_buf(),
                Arc::new(maia_tools::LocalFs),
                id,
                Vec::new(),
                Vec::new(),
            )
            .expect("the thread loads again");
        self.engine = engine;
        self.session = Some(session);
        self.events = events;
        replay
    }

    /// [`Harness::stop`] then [`Harness::load`].
    pub async fn restart(&mut self) -> Vec<Event> {
        let id = self.stop().await;
        self.load(&id)
    }
}

fn engine_for(home: &Path) -> Engine {
    Engine::new(EngineOptions {
        home: Some(home.to_path_buf()),
        ..Default::default()
    })
}

fn write_settings(home: &Path, mock: &MockLlm, extra: &Value) {
    let mut settings = json!({
        "LiteLLM_URL": mock.url(),
        "model": "mock-model",
        "llm_retry_base_ms": 10,
    });
    if let (Some(base), Some(extra)) = (settings.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    std::fs::create_dir_all(home.join(".maia")).expect("~/.maia");
    std::fs::write(
        home.join(".maia/settings.json"),
        serde_json::to_string_pretty(&settings).expect("json"),
    )
    .expect("settings written");
}

/// The text the agent streamed in `events`.
pub fn agent_text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::AgentText { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The turn's stop reason (the last event).
pub fn stop_of(events: &[Event]) -> StopReason {
    match events.last() {
        Some(Event::TurnEnded(stop)) => *stop,
        other => panic!("not a finished turn: {other:?}"),
    }
}

/// The text of every message of a recorded chat request, system first.
pub fn message_texts(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .map(|m| {
                    let role = m["role"].as_str().unwrap_or_default().to_owned();
                    let text = match &m["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(""),
                        _ => String::new(),
                    };
                    (role, text)
                })
                .collect()
        })
        .unwrap_or_default()
}
