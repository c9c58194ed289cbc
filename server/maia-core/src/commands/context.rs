//! `/context`: what fills the model's context window (the map of
//! [`crate::context_map`], the one clients draw: system prompt,
//! instruction files, skills, tools, MCP tools, messages, output reserve,
//! free space, where auto-compaction fires), the meter's numbers and where
//! they come from, the cost, the workspace folders and the managed policy
//! in force.

use crate::context_map::{ContextMap, SegmentKind};
use crate::session::Session;

pub(super) fn context_command(session: &Session) {
    let model = session.model().map(str::to_owned);
    // The meter's numbers: what the last usage_update said, or would say.
    let used = session.context_tokens();
    let map = session.context_map(used, session.context_source(), 0);
    let context_file = instruction_lines(session, &map);
    let meter = match session.meter().window() {
        Some(window) => format!(
            "{used} of {window} tokens ({:.0} %)",
            used as f64 * 100.0 / window.max(1) as f64
        ),
        None => format!("{used} tokens (window unknown: no meter)"),
    };
    let source = match session.context_source() {
        "measured" => {
            "measured: the server's last usage (prompt + answer, reasoning excluded), plus an estimate of what came since"
        }
        _ => "estimated: ~4 characters per token",
    };
    let window_source = match session.meter().window_source() {
        Some(source) => format!(" (from {source})"),
        None => String::new(),
    };
    let last = match &session.meter().last_usage() {
        Some(u) => format!(
            "prompt {} + answer {} tokens ({} of them reasoning, not kept); cached: {} read, {} written",
            u.prompt_tokens,
            u.completion_tokens,
            u.reasoning_tokens,
            u.cached_tokens,
            u.cache_write_tokens
        ),
        None => "none yet".to_owned(),
    };
    let caching = model.as_deref().map_or("no model yet", |m| {
        if session.prompt_caching(m) {
            "on (cache_control marks on the system message and the last two messages)"
        } else {
            "off"
        }
    });
    let summary_model = session
        .project()
        .settings
        .small_model
        .clone()
        .or_else(|| model.clone())
        .unwrap_or_else(|| "(not chosen yet)".into());
    let text = format!(
        "Context of `{name}`:\n\n\
         - in use: {meter}, {source}\n\
         - calibration: {ratio:.2} real tokens per estimated token\n\
         - model: `{model}`, context window: {window}{window_source}\n\
         - system prompt: ~{sys} tokens, {doctrine}\n\
         - instruction files: {context_file}\n\
         - skills: ~{skills} tokens\n\
         - tool definitions: ~{tools} tokens (MCP tools: ~{mcp} tokens)\n\
         - messages: {count} (~{msgs} tokens)\n\
         - output reserve: {reserve}\n\
         - free: {free}\n\
         - automatic compaction: {auto}\n\
         - pending items: {pending}\n\
         - last response: {last}\n\
         - cost: {cost} this thread, {turn_cost} the last turn (`/cost` for each model)\n\
         - cached prompt tokens this session: {cached}\n\
         - prompt caching: {caching}\n\
         - summaries written by: `{summary_model}`\n\
         - tool calls written as text: {run} run as calls, {retried} corrections sent, {shown} shown as text",
        name = session.conversation().name(),
        ratio = session.meter().calibration(),
        sys = map.tokens_of(SegmentKind::SystemPrompt),
        doctrine = session.doctrine_in_force(),
        skills = map.tokens_of(SegmentKind::Skills),
        tools = map.tokens_of(SegmentKind::Tools),
        mcp = map.tokens_of(SegmentKind::McpTools),
        count = session.conversation().len(),
        msgs = map.tokens_of(SegmentKind::Conversation),
        reserve = reserve_line(&map),
        free = match map.window {
            0 => "unknown (window unknown)".to_owned(),
            _ => format!("{} tokens", map.tokens_of(SegmentKind::Free)),
        },
        auto = auto_line(session, &map),
        pending = session.pending_bang_outputs(),
        model = model.unwrap_or_else(|| "(not chosen yet)".into()),
        window = session
            .meter()
            .window()
            .map_or_else(|| "unknown".to_owned(), |w| format!("{w} tokens")),
        cached = session.meter().cached_total(),
        cost = crate::cost::show(session.conversation().ledger().total()),
        turn_cost = crate::cost::show(session.conversation().turn_cost().total()),
        run = session.meter().text_tool_calls().run,
        retried = session.meter().text_tool_calls().retried,
        shown = session.meter().text_tool_calls().shown,
    );
    let mut text = format!("{text}{}", workspace_report(session));
    match &session.services().options.policy {
        Some(policy) => {
            text.push_str(&format!("\n- managed policy: `{}`", policy.path.display()));
            for line in policy.lines() {
                text.push_str(&format!("\n  - {line}"));
            }
        }
        None => text.push_str("\n- managed policy: none"),
    }
    let children = crate::cost::subagent_lines(session.conversation().ledger());
    if !children.is_empty() {
        text.push_str("\n- subagents (charged to this thread):");
        for line in children {
            text.push_str(&format!("\n  - {line}"));
        }
    }
    session.say(text);
}

