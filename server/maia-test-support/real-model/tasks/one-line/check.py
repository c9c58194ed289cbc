import sys, subprocess
out = subprocess.run([sys.executable, "greet.py"], capture_output=True, text=True).stdout.strip()
assert out == "Hi, world!", f"greet.py prints {out!r}"
