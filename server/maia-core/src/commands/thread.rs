//! The commands about threads: `/load` (a saved conversation, continued
//! here or as a copy), `/rewind` (the thread truncated before a user
//! message, with its files if asked) and `/fork` (a new thread with this
//! conversation, in this folder or a new git worktree), and the fresh
//! names they and `/new` give.

use crate::session::{Session, fresh_name, replay};
use crate::store;

/// A fresh name that is neither the current one nor a saved one (a
/// second `/new` within the same second must not overwrite anything).
pub(super) fn unused_name(session: &Session) -> String {
    let base = fresh_name(session.id());
    let mut name = base.clone();
    let mut n = 2;
    while name == session.conversation().name()
        || store::session_path(&session.services().cwd, &name).exists()
    {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

pub(super) fn load_command(session: &mut Session, name: &str) {
    crate::blocking::off_runtime(|| load_saved(session, name));
}

fn load_saved(session: &mut Session, name: &str) {
    if !store::valid_name(name) {
        let saved: Vec<String> = store::list(&session.services().cwd)
            .into_iter()
            .map(|s| format!("`{}`", s.name))
            .collect();
        session.say(format!(
            "Usage: `/load NAME`. Saved sessions here: {}",
            if saved.is_empty() {
                "none".to_owned()
            } else {
                saved.join(", ")
            }
        ));
        return;
    }
    let path = store::session_path(&session.services().cwd, name);
    let loaded = match store::load(&path) {
        Ok(loaded) => loaded,
        Err(e) => {
            session.say(format!("Cannot load `{name}`: {e}"));
            return;
        }
    };
    // Another thread's conversation continues here as a copy: two
    // threads never write to one file, and that thread keeps its own.
    let (target, intro) = if loaded.header.id == session.id() {
        (name.to_owned(), format!("Loaded `{name}`:"))
    } else {
        let copy = unused_name(session);
        let intro = format!("Loaded `{name}` (continued here as `{copy}`):");
        (copy, intro)
    };
    if let Err(e) = session.adopt(target, &loaded) {
        session.say(format!("Cannot load `{name}`: {e}"));
        return;
    }
    session.say(intro);
    for event in replay(&crate::timeline::rewound(&loaded), &session.services().cwd) {
        session.emit(event);
    }
    session.report_estimate();
}

/// `/rewind`: lists the thread's user messages; `/rewind N` truncates the
/// thread before message N (`--files`: with the files as they were then).
pub(super) async fn rewind_command(session: &mut Session, args: &str) {
    let mut words = args.split_whitespace();
    let number = words.next();
    let files = words.any(|w| w == "--files");
    let messages = session.conversation().user_messages().to_vec();
    let Some(number) = number else {
        if messages.is_empty() {
            session.say("No user message to rewind to.".to_owned());
            return;
        }
        let mut text =
            String::from("User messages (`/rewind N` drops message N and what follows it):\n\n");
        for (n, message) in messages.iter().enumerate() {
            let first = message.text.lines().next().unwrap_or("");
            text.push_str(&format!("{}. {first}\n", n + 1));
        }
        session.say(text);
        return;
    };
    let Some(message) = number
        .parse::<usize>()
        .ok()
        .and_then(|n| messages.get(n.checked_sub(1)?))
    else {
        session.say(format!(
            "Usage: `/rewind N [--files]`, N from 1 to {}.",
            messages.len()
        ));
        return;
    };
    // The files' preview first: a revert that cannot be done changes nothing.
    let preview = match files {
        true => match session.preview_restore(&message.id).await {
            Ok(preview) => preview,
            Err(e) => return session.say(format!("Not rewound: {e}.")),
        },
        false => None,
    };
    let point = crate::timeline::MessagePoint {
        message_id: message.id.clone(),
        ..Default::default()
    };
    let mut text = match session.rewind(&point) {
        Ok(done) => format!(
            "Rewound before message {number} (`{}`); it and what followed are gone from the conversation (the journal keeps them). Send a prompt to continue from there.",
            done.text.lines().next().unwrap_or("")
        ),
        Err(e) => return session.say(format!("Not rewound: {e}.")),
    };
    if let Some(preview) = preview {
        text.push_str(&session.apply_restore(preview).await);
    }
    session.say(text);
}

/// `/fork [--worktree]`: a new thread with this conversation, in this
/// folder or in a new git worktree beside the project.
pub(super) async fn fork_command(session: &mut Session, args: &str) {
    let cwd = session.services().cwd.clone();
    let wants_worktree = match args.trim() {
        "" => false,
        "--worktree" => true,
        _ => {
            session.say("Usage: `/fork [--worktree]`.".to_owned());
            return;
        }
    };
    let source = session.id().to_owned();
    let fork = match crate::blocking::off_runtime(|| {
        crate::timeline::Fork::prepare(&cwd, &source, None)
    }) {
        Ok(fork) => fork,
        Err(e) => return session.say(format!("Not forked: {e}.")),
    };
    let worktree = match wants_worktree {
        false => None,
        true => match crate::worktree::add(&cwd, &crate::store::sessions_dir(&cwd)).await {
            Ok(made) => Some(made),
            Err(e) => return session.say(format!("Not forked: {e}.")),
        },
    };
    let target = worktree
        .as_ref()
        .map_or(cwd.clone(), |(w, _)| w.cwd.clone());
    let id = uuid::Uuid::new_v4().to_string();
    let name = fresh_name(&id);
    let home = session.services().options.home.clone();
    let saved = crate::blocking::off_runtime(|| fork.save((&target, &id, &name), home.as_deref()));
    // Saved: the worktree is the fork's; else it goes.
    let worktree = match (worktree, &saved) {
        (Some((w, making)), Ok(())) => {
            making.done();
            Some(w)
        }
        (Some((_, making)), Err(_)) => {
            making.undo().await;
            None
        }
        (None, _) => None,
    };
    session.say(match (saved, worktree) {
        (Err(e), _) => format!("Not forked: {e}."),
        (Ok(()), None) => format!(
            "Forked this conversation into the new session `{id}` (same folder); open it from the session list."
        ),
        (Ok(()), Some(w)) => format!(
            "Forked this conversation into the new session `{id}`, working in the git worktree `{}` on the new branch `{}`; open it from the session list of that folder. Remove it with `git worktree remove {}` when done.",
            w.path.display(),
            w.branch,
            w.path.display()
        ),
    });
}
