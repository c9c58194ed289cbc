import subprocess, sys
want = subprocess.run([sys.executable, "fingerprint.py"], capture_output=True, text=True).stdout.strip()
got = open("fingerprint.txt").read().strip()
assert got == want, f"fingerprint.txt holds {got!r}, the command prints {want!r}"
