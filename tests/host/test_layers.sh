#!/usr/bin/env bash
# The layering rule of docs/architecture.md section 1 and the 120-line limit on functions, held
# by scripts/check-layers on the source tree; and the check itself shown to fail: a copy of a
# small tree with a forbidden include, and one with a long function, must each be refused.
. "$(dirname "$0")/../lib.sh"

CHECK="$STITCH_SRC/scripts/check-layers"
python3 "$CHECK" "$STITCH_SRC" >"$WORK/tree.out" 2>&1
rc=$?
cat "$WORK/tree.out"
check "the source tree passes check-layers" [ $rc -eq 0 ]

# A small tree: common/ and runner/ files that follow the rule.
T="$WORK/tree"
mkdir -p "$T/src/common" "$T/src/runner" "$T/src/verify" "$T/include/stitch"
printf '#include "stitch/error.h"\nint st_a(void);\n' >"$T/src/common/a.h"
printf '#include "common/a.h"\nint st_a(void)\n{\n\treturn 0;\n}\n' >"$T/src/common/a.c"
printf '#include "common/a.h"\n#include "stitch/timing.h"\nint main(void)\n{\n\treturn st_a();\n}\n' \
	>"$T/src/runner/r.c"
printf '#include "common/a.h"\nint st_v(void);\n' >"$T/src/verify/v.h"
printf '/* public */\n' >"$T/include/stitch/error.h"
python3 "$CHECK" "$T" >"$WORK/good.out" 2>&1
check "a small tree that follows the rule passes" [ $? -eq 0 ]

# The runner may never include verify/.
cp -r "$T" "$WORK/bad1"
printf '#include "verify/v.h"\n' >>"$WORK/bad1/src/runner/r.c"
python3 "$CHECK" "$WORK/bad1" >"$WORK/bad1.out" 2>&1
check "runner including verify/: check-layers fails" [ $? -ne 0 ]
check "the forbidden edge is named with file:line" grep -q 'src/runner/r.c:7: runner may not include verify' "$WORK/bad1.out"

# Nor common/ anything above it, even spelled with "../".
cp -r "$T" "$WORK/bad2"
printf '#include "../verify/v.h"\n' >>"$WORK/bad2/src/common/a.h"
python3 "$CHECK" "$WORK/bad2" >"$WORK/bad2.out" 2>&1
check "common including ../verify/: check-layers fails" [ $? -ne 0 ]

# A function of 121 lines.
cp -r "$T" "$WORK/bad3"
{
	printf 'int st_long(int x)\n{\n'
	for i in $(seq 121); do printf '\tx += %d;\n' "$i"; done
	printf '\treturn x;\n}\n'
} >"$WORK/bad3/src/common/long.c"
python3 "$CHECK" "$WORK/bad3" >"$WORK/bad3.out" 2>&1
check "a 122-line function: check-layers fails" [ $? -ne 0 ]
check "the long function is named with file:line and length" \
	grep -q 'src/common/long.c:1: st_long is 122 lines' "$WORK/bad3.out"
finish
