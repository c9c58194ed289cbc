import subprocess, sys
sys.path.insert(0, ".")
import mathutil
assert mathutil.multiply(3, 4) == 12, "multiply(3, 4) != 12"
assert mathutil.multiply(-2, 5) == -10
assert mathutil.add(2, 3) == 5
test = open("test_mathutil.py").read()
assert "multiply" in test, "no test of multiply in test_mathutil.py"
r = subprocess.run([sys.executable, "-m", "unittest", "-q", "test_mathutil"], capture_output=True, text=True)
assert r.returncode == 0, r.stderr[-500:]
assert "Ran 2 tests" in r.stderr or "Ran 3 tests" in r.stderr or "Ran 4 tests" in r.stderr, r.stderr[-300:]
