//! What a batch of tool calls did to its session, applied after the batch
//! ([`TurnEffect`]s, in the order of the calls): the sandbox's memory of
//! failed commands, the mode an approved plan chose, the task list, the
//! tools loaded for the thread's next requests, and
//! whether the turn ends because a question was shown as text. A child of
//! `session`, like `turn`.

use crate::effect::TurnEffect;
use crate::event::Event;
use crate::session::Session;
use crate::session_tools::Todo;
use crate::store::Record;

/// What the turn acts on after a batch's effects were applied.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// The mode changed: the next batch is offered the new mode's tools.
    pub(crate) mode_changed: bool,
    /// An `AskUser` question was shown as text: the turn ends after this
    /// batch, so the user answers in their next prompt.
    pub(crate) asked_as_text: bool,
    /// A hook asked the turn to stop (`continue: false`): why.
    pub(crate) hook_stopped: Option<String>,
    /// The task list, when it changed: recorded once for the batch
    /// ([`Applied::record_todos`]), after the calls.
    todos: Option<Vec<Todo>>,
}

impl Session {
    /// Applies what the batch's calls did, in their order; the task list
    /// and the mode as the last call left them.
    pub(crate) fn apply_effects(&mut self, effects: Vec<TurnEffect>) -> Applied {
        let mut applied = Applied::default();
        let mut todos = None;
        let mut mode = None;
        for effect in effects {
            match effect {
                TurnEffect::AskedAsText => applied.asked_as_text = true,
                TurnEffect::HookStopped(reason) => applied.hook_stopped = Some(reason),
                TurnEffect::SwitchMode(chosen) => mode = Some(chosen),
                TurnEffect::TodosChanged(list) => todos = Some(list),
                TurnEffect::SandboxDenied { key } => {
                    self.tools.sandbox_failures.insert(key);
                }
                TurnEffect::SandboxPassed { key } => {
                    self.tools.sandbox_failures.remove(&key);
                }
                TurnEffect::ToolsLoaded(names) => self.conversation.load_tools(names),
            }
        }
        if let Some(mode) = mode
            && mode != self.mode
        {
            self.mode = mode;
            self.services.state.set_mode(mode);
            self.emit(Event::ModeChanged(mode));
            applied.mode_changed = true;
        }
        if let Some(todos) = todos
            && let Ok(mut list) = self.tools.todos.lock()
            && *list != todos
        {
            list.clone_from(&todos);
            applied.todos = Some(todos);
        }
        applied
    }
}

impl Applied {
    /// Records the batch's change of the task list, once.
    pub(crate) fn record_todos(&mut self, session: &mut Session) {
        if let Some(todos) = self.todos.take() {
            session.record(&Record::Plan { todos });
        }
    }
}
