"""Differential test of the ``Bash(...)`` policy against real shells.

For every generated command the checker (:func:`simple_command_words`) admits, the command runs as
``env -i PATH=<recorders> bash --norc --noprofile -c CMD`` (and under ``sh -c``, which is dash on
Debian, the fallback shell of the runtimes) in an empty directory; the recorders log the argv they
receive. The shell must have executed exactly one program, with exactly the words the checker
computed; a command whose first word is not a recorder must execute none. The policy built from
``allowed-tools: Bash(git:*)`` must admit only commands whose words start with ``git``.

Generated commands come from two sources: structured near-misses (words assembled from plain
text, backslash escapes, single and double quotes, and fragments of shell syntax: ``#``, ``$``,
expansions, globs, braces, ``~``, ``=``, operators, line continuations, carriage returns, unicode
spaces, ...) and random text over an alphabet rich in shell metacharacters. Each hypothesis
example is a batch of commands run by one driver process, to keep the cost near one ``bash -c``
per admitted command.

Sizes: the normal run generates ``EXAMPLES * BATCH`` commands per strategy (see the constants).
Set ``SKILLRUNTIME_SECURITY_LONG=1`` for a run 25 times longer.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from security.shell_recorder import ShellRecorder, shell_builtins
from skillruntime.core.models import Skill
from skillruntime.core.tools.policy import SkillPolicy
from skillruntime.core.tools.simple_command import (
    UnclassifiedCommandError,
    simple_command_words,
)

LONG = os.environ.get("SKILLRUNTIME_SECURITY_LONG") == "1"
EXAMPLES = 20 * (25 if LONG else 1)
BATCH = 50
"""Commands per hypothesis example; one driver process runs a whole batch."""

RECORDED = ("git", "touch", "rm", "sh", "ls", "x", "id", "status", "atus", "pwned", "a", "b")
"""Programs the recorder directory holds: the constrained command and decoys."""

BASH = shutil.which("bash")
DASH = shutil.which("dash")
SHELLS = tuple(shell for shell in (BASH, DASH) if shell is not None)
BUILTINS = shell_builtins(BASH) if BASH else frozenset()

SPECIAL = [
    *" \t\n\r\\'\"#$`;&|<>(){}[]*?~=!%^,:@+-./",
    "\u00a0",
    "\u2028",
    "\u200b",
    "\u202e",
    "\u3000",
    "é",
    "ß",
    "€",
    "😀",
    "\x01",
    "\x7f",
]


def alphabet(excluded: str = "") -> st.SearchStrategy[str]:
    """Shell metacharacters, quotes, blanks and unicode, plus any character; never NUL."""
    special = [char for char in SPECIAL if char not in excluded]
    return st.sampled_from(special) | st.characters(
        codec="utf-8", exclude_characters="\x00" + excluded
    )


ALPHABET = alphabet()
PLAIN = st.text(st.sampled_from(list("abgitsu0123456789-_./,:@%+=^é€")), min_size=1, max_size=6)
FRAGMENTS = st.sampled_from(
    [
        "#",
        "#;touch pwned",
        ";x",
        "&x",
        "&&x",
        "||x",
        "|x",
        ">x",
        "<x",
        ">>x",
        "2>&1",
        "$x",
        "${x}",
        "$(x)",
        "`x`",
        "$((1))",
        "$'a'",
        "$'\\x3bx'",
        '$"a"',
        "<(x)",
        ">(x)",
        "*",
        "?",
        "[ab]",
        "{a,b}",
        "{a..b}",
        "~",
        "~root",
        "=",
        "a=b",
        "!",
        "\\\n",
        "\\\r\n",
        "\n",
        "\r",
        "\u00a0",
        "<<<x",
        "<<E\nx\nE\n",
        "(x)",
        "{ x; }",
        "\\",
        "'",
        '"',
        "%",
        "@(a)",
    ]
)


def _escaped() -> st.SearchStrategy[str]:
    return ALPHABET.map(lambda char: "\\" + char)


def _single_quoted() -> st.SearchStrategy[str]:
    return st.text(alphabet("'"), max_size=6).map(lambda text: f"'{text}'")


def _double_quoted() -> st.SearchStrategy[str]:
    piece = (
        alphabet('"\\$`')
        | st.sampled_from(['\\"', "\\\\", "\\$", "\\`", "\\a", "\\n", "\\'", "$", "$x", "`"])
        | _escaped()
    )
    return st.lists(piece, max_size=5).map(lambda parts: '"' + "".join(parts) + '"')


PART = PLAIN | _escaped() | _single_quoted() | _double_quoted() | FRAGMENTS
WORD = st.lists(PART, min_size=1, max_size=3).map("".join)
SEPARATOR = st.sampled_from([" ", "  ", "\t", " \t "]) | st.sampled_from(
    ["\r", "\n", "\u00a0", "\\\n", ";", "#", ""]
)


def _command_word() -> st.SearchStrategy[str]:
    name = st.sampled_from(RECORDED)
    quoted_forms = name.flatmap(
        lambda text: st.sampled_from(
            [
                text,
                f"'{text}'",
                f'"{text}"',
                "\\" + text,
                text[0] + "'" + text[1:] + "'",
                text[:1] + '""' + text[1:],
            ]
        )
    )
    return quoted_forms | WORD


@st.composite
def structured_commands(draw: st.DrawFn) -> str:
    """A command word, then words and separators assembled from near-miss parts."""
    parts = [draw(st.sampled_from(["", " ", "\t"])), draw(_command_word())]
    for _ in range(draw(st.integers(0, 4))):
        parts.append(draw(SEPARATOR))
        parts.append(draw(WORD))
    parts.append(draw(st.sampled_from(["", " ", "\t", "\n", ";", " #c"])))
    return "".join(parts)


@st.composite
def random_commands(draw: st.DrawFn) -> str:
    """A recorder name followed by random text over the metacharacter-rich alphabet."""
    head = draw(st.sampled_from(RECORDED))
    return head + draw(st.sampled_from([" ", "", "\t"])) + draw(st.text(ALPHABET, max_size=16))


@st.composite
def mutated_commands(draw: st.DrawFn) -> str:
    """An admitted-looking command with one to three characters inserted, deleted or replaced."""
    text = draw(structured_commands())
    for _ in range(draw(st.integers(1, 3))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(ALPHABET)
        if action == "insert":
            text = text[:position] + char + text[position:]
        elif action == "delete":
            text = text[:position] + text[position + 1 :]
        else:
            text = text[:position] + char + text[position + 1 :]
    return text


GIT_POLICY = SkillPolicy.from_skill(
    Skill(name="git-only", base_path="/s", frontmatter={"allowed-tools": "Bash(git:*)"})
)


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> ShellRecorder:
    assert BASH is not None, "bash must be installed for the differential test"
    return ShellRecorder(tmp_path_factory.mktemp("shell-recorder"), RECORDED)


def _classify(command: str) -> tuple[str, ...] | None:
    try:
        return simple_command_words(command)
    except UnclassifiedCommandError:
        return None


def check_against_shells(
    recorder: ShellRecorder, commands: list[str], shells: tuple[str, ...], locale: str
) -> int:
    """Assert the shells agree with the checker on every admitted command; count those run."""
    admitted: list[tuple[str, tuple[str, ...]]] = []
    for command in commands:
        words = _classify(command)
        if GIT_POLICY.bash_reason(command) is None:
            assert words is not None, command
            assert words[0] == "git", command
        if words is None or words[0] in BUILTINS:
            continue
        admitted.append((command, words))
    if not admitted:
        return 0
    runs = recorder.run([command for command, _ in admitted], shells, locale)
    assert len(runs) == len(admitted) * len(shells)
    for index, (command, words) in enumerate(admitted):
        for offset, shell in enumerate(shells):
            executed = runs[index * len(shells) + offset]
            expected = [words] if words[0] in recorder.names else []
            assert executed == expected, (shell, command, words, executed)
    return len(admitted)


LOCALES = st.sampled_from(["C", "C.UTF-8"])
SHELL_SETS = st.sampled_from([SHELLS[:1]] * 3 + [SHELLS])
"""Every batch runs under bash; one batch in four under dash as well (``sh`` on Debian)."""
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(
    commands=st.lists(structured_commands(), min_size=BATCH, max_size=BATCH),
    shells=SHELL_SETS,
    locale=LOCALES,
)
def test_structured_commands_run_exactly_the_words_the_checker_admits(
    recorder: ShellRecorder, commands: list[str], shells: tuple[str, ...], locale: str
) -> None:
    check_against_shells(recorder, commands, shells, locale)


@SETTINGS
@given(
    commands=st.lists(mutated_commands(), min_size=BATCH, max_size=BATCH),
    shells=SHELL_SETS,
    locale=LOCALES,
)
def test_mutated_commands_run_exactly_the_words_the_checker_admits(
    recorder: ShellRecorder, commands: list[str], shells: tuple[str, ...], locale: str
) -> None:
    check_against_shells(recorder, commands, shells, locale)


@SETTINGS
@given(
    commands=st.lists(random_commands(), min_size=BATCH, max_size=BATCH),
    shells=SHELL_SETS,
    locale=LOCALES,
)
def test_random_metacharacter_commands_run_exactly_the_words_the_checker_admits(
    recorder: ShellRecorder, commands: list[str], shells: tuple[str, ...], locale: str
) -> None:
    check_against_shells(recorder, commands, shells, locale)


ADMITTED_EXAMPLES = [
    ("git status", ("git", "status")),
    ("  git\tlog  -1 ", ("git", "log", "-1")),
    ("'git' st\"at\"us", ("git", "status")),
    ("git commit -m 'a; b | c'", ("git", "commit", "-m", "a; b | c")),
    ('git commit -m "say \\"hi\\" \\$5 \\\\ \\n"', ("git", "commit", "-m", 'say "hi" $5 \\ \\n')),
    ("git a\\;b \\#c \\*", ("git", "a;b", "#c", "*")),
    ("git 'line\nbreak'", ("git", "line\nbreak")),
    ("git log --format=%h@x,y:z", ("git", "log", "--format=%h@x,y:z")),
    ("git é€", ("git", "é€")),
    ("git ''", ("git", "")),
]


@pytest.mark.parametrize(("command", "words"), ADMITTED_EXAMPLES)
def test_admitted_examples_run_exactly_their_words(
    recorder: ShellRecorder, command: str, words: tuple[str, ...]
) -> None:
    assert simple_command_words(command) == words
    assert GIT_POLICY.bash_reason(command) is None
    assert recorder.run([command], SHELLS) == [[words]] * len(SHELLS)


KNOWN_BYPASSES = [
    "git status#;touch pwned",
    "git status #;touch pwned",
    "git status;touch pwned",
    "git $'status\\x3b'touch pwned",
    "git $'\\x3btouch' pwned",
    "git st\\\natus;x",
    "git st\\\natus",
    "git\\\n;x",
    "git status\rtouch pwned",
    "git status\ntouch pwned",
    "git status\u00a0;touch pwned",
    "git {status,;touch}",
    "git {a,b}",
    "git *",
    "git s?atus",
    "git [s]tatus",
    "git ~",
    "git ~/x",
    "git a=~",
    "git <(touch pwned)",
    "git >(touch pwned)",
    "git $(touch pwned)",
    "git `touch pwned`",
    'git "$(touch pwned)"',
    'git "`touch pwned`"',
    "git ${IFS}x",
    "git $IFS",
    "git $((1))",
    'git $"status"',
    "PATH=. git status",
    "git status > pwned",
    "git status 2>pwned",
    "git status <<<x",
    "git status <<E\nx\nE",
    "git status &",
    "git status & touch pwned",
    "git status | touch pwned",
    "git status || touch pwned",
    "! git status",
    "time git status",
    "{ git status; }",
    "(git status)",
    "coproc git status",
    "git status; ",
    "git 'unbalanced",
    'git "unbalanced',
    "git status \\",
    "",
    "   ",
]


@pytest.mark.parametrize("command", KNOWN_BYPASSES)
def test_known_bypasses_are_refused(command: str) -> None:
    with pytest.raises(UnclassifiedCommandError):
        simple_command_words(command)
    reason = GIT_POLICY.bash_reason(command)
    assert reason is not None
    assert "refused because it" in reason


def test_refusal_names_the_construct() -> None:
    reasons = {
        "git status#;touch x": "control operator ';'",
        "git status#x": "unquoted '#'",
        "git $'x'": "ANSI-C quoted string",
        "git st\\\natus": "line continuation",
        "git *.py": "glob character '*'",
        "git {a,b}": "brace",
        "git ~": "tilde",
        "git <(ls)": "process substitution",
        "git $HOME": "parameter expansion",
        "A=1 git": "variable assignment",
        "git # note": "comment",
        "git > out": "control operator '>'",
        "git 'open": "not valid shell syntax",
    }
    for command, expected in reasons.items():
        with pytest.raises(UnclassifiedCommandError, match=None) as caught:
            simple_command_words(command)
        assert expected in caught.value.reason, (command, caught.value.reason)


def test_the_checker_refuses_what_it_cannot_classify(tmp_path: Path) -> None:
    # A $'...' string is refused rather than decoded, so a decoder mistake cannot admit a
    # hidden operator; the recorder shows what bash would have run instead.
    recorder = ShellRecorder(tmp_path, RECORDED)
    command = "git $'status\\x3b'touch"
    runs = recorder.run([command], SHELLS[:1])
    assert runs == [[("git", "status;touch")]]
    with pytest.raises(UnclassifiedCommandError, match="ANSI-C"):
        simple_command_words(command)
