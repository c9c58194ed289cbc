//! `/review`: the built-in review command, run as a read-only turn (the
//! tools of [`crate::plan_mode::ToolSet::ReadOnly`]). `/review` reviews
//! the uncommitted changes (`git diff HEAD`: the index and the worktree,
//! plus each untracked file as a new file); `/review BRANCH` the current
//! branch against BRANCH (`git diff BRANCH...HEAD`, from their merge
//! base). The diff goes to the model with instructions to report each
//! finding as a link to its file and line the editor can open. A skill
//! or Markdown command named `review` replaces it.

use std::path::Path;
use std::time::Duration;

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
async fn git(cwd: &Path, args: &[&str]) -> Result<String, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_carries_the_diff_and_the_link_format() {
        let p = prompt(Path::new("/w"), None, "+new line");
        assert!(p.contains("uncommitted changes"));
        assert!(p.contains("```diff\n+new line\n```"));
        assert!(p.contains("file:///w/path#LLINE"));
        assert!(prompt(Path::new("/w"), Some("main"), "").contains("against `main`"));
    }
}
