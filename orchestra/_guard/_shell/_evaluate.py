"""The evaluator: runs a parsed command tree in the mind, judging each command's harm.

Commands run in order, each with its words expanded (:mod:`._words`) after
the command substitutions inside them have been analysed in turn. ``VAR=1
cmd`` and ``VAR=1`` alone are read, ``for`` binds its variable, and each
simple command goes to its rule by name: a wrapper's (:mod:`._wrappers`)
gives the command it runs; those of the file verbs (:mod:`._verbs`), git
(:mod:`._git`) and ``find`` (:mod:`._find`) judge it; ``cd``,
``export`` and their kin change the state (:mod:`._state`). Redirections
``>``, ``>>``, ``&>``, ``<>`` change their target.

The strings of ``sh -c``, ``bash -c``, ``eval`` and ``watch``, and shell
input from here-documents and here-strings, are analysed as commands too,
nested at most 12 deep; a command nested deeper (or past the parser's 48
levels of groups and substitutions) is refused whatever it holds. ``( … )``,
each side of a pipeline and a background job run on a copy of the state, so a
``cd`` there does not leak.

This runs on every tool call of an agent: it imports only its sibling modules.
"""

from __future__ import annotations

from ._harm import check_write
from ._options import has_flag, parse_options
from ._parse import ASSIGNMENT, MAX_NESTING, For, Group, Parser, Part, Word, is_digits
from ._state import BUILTINS, WORK_LIMIT, Arg, stdin_program
from ._verbs import VERBS
from ._words import expand_word
from ._wrappers import WRAPPERS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._parse import Item, Simple
    from ._state import Analysis, Handler, State

_MAX_DEPTH = 12  # nested sh -c / eval / substitutions
MAX_COMMAND = WORK_LIMIT // 4
"""The longest command analysed, in characters; a longer one is refused unread."""
_WRITE_REDIRECTS = frozenset({">", ">|", ">>", "&>", "&>>", ">&", "<>"})


def analyse_text(analysis: Analysis, text: str, state: State) -> None:
    """Analyse ``text`` as commands run in ``state``."""
    if not analysis.spend(len(text)):
        return
    if analysis.depth >= _MAX_DEPTH:
        analysis.refuse_command(
            f"the command nests sh -c/eval too deeply to analyse (more than {_MAX_DEPTH} levels)"
        )
        return
    analysis.depth += 1
    try:
        parser = Parser(text)
        items = parser.parse_list("")
        parser.read_documents()  # a here-document without a line after its command
        _too_deep(analysis, parser)
        _run_list(analysis, items, state)
    finally:
        analysis.depth -= 1


def _too_deep(analysis: Analysis, parser: Parser) -> None:
    if parser.too_deep:
        analysis.refuse_command(
            f"the command nests too deeply to analyse (more than {MAX_NESTING} levels)"
        )


def _run_list(analysis: Analysis, items: list[Item], state: State) -> None:
    previous = ""
    previous_args: list[Arg] | None = None
    output: list[str] | None = None  # what the previous command writes, when known
    for item in items:
        # Each side of a pipe and a background job run in a subshell.
        alone = previous in ("|", "|&") or item.separator in ("|", "|&", "&")
        current = state.copy() if alone else state
        node = item.node
        if isinstance(node, Group):
            _redirects(analysis, node.redirects, current)
            _run_list(analysis, node.body, current.copy() if node.subshell else current)
            previous = item.separator
            previous_args = []  # what a group writes into a pipe is not known here
            continue
        if isinstance(node, For):
            values: tuple[str, ...] | None = None
            if node.words is not None:
                args = [a for w in node.words for a in _expand(analysis, w, current)]
                if not any(a.opaque for a in args):
                    values = tuple(a.text for a in args)
            current.variables[node.name] = values
        else:
            piped = previous in ("|", "|&")
            current.piped = previous_args if piped else None
            current.piped_text = output if piped else None
            previous_args, stdin = _run_simple(analysis, node, current)
            output = _output(previous_args, stdin)
            current.piped = current.piped_text = None
            previous = item.separator
            continue
        previous = item.separator
        previous_args = None


def _expand(analysis: Analysis, word: Word, state: State, *, split: bool = True) -> list[Arg]:
    """The arguments a word becomes; substitutions inside it are analysed on the way."""
    for part in word.parts:
        if part.body is not None:
            _run_list(analysis, part.body, state.copy())
    return expand_word(analysis, word, state, split=split)


