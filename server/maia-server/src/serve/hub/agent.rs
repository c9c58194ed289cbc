//! The agent's side of the hub: the agent connections started on their
//! pipes, their updates numbered, kept and sent to every client of their
//! wire attached, their questions sent to that wire's controllers, and the
//! answers to the requests forwarded for clients routed back (attaching a
//! client when a session opens for it, and asking the other wire's
//! connection to serve it too).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Asked;
use super::{
    CLOSED, ECHOED, Hub, Kind, LOG_BYTES, LOG_LIMIT, Role, Routed, State, TURN_ENDED, Waiter,
    asked_key, attach, detach, error, key, resend_questions, session_of,
};

/// One agent connection on a pipe, initialized: what writes to it, what
/// it writes, and its `initialize` answer.
type Started = (
    mpsc::UnboundedSender<String>,
    tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    Value,
);

/// How long a stopping daemon gives its clients to take the agent's last
/// messages.
const LAST_WORDS: Duration = Duration::from_secs(1);

/// Starts the agent connection of `wire` (0: v1, 1: v2) on a pipe and
/// initializes it as a client without `fs` or terminals (the daemon reads
/// and writes files itself, see docs/remote.md); `stop` closes its input,
/// as a stdio client's leaving closes `maia acp`'s.
async fn start_agent(
    engine: maia_core::Engine,
    wire: usize,
    shared: Option<Arc<crate::acp::Shared>>,
    stop: CancellationToken,
) -> anyhow::Result<Started> {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (their_read, their_write) = tokio::io::split(theirs);
    let v2 = wire == 1;
    tokio::spawn(crate::acp::serve_pipe(
        engine,
        (v2, shared),
        their_read,
        their_write,
    ));
    let (read, mut write) = tokio::io::split(ours);
    let mut lines = BufReader::new(read).lines();
    let info = json!({"name": "maia-serve", "version": env!("CARGO_PKG_VERSION")});
    let params = if v2 {
        json!({"protocolVersion": 2, "info": info, "capabilities": {}})
    } else {
        json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": info})
    };
    let init =
        json!({"jsonrpc": "2.0", "id": "hub-init", "method": "initialize", "params": params});
    write.write_all(format!("{init}\n").as_bytes()).await?;
    let result = loop {
        let Some(line) = lines.next_line().await? else {
            anyhow::bail!("the agent ended before it was initialized");
        };
        let message: Value = serde_json::from_str(&line)?;
        if message["id"] == "hub-init" {
            break message["result"].clone();
        }
    };
    if result["protocolVersion"] != json!(wire + 1) {
        anyhow::bail!("the agent connection did not speak version {}", wire + 1);
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        loop {
            let line = tokio::select! {
                line = rx.recv() => line,
                () = stop.cancelled() => None,
            };
            let Some(line) = line else { break };
            if write.write_all(line.as_bytes()).await.is_err()
                || write.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        // The agent reads the end of its input and stops.
        let _ = write.shutdown().await;
    });
    Ok((tx, lines, result))
}

impl Hub {
    /// Sends `message` to the agent of `wire` (0: v1, 1: v2).
    pub(super) fn to_agent(&self, wire: usize, message: &Value) {
        let sent = self
            .agents
            .get(wire)
            .is_some_and(|agent| agent.send(message.to_string()).is_ok());
        if !sent {
            tracing::warn!(wire, "the agent is gone; a message was dropped");
        }
    }

    /// Sends the hub's own request `message` to the agent of `wire`.
    pub(super) fn internal(&self, state: &mut State, wire: usize, message: Value, kind: Kind) {
        let routed = Routed {
            conn: 0,
            id: Value::Null,
            kind,
            scope: None,
            wire,
        };
        self.send_routed(state, message, routed);
    }

    /// Sends request `message` to the agent of `routed.wire` under an id of
    /// the hub's own (`c<conn>.<n>`, or `hub.<n>` for its own requests),
    /// which its answer is routed back by.
    pub(super) fn send_routed(&self, state: &mut State, mut message: Value, routed: Routed) {
        let ours = match routed.conn {
            0 => format!("hub.{}", state.next),
            conn => format!("c{conn}.{}", state.next),
        };
        state.next += 1;
        let wire = routed.wire;
        state.routed.insert(ours.clone(), routed);
        message["id"] = Value::String(ours);
        self.to_agent(wire, &message);
    }

