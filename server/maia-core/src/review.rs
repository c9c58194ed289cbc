//! `/review`: the built-in review command, run as a read-only turn (the
//! tools of the plan mode's `ToolSet::ReadOnly`). `/review` reviews
//! the uncommitted changes (`git diff HEAD`: the index and the worktree,
//! plus each untracked file as a new file); `/review BRANCH` the current
//! branch against BRANCH (`git diff BRANCH...HEAD`, from their merge
//! base). The diff goes to the model with instructions to report each
//! finding as a link to its file and line; the links of its answer are
//! then sent as [`Finding`]s (an ACP tool call with a location per
//! finding, which the editor can open). A skill or Markdown command named
//! `review` replaces it.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// One finding of a review: where, and what the answer says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    /// 1-based.
    pub line: u32,
    pub text: String,
}

/// The name the command is typed as.
pub const NAME: &str = "review";

/// What `/help` and the editor's command list say of it.
pub const DESCRIPTION: &str =
    "Review the uncommitted changes, or this branch against BRANCH (read-only tools)";

/// The argument's hint.
pub const HINT: &str = "base branch (optional)";

/// Characters of the diff sent to the model (cut in the middle beyond).
const MAX_DIFF_CHARS: usize = 120_000;

/// How long one git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `git args` in `cwd`; its stdout, or what went wrong.
pub(crate) async fn git(cwd: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = maia_tools::process::command("git");
    command
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(GIT_TIMEOUT, command.output())
        .await
        .map_err(|_| format!("`git {}` took too long", args.join(" ")))?
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(format!("`git {}` failed: {}", args.join(" "), err.trim()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The changes to review: against `base`'s merge base, or the uncommitted
/// ones (staged, unstaged and untracked files).
pub async fn changes(cwd: &Path, base: Option<&str>) -> Result<String, String> {
    if let Some(base) = base {
        if base.starts_with('-') {
            return Err(format!("`{base}` is not a branch name"));
        }
        return git(cwd, &["diff", "--no-color", &format!("{base}...HEAD")]).await;
    }
    // A repository without commits has no HEAD: everything is new.
    let head = git(cwd, &["rev-parse", "--verify", "--quiet", "HEAD"]).await;
    let mut diff = match head {
        Ok(_) => git(cwd, &["diff", "--no-color", "HEAD"]).await?,
        Err(_) => git(cwd, &["diff", "--no-color", "--cached"]).await?,
    };
    let untracked = git(cwd, &["ls-files", "--others", "--exclude-standard", "-z"]).await?;
    for file in untracked.split('\0').filter(|f| !f.is_empty()) {
        // `git diff --no-index` exits 1 when the files differ: read it
        // whatever the status.
        let output = maia_tools::process::command("git")
            .args(["diff", "--no-color", "--no-index", "--", "/dev/null", file])
            .current_dir(cwd)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        if let Ok(Ok(output)) = tokio::time::timeout(GIT_TIMEOUT, output).await {
            diff.push_str(&String::from_utf8_lossy(&output.stdout));
        }
    }
    Ok(diff)
}

/// The message the model is given: what to review, how to report, the diff.
pub fn prompt(cwd: &Path, base: Option<&str>, diff: &str) -> String {
    let what = match base {
        Some(base) => format!("the changes of the current branch against `{base}`"),
        None => "the uncommitted changes (staged, unstaged and new files)".to_owned(),
    };
    let diff = maia_tools::truncate_middle(diff, MAX_DIFF_CHARS);
    format!(
        "Review {what} in {cwd}. You may read and search the project (read-only tools only); do not \
change anything.\n\n\
Look for bugs, missing error handling, security problems, unclear code and missing tests. Report \
each finding on its own line, most serious first, as\n\
`- [path:LINE](file://{cwd}/path#LLINE) **severity** — what is wrong and how to fix it`\n\
(path relative to the working folder, LINE the line in the new version), so the editor can open \
it. End with a one-line verdict. If there is nothing to report, say so.\n\n\
```diff\n{diff}\n```",
        cwd = cwd.display(),
    )
}

/// The findings of a review answer: each `[path:LINE](…)` link, resolved
/// against `cwd`, with the text of its line (at most 50).
pub fn findings(answer: &str, cwd: &Path) -> Vec<Finding> {
    static LINK: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\[([^\]\[]+?):(\d+)\]\(").ok());
    let Some(link) = LINK.as_ref() else {
        return Vec::new();
    };
    answer
        .lines()
        .filter_map(|text| {
            let found = link.captures(text)?;
            let path = found.get(1)?.as_str().trim().trim_matches('`');
            let line = found
                .get(2)?
                .as_str()
                .parse()
                .ok()
                .filter(|&l: &u32| l > 0)?;
            Some(Finding {
                path: maia_tools::path::resolve(cwd, path),
                line,
                text: text.trim().trim_start_matches(['-', '*']).trim().to_owned(),
            })
        })
        .take(50)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_read_from_the_links() {
        let answer = "Findings:\n- [src/a.rs:12](file:///w/src/a.rs#L12) **high** — bug\n\
                      - no link here\n* [`b.rs:0`](b.rs) zero is no line\n- [c.rs:3](c.rs#L3) ok";
        let found = findings(answer, Path::new("/w"));
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].path, Path::new("/w/src/a.rs"));
        assert_eq!(found[0].line, 12);
        assert!(found[0].text.starts_with("[src/a.rs:12]"));
        assert_eq!(found[1].path, Path::new("/w/c.rs"));
    }

    #[test]
    fn the_prompt_carries_the_diff_and_the_link_format() {
        let p = prompt(Path::new("/w"), None, "+new line");
        assert!(p.contains("uncommitted changes"));
        assert!(p.contains("```diff\n+new line\n```"));
        assert!(p.contains("file:///w/path#LLINE"));
        assert!(prompt(Path::new("/w"), Some("main"), "").contains("against `main`"));
    }
}
