"""The shell scripts of the Docker runtime's file operations, and why they are race-free.

A command of the conversation runs in the same container as the file operations, as the same
user, and may swap any directory it owns for a symbolic link at any moment (docs/security.md).
So no path below the workspace is ever handed to the engine's archive API (the engine resolves
a path as root when the request arrives, whatever was checked before: the shape of Docker's
CVE-2018-15664). Instead every operation is one exec of a script below, and the script never
trusts a path it has checked:

* **Pinning.** ``walk`` enters the path one component at a time with ``cd -P`` and, after every
  step, compares the physical working directory (``$PWD``, which ``cd -P`` sets from
  ``getcwd``) with the workspace's. A working directory is a reference to the directory itself:
  once it is found inside the workspace, a later swap of any name on the way cannot move it
  (the workspace's volume is its own mount: nothing is renamed out of it). Everything after the
  walk uses names of one component relative to that directory.
* **The last component.** A read opens the name, then asks the kernel where the descriptor
  really is (``/proc/self/fd/3``) and refuses a file outside the workspace; a write creates a new
  file with ``O_EXCL`` (``set -C``: never through a link), fills it from standard input and
  renames it over the name (``mv -T``: a rename replaces a link, never follows it); a delete
  unlinks (``rm -f``, ``rmdir``) and descends into directories only by the same pinned walk.
* **Permissions.** The scripts run as the runtime's user, so the kernel applies that user's
  permissions (the containers drop every capability: root there could not do more). An archive
  the engine extracts (a skill, a batch of files) goes into a staging directory in a sticky
  directory below the volume's mount point; it is root's, mode ``0700``, while the engine
  writes it (no command can reach into it or rename it), is handed to the user by a second
  ``PUT`` afterwards, and :data:`PLACE_SCRIPT` moves it into place with the same pinned walk.

Every script takes ``$1`` (the workspace, empty for none) and ``$2`` (the path), both as
``printf %b`` text (:func:`~skillruntime.docker.files.shell_argument`), and reports its exit
status as a last ``srt-rc=N`` line on standard error, so no exec inspection is needed. The
statuses are in :class:`Status`. Without a workspace only the user's permissions bound the
operations (no containment).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "DATA_MARK",
    "DELETE_SCRIPT",
    "LIST_SCRIPT",
    "MKDIR_SCRIPT",
    "PLACE_SCRIPT",
    "READ_SCRIPT",
    "STAGE_CHECK_SCRIPT",
    "STAT_SCRIPT",
    "TREE_SCRIPT",
    "UNTAR_SCRIPT",
    "WRITE_SCRIPT",
    "Status",
]


class Status(IntEnum):
    """Exit statuses of the file scripts (anything else: the tool's message on stderr)."""

    OK = 0
    MISSING = 2
    NOT_DIRECTORY = 3
    FAILED = 4
    DENIED = 5
    ESCAPE = 6
    IS_DIRECTORY = 7
    NOT_REGULAR = 8
    LINK_LOOP = 9
    CHANGED = 10
    TOOL_ERROR = 11
    UNSAFE_ROOT = 12
    NO_TOOL = 127


DATA_MARK = b"srt-data\n"
"""What a read prints once the file is open and checked, before its content."""

_PRELUDE = r"""
export LC_ALL=C
trap 'printf "\nsrt-rc=%d\n" "$?" >&2' EXIT
Br=/
B=$(printf '%b.' "$1"); B=${B%.}; p=$(printf '%b.' "$2"); p=${p%.}
inside() {
  [ "$Br" = / ] && return 0
  case "$PWD/" in "$Br"/*) return 0;; esac
  return 1
}
start() {
  if [ -n "$B" ]; then
    cd -P -- "$B" 2>/dev/null || exit 2
    Br=$PWD
    case $p in "$B") rel=;; "$B"/*) rel=${p#"$B"/};; *) exit 6;; esac
  else
    cd / || exit 4
    Br=/
    rel=${p#/}
  fi
  case $rel in */*) dir=${rel%/*}; name=${rel##*/};; *) dir=; name=$rel;; esac
}
walk() {
  r=$1
  while [ -n "$r" ]; do
    c=${r%%/*}
    case $r in */*) r=${r#*/};; *) r=;; esac
    case $c in ''|.) continue;; esac
    [ "$2" = 2 ] && [ -L "$c" ] && rm -f -- "$c" 2>/dev/null
    if [ "$2" != 0 ] && [ ! -e "$c" ] && [ ! -L "$c" ]; then
      mkdir -- "$c" || [ -d "$c" ] || exit 11
    fi
    if ! cd -P -- "$c" 2>/dev/null; then
      [ -e "$c" ] || exit 2
      [ -d "$c" ] || exit 3
      exit 5
    fi
    inside || exit 6
  done
}
final() {
  n=$1; h=0
  while [ -L "$n" ]; do
    h=$((h + 1)); [ "$h" -le 8 ] || exit 9
    t=$(readlink -- "$n") || exit 2
    case $t in
      */*) d=${t%/*}; n=${t##*/}; [ -n "$d" ] || d=/;;
      *) d=.; n=$t;;
    esac
    cd -P -- "$d" 2>/dev/null || { [ -e "$d" ] || exit 2; [ -d "$d" ] || exit 3; exit 5; }
    inside || exit 6
  done
  case $n in ''|.|..)
    cd -P -- "${n:-.}" 2>/dev/null || exit 5
    inside || exit 6
    n=.;;
  esac
}
"""

STAT_SCRIPT = (
    _PRELUDE
    + r"""
start; walk "$dir" 0
final "${name:-.}"
for i in 1 2 3 4 5 6 7 8; do
  s=$(stat -c '%f %s %Y' -- "$n" 2>/dev/null) || { [ -e "$n" ] || [ -L "$n" ] || exit 2; exit 5; }
  m=${s%% *}
  [ $((0x$m & 0xF000)) = $((0xA000)) ] || { printf '%s\n' "$s"; exit 0; }
  final "$n"
done
exit 9
"""
)
"""``stat`` of the path, final links followed inside the workspace: one line
``<mode hex> <size> <mtime>``."""

READ_SCRIPT = (
    _PRELUDE
    + r"""
start; walk "$dir" 0
final "${name:-.}"
[ -e "$n" ] || exit 2
[ -d "$n" ] && exit 7
[ -f "$n" ] || exit 8
command exec 3< "$n" || exit 11
[ -f /proc/self/fd/3 ] || exit 8
if [ "$Br" != / ]; then
  f=$(readlink /proc/self/fd/3) || exit 4
  case $f in "$Br"/*) ;; *) exit 6;; esac
fi
printf 'srt-data\n'
cat <&3 || exit 11
"""
)
"""The file's content after :data:`DATA_MARK` (nothing is printed before the file is open and
checked)."""

WRITE_SCRIPT = (
    _PRELUDE
    + r"""
start; walk "$dir" 1
n=$name
[ -n "$n" ] || exit 7
[ -d "$n" ] && [ ! -L "$n" ] && exit 7
t=".skillruntime-write-$3"
umask 022
set -C
command exec 3> "$t" || exit 11
set +C
head -c "$5" >&3
if [ "$(stat -L -c %s /proc/self/fd/3)" != "$5" ]; then rm -f -- "$t"; exit 11; fi
if [ "$4" = x ]; then chmod 755 /proc/self/fd/3 || { rm -f -- "$t"; exit 11; }; fi
exec 3>&-
if ! mv -fT -- "$t" "$n"; then
  rm -f -- "$t"
  [ -d "$n" ] && exit 7
  exit 11
fi
"""
)
"""``$5`` bytes of standard input into the path (``$3``: a fresh token, ``$4``: ``x`` for an
executable),
missing parents created; a directory at the path is refused."""

_RMTREE = r"""
rmtree() {
  local up e
  if [ -d "$1" ] && [ ! -L "$1" ]; then
    up=$PWD
    cd -P -- "$1" 2>/dev/null || exit 5
    inside || exit 6
    rm -f -- * .[!.]* ..?* 2>/dev/null
    for e in * .[!.]* ..?*; do
      if [ -d "$e" ] && [ ! -L "$e" ]; then rmtree "$e"
      elif [ -e "$e" ] || [ -L "$e" ]; then rm -f -- "$e" || exit 11
      fi
    done
    cd -P .. || exit 11
    [ "$PWD" = "$up" ] || exit 10
    rmdir -- "$1" || exit 11
  else
    rm -f -- "$1" || exit 11
  fi
}
"""

DELETE_SCRIPT = (
    _PRELUDE
    + _RMTREE
    + r"""
start
[ -n "$name" ] || exit 5
walk "$dir" 0
[ -e "$name" ] || [ -L "$name" ] || exit 0
rmtree "$name"
"""
)
"""Remove the path (a tree without following any link); ``2`` or ``3``: nothing to remove."""

MKDIR_SCRIPT = (
    _PRELUDE
    + r"""
start; walk "$rel" 1
"""
)
"""Create the directory and its missing parents (links inside the workspace followed)."""

LIST_SCRIPT = (
    _PRELUDE
    + r"""
start; walk "$dir" 0
n=${name:-.}
[ -e "$n" ] || [ -L "$n" ] || exit 2
if [ -d "$n" ] && [ ! -L "$n" ]; then
  cd -P -- "$n" 2>/dev/null || exit 5
  inside || exit 6
  { [ -r . ] && [ -x . ]; } || exit 5
  t=$(mktemp) || exit 4
  trap 'rm -f "$t"; printf "\nsrt-rc=%d\n" "$?" >&2' EXIT
  find . -mindepth 1 -maxdepth "$3" -print0 > "$t" 2>/dev/null
  printf 'd'
  cat "$t"
  printf '\0'
  xargs -0 -r stat -c '%f %s %Y' -- < "$t" 2>/dev/null
else
  printf 'f%s\0\0' "$n"
  stat -c '%f %s %Y' -- "$n" 2>/dev/null || exit 2
fi
exit 0
"""
)
"""``d`` and the NUL-ended names (``./…``) of the entries below the directory to depth ``$3``,
one more NUL, then a ``stat`` line per name; or ``f``, the name, two NULs and the ``stat`` line
of a path that is no directory (a link is listed as itself)."""

TREE_SCRIPT = (
    _PRELUDE
    + r"""
start; walk "$rel" 0
command -v tar >/dev/null 2>&1 || exit 127
{ [ -r . ] && [ -x . ]; } || exit 5
tar -cf - . || exit 11
"""
)
"""The directory (links inside the workspace followed) as a tar stream of ``./…`` members,
read as the runtime's user (the search's one request)."""

UNTAR_SCRIPT = (
    _PRELUDE
    + _RMTREE
    + r"""
start
command -v tar >/dev/null 2>&1 || exit 127
x=$(printf '%b.' "$3"); x=${x%.}
if [ -n "$x" ]; then walk "$rel" 2; else walk "$rel" 1; fi
case $x in */*|.|..) exit 6;; esac
if [ -n "$x" ] && { [ -e "$x" ] || [ -L "$x" ]; }; then rmtree "$x"; fi
umask 022
head -c "$4" | tar -xf - || exit 11
"""
)
"""A tar stream of ``$4`` bytes from standard input extracted as the runtime's user into the
directory (made when missing); ``$3``, when not empty, names an entry of the directory removed
first (and then a link on the way to the directory is replaced by a directory where the user
may remove it). Used without a workspace, where the user's permissions are the only bound."""

STAGE_CHECK_SCRIPT = r"""
export LC_ALL=C
trap 'printf "\nsrt-rc=%d\n" "$?" >&2' EXIT
d=$(printf '%b.' "$1"); d=${d%.}
cd -P -- "$d" 2>/dev/null || exit 2
d=$PWD
while :; do
  s=$(stat -c '%u %a' -- "$d") || exit 4
  u=${s%% *}; m=0${s#* }
  [ "$u" = 0 ] || { printf 'owned by uid %s: %s\n' "$u" "$d" >&2; exit 12; }
  if [ $((m & 022)) != 0 ] && [ $((m & 01000)) = 0 ]; then
    printf 'writable by others: %s\n' "$d" >&2; exit 12
  fi
  [ "$d" != / ] || break
  d=${d%/*}; [ -n "$d" ] || d=/
done
"""
"""Run once per container before the first staged archive: refuses (``12``) when the volume's
mount point ``$1`` or a directory above it is not root's or is writable by others (not
sticky): then a command could rename the staging directory while the engine extracts into it.
"""

PLACE_SCRIPT = (
    _PRELUDE
    + _RMTREE
    + r"""
S=$(printf '%b.' "$3"); S=${S%.}
shift 3
cd -P -- "$S" 2>/dev/null || exit 4
Sr=$PWD
start
(
while [ "$#" -ge 3 ]; do
  kind=$1; staged=$(printf '%b.' "$2"); staged=${staged%.}; p=$(printf '%b.' "$3"); p=${p%.}
  shift 3
  cd -- "$Br" || exit 4
  case $p in "$B"/?*) rel=${p#"$B"/};; *) exit 6;; esac
  case $rel in */*) dir=${rel%/*}; name=${rel##*/};; *) dir=; name=$rel;; esac
  if [ "$kind" = T ]; then walk "$dir" 2; else walk "$dir" 1; fi
  if [ "$kind" = T ]; then
    if [ -e "$name" ] || [ -L "$name" ]; then mv -fT -- "$name" "$Sr/.old-$#" || exit 11; fi
    mv -T -- "$Sr/$staged" "$name" || exit 11
  elif [ "$kind" = G ]; then
    walk "$name" 1
    find "$Sr/$staged" -mindepth 1 -maxdepth 1 -exec sh -c 'exec mv -f -- "$@" .' sh {} + \
      || exit 11
    [ -z "$(ls -A -- "$Sr/$staged")" ] || exit 11
  else
    [ -d "$name" ] && [ ! -L "$name" ] && exit 7
    mv -fT -- "$Sr/$staged" "$name" || exit 11
  fi
done
); s=$?
cd -P -- "$Sr/.." && Br=$Sr && ( rmtree "${Sr##*/}" ) || [ "$s" != 0 ] || s=11
exit "$s"
"""
)
"""Run as the user: move what the engine extracted into the staging directory ``$3`` (root's
while the engine extracted, the user's since) into the workspace ``$1`` (``$2``: the workspace
again); then triples of kind (``T``: a tree replacing whatever is at the path, ``F``: a file,
``G``: a staged directory of files all going into the directory at the path, made when missing),
staged name and target path. A ``G`` group is one ``mv`` of all its files into the directory
reached by the pinned walk (its working directory): each file lands at ``./<name>`` by
``rename`` — a link there is replaced, never followed, and a directory there fails the move
(POSIX ``mv source... directory``) — so a thousand files cost one walk per directory and a few
processes instead of one ``mv`` each. The staging directory is removed, also when a move failed."""