    /// Starts the agent (with `protocol_v2`, one connection per protocol
    /// version, both on one engine) and initializes it.
    pub async fn start(
        options: maia_core::EngineOptions,
        protocol_v2: bool,
    ) -> anyhow::Result<Arc<Hub>> {
        let numbers = super::numbers::Numbers::under(options.home.as_deref());
        let engine = maia_core::Engine::new(options);
        let shared = protocol_v2.then(crate::acp::Shared::new);
        let stop = CancellationToken::new();
        let mut agents = Vec::new();
        let mut init = Vec::new();
        let mut outputs = Vec::new();
        for wire in 0..=usize::from(protocol_v2) {
            let (tx, lines, result) =
                start_agent(engine.clone(), wire, shared.clone(), stop.clone()).await?;
            agents.push(tx);
            init.push(result);
            outputs.push(lines);
        }
        let hub = Arc::new(Hub {
            state: std::sync::Mutex::new(State {
                init,
                next: 1,
                numbers,
                ..State::default()
            }),
            agents,
            stop,
            readers: tokio_util::task::TaskTracker::new(),
        });
        for (wire, mut lines) in outputs.into_iter().enumerate() {
            let reader = hub.clone();
            hub.readers.spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    match serde_json::from_str::<Value>(&line) {
                        Ok(message) => reader.on_agent(wire, message),
                        Err(e) => tracing::error!("the agent wrote a line that is not JSON: {e}"),
                    }
                }
                tracing::info!(wire, "the agent ended");
            });
        }
        hub.readers.close();
        Ok(hub)
    }

    /// Stops the agent as `maia acp` stops when its client leaves: running
    /// prompts are answered `cancelled` (what streamed is kept in the
    /// journal) and sessions stop. Waits up to `within` for the agent's
    /// last messages to reach the clients' outboxes, then a moment for
    /// the clients to take them.
    pub async fn shut_down(&self, within: Duration) {
        self.stop.cancel();
        if tokio::time::timeout(within, self.readers.wait())
            .await
            .is_err()
        {
            tracing::warn!("the agent did not stop in time");
        }
        let outboxes: Vec<_> = self
            .lock()
            .clients
            .values()
            .map(|c| c.outbox.clone())
            .collect();
        let taken = async {
            while outboxes.iter().any(|o| !o.is_drained() && !o.is_closed()) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let _ = tokio::time::timeout(LAST_WORDS, taken).await;
    }

    /// A message from the agent connection of `wire`.
    pub(super) fn on_agent(&self, wire: usize, message: Value) {
        let mut state = self.lock();
        self.handle(&mut state, wire, message);
        // Clients dropped for falling behind leave like any other.
        self.send_cancels(&mut state);
    }

    fn handle(&self, state: &mut State, wire: usize, message: Value) {
        let method = message["method"].as_str().map(str::to_owned);
        let id = message.get("id").cloned();
        match (method, id) {
            (None, Some(id)) => self.answer(state, &key(&id), message),
            (Some(method), None) if method == maia_rpc::CANCEL_REQUEST => {
                let asked = asked_key(wire, &message["params"]["requestId"]);
                if let Some(asked) = state.asked.remove(&asked) {
                    for conn in &asked.sent {
                        if let Some(c) = state.clients.get(conn) {
                            c.outbox
                                .push(Some(&asked.session), message.to_string(), false);
                        }
                    }
                }
            }
            (Some(_), None) => match session_of(&message) {
                Some(sid) => publish(state, &sid, wire, message),
                None => {
                    let text = message.to_string();
                    for c in state
                        .clients
                        .values()
                        .filter(|c| c.initialized && c.wire == wire)
                    {
                        c.outbox.push(None, text.clone(), false);
                    }
                }
            },
            (Some(_), Some(id)) => {
                let Some(sid) = session_of(&message).filter(|s| state.live.contains_key(s)) else {
                    self.to_agent(
                        wire,
                        &error(&id, -32603, "no client can answer this", Value::Null),
                    );
                    return;
                };
                let controllers = controllers(state, &sid, wire);
                let text = message.to_string();
                for conn in &controllers {
                    if let Some(c) = state.clients.get(conn) {
                        c.outbox.push(Some(&sid), text.clone(), false);
                    }
                }
                state.asked.insert(
                    asked_key(wire, &id),
                    Asked {
                        session: sid,
                        message,
                        sent: controllers,
                        wire,
                    },
                );
            }
            (None, None) => tracing::error!("the agent wrote a message that is not JSON-RPC"),
        }
    }

    /// The agent's answer to the forwarded request `ours`.
    fn answer(&self, state: &mut State, ours: &str, mut message: Value) {
        let Some(routed) = state.routed.remove(ours) else {
            return;
        };
        let wire = routed.wire;
        message["id"] = routed.id.clone();
        let ok = message.get("result").is_some();
        match routed.kind {
            Kind::Plain | Kind::Internal => {}
            Kind::Prompt { session } => {
                if let Some(c) = state.clients.get(&routed.conn) {
                    c.outbox
                        .push(routed.scope.as_deref(), message.to_string(), false);
                }
                let ended = json!({"jsonrpc": "2.0", "method": TURN_ENDED, "params": {
                    "sessionId": session,
                    "stopReason": message["result"]["stopReason"],
                    "error": message.get("error"),
                }});
                publish(state, &session, wire, ended);
                self.release(state, &session);
                return;
            }
            Kind::New { cancel_on_leave } => {
                if let Some(sid) = message["result"]["sessionId"].as_str() {
                    if cancel_on_leave && let Some(c) = state.clients.get_mut(&routed.conn) {
                        c.cancel_on_leave.insert(sid.to_owned());
                    }
                    let mut opened = message["result"].clone();
                    if wire == 1
                        && let Some(object) = opened.as_object_mut()
                    {
                        // What a v2 attach is answered: a resume's answer.
                        object.remove("sessionId");
                    }
                    let role = state.clients.get(&routed.conn).map(|c| c.access.role);
                    let live = state.live_entry(sid);
                    live.views[wire].opened = Some(opened);
                    if let Some(role) = role {
                        live.attached.insert(routed.conn, role);
                    }
                    if let Some(c) = state.clients.get_mut(&routed.conn) {
                        c.attached.insert(sid.to_owned());
                    }
                    let sid = sid.to_owned();
                    self.mirror(state, &sid, wire);
                }
            }
            Kind::Open { session } => {
                if wire == 0
                    && let Some(result) = message["result"].as_object_mut()
                {
                    // v1's load and resume answers name no session; clients
                    // of the network transport open the session's stream on
                    // a message that does (and a live attach's answer has it).
                    result.insert("sessionId".into(), Value::String(session.clone()));
                }
                if let Some(live) = state.live.get(&session)
                    && message["result"].is_object()
                {
                    // The last number of its replay, as a live attach's.
                    message["result"]["_meta"]["maia"]["seq"] = json!(live.views[wire].seq.last);
                }
                self.opened(state, wire, &session, &message);
                if let Some(c) = state.clients.get_mut(&routed.conn) {
                    // The replay was sent; what follows takes the
                    // session's stream.
                    c.replaying_here.remove(&session);
                    c.outbox
                        .push(routed.scope.as_deref(), message.to_string(), false);
                }
                if ok {
                    resend_questions(state, routed.conn, &session);
                    self.mirror(state, &session, wire);
                }
                let waiters = state
                    .live
                    .get_mut(&session)
                    .map(|live| std::mem::take(&mut live.views[wire].waiters))
                    .unwrap_or_default();
                for w in waiters {
                    attach_waiter(state, &session, w);
                }
                return;
            }
            Kind::Mirror { session } => {
                let waiters = state
                    .live
                    .get_mut(&session)
                    .map(|live| std::mem::take(&mut live.views[wire].waiters))
                    .unwrap_or_default();
                if !ok {
                    // The session goes on for the other wire's clients.
                    tracing::error!(session = %session, wire, %message, "the other wire could not serve a session");
                    for w in waiters {
                        let mut refused = message.clone();
                        refused["id"] = w.id;
                        if let Some(c) = state.clients.get(&w.conn) {
                            c.outbox.push(None, refused.to_string(), false);
                        }
                    }
                    return;
                }
                if let Some(live) = state.live.get_mut(&session) {
                    live.views[wire].opened = Some(message["result"].clone());
                }
                for w in waiters {
                    attach_waiter(state, &session, w);
                }
                return;
            }
            Kind::Close { session } => {
                if ok {
                    // Every client attached is told, the closer included.
                    let closed = json!({"jsonrpc": "2.0", "method": CLOSED,
                        "params": {"sessionId": session}});
                    for view in 0..self.agents.len() {
                        publish(state, &session, view, closed.clone());
                    }
                    state.live.remove(&session);
                    for c in state.clients.values_mut() {
                        c.attached.remove(&session);
                    }
                }
            }
        }
        if let Some(c) = state.clients.get(&routed.conn) {
            c.outbox
                .push(routed.scope.as_deref(), message.to_string(), false);
        }
    }

    /// The session's open on `wire` was answered `message`: kept for the
    /// attaches to come; a failed one ends the live session, and whoever
    /// waited for it is answered the error.
    fn opened(&self, state: &mut State, wire: usize, session: &str, message: &Value) {
        let Some(live) = state.live.get_mut(session) else {
            return;
        };
        if message.get("result").is_some() {
            live.views[wire].opened = Some(message["result"].clone());
            return;
        }
        let Some(live) = state.live.remove(session) else {
            return;
        };
        for c in state.clients.values_mut() {
            c.attached.remove(session);
        }
        for w in live.views.iter().flat_map(|v| v.waiters.iter()) {
            let mut refused = message.clone();
            refused["id"] = w.id.clone();
            if let Some(c) = state.clients.get(&w.conn) {
                c.outbox.push(None, refused.to_string(), false);
            }
        }
    }

    /// Asks the other wire's connection (when there is one) to serve the
    /// session `wire` opened.
    fn mirror(&self, state: &mut State, session: &str, wire: usize) {
        if self.agents.len() < 2 {
            return;
        }
        let attach = json!({"jsonrpc": "2.0", "method": crate::acp::ATTACH,
            "params": {"sessionId": session}});
        let kind = Kind::Mirror {
            session: session.to_owned(),
        };
        self.internal(state, 1 - wire, attach, kind);
    }
}

