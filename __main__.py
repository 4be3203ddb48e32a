"""`python -m kgot` is the same as the `kgot` command."""

from kgot.cli import run

run()
