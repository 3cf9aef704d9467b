"""Interpreters and editors that can write anything: the programs they are given.

- ``python -c``, ``perl -e``/``-E``, ``ruby -e``, ``node -e``/``-p``,
  ``php -r``, ``lua -e``, and the same interpreters (``sh`` and its kin too,
  in :mod:`._evaluate`) reading their program from stdin: the program's text
  is judged by the paths it names (:mod:`._mentions`) and by its calls that
  delete, change or run (:mod:`._calls`). A program from a
  here-document or here-string, or piped from an ``echo``/``printf`` of known
  text, is read; one piped from anything else (``curl … | sh``, ``base64 -d |
  python3``) is known only when it runs, and is refused whatever it holds.
- A script file (``python script.py``, ``python -m pytest``) is not read:
  running the project's own code is the agent's everyday work.
- ``perl -i``/``ruby -i`` change the files after the program, as ``sed -i``
  does (:mod:`._verbs`); ``awk -i inplace`` too, and the program of any
  ``awk`` is judged like an interpreter's.
- ``vi``/``vim``/``nvim``/``ex``/``ed`` change the files they are given (an
  agent runs them only in batch mode, ``vim -es``, ``ex -sc wq``); ``-R``
  opens them read-only.

This runs on every tool call of an agent that runs one of these: it imports
only its sibling modules.
"""

from __future__ import annotations

from ._harm import check_write
from ._mentions import judge_program
from ._options import parse_options
from ._state import stdin_program
from ._verbs import in_place

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Analysis, Arg, Handler, State


class _Syntax:
    """How an interpreter is told its program: the option letters and long options."""

    __slots__ = ("code", "long_code", "long_valued", "rest", "script", "valued")

    def __init__(
        self,
        code: str,
        *,
        rest: str = "",
        valued: str = "",
        script: str = "",
        long_code: tuple[str, ...] = (),
        long_valued: tuple[str, ...] = (),
    ) -> None:
        self.code = code  # -c CODE: the rest of the word or the next argument
        self.rest = rest  # letters taking the rest of their word as a value
        self.valued = valued  # those of them taking the next argument when the word ends
        self.script = script  # letters that name what runs instead (python -m MOD)
        self.long_code = long_code
        self.long_valued = long_valued


_SYNTAX = {
    "python": _Syntax("c", rest="WXm", valued="WXm", script="m"),
    "perl": _Syntax("eE", rest="IMmxdDlC0i", valued="IMm"),
    "ruby": _Syntax("e", rest="IrCxEKTUWF0li", valued="IrCEK"),
    "node": _Syntax(
        "ep",
        rest="r",
        valued="r",
        long_code=("--eval", "--print"),
        long_valued=("--require", "--import", "--loader", "--input-type", "--conditions"),
    ),
    "php": _Syntax("r", rest="cdfzt", valued="cdfzt", script="f"),
    "lua": _Syntax("e", rest="l", valued="l"),
}
_FAMILIES = {"pypy": "python", "nodejs": "node"}


def _program(syntax: _Syntax, argv: list[Arg]) -> tuple[list[Arg], bool]:
    """The programs given on the command line, and whether stdin is the program."""
    codes: list[Arg] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        text = arg.text
        index += 1
        if arg.opaque or text == "--" or not text.startswith("-"):
            return codes, False  # a script (or arguments after the programs)
        if text == "-":
            return codes, not codes
        if text.startswith("--"):
            name, equals, value = text.partition("=")
            if name in syntax.long_code:
                codes.append(_value(value, equals, argv, index))
                index += not equals
            elif name in syntax.long_valued and not equals:
                index += 1
            continue
        letters = text[1:]
        for position, letter in enumerate(letters):
            tail = letters[position + 1 :]
            if letter in syntax.code:
                codes.append(_value(tail, tail, argv, index))
                index += not tail
                break
            if letter in syntax.script:
                return codes, False
            if letter in syntax.rest:
                index += not tail and letter in syntax.valued
                break
    return codes, not codes


def _value(value: str, attached: str, argv: list[Arg], index: int) -> Arg:
    from ._state import Arg

    if attached:
        return Arg(value)
    return argv[index] if index < len(argv) else Arg("")


def interpreter(
    analysis: Analysis, verb: str, argv: list[Arg], state: State, stdin: list[str]
) -> None:
    """``python -c``, ``perl -e``, …: the program's text, from its arguments or stdin."""
    family = verb.rstrip("0123456789.")  # python3.12 is python
    family = _FAMILIES.get(family, family)
    if family in ("perl", "ruby"):
        in_place(analysis, family, argv, state, stdin)
    codes, from_stdin = _program(_SYNTAX[family], argv)
    for code in codes:
        if code.opaque:
            analysis.refuse_command(f"{verb}'s program is known only when it runs")
        else:
            judge_program(analysis, f"the program {verb} runs", code.text, state)
    if from_stdin:
        for text in stdin_program(analysis, verb, state, stdin):
            judge_program(analysis, f"the program {verb} reads from stdin", text, state)


def awk(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``awk PROGRAM FILE…``: the program judged; the files changed with ``-i inplace``."""
    options, operands = parse_options(
        argv, frozenset({"-f", "-v", "-F", "-i", "-E", "-l", "--include", "--file", "--load"})
    )
    includes = [value for name, value in options if name in ("-i", "--include")]
    has_file = any(name in ("-f", "--file", "-E") for name, _ in options)
    if not has_file and operands:
        program, operands = operands[0], operands[1:]
        if program.opaque:
            analysis.refuse_command(f"{verb}'s program is known only when it runs")
        else:
            judge_program(analysis, f"the program {verb} runs", program.text, state)
    if "inplace" in includes or "inplace.awk" in includes:
        for operand in operands:
            if operand.opaque or "=" not in operand.text:  # var=value is an assignment
                check_write(analysis, f"{verb} -i inplace", operand, state)


def editor(analysis: Analysis, verb: str, argv: list[Arg], state: State, _: list[str]) -> None:
    """``vim -es``, ``ex``, ``ed``: the files they are given may be written."""
    with_value = frozenset({"-c", "--cmd", "-S", "-u", "-U", "-i", "-T", "-w", "-W", "-t", "-q"})
    options, operands = parse_options(argv, with_value | frozenset({"-p"} if verb == "ed" else ()))
    if any(name == "-R" for name, _ in options):
        return  # read-only
    for operand in operands:
        if not operand.text.startswith("+") or operand.opaque:
            check_write(analysis, verb, operand, state)


INTERPRETERS: dict[str, Handler] = {
    **dict.fromkeys(_SYNTAX, interpreter),
    **dict.fromkeys(_FAMILIES, interpreter),
    "awk": awk,
    "gawk": awk,
    **dict.fromkeys(("vi", "vim", "nvim", "ex", "ed"), editor),
}
