//! Subagents in process: `Task` calls start child sessions whose requests
//! reach the mock in parallel, whose questions reach the parent's events,
//! which are cancelled alone or with their parent, which nest at most two
//! deep, and which the journal keeps.

use maia_core::{ChoiceKind, Event, StopReason, SubagentState, SubagentUpdate};
use maia_test_support::{self as mock, Gate, Reply};
use serde_json::{Value, json};

use crate::harness::{Harness, WAIT, message_texts, stop_of};

/// The first user message of a request: a child's is its prompt.
fn first_user(request: &Value) -> String {
    message_texts(request)
        .into_iter()
        .find(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .unwrap_or_default()
}

/// The names of the tools a request offers.
fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a request has tool results (a later request of its session).
fn has_results(request: &Value) -> bool {
    message_texts(request)
        .iter()
        .any(|(role, _)| role == "tool")
}

/// The tool results the parent's request `index` sent, in order.
fn results(h: &Harness, prompt: &str) -> Vec<String> {
    h.mock
        .requests()
        .iter()
        .rev()
        .find(|r| first_user(r) == prompt && has_results(r))
        .map(|r| {
            message_texts(r)
                .into_iter()
                .filter(|(role, _)| role == "tool")
                .map(|(_, text)| text)
                .collect()
        })
        .unwrap_or_default()
}

fn task(id: &str, agent: Option<&str>, prompt: &str) -> (String, String, Value) {
    let mut args = json!({"description": format!("do {id}"), "prompt": prompt});
    if let Some(agent) = agent {
        args["agent"] = agent.into();
    }
    (id.to_owned(), "Task".to_owned(), args)
}

fn tool_calls(calls: &[(String, String, Value)]) -> Reply {
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), name.as_str(), args.clone()))
        .collect();
    mock::tool_calls_reply(&calls)
}

