import re, subprocess, sys
answer = open(sys.argv[1]).read()
assert re.search(r"\b7\b|\bseven\b", answer, re.I), f"no 7 in the answer: {answer[-300:]!r}"
r = subprocess.run(["git", "status", "--porcelain", "--", "."], capture_output=True, text=True)
def own(line):
    # The agents' own housekeeping: MAIA's .maia/, aider's .aider* and the
    # .gitignore line aider adds for them.
    path = line[3:]
    if path.startswith((".maia", ".aider")):
        return True
    return path == ".gitignore" and all(l.startswith(".aider") or not l.strip() for l in open(".gitignore"))
changed = [l for l in r.stdout.splitlines() if not own(l)]
assert not changed, f"files changed: {changed}"
