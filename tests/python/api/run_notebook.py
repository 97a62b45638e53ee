"""Executes a notebook in a fresh IPython kernel (nbclient) and writes it with its outputs:
`python run_notebook.py IN.ipynb OUT.ipynb`. A cell that raises stops the run unless it carries
the `raises-exception` tag, as in `jupyter execute`."""

import sys

import nbclient
import nbformat

nb = nbformat.read(sys.argv[1], as_version=4)
try:
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
finally:
    nbformat.write(nb, sys.argv[2])