/// The subagent updates of `events`: (child id, what happened).
fn child_updates(events: &[Event]) -> Vec<(String, &SubagentUpdate)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Subagent(s) => Some((s.child.id.clone(), &s.update)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn two_task_calls_run_their_children_in_parallel_and_return_their_answers() {
    let mut h = Harness::start(json!({})).await;
    let gate = Gate::default();
    let held = gate.clone();
    h.mock.set_rule(move |request| {
        let first = first_user(request);
        let answer = match first.as_str() {
            "find A" => "A is in a.rs",
            "find B" => "B is in b.rs",
            _ => return None,
        };
        Some(Reply::Gated {
            gate: held.clone(),
            reply: Box::new(mock::text_reply(answer)),
        })
    });
    h.mock.push(tool_calls(&[
        task("t1", None, "find A"),
        task("t2", None, "find B"),
    ]));
    h.mock.push(mock::text_reply("both found"));
    h.session()
        .prompt(vec![maia_core::PromptPart::Text("look for both".into())])
        .unwrap();
    // Both children asked the model before either was answered.
    let requests = h.mock.wait_for_requests(3, WAIT).await;
    let mut firsts: Vec<String> = requests.iter().map(first_user).collect();
    firsts.sort();
    assert_eq!(firsts, ["find A", "find B", "look for both"]);
    gate.open();
    let events = h.until_turn_ended().await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert_eq!(
        results(&h, "look for both"),
        ["A is in a.rs", "B is in b.rs"]
    );
    // Each child is announced before anything else of it, and ends.
    let updates = child_updates(&events);
    let children: Vec<&String> = updates
        .iter()
        .filter(|(_, u)| matches!(u, SubagentUpdate::Started))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(children.len(), 2, "{updates:#?}");
    for child in children {
        let mine: Vec<&&SubagentUpdate> = updates
            .iter()
            .filter(|(id, _)| id == child)
            .map(|(_, u)| u)
            .collect();
        assert!(matches!(mine.first(), Some(SubagentUpdate::Started)));
        assert!(matches!(
            mine.last(),
            Some(SubagentUpdate::Ended {
                state: SubagentState::Completed,
                ..
            })
        ));
    }
    // The child's requests have their own history: the prompt only.
    let child = h
        .mock
        .requests()
        .into_iter()
        .find(|r| first_user(r) == "find A")
        .unwrap();
    let roles: Vec<String> = message_texts(&child).into_iter().map(|(r, _)| r).collect();
    assert_eq!(roles, ["system", "user"]);

    // Saved with the thread and replayed after a restart.
    let replay = h.restart().await;
    let replayed = child_updates(&replay);
    assert_eq!(
        replayed
            .iter()
            .filter(|(_, u)| matches!(u, SubagentUpdate::Ended { .. }))
            .count(),
        2,
        "{replayed:#?}"
    );
}

#[tokio::test]
async fn a_child_may_start_a_child_but_a_grandchild_may_not() {
    let mut h = Harness::start(json!({})).await;
    h.mock
        .set_rule(|request| match first_user(request).as_str() {
            "level one" if !has_results(request) => {
                Some(tool_calls(&[task("g1", None, "level two")]))
            }
            "level one" => Some(mock::text_reply("one done")),
            "level two" => Some(mock::text_reply("two done")),
            _ => None,
        });
    h.mock.push(tool_calls(&[task("t1", None, "level one")]));
    h.mock.push(mock::text_reply("all done"));
    let events = h.prompt("nest").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    let requests = h.mock.requests();
    let offered = |prompt: &str| {
        tool_names(
            requests
                .iter()
                .find(|r| first_user(r) == prompt)
                .unwrap_or_else(|| panic!("no request for {prompt}")),
        )
    };
    assert!(offered("nest").contains(&"Task".to_owned()));
    assert!(offered("level one").contains(&"Task".to_owned()));
    assert!(!offered("level two").contains(&"Task".to_owned()));
    assert_eq!(results(&h, "level one"), ["two done"]);
    assert_eq!(results(&h, "nest"), ["one done"]);
}

#[tokio::test]
async fn explore_runs_on_the_small_model_with_read_only_tools() {
    let mut h = Harness::start(json!({"smallModel": "small-model"})).await;
    h.mock.set_rule(|request| {
        (first_user(request) == "survey").then(|| mock::text_reply("surveyed"))
    });
    h.mock
        .push(tool_calls(&[task("t1", Some("explore"), "survey")]));
    h.mock.push(mock::text_reply("ok"));
    h.prompt("explore it").await;
    let requests = h.mock.requests();
    let child = requests.iter().find(|r| first_user(r) == "survey").unwrap();
    assert_eq!(child["model"], "small-model");
    let tools = tool_names(child);
    assert!(tools.contains(&"Read".to_owned()), "{tools:?}");
    for writer in ["Bash", "Write", "Edit", "Task"] {
        assert!(!tools.contains(&writer.to_owned()), "{tools:?}");
    }
    let parent = requests
        .iter()
        .find(|r| first_user(r) == "explore it")
        .unwrap();
    assert_eq!(parent["model"], "mock-model");
    // Its cost is charged to the thread, named.
    h.mock.push(mock::text_reply("unused"));
    let report = crate::harness::agent_text(&h.prompt("/cost").await);
    assert!(
        report.contains("small-model (subagent explore)"),
        "{report}"
    );
    let context = crate::harness::agent_text(&h.prompt("/context").await);
    assert!(
        context.contains("subagent `explore` on `small-model`: 1 requests"),
        "{context}"
    );
}

#[tokio::test]
async fn a_childs_permission_question_is_asked_through_the_parent_with_its_name() {
    let mut h = Harness::start(json!({})).await;
    h.mock
        .set_rule(|request| match first_user(request).as_str() {
            "make it" if !has_results(request) => Some(mock::tool_calls_reply(&[(
                "w1",
                "Bash",
                json!({"command": "touch made.txt"}),
            )])),
            "make it" => Some(mock::text_reply("made")),
            _ => None,
        });
    h.mock.push(tool_calls(&[task("t1", None, "make it")]));
    h.mock.push(mock::text_reply("ok"));
    let events = h
        .prompt_answering("please make it", ChoiceKind::AllowOnce)
        .await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    // prompt_answering turns each question into a ToolCall event of its view.
    assert!(
        events.iter().any(|e| matches!(e, Event::ToolCall(v)
            if v.title.starts_with("general-purpose: ") && v.title.contains("touch made.txt"))),
        "{events:#?}"
    );
    assert!(
        h.path("made.txt").exists(),
        "the answer applied to the child"
    );
    assert_eq!(results(&h, "please make it"), ["made"]);
}

/// Waits until the child started by `events` is announced; returns its id.
async fn child_id(h: &mut Harness, seen: &mut Vec<Event>) -> String {
    loop {
        let event = tokio::time::timeout(WAIT, h.events.recv())
            .await
            .expect("a child is announced")
            .expect("events");
        if let Event::Subagent(s) = &event
            && matches!(s.update, SubagentUpdate::Started)
        {
            let id = s.child.id.clone();
            seen.push(event);
            return id;
        }
        seen.push(event);
    }
}

#[tokio::test]
async fn a_child_cancelled_alone_ends_its_task_and_the_parent_goes_on() {
    let mut h = Harness::start(json!({})).await;
    h.mock
        .set_rule(|request| (first_user(request) == "wait forever").then_some(Reply::Hang));
    h.mock.push(tool_calls(&[task("t1", None, "wait forever")]));
    h.mock.push(mock::text_reply("went on"));
    h.session()
        .prompt(vec![maia_core::PromptPart::Text("start".into())])
        .unwrap();
    let mut seen = Vec::new();
    let id = child_id(&mut h, &mut seen).await;
    h.mock.wait_for_requests(2, WAIT).await;
    assert!(h.session().cancel_child(&id));
    let events = h.until_turn_ended().await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    let result = results(&h, "start");
    assert!(result[0].contains("cancelled by the user"), "{result:?}");
    h.mock.wait_for_dropped_streams(1, WAIT).await;
    let children = h
        .mock
        .requests()
        .iter()
        .filter(|r| first_user(r) == "wait forever")
        .count();
    assert_eq!(children, 1, "no child request after its cancel");
    assert!(!h.session().cancel_child(&id), "it is gone");
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_child() {
    let mut h = Harness::start(json!({})).await;
    h.mock
        .set_rule(|request| (first_user(request) == "wait forever").then_some(Reply::Hang));
    h.mock.push(tool_calls(&[task("t1", None, "wait forever")]));
    h.session()
        .prompt(vec![maia_core::PromptPart::Text("start".into())])
        .unwrap();
    let mut seen = Vec::new();
    child_id(&mut h, &mut seen).await;
    h.mock.wait_for_requests(2, WAIT).await;
    h.session().cancel();
    let events = h.until_turn_ended().await;
    assert_eq!(stop_of(&events), StopReason::Cancelled);
    h.mock.wait_for_dropped_streams(1, WAIT).await;
    assert!(
        child_updates(&events).iter().any(|(_, u)| matches!(
            u,
            SubagentUpdate::Ended {
                state: SubagentState::Cancelled,
                ..
            }
        )),
        "{events:#?}"
    );
    assert_eq!(h.mock.requests().len(), 2, "nothing asked after the cancel");
}

#[tokio::test]
async fn an_agent_files_tools_narrow_and_a_planning_parents_child_is_read_only() {
    let mut h = Harness::start(json!({})).await;
    std::fs::create_dir_all(h.path(".maia/agents")).unwrap();
    std::fs::write(
        h.path(".maia/agents/fixer.md"),
        "---\ndescription: Fixes things\ntools: Read, Bash, Edit\n---\nYou are the FIXER.\n",
    )
    .unwrap();
    // Agent files are read when the project is (re)loaded.
    h.prompt("/clear").await;
    h.mock.set_rule(|request| {
        matches!(first_user(request).as_str(), "fix it" | "fix it again")
            .then(|| mock::text_reply("fixed"))
    });
    h.mock
        .push(tool_calls(&[task("t1", Some("fixer"), "fix it")]));
    h.mock.push(mock::text_reply("ok"));
    h.prompt("go").await;
    let child = h
        .mock
        .requests()
        .into_iter()
        .find(|r| first_user(r) == "fix it")
        .unwrap();
    let mut tools = tool_names(&child);
    tools.sort();
    assert_eq!(tools, ["Bash", "Edit", "Read"]);
    let system = &message_texts(&child)[0].1;
    assert!(system.starts_with("You are the FIXER."), "{system}");

    // In plan mode the same agent gets the read-only part of its list.
    h.session().set_mode(maia_core::Mode::Plan).unwrap();
    h.mock
        .push(tool_calls(&[task("t2", Some("fixer"), "fix it again")]));
    h.mock.push(mock::text_reply("planned"));
    h.prompt("plan it").await;
    let child = h
        .mock
        .requests()
        .into_iter()
        .find(|r| first_user(r) == "fix it again")
        .unwrap();
    assert_eq!(tool_names(&child), ["Read"]);
}
