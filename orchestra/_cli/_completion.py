"""``forge completion bash|zsh|fish``: shell completion generated from the parser itself.

The script is built from the same ``argparse`` tree that parses a command line,
so a new command, action or option completes the day it is added. What it
completes: the commands, each command's actions (``forge policy <TAB>``), the
options of the command or action typed so far, the choices of an option that
has them, and change names (after ``--change`` and for a command's positional
change) from the nearest ``.forge/changes/`` folder, read when TAB is pressed.

Written here rather than taken from a library: shtab (static scripts from
argparse) covers bash and zsh but not fish, and argcomplete runs ``forge``
itself on every TAB, a Python start per key press, and must hook every start of
the program. The tree walk is pure (:func:`command_tree`); each shell's script
is text built from it.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Iterator

import attrs

from .._errors import EXIT_OK
from ._console import Output

SHELLS = ("bash", "zsh", "fish")
# Where a value is a change's name: the option, or a command's positional.
_CHANGE = "change"


@attrs.frozen
class Option:
    """One option of a command: its flags, what it says, and what value it takes."""

    flags: tuple[str, ...]
    help: str
    takes_value: bool
    choices: tuple[str, ...] = ()
    change: bool = False  # its value is a change's name


@attrs.frozen
class Command:
    """One command or action (``()`` is ``forge`` itself) and what may follow it."""

    path: tuple[str, ...]
    subcommands: tuple[tuple[str, str], ...]  # (name, help)
    options: tuple[Option, ...]
    takes_change: bool  # a positional change
    words: tuple[str, ...] = ()  # the choices of its positionals (forge completion <shell>)


def command_tree(parser: argparse.ArgumentParser) -> list[Command]:
    """Every command and action of ``parser``, outermost first."""
    return list(_walk(parser, ()))


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[Command]:
    subcommands: list[tuple[str, str]] = []
    children: list[tuple[str, argparse.ArgumentParser]] = []
    options: list[Option] = []
    takes_change = False
    words: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                subcommands.append((name, helps.get(name, "")))
                children.append((name, child))
        elif action.option_strings:
            if action.help == argparse.SUPPRESS:
                continue
            choices = tuple(str(c) for c in action.choices) if action.choices else ()
            options.append(
                Option(
                    flags=tuple(action.option_strings),
                    help=_one_line(action.help or ""),
                    takes_value=action.nargs != 0,
                    choices=choices,
                    change=action.dest == _CHANGE,
                )
            )
        elif action.dest == _CHANGE:
            takes_change = True
        elif action.choices:
            words.extend(str(choice) for choice in action.choices)
    yield Command(path, tuple(subcommands), tuple(options), takes_change, tuple(words))
    for name, child in children:
        yield from _walk(child, (*path, name))


def _one_line(text: str) -> str:
    # argparse's %(default)s and the like are for --help; a completion shows a short line.
    return " ".join(text.replace("%(default)s", "").replace("%%", "%").split())


def run(args: argparse.Namespace, out: Output) -> int:
    """Print the completion script for ``args.shell``."""
    from ._main import build_parser

    tree = command_tree(build_parser())
    print(script(args.shell, tree), end="")
    return EXIT_OK


def script(shell: str, tree: list[Command]) -> str:
    """The completion script for ``shell`` (one of :data:`SHELLS`)."""
    if shell == "fish":
        return _fish(tree)
    body = _bash(tree)
    if shell == "zsh":
        return _ZSH_PRELUDE + body
    return body


# zsh runs bash's completion functions through bashcompinit (in sh emulation,
# so the arrays are bash's); compinit only when the startup file has not run it.
_ZSH_PRELUDE = """\
(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }
autoload -U +X bashcompinit && bashcompinit
"""


def _path_key(path: tuple[str, ...]) -> str:
    return " ".join(path)


def _next_words(command: Command) -> list[str]:
    """What may follow a command as a word: its actions, or its positionals' choices."""
    return [name for name, _ in command.subcommands] + list(command.words)


def _value_flags(tree: list[Command]) -> list[str]:
    return sorted({flag for c in tree for o in c.options if o.takes_value for flag in o.flags})


# Finds the nearest .forge/changes/ upwards from the current folder and lists it.
# No external commands, and no variable named path: zsh ties $path to $PATH.
_CHANGES_SH = """\
_forge_changes() {
  local dir=$PWD
  while :; do
    if [ -d "$dir/.forge/changes" ]; then
      (cd "$dir/.forge/changes" && for c in */; do [ -d "$c" ] && printf '%s\\n' "${c%/}"; done)
      return
    fi
    [ "$dir" = / ] && return
    dir=${dir%/*}
    dir=${dir:-/}
  done
}
"""


