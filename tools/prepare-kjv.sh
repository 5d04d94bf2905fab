#!/usr/bin/env bash
# The King James Bible as plain text (public domain; Debian's bible-kjv-text, printed by its
# `bible` program), for examples/llama2-c-training:
#   tools/prepare-kjv.sh OUT.txt
# One line per verse ("In the beginning God created ..."), chapters separated by a blank line;
# the book / chapter headings and verse numbers are dropped.
set -euo pipefail
out=${1:?usage: tools/prepare-kjv.sh OUT.txt}
command -v bible >/dev/null || { echo "prepare-kjv: 'bible' not found (apt-get install bible-kjv)" >&2; exit 1; }
# `bible` prints each chapter as a heading line ("Genesis 1", flush left), then one line per verse
# indented by its number
bible -l100000 "Gen1:1-Rev22:21" |
  awk '/^$/ {next} /^[^ ]/ {if (n) print ""; next} {sub(/^ +[0-9]+ /, ""); print; n++}' > "$out"
echo "prepare-kjv: $(wc -c < "$out") bytes, $(wc -l < "$out") lines in $out" >&2
