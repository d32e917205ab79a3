"""Runs a command, prints its output and exit status; succeeds only when the
status is the expected one (lit's shell has no $?)."""
import subprocess
import sys

expected = int(sys.argv[1])
run = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
sys.stdout.write(run.stdout)
print("exit status", run.returncode)
sys.exit(0 if run.returncode == expected else 1)
