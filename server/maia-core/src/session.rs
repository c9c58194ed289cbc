//! A session: its state, the task that runs its turns one after another,
//! and the handle a front door drives it with.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use maia_llm::{ChatMessage, LlmClient, LlmError};
use maia_tools::{FileSystem, ReadTracker};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine::EngineOptions;
use crate::event::{Event, StopReason};
use crate::permission::Broker;
use crate::prompt::PromptPart;
use crate::settings::{self, Settings};

/// A prompt was sent while a turn is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this session is already running a prompt; wait for it to finish or cancel it")]
pub struct Busy;

enum Op {
    Prompt {
        parts: Vec<PromptPart>,
        cancel: CancellationToken,
    },
}

/// Drives one session. Cloneable; the session ends when every clone is gone.
#[derive(Clone)]
pub struct SessionHandle {
    id: String,
    cwd: PathBuf,
    ops: mpsc::UnboundedSender<Op>,
    turn: Arc<Mutex<Option<CancellationToken>>>,
    busy: Arc<AtomicBool>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Starts a turn. Its events, ending with [`Event::TurnEnded`], arrive
    /// on the session's event receiver.
    pub fn prompt(&self, parts: Vec<PromptPart>) -> Result<(), Busy> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Busy);
        }
        let cancel = CancellationToken::new();
        if let Ok(mut turn) = self.turn.lock() {
            *turn = Some(cancel.clone());
        }
        if self.ops.send(Op::Prompt { parts, cancel }).is_err() {
            self.busy.store(false, Ordering::Release);
            return Err(Busy);
        }
        Ok(())
    }

    /// Cancels the running turn, if any: the model stream is dropped and
    /// running tools are killed. The turn then ends with `Cancelled`.
    pub fn cancel(&self) {
        if let Ok(turn) = self.turn.lock()
            && let Some(token) = turn.as_ref()
        {
            token.cancel();
        }
    }

    /// Whether a turn is running.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }
}

/// Everything a running session owns.
pub(crate) struct Session {
    pub id: String,
    pub cwd: PathBuf,
    pub settings: Settings,
    pub llm: Result<LlmClient, LlmError>,
    pub model: Option<String>,
    pub history: Vec<ChatMessage>,
    pub fs: Arc<dyn FileSystem>,
    pub reads: Arc<ReadTracker>,
    pub broker: Arc<Mutex<Broker>>,
    pub events: mpsc::UnboundedSender<Event>,
    pub tool_seq: u64,
}

impl Session {
    pub fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }
}

pub(crate) fn spawn(
    options: &EngineOptions,
    cwd: PathBuf,
    fs: Arc<dyn FileSystem>,
) -> (SessionHandle, mpsc::UnboundedReceiver<Event>) {
    let id = uuid::Uuid::new_v4().to_string();
    let settings = settings::load(options.home.as_deref(), &cwd, options.env_api_key.clone());
    let llm = LlmClient::new(settings.llm.clone());
    let model = options.model.clone().or_else(|| settings.model.clone());
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let busy = Arc::new(AtomicBool::new(false));
    let turn = Arc::new(Mutex::new(None));
    let handle = SessionHandle {
        id: id.clone(),
        cwd: cwd.clone(),
        ops: ops_tx,
        turn: turn.clone(),
        busy: busy.clone(),
    };
    tracing::info!(session = %id, cwd = %cwd.display(), settings = ?settings.loaded, "session started");
    let mut session = Session {
        id,
        cwd,
        settings,
        llm,
        model,
        history: Vec::new(),
        fs,
        reads: Arc::new(ReadTracker::default()),
        broker: Arc::new(Mutex::new(Broker::default())),
        events: events_tx,
        tool_seq: 0,
    };
    tokio::spawn(async move {
        while let Some(op) = ops_rx.recv().await {
            match op {
                Op::Prompt { parts, cancel } => {
                    let stop = session.run_turn(parts, &cancel).await;
                    let stop = if cancel.is_cancelled() {
                        StopReason::Cancelled
                    } else {
                        stop
                    };
                    if let Ok(mut turn) = turn.lock() {
                        *turn = None;
                    }
                    busy.store(false, Ordering::Release);
                    session.emit(Event::TurnEnded(stop));
                }
            }
        }
        tracing::debug!(session = %session.id, "session ended");
    });
    (handle, events_rx)
}