def _output(args: list[Arg] | None, stdin: list[str]) -> list[str] | None:
    """What ``echo``/``printf`` of known words, or ``cat`` of its here-document, writes."""
    if not args or any(a.opaque for a in args):
        return None
    name = args[0].text.rsplit("/", 1)[-1]
    if name in ("echo", "printf"):
        return [" ".join(a.text for a in args[1:])]
    if name == "cat" and stdin and all(a.text.startswith("-") for a in args[1:]):
        return stdin
    return None


def _run_simple(
    analysis: Analysis, node: Simple, state: State
) -> tuple[list[Arg] | None, list[str]]:
    """Analyse one simple command: its expanded words (None for assignments alone), and
    the texts its stdin reads (here-documents and here-strings)."""
    stdin = _redirects(analysis, node.redirects, state)
    for body, expand in node.docs:
        stdin.append(body)
        if expand:
            parser = Parser(body)
            parts: list[Part] = []
            parser.double_quoted(parts, "")
            _too_deep(analysis, parser)
            _expand(analysis, Word(parts), state)  # analyses its substitutions
    assignments: list[tuple[str, str | None]] = []
    index = 0
    for word in node.words:
        first = word.parts[0] if word.parts else None
        match = ASSIGNMENT.match(first.text) if first and first.kind == "lit" else None
        if match is None:
            break
        rest = [Part("lit", first.text[match.end() :]), *word.parts[1:]] if first else []
        value = _expand(analysis, Word(rest), state, split=False)
        known = len(value) == 1 and not value[0].opaque
        assignments.append((match.group(1), value[0].text if known else None))
        index += 1
    if index == len(node.words):
        state.variables.update(assignments)
        return None, stdin
    args = [a for w in node.words[index:] for a in _expand(analysis, w, state)]
    _dispatch(analysis, args, state, stdin)
    return args, stdin


def _redirects(analysis: Analysis, redirects: list[tuple[str, Word]], state: State) -> list[str]:
    """Check the redirections' targets; the text of any here-string."""
    stdin: list[str] = []
    for operator, word in redirects:
        args = _expand(analysis, word, state, split=False)
        if operator == "<<<":
            stdin.extend(a.text for a in args if not a.opaque)
            continue
        if operator not in _WRITE_REDIRECTS:
            continue
        for arg in args:
            if operator == ">&" and not arg.opaque and (is_digits(arg.text) or arg.text == "-"):
                continue  # 2>&1: a descriptor, not a file
            check_write(analysis, f"the redirection {operator}", arg, state)
    return stdin


def _dispatch(analysis: Analysis, args: list[Arg], state: State, stdin: list[str]) -> None:
    """Judge the command ``args`` by its rule, through any wrappers and aliases around it."""
    while args and not args[0].opaque:
        name = args[0].text.rsplit("/", 1)[-1]
        if name in state.aliases and name == args[0].text and name not in analysis.aliasing:
            _alias(analysis, name, args[1:], state, stdin)
            return
        wrapper = WRAPPERS.get(name)
        if wrapper is not None:
            unwrapped = wrapper(analysis, args[1:], state)
            if unwrapped is None:
                return
            args, state = unwrapped
            continue
        handler = _HANDLERS.get(name) or _HANDLERS.get(_unversioned(name))
        if handler is not None:
            handler(analysis, name, args[1:], state, stdin)
        return
    if args:
        # Its name is known only when it runs: it could be rm.
        from ._mentions import judge_computed

        judge_computed(analysis, args, state)


def _unversioned(name: str) -> str:
    """``python3.12`` is ``python``, ``lua5.4`` ``lua`` (for the interpreters' rules)."""
    base = name.rstrip("0123456789.")
    return base if base in _VERSIONED else name


def _alias(analysis: Analysis, name: str, argv: list[Arg], state: State, stdin: list[str]) -> None:
    """An alias's text stands for its name; the arguments follow it (known or not)."""
    text = state.aliases[name]
    if text is None:
        from ._mentions import judge_computed

        judge_computed(analysis, [Arg(name, opaque=True), *argv], state)
        return
    import shlex

    unknown = '"${_forge_unknown_}"'  # an opaque argument: its known prefix, then unknown
    words = [shlex.quote(a.text) + (unknown if a.opaque else "") for a in argv]
    before = analysis.aliasing
    analysis.aliasing = before | {name}
    state.variables["_forge_unknown_"] = None
    try:
        analyse_text(analysis, " ".join([text, *words]), state)
    finally:
        analysis.aliasing = before


