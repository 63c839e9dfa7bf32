"""What ansible-test's pip bootstrap script does, without its download (tests/harness/ansible_test.sh).

ansible-test makes each sanity virtual environment without pip and then runs a cached copy of get-pip.py that it
downloads from a host CI cannot reach. This stands in for that script: pip from the interpreter's own ensurepip
wheel (offline), then `pip install` of the pip version ansible-test asks for, from the package index, with the same
arguments (less get-pip's own --no-setuptools / --no-wheel, which say what not to install).
"""

import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True, stdout=subprocess.DEVNULL)
sys.exit(subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args]).returncode)
