"""Executes a notebook in a fresh IPython kernel (nbclient) and writes it with its outputs:
`python run_notebook.py IN.ipynb OUT.ipynb`. A cell that raises stops the run unless it carries
the `raises-exception` tag, as in `jupyter execute`.

The kernel is this interpreter's, through a kernel spec of its own, and IPython's profile is a
fresh one: a `python3` kernel spec or a startup file of the machine's never runs the test."""

import json
import os
import sys
import tempfile

import nbclient
import nbformat

KERNEL = "cudaleak-test"

home = tempfile.mkdtemp(prefix="cudaleak-notebook-")
spec = os.path.join(home, "kernels", KERNEL)
os.makedirs(spec)
with open(os.path.join(spec, "kernel.json"), "w", encoding="utf-8") as f:
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    json.dump({"argv": argv, "display_name": KERNEL, "language": "python"}, f)
os.environ["JUPYTER_PATH"] = home
os.environ["IPYTHONDIR"] = os.path.join(home, "ipython")

nb = nbformat.read(sys.argv[1], as_version=4)
try:
    nbclient.NotebookClient(nb, timeout=120, kernel_name=KERNEL).execute()
finally:
    nbformat.write(nb, sys.argv[2])