/// The output reserve and how it was chosen.
fn reserve_line(map: &ContextMap) -> String {
    match map.window {
        0 => "none yet (window unknown)".to_owned(),
        _ => format!(
            "{} tokens kept for the answer (the model's maximum output from the proxy's model information, else {}; at most an eighth of the window)",
            map.reserve,
            crate::context_map::DEFAULT_OUTPUT_RESERVE
        ),
    }
}

/// Where automatic compaction fires, or why it does not.
fn auto_line(session: &Session, map: &ContextMap) -> String {
    match map.auto_compact_at {
        Some(at) => format!("at {at} tokens (`autoCompact`)"),
        None if !session.auto_compact_enabled() => {
            "off (`autoCompact`; `/compact` still works)".to_owned()
        }
        None => "not until the window is known".to_owned(),
    }
}

/// The `/context` lines about the instruction files: each with why it was
/// read and its size (its segment of the map; after a compaction the
/// summary stands in for them), then those added when a tool worked in a
/// sub-folder.
fn instruction_lines(session: &Session, map: &ContextMap) -> String {
    let loaded = &session.project().context_files;
    let mut lines: Vec<String> = loaded
        .files
        .iter()
        .map(|f| {
            let path = f.path.display().to_string();
            let size = map
                .segments
                .iter()
                .find(|s| s.path.as_deref() == Some(path.as_str()))
                .map_or_else(
                    || "replaced by the summary".to_owned(),
                    |s| format!("~{} tokens", s.tokens),
                );
            format!(
                "`{path}` ({}, {size}{})",
                f.scope.why(),
                if f.cut { ", cut" } else { "" }
            )
        })
        .collect();
    lines.extend(session.sub_folder_instructions().into_iter().map(|p| {
        format!(
            "`{}` (sub-folder a tool worked in, in the messages)",
            p.display()
        )
    }));
    lines.extend(loaded.warnings.iter().cloned());
    if lines.is_empty() {
        return format!(
            "none (no MAIA.md, AGENTS.md or CLAUDE.md from {} down to here, nor in ~/.maia)",
            loaded.root.display()
        );
    }
    let mut out = String::new();
    for line in lines {
        out.push_str(&format!("\n  - {line}"));
    }
    out
}

/// The `/context` lines about the workspace folders.
fn workspace_report(session: &Session) -> String {
    let mut out = format!(
        "\n- working folder: `{}`\n- additional workspace folders:",
        session.services().cwd.display()
    );
    if session.services().roots.is_empty() {
        out.push_str(" none");
    }
    for root in &session.services().roots {
        out.push_str(&format!("\n  - `{}`", root.display()));
    }
    out
}