def _bash(tree: list[Command]) -> str:
    words = "\n".join(
        f"    {shlex.quote(_path_key(c.path))}) echo {shlex.quote(' '.join(_next_words(c)))} ;;"
        for c in tree
        if c.subcommands or c.words
    )
    options = "\n".join(
        f"    {shlex.quote(_path_key(c.path))}) echo "
        f"{shlex.quote(' '.join(f for o in c.options for f in o.flags))} ;;"
        for c in tree
        if c.options
    )
    choices = "\n".join(
        f"    {shlex.quote(flag)}) echo {shlex.quote(' '.join(o.choices))} ;;"
        for flag, o in sorted(
            {f: o for c in tree for o in c.options if o.choices for f in o.flags}.items()
        )
    )
    positional = "|".join(_path_key(c.path) for c in tree if c.takes_change)
    takes = " ".join(_value_flags(tree))
    return f"""\
# forge completion for bash (generated by `forge completion bash`).
{_CHANGES_SH}
_forge_subcommands() {{
  case "$1" in
{words}
  esac
}}
_forge_options() {{
  case "$1" in
{options}
  esac
}}
_forge_choices() {{
  case "$1" in
{choices}
  esac
}}
_forge() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=""
  local at="" word i skip=0 takes=" {takes} " positional="|{positional}|"
  [ "$COMP_CWORD" -gt 0 ] && prev=${{COMP_WORDS[COMP_CWORD-1]}}
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${{COMP_WORDS[i]}}
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    case "$word" in
      --*=*) ;;
      -*) case "$takes" in *" $word "*) skip=1 ;; esac ;;
      *) case " $(_forge_subcommands "$at") " in
           *" $word "*) at=${{at:+$at }}$word ;;
         esac ;;
    esac
  done
  if [ "$skip" = 1 ]; then
    if [ "$prev" = --change ]; then
      COMPREPLY=($(compgen -W "$(_forge_changes)" -- "$cur"))
    else
      local listed
      listed=$(_forge_choices "$prev")
      if [ -n "$listed" ]; then COMPREPLY=($(compgen -W "$listed" -- "$cur"))
      else COMPREPLY=($(compgen -f -- "$cur")); fi
    fi
    return
  fi
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$(_forge_options "$at")" -- "$cur")) ;;
    *)
      local next
      next=$(_forge_subcommands "$at")
      case "$positional" in *"|$at|"*) next="$next $(_forge_changes)" ;; esac
      COMPREPLY=($(compgen -W "$next" -- "$cur")) ;;
  esac
}}
complete -F _forge forge
"""


def _fish_quote(text: str) -> str:
    # A fish single-quoted string: only \\ and \' are escapes.
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish(tree: list[Command]) -> str:
    subs = "\n".join(
        f"        case {_fish_quote(_path_key(c.path))}\n"
        f"            printf '%s\\n' {' '.join(_fish_quote(n) for n, _ in c.subcommands)}"
        for c in tree
        if c.subcommands
    )
    takes = " ".join(_fish_quote(flag) for flag in _value_flags(tree))
    lines = [
        "# forge completion for fish (generated by `forge completion fish`).",
        "function __forge_subcommands",
        "    switch $argv[1]",
        subs,
        "    end",
        "end",
        "# The command and actions typed so far (values of options skipped).",
        "function __forge_path",
        "    set -l path",
        "    set -l skip 0",
        f"    set -l takes {takes}",
        "    for word in (commandline -opc)[2..-1]",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $word",
        "            case '--*=*'",
        "            case '-*'",
        "                contains -- $word $takes; and set skip 1",
        "            case '*'",
        '                if contains -- $word (__forge_subcommands "$path")',
        "                    set path $path $word",
        "                end",
        "        end",
        "    end",
        '    string join " " -- $path',
        "end",
        "function __forge_at",
        "    set -l here (__forge_path)",
        '    test "$here" = "$argv[1]"',
        "end",
        "function __forge_changes",
        "    set -l dir $PWD",
        "    while true",
        "        if test -d $dir/.forge/changes",
        "            for c in $dir/.forge/changes/*/",
        "                string replace -r '.*/([^/]+)/$' '$1' -- $c",
        "            end",
        "            return",
        "        end",
        "        test $dir = /; and return",
        "        set dir (string replace -r '/[^/]*$' '' -- $dir)",
        '        test -n "$dir"; or set dir /',
        "    end",
        "end",
        "complete -c forge -f",
    ]
    for command in tree:
        at = _fish_quote(f"__forge_at {json.dumps(_path_key(command.path))}")
        for name, said in command.subcommands:
            lines.append(f"complete -c forge -n {at} -a {_fish_quote(name)} -d {_fish_quote(said)}")
        if command.takes_change:
            lines.append(f"complete -c forge -n {at} -a '(__forge_changes)' -d change")
        for word in command.words:
            lines.append(f"complete -c forge -n {at} -a {_fish_quote(word)}")
        for option in command.options:
            spec = []
            for flag in option.flags:
                if flag.startswith("--"):
                    spec.append(f"-l {_fish_quote(flag[2:])}")
                elif len(flag) == 2:
                    spec.append(f"-s {_fish_quote(flag[1:])}")
                else:
                    spec.append(f"-o {_fish_quote(flag[1:])}")
            if option.change:
                spec.append("-x -a '(__forge_changes)'")
            elif option.choices:
                spec.append(f"-x -a {_fish_quote(' '.join(option.choices))}")
            elif option.takes_value:
                spec.append("-r -F")
            lines.append(
                f"complete -c forge -n {at} {' '.join(spec)} -d {_fish_quote(option.help)}"
            )
    return "\n".join(lines) + "\n"