def _find(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``find``: its own harm, and each ``-exec`` command over the paths it would get."""
    # Imported for the commands that use them: a hook pays for the rules its command needs.
    from ._find import find_execs

    judged: set[int] = set()
    for command, found in find_execs(analysis, argv, state):
        if id(command) not in judged:
            # Its fixed arguments, wherever find starts and whatever it finds.
            judged.add(id(command))
            neutral = [Arg(a.text.replace("{}", "/dev/null"), a.opaque) for a in command]
            _dispatch(analysis, neutral, state.copy(), [])
        if not any("{}" in a.text for a in command):
            continue
        before = len(analysis.refusals)
        for path in found:  # shallowest first; one refusal per action is enough
            replaced = [Arg(a.text.replace("{}", path), a.opaque) for a in command]
            _dispatch(analysis, replaced, state.copy(), [])
            if len(analysis.refusals) > before:
                break


def _shell(analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]) -> None:
    """``sh -c TEXT``, ``bash <<EOF``, ``bash -s <<< TEXT``: the text is analysed too."""
    index = 0
    command = False
    while index < len(argv):
        text = argv[index].text
        if argv[index].opaque or text in ("-", "--"):
            index += text in ("-", "--") and not argv[index].opaque
            break
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2
            continue
        if text[:1] not in "-+":
            break
        command = command or (not text.startswith("--") and "c" in text[1:])
        index += 1
    if command:
        if index < len(argv) and not argv[index].opaque:
            inner = state.copy()
            inner.positional = [None if a.opaque else a.text for a in argv[index + 1 :]]
            analyse_text(analysis, argv[index].text, inner)
        return
    if index >= len(argv):
        for text in stdin_program(analysis, verb, state, stdin):
            analyse_text(analysis, text, state.copy())


def _interpreter(
    analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]
) -> None:
    """``python -c``, ``perl -e``, ``awk``, ``vim -es``, …: :mod:`._interpreters`' rules."""
    from ._interpreters import INTERPRETERS

    INTERPRETERS[_unversioned(verb)](analysis, verb, argv, state, stdin)
    # The command lines its program runs (os.system("…"), :mod:`._calls`), as commands.
    commands, analysis.commands = analysis.commands, []
    for text, inner in commands:
        analyse_text(analysis, text, inner)


def _archiver(
    analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]
) -> None:
    """``tar``, ``zip``, ``unzip``, ``7z``, ``cpio``: :mod:`._archivers`' rules."""
    from ._archivers import ARCHIVERS

    ARCHIVERS[verb](analysis, verb, argv, state, stdin)


def _compressor(
    analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]
) -> None:
    """``gzip``, ``xz``, ``zstd``, …: :mod:`._compress`' rule."""
    from ._compress import compressor

    compressor(analysis, verb, argv, state, stdin)


def _patch(analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]) -> None:
    """``patch``: :mod:`._patches`' rule."""
    from ._patches import patch

    patch(analysis, verb, argv, state, stdin)


def _git(analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]) -> None:
    """``git``: its subcommands' rules (:mod:`._git`)."""
    from ._git import git

    git(analysis, verb, argv, state, stdin)


def _eval(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``eval ARGS``: the arguments, joined, are analysed as commands."""
    analyse_text(analysis, " ".join(a.text for a in argv), state)


def _watch(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``watch CMD``: the command runs (again and again) in a shell, or with ``-x`` directly."""
    options, rest = parse_options(argv, frozenset({"-n", "--interval", "-d"}), first=True)
    if has_flag(options, "x", "--exec"):
        _dispatch(analysis, rest, state.copy(), [])
    else:
        analyse_text(analysis, " ".join(a.text for a in rest), state.copy())


_HANDLERS: dict[str, Handler] = {
    **VERBS,
    **BUILTINS,
    "find": _find,
    "git": _git,
    "sh": _shell,
    "bash": _shell,
    "zsh": _shell,
    "dash": _shell,
    "ksh": _shell,
    "eval": _eval,
    "watch": _watch,
    # Imported only by the commands that run them (the lists are the modules' own).
    **dict.fromkeys(
        ("python", "pypy", "perl", "ruby", "node", "nodejs", "php", "lua", "awk", "gawk"),
        _interpreter,
    ),
    **dict.fromkeys(("vi", "vim", "nvim", "ex", "ed"), _interpreter),
    **dict.fromkeys(
        ("tar", "gtar", "bsdtar", "zip", "unzip", "7z", "7za", "7zz", "cpio"), _archiver
    ),
    **dict.fromkeys(
        (
            "gzip",
            "pigz",
            "gunzip",
            "unpigz",
            "bzip2",
            "bunzip2",
            "xz",
            "unxz",
            "lzma",
            "unlzma",
            "lz4",
            "compress",
            "uncompress",
            "zstd",
            "unzstd",
        ),
        _compressor,
    ),
    "patch": _patch,
}
_VERSIONED = frozenset({"python", "pypy", "perl", "ruby", "node", "php", "lua"})
