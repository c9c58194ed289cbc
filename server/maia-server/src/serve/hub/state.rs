//! The hub's state, under its one lock: the clients, the live sessions
//! with one view per protocol version (numbers, replay log, open's answer,
//! attaches waiting for it), the requests forwarded to the agent and the
//! agent's questions waiting for an answer.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use super::super::outbox::Outbox;
use super::super::tokens::{Access, Role};
use super::{lineup, numbers};

pub(super) struct Client {
    pub(super) outbox: Arc<Outbox>,
    pub(super) access: Access,
    pub(super) initialized: bool,
    /// The agent connection this client talks to (its protocol version).
    pub(super) wire: usize,
    pub(super) attached: HashSet<String>,
    /// The sessions whose turn is cancelled when this client leaves
    /// (`_meta.maia.cancelOnDisconnect` on the open or attach).
    pub(super) cancel_on_leave: HashSet<String>,
    /// The sessions this client is opening by a request sent without
    /// `Acp-Session-Id`: their replay goes on its connection's stream,
    /// before the answer (`attach::stream_of`).
    pub(super) replaying_here: HashSet<String>,
}

/// A session open in the agent, with who is attached to it.
#[derive(Default)]
pub(super) struct Live {
    /// What the clients of each wire see of it.
    pub(super) views: [View; 2],
    pub(super) attached: BTreeMap<u64, Role>,
}

/// A live session as one agent connection (one protocol version) tells it.
#[derive(Default)]
pub(super) struct View {
    /// Its update numbers (`hub/numbers.rs`: they survive the daemon).
    pub(super) seq: numbers::Sequence,
    /// The kept updates with their size; `log_bytes` their sum.
    pub(super) log: VecDeque<(usize, Value)>,
    pub(super) log_bytes: usize,
    /// The last `state_update` told (v2): the snapshot an attach is sent.
    pub(super) state: Option<Value>,
    /// The open's answer (what a later attach is answered), once given.
    pub(super) opened: Option<Value>,
    /// Attaches waiting for the open's answer.
    pub(super) waiters: Vec<Waiter>,
}

/// An attach waiting for the open's answer: the client, its request's id,
/// its `since`, and whether its answer goes on the session's stream.
pub(super) struct Waiter {
    pub(super) conn: u64,
    pub(super) id: Value,
    pub(super) since: Option<u64>,
    pub(super) scoped: bool,
}

impl Live {
    /// A session going live: its numbers go on from where the daemon
    /// left them.
    pub(super) fn resume(numbers: &numbers::Numbers, sid: &str) -> Self {
        let mut live = Live::default();
        for (wire, view) in live.views.iter_mut().enumerate() {
            view.seq = numbers::Sequence::resume(numbers, sid, wire);
        }
        live
    }
}

pub(super) enum Kind {
    Plain,
    /// `session/prompt`: its end is told to every attached client.
    Prompt {
        session: String,
    },
    New {
        cancel_on_leave: bool,
    },
    Open {
        session: String,
    },
    Close {
        session: String,
    },
    /// The hub's `_hub/attach`: the other wire serves the session too.
    Mirror {
        session: String,
    },
    /// The hub's own request whose answer nobody waits for.
    Internal,
}

/// A client's request forwarded to the agent (`conn` 0: the hub's own).
pub(super) struct Routed {
    pub(super) conn: u64,
    pub(super) id: Value,
    pub(super) kind: Kind,
    pub(super) scope: Option<String>,
    pub(super) wire: usize,
}

/// A client's request as the hub takes it (its message aside).
pub(super) struct Request<'a> {
    pub(super) conn: u64,
    pub(super) access: &'a Access,
    pub(super) method: &'a str,
    pub(super) id: Value,
    /// Its answer goes on the stream of the session it names.
    pub(super) scoped: bool,
}

/// The agent's request of a session, sent to its controllers of `wire`.
pub(super) struct Asked {
    pub(super) session: String,
    pub(super) message: Value,
    pub(super) sent: Vec<u64>,
    pub(super) wire: usize,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) clients: HashMap<u64, Client>,
    pub(super) live: HashMap<String, Live>,
    pub(super) routed: HashMap<String, Routed>,
    pub(super) asked: HashMap<String, Asked>,
    pub(super) next: u64,
    /// Each wire's `initialize` answer.
    pub(super) init: Vec<Value>,
    /// Sessions to cancel (and the wire to ask), as clients that asked for
    /// it left.
    pub(super) cancels: Vec<(String, usize)>,
    /// Prompts waiting for their session's prompt in flight.
    pub(super) lineup: lineup::Lineup,
    /// Where the sessions' update numbers are kept.
    pub(super) numbers: numbers::Numbers,
}

impl State {
    /// The live session `sid`, made live when it was not.
    pub(super) fn live_entry(&mut self, sid: &str) -> &mut Live {
        let numbers = &self.numbers;
        self.live
            .entry(sid.to_owned())
            .or_insert_with(|| Live::resume(numbers, sid))
    }
}
