"""`python -m cudaleak ARGS…` runs the `cudaleak` command installed with this package, for
environments whose scripts directory is not on PATH."""
import os
import sys
import sysconfig


def main():
    cli = os.path.join(sysconfig.get_path("scripts"), "cudaleak")
    if not os.path.isfile(cli):
        sys.exit("cudaleak: the cudaleak command is not installed beside this package (%s)" % cli)
    os.execv(cli, [cli, *sys.argv[1:]])


if __name__ == "__main__":
    main()
