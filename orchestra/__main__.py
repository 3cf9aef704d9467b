"""``python -m orchestra`` runs the ``forge`` command line."""

from ._cli import entry

entry()
