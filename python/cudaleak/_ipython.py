"""The IPython and Jupyter extension (`%load_ext cudaleak`): the `%%cudaleak` cell magic, which
shows what a cell left allocated on the GPU, and `%cudaleak_report`, what is live in the session.

Both go through the Python API (cudaleak.track(), cudaleak.snapshot()), so the shim is attached
on first use and the kernel never needs a restart; every word shown is the CLI's own report.
This module is imported only by `load_ipython_extension`: `import cudaleak` imports no IPython.
It must never word a finding itself, nor swallow an exception of the cell.
"""

import ast
import gc
import html

from IPython.core import magic_arguments
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from . import _frameworks, api

# The inline HTML report is the CLI's whole page; a frame keeps its styles off the notebook's.
# (In a div: IPython warns about an HTML object that starts with an iframe.)
FRAME = (
    '<div><iframe srcdoc="{}" sandbox="allow-scripts" '
    'style="width:100%;height:{}px;border:1px solid #d8dce4"></iframe></div>'
)
FRAME_HEIGHT = 600


def load(ipython):
    """Registers the magics on IPYTHON (an InteractiveShell)."""
    ipython.register_magics(CudaleakMagics)


def _source(shell, cell):
    """The cell's code as IPython compiles a cell (its own syntax transformed, the AST
    transformers applied), numbered as the cell is: the magic's line is line 1, kept blank.
    Returns (statements, last expression or None), the way %%time splits them, so that the
    cell's value is shown as a cell's is."""
    source = "\n" + shell.transform_cell(cell)
    # Registered with linecache under the cell's number: tracebacks read "Cell In[N], line L".
    name = shell.compile.cache(source, shell.execution_count, raw_code=source)
    tree = shell.transform_ast(shell.compile.ast_parse(source, filename=name))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = shell.compile(tree, name, "exec")
    return body, (shell.compile(last, name, "eval") if last is not None else None)


def _show(report, as_html):
    if as_html:
        from IPython.display import HTML, display

        display(HTML(FRAME.format(html.escape(report, quote=True), FRAME_HEIGHT)))
    else:
        print(report, end="" if report.endswith("\n") else "\n")


@magics_class
class CudaleakMagics(Magics):
    @magic_arguments.magic_arguments()
    @magic_arguments.argument(
        "--limit",
        metavar="SIZE",
        help="raise cudaleak.LeakError, whose message is the report, when the cell left more "
        'than SIZE (bytes, or a size such as "1 MiB") allocated',
    )
    @magic_arguments.argument(
        "--show-cached",
        action="store_true",
        help="list every callsite whose blocks a cache or library handle holds",
    )
    @magic_arguments.argument(
        "--html", action="store_true", help="show the CLI's HTML report inline instead of text"
    )
    @cell_magic
    def cudaleak(self, line, cell):
        """Runs the cell inside cudaleak.track() and shows what it left allocated on the GPU:
        the CLI's report (`cudaleak report --since`), its blocks named at the cell's lines.
        Blocks allocated before the cell are never blamed on it. When the cell raises, its
        exception propagates and no report is shown."""
        __tracebackhide__ = True  # noqa: F841 - IPython leaves this frame out of tracebacks
        args = magic_arguments.parse_argstring(self.cudaleak, line)
        body, last = _source(self.shell, cell)
        glob, loc = self.shell.user_global_ns, self.shell.user_ns
        value = None
        # Growth needs snapshots while the cell runs; the magic shows none, so takes none.
        with api.track(snapshot_every=None) as tracker:
            exec(body, glob, loc)
            if last is not None:
                value = eval(last, glob, loc)
        options = {"show_cached": args.show_cached}
        fmt = "html" if args.html else "text"
        if args.limit is not None:
            try:
                # IPython's argument splitter keeps the quotes of `--limit "1 MiB"`.
                tracker.assert_no_leaks(args.limit.strip("'\""))
            except api.LeakError as e:
                if args.html:
                    _show(tracker.report(fmt, **options), True)
                # Raised from here: the traceback is the cell's, not the API's internals.
                raise e.with_traceback(None) from None
        _show(tracker.report(fmt, **options), args.html)
        return value

    @magic_arguments.magic_arguments()
    @magic_arguments.argument(
        "--keep-pools",
        action="store_true",
        help="do not empty the frameworks' pools first: what a pool caches is then reported as "
        "the CLI reports caches",
    )
    @magic_arguments.argument(
        "--show-cached",
        action="store_true",
        help="list every callsite whose blocks a cache or library handle holds",
    )
    @magic_arguments.argument(
        "--html", action="store_true", help="show the CLI's HTML report inline instead of text"
    )
    @line_magic
    def cudaleak_report(self, line):
        """Shows every block live now that the shim knows of (those allocated since it was
        attached, or since the start under `cudaleak run`): garbage is collected and the
        frameworks' pools (PyTorch's caching allocator, CuPy's pools) are emptied first, so
        what is still allocated is what objects of the session keep."""
        args = magic_arguments.parse_argstring(self.cudaleak_report, line)
        gc.collect()
        if not args.keep_pools:
            _frameworks.empty_pools()
        snap = api.snapshot()
        options = {"show_cached": args.show_cached, "pools_emptied": not args.keep_pools}
        _show(snap.report("html" if args.html else "text", **options), args.html)
