#!/bin/sh
# Bootstrap of the text-stats skill: compile assets/stopwords.txt into build/stopwords.txt
# (lowercase, one word per line, sorted, no duplicates). Run once in the skill directory;
# scripts/run.sh refuses to run without its output. Safe to run again.
set -eu
root=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
source_list="$root/assets/stopwords.txt"
target="$root/build/stopwords.txt"
if [ ! -f "$source_list" ]; then
    echo "text-stats setup: missing $source_list" >&2
    exit 1
fi
mkdir -p "$root/build"
partial="$target.partial.$$"
trap 'rm -f "$partial"' EXIT
export LC_ALL=C
sed -e 's/#.*$//' "$source_list" \
    | tr 'A-Z' 'a-z' \
    | tr -s ' \t\r' '\n\n\n' \
    | awk 'NF' \
    | sort -u > "$partial"
mv "$partial" "$target"
count=$(wc -l < "$target" | tr -d ' ')
echo "text-stats setup: compiled $count stopwords into build/stopwords.txt"
