#!/bin/sh
# text-stats: line, word and unique-word counts and the most frequent words of a text file,
# stopwords excluded. Usage: run.sh FILE [TOP]  (TOP defaults to 10).
# Requires the bootstrap (scripts/setup.sh) to have built build/stopwords.txt.
# Exit codes: 0 ok, 2 bad arguments or unreadable file, 3 bootstrap missing.
set -eu
root=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
stopwords="$root/build/stopwords.txt"
if [ ! -f "$stopwords" ]; then
    echo "text-stats: the skill is not bootstrapped ($stopwords is missing);" \
        "run 'sh scripts/setup.sh' in the skill directory first" >&2
    exit 3
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: run.sh FILE [TOP]" >&2
    exit 2
fi
file=$1
top=${2:-10}
case $top in
    '' | *[!0-9]* | 0 | 0*)
        echo "text-stats: TOP must be a positive integer, got '$top'" >&2
        exit 2
        ;;
esac
if [ ! -f "$file" ] || [ ! -r "$file" ]; then
    echo "text-stats: cannot read file '$file'" >&2
    exit 2
fi
export LC_ALL=C
words=$(mktemp)
trap 'rm -f "$words"' EXIT
# One lowercase ASCII word per line; apostrophes inside words are kept ("don't").
tr 'A-Z' 'a-z' < "$file" \
    | tr -cs "a-z0-9'" '\n' \
    | sed -e "s/^'*//" -e "s/'*\$//" \
    | awk 'NF' > "$words"
echo "file: $(basename -- "$file")"
echo "lines: $(wc -l < "$file" | tr -d ' ')"
echo "words: $(wc -l < "$words" | tr -d ' ')"
echo "unique words: $(sort -u "$words" | wc -l | tr -d ' ')"
echo "top words (stopwords excluded):"
awk 'FILENAME == ARGV[1] { stop[$0] = 1; next }
     !($0 in stop) { count[$0]++ }
     END { for (w in count) print count[w], w }' "$stopwords" "$words" \
    | sort -k1,1nr -k2,2 \
    | head -n "$top" \
    | awk '{ printf "%7d  %s\n", $1, $2 }'