/// An attach that waited for the open's answer, made now.
fn attach_waiter(state: &mut State, session: &str, w: Waiter) {
    attach(
        state,
        w.conn,
        session,
        &w.id,
        w.since,
        w.since.is_some(),
        w.scoped,
    );
}

/// Numbers a message of the live session `sid` as `wire` tells it, keeps it
/// for replay and sends it to every client of that wire attached; a client
/// that fell behind is dropped.
fn publish(state: &mut State, sid: &str, wire: usize, message: Value) {
    publish_as(state, sid, wire, message, None);
}

/// `publish`; with `echo_of`, a client's own words told to the others
/// (`echo`): that client gets `ECHOED` with the number instead, so every
/// client's numbers stay contiguous.
pub(super) fn publish_as(
    state: &mut State,
    sid: &str,
    wire: usize,
    mut message: Value,
    echo_of: Option<u64>,
) {
    let Some(live) = state.live.get_mut(sid) else {
        tracing::debug!(session = %sid, "an update of a session nobody opened");
        return;
    };
    let view = &mut live.views[wire];
    if message["params"]["update"]["sessionUpdate"] == "state_update" {
        view.state = Some(message["params"]["update"].clone());
    }
    let seq = view.seq.next(&state.numbers, sid, wire);
    let placeholder = echo_of.map(|_| {
        json!({"jsonrpc": "2.0", "method": ECHOED,
            "params": {"sessionId": sid, "_meta": {"maia": {"seq": seq}}}})
        .to_string()
    });
    message["params"]["_meta"]["maia"]["seq"] = json!(seq);
    let text = message.to_string();
    view.log_bytes += text.len();
    view.log.push_back((text.len(), message));
    while view.log.len() > LOG_LIMIT || view.log_bytes > LOG_BYTES {
        match view.log.pop_front() {
            Some((size, _)) => view.log_bytes -= size,
            None => break,
        }
    }
    let attached: Vec<u64> = live.attached.keys().copied().collect();
    for conn in attached {
        let sent = match &placeholder {
            Some(own) if Some(conn) == echo_of => own,
            _ => &text,
        };
        let dropped = state
            .clients
            .get(&conn)
            .filter(|c| c.wire == wire)
            .is_some_and(|c| !c.outbox.push(attach::stream_of(c, sid), sent.clone(), true));
        if dropped {
            tracing::warn!(conn, session = %sid, "a client fell behind; dropped");
            detach(state, conn);
        }
    }
}

/// The controllers of `wire` attached to `sid`.
fn controllers(state: &State, sid: &str, wire: usize) -> Vec<u64> {
    state.live.get(sid).map_or_else(Vec::new, |live| {
        live.attached
            .iter()
            .filter(|(conn, role)| {
                **role == Role::Controller
                    && state.clients.get(conn).is_some_and(|c| c.wire == wire)
            })
            .map(|(conn, _)| *conn)
            .collect()
    })
}
