#!/bin/sh
# weaken_objects.sh OBJCOPY SYMBOL_FILE OUT_DIR OBJECT...
# Copies each object to OUT_DIR/<name>.o with the listed (C++ runtime) symbols weakened.
set -eu
objcopy=$1 symbols=$2 out=$3
shift 3
for obj in "$@"; do
  name=$(basename "$obj")
  name=${name%.cc.o}
  "$objcopy" --weaken-symbols="$symbols" "$obj" "$out/$name.o"
done
