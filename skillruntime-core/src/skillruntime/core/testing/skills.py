"""Host-side test skills the conformance kit prepares into the runtime under test.

Every skill is a fresh directory under the test's temporary directory with a ``SKILL.md``, an
executable script, a binary asset holding all 256 byte values, and optionally the files the
upload policy must keep out of a runtime (``.git/``, ``.env``, credential files, symbolic links).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from ..models import BootstrapCommand, Skill

__all__ = [
    "ALL_BYTES",
    "DEFAULT_BODY",
    "POLICY_EXCLUDED_PATHS",
    "STANDARD_FILES",
    "SkillFactory",
    "append_line_command",
]

ALL_BYTES = bytes(range(256)) * 4
"""Content of ``assets/all-bytes.bin``: every byte value, four times."""

DEFAULT_BODY = "Use the hello script."
"""Instructions of a kit skill unless :meth:`SkillFactory.create` is given others."""

HELLO_SCRIPT = '#!/bin/sh\nprintf "hello from %s\\n" "$(basename "$0")"\n'

STANDARD_FILES = ("SKILL.md", "assets/all-bytes.bin", "notes/readme.txt", "scripts/hello.sh")
"""Relative paths of the files every kit skill has (and that a prepared copy must hold)."""

POLICY_EXCLUDED_PATHS = (
    ".git/config",
    ".git/objects/ab/cdef",
    ".env",
    ".env.local",
    "credentials.json",
    "nested/Credentials.yaml",
    "linked-secret.txt",
    "linked-dir",
)
"""Paths the upload policy must keep out of every prepared copy."""


def _description(name: str) -> str:
    return f"Conformance-kit skill {name}."


def append_line_command(file_path: str, line: str = "run") -> str:
    """A POSIX shell command appending ``line`` to the runtime file ``file_path``."""
    return f"printf '%s\\n' {shlex.quote(line)} >> {shlex.quote(file_path)}"


class SkillFactory:
    """Builds skill directories on the host; each call makes a new directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._count = 0

    def _directory(self, name: str) -> Path:
        self._count += 1
        directory = self.root / f"{self._count:03d}" / name
        directory.mkdir(parents=True)
        return directory

    def create(
        self,
        name: str,
        *,
        extra_files: Mapping[str, bytes | str] | None = None,
        body: str = DEFAULT_BODY,
    ) -> Skill:
        """A skill named ``name`` with the :data:`STANDARD_FILES` plus ``extra_files``."""
        directory = self._directory(name)
        skill_md = f"---\nname: {name}\ndescription: {_description(name)}\n---\n\n{body}\n"
        files: dict[str, bytes | str] = {
            "SKILL.md": skill_md,
            "assets/all-bytes.bin": ALL_BYTES,
            "notes/readme.txt": "plain text, not executable\n",
        }
        files.update(extra_files or {})
        for relative, content in files.items():
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                target.write_text(content, encoding="utf-8")
            else:
                target.write_bytes(content)
        script = directory / "scripts" / "hello.sh"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(HELLO_SCRIPT, encoding="utf-8")
        script.chmod(0o755)
        return self.skill_at(directory, name, body=body)

    def create_with_policy_files(self, name: str) -> Skill:
        """A skill that also holds everything in :data:`POLICY_EXCLUDED_PATHS`."""
        skill = self.create(
            name,
            extra_files={
                ".git/config": "[core]\n",
                ".git/objects/ab/cdef": b"\x00git",
                ".env": "KIT_SECRET=from-dotenv\n",
                ".env.local": "KIT_SECRET=from-dotenv-local\n",
                "credentials.json": '{"token": "kit-secret"}\n',
                "nested/Credentials.yaml": "token: kit-secret\n",
                "nested/kept.txt": "kept\n",
            },
        )
        directory = Path(skill.base_path)
        outside = directory.parent / "outside"
        (outside / "dir").mkdir(parents=True)
        (outside / "secret.txt").write_text("outside secret\n", encoding="utf-8")
        (outside / "dir" / "inner.txt").write_text("outside dir\n", encoding="utf-8")
        (directory / "linked-secret.txt").symlink_to(outside / "secret.txt")
        (directory / "linked-dir").symlink_to(outside / "dir", target_is_directory=True)
        return skill

    @staticmethod
    def skill_at(directory: Path, name: str, *, body: str = DEFAULT_BODY) -> Skill:
        """A :class:`Skill` for an existing directory (metadata kept minimal)."""
        description = _description(name)
        return Skill(
            name=name,
            description=description,
            base_path=str(directory),
            frontmatter={"name": name, "description": description},
            body=body,
        )

    @staticmethod
    def counting_bootstrap(log_path: str, *, timeout_seconds: float = 60.0) -> BootstrapCommand:
        """Appends a line to ``log_path`` and writes ``bootstrap-marker.txt`` in the skill root."""
        return BootstrapCommand(
            command=f"{append_line_command(log_path)} && printf 'ready\\n' > bootstrap-marker.txt",
            timeout_seconds=timeout_seconds,
        )

    @staticmethod
    def fail_once_bootstrap(flag_path: str, log_path: str) -> BootstrapCommand:
        """Fails with exit code 7 and known output the first time, succeeds afterwards."""
        flag = shlex.quote(flag_path)
        return BootstrapCommand(
            command=(
                f"{append_line_command(log_path)}; "
                f"if [ -f {flag} ]; then printf 'recovered\\n' > bootstrap-marker.txt; "
                f"else : > {flag}; printf 'kit-boom-stdout\\n'; printf 'kit-boom-stderr\\n' >&2; "
                "exit 7; fi"
            ),
            timeout_seconds=60.0,
        )
