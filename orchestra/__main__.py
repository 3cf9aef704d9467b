"""``python -m orchestra`` runs the ``forge`` command line."""

from ._cli._entry import entry

entry()
