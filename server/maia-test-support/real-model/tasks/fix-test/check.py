import subprocess, sys
orig = '''import unittest

from stats import mean, spread
'''
assert open("test_stats.py").read().startswith(orig), "test_stats.py was changed"
assert "assertEqual(mean([2, 4, 6]), 4)" in open("test_stats.py").read(), "the test was changed"
r = subprocess.run([sys.executable, "-m", "unittest", "-q", "test_stats"], capture_output=True, text=True)
assert r.returncode == 0, r.stderr[-500:]
