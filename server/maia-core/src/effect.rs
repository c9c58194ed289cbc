//! What a tool does, as typed values: [`ToolEffect`], the class of change
//! a tool may make (declared by the tool, `Tool::effect`; plan mode,
//! checkpoints and a subagent's narrowing all read it), and
//! [`TurnEffect`], what one call did to its session (returned with the
//! call's output and applied by the session after the batch). A leaf
//! below `tools`, `plan_mode` and `subagent`.

use crate::mode::Mode;
use crate::session_tools::Todo;

/// The class of change a tool may make (`Tool::effect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolEffect {
    /// Reads the project, the web or the language servers; changes nothing.
    ReadOnly,
    /// Acts within the conversation only: the task list, a question to the
    /// user, leaving plan mode, reading a background command's output.
    Conversation,
    /// Reads the session's own settings or instructions (the current
    /// model, a skill, whose instructions are for acting): changes
    /// nothing, offered only where the model may act.
    Session,
    /// May change files.
    Files,
    /// Runs programs (or another server's tools): may change anything.
    Process,
    /// Starts a subagent, whose tools may change files (read-only when its
    /// parent is).
    Subagent,
}

impl ToolEffect {
    /// Whether a read-only turn (`/review`, the `plan` mode, a read-only
    /// subagent) offers a tool of this class.
    pub fn read_only_turns_offer(self) -> bool {
        matches!(
            self,
            ToolEffect::ReadOnly | ToolEffect::Conversation | ToolEffect::Subagent
        )
    }

    /// Whether a call may change files, so it takes a checkpoint before
    /// and after its batch (a subagent's child takes none of its own).
    pub fn may_change_files(self) -> bool {
        matches!(
            self,
            ToolEffect::Files | ToolEffect::Process | ToolEffect::Subagent
        )
    }
}

/// What a call did to its session besides its output, applied by the
/// session after the batch, in the order of the calls.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEffect {
    /// An `AskUser` question was shown as text: the turn ends after the
    /// batch, so the user answers in their next prompt.
    AskedAsText,
    /// An approved plan chose this mode; the next batch runs in it.
    SwitchMode(Mode),
    /// The task list is now this.
    TodosChanged(Vec<Todo>),
    /// A command failed in the sandbox, maybe because of it: its next
    /// call is asked, offering a run without the sandbox.
    SandboxDenied { key: String },
    /// A command ran without a sandbox denial: that offer is withdrawn.
    SandboxPassed { key: String },
    /// A hook answered `continue: false`: the turn ends after the batch,
    /// the reason (`stopReason`) told to the user.
    HookStopped(String),
    /// These tools' definitions are sent from the next request on (a
    /// `ToolSearch` found them, or one was called by name); kept with the
    /// thread.
    ToolsLoaded(Vec<String>),
}
