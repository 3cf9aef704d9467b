"""Would a shell command harm a protected path? The analysis behind ``forge guard``.

A command is read the way bash reads it, every word is expanded against the
real tree, and each command that runs is judged by what it would delete or
change. The work is done by these modules, in the order a command meets them:

- :mod:`._analyse`: the two entry points, :func:`analyse_command` and
  :func:`check_file_write`.
- :mod:`._parse`: the command line read into a tree (quotes, operators,
  groups, substitutions, here-documents), leniently.
- :mod:`._evaluate`: the evaluator; runs the tree in the mind, command by
  command, and hands each to its rule by name. ``sh -c``, ``eval`` and
  substitutions are analysed too.
- :mod:`._words`: word expansion (``~``, ``$VAR``, ``{a,b}``, globs).
- :mod:`._state`: what the analysis carries (the refusals; per command list
  the working folder and variables) and ``cd``/``export``/… that change it.
- :mod:`._wrappers`: ``sudo``, ``env``, ``xargs``, …, which run the command
  after them.
- :mod:`._verbs`, :mod:`._git`, :mod:`._find`, :mod:`._archivers`,
  :mod:`._compress`, :mod:`._patches`: the rules of the commands that delete
  or change files; :mod:`._interpreters` those of the interpreters and editors
  that can write anything, judged by the paths their programs name
  (:mod:`._mentions`, which also judges a command whose name is known only
  when it runs) and by the calls in them that delete, change or run
  (:mod:`._calls`).
- :mod:`._forge_state`: Forge's own state, guarded whatever the spec says.
- :mod:`._options`: a command's arguments read as options and operands.
- :mod:`._harm`: whether deleting or changing a path harms a protected one,
  and the walk for protected paths on disk.

This is a seatbelt against an agent's accidents, not a sandbox against a
hostile one: script files, ``make`` targets, calls under names it does not
know and code a program builds at run time are not followed. A command over
:data:`._evaluate.MAX_COMMAND` characters, or whose analysis would cost more than
:data:`._state.WORK_LIMIT`, is refused: the check's cost is bounded whatever
the command.

These modules run on every tool call of an agent: they import only cheap
parts of the standard library and :mod:`orchestra._protect._spec`.
"""

from ._analyse import analyse_command as analyse_command
from ._analyse import check_file_write as check_file_write
from ._state import Refusal as Refusal
