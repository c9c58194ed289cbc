//! The children of `Task` calls as sessions of their own: [`ChildSpawner`]
//! makes a child's session from its parent's parts (its project shared,
//! its conversation kept in memory, its MCP and language servers its
//! parent's), runs it like any session ([`super::launch`]), registers it
//! so `cancel_child` finds it, and gives the `Task` call its first prompt.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Children, Launch, SessionHandle, launch};
use crate::conversation::Conversation;
use crate::prompt::PromptPart;
use crate::queue::Queue;
use crate::session::{Change, Parts, Services, Session};
use crate::session_state::StateCell;
use crate::store;

/// Starts the children of a top session's `Task` calls (and theirs).
pub(super) struct ChildSpawner {
    pub(super) children: Children,
}

impl crate::session::Spawner for ChildSpawner {
    fn spawn(&self, setup: crate::session::ChildSetup) -> crate::subagent::Child {
        let crate::session::ChildSetup {
            id,
            options,
            cwd,
            roots,
            fs,
            mcp,
            lsp,
            windows,
            project,
            model,
            mode,
            client,
            role,
            prompt,
        } = setup;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (changes_tx, changes) = mpsc::unbounded_channel();
        tracing::info!(session = %id, agent = %role.agent, depth = role.depth, model = ?model, "subagent started");
        let state = StateCell::new(model.clone());
        state.set_mode(mode);
        let conversation =
            Conversation::ephemeral(&id, &cwd, options.home.as_deref(), events_tx.clone());
        let mut session = Session::new(Parts {
            id: id.clone(),
            services: Services {
                options,
                cwd,
                roots,
                fs,
                events: events_tx,
                mcp,
                lsp,
                vision: crate::images::VisionCache::new(windows.catalogue().clone()),
                windows,
                changes,
                spawner: Arc::new(ChildSpawner {
                    children: self.children.clone(),
                }),
                state: state.clone(),
            },
            project,
            conversation,
            model: model.clone(),
            role: Some(role),
        });
        session.apply(Change::Mode(mode));
        session.apply(Change::Client(client));
        let handle = launch(
            session,
            Launch {
                changes: changes_tx,
                queue: Queue::load(None),
                initial_model: model,
                saved_options: store::SessionOptions::new(),
                children: self.children.clone(),
                state,
                top: false,
            },
        );
        if let Ok(mut children) = self.children.lock() {
            children.insert(id.clone(), handle.clone());
        }
        // Idle and new: the prompt is taken.
        let _ = handle.prompt(vec![PromptPart::Text(prompt)]);
        crate::subagent::Child {
            id: id.clone(),
            events: events_rx,
            control: Box::new(ChildControl {
                handle,
                children: self.children.clone(),
            }),
        }
    }
}

/// A `Task` call's hold on its child: cancels it; when dropped, the child
/// leaves the registry and its session ends.
struct ChildControl {
    handle: SessionHandle,
    children: Children,
}

impl crate::subagent::ChildControl for ChildControl {
    fn cancel(&self) {
        self.handle.cancel();
    }
}

impl Drop for ChildControl {
    fn drop(&mut self) {
        if let Ok(mut children) = self.children.lock() {
            children.remove(self.handle.id());
        }
    }
}
