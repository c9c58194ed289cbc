import subprocess, sys
for f in ("shapes.py", "report.py"):
    text = open(f).read()
    assert "area_sq" not in text, f"area_sq still in {f}"
    assert "square_area" in text, f"square_area not in {f}"
r = subprocess.run([sys.executable, "report.py"], capture_output=True, text=True)
assert r.stdout.strip() == "square: 9, rectangle: 10", (r.stdout, r.stderr[-300:])
