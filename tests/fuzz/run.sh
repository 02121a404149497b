#!/usr/bin/env bash
# Build the libFuzzer harnesses of tests/fuzz (with ASan and UBSan) and run each one for a
# while over a scratch copy of its seed corpus, so the corpus libFuzzer grows never lands in the
# tree. Exits 77 with a one-line reason where clang-14 or its fuzzer runtime is missing (CTest
# shows a skip), 1 on any crash, leak, timeout or out-of-memory, naming the reproducer.
#
#   tests/fuzz/run.sh [--seconds N] [--out DIR] [--jobs N] [task|expr|proto ...]
set -euo pipefail

seconds=60
out="${TMPDIR:-/tmp}/stitch-fuzz"
jobs=$(( $(nproc) < 3 ? $(nproc) : 3 ))
names=()
while (($#)); do
	case "$1" in
	--seconds) seconds="$2"; shift 2 ;;
	--out) out="$2"; shift 2 ;;
	--jobs) jobs="$2"; shift 2 ;;
	-h | --help) sed -n '2,8s/^# \{0,1\}//p' "$0"; exit 0 ;;
	task | expr | proto) names+=("$1"); shift ;;
	*) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
((${#names[@]})) || names=(task expr proto)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
cc="${CLANG:-clang-14}"

if ! command -v "$cc" >/dev/null; then
	echo "SKIP: $cc not found (install clang-14 and libclang-rt-14-dev)"
	exit 77
fi
if ! pkg-config --exists jansson; then
	echo "SKIP: jansson development files not found (pkg-config jansson)"
	exit 77
fi

mkdir -p "$out/obj" "$out/bin"
out=$(cd "$out" && pwd)
sanitize=("-fsanitize=fuzzer,address,undefined" -fno-sanitize-recover=undefined)
probe="$out/bin/probe"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
	>"$probe.c"
if ! "$cc" "${sanitize[@]}" "$probe.c" -o "$probe" 2>"$probe.log"; then
	echo "SKIP: $cc cannot link -fsanitize=fuzzer (libclang-rt-14-dev missing?): $(head -n 1 "$probe.log")"
	exit 77
fi

# shellcheck disable=SC2207 # pkg-config output is a list of flags, split on purpose
jansson_cflags=($(pkg-config --cflags jansson))
# shellcheck disable=SC2207
jansson_libs=($(pkg-config --libs jansson))
cflags=(-std=c11 -g -O1 "${sanitize[@]}" -Wall -Wextra -Werror -D_GNU_SOURCE
	"-DSTITCH_SOURCE_DIR=\"$src\"" "-DSTITCH_VERSION=\"fuzz\"" -I "$src/include" -I "$src/src"
	"${jansson_cflags[@]}")
libs=("${jansson_libs[@]}" -lcrypto -lpthread -lm)

# The stitch sources each harness links, instrumented like the harness so that coverage guides
# the search through them too.
sources_of() {
	case "$1" in
	task | expr) echo "$src"/src/task/*.c "$src"/src/common/*.c ;;
	proto) echo "$src"/src/common/*.c "$src/src/verify/reply.c" "$src/src/verify/stats.c" ;;
	esac
}

build() {
	local name="$1" objs=() f o
	for f in $(sources_of "$name"); do
		o="$out/obj/$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
		if [[ ! -e "$o" || "$f" -nt "$o" ]]; then
			"$cc" "${cflags[@]}" -c "$f" -o "$o"
		fi
		objs+=("$o")
	done
	"$cc" "${cflags[@]}" "$here/fuzz_$name.c" "${objs[@]}" "${libs[@]}" -o "$out/bin/fuzz_$name"
}

# Run one harness; leaves its log, its artifacts (reproducers) and a one-line summary in
# $out/run/<name>.
fuzz() {
	local name="$1" work="$out/run/$1" rc=0
	rm -rf "$work"
	mkdir -p "$work/corpus" "$work/artifacts"
	cp "$here/corpus/$name"/* "$work/corpus/"
	local seeds
	seeds=$(find "$work/corpus" -type f | wc -l)
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$out/bin/fuzz_$name" \
		-max_total_time="$seconds" -detect_leaks=1 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" \
		>"$work/log" 2>&1 || rc=$?
	local execs cov ft corpus
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
	read -r cov ft corpus < <(sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/\1 \2 \3/p' \
		"$work/log" | tail -n 1) || true
	local crashes leaks hangs ooms
	crashes=$(find "$work/artifacts" -name 'crash-*' | wc -l)
	leaks=$(find "$work/artifacts" -name 'leak-*' | wc -l)
	hangs=$(find "$work/artifacts" -name 'timeout-*' | wc -l)
	ooms=$(find "$work/artifacts" -name 'oom-*' | wc -l)
	printf '| fuzz_%s | %s s | %s | %s | %s | %s -> %s | %s | %s | %s | %s |\n' "$name" "$seconds" \
		"${execs:-?}" "${cov:-?}" "${ft:-?}" "$seeds" "${corpus:-?}" "$crashes" "$leaks" "$hangs" \
		"$ooms" >"$work/summary"
	echo "$rc" >"$work/rc"
}

for name in "${names[@]}"; do
	echo "building fuzz_$name"
	build "$name"
done

echo "fuzzing ${names[*]} for $seconds s each, $jobs at a time (output in $out/run)"
running=0
for name in "${names[@]}"; do
	fuzz "$name" &
	running=$((running + 1))
	if ((running >= jobs)); then
		wait -n || true
		running=$((running - 1))
	fi
done
wait

echo "| harness | time | executions | cov | ft | corpus (seeds -> end) | crashes | leaks | hangs | ooms |"
echo "|---|---|---|---|---|---|---|---|---|---|"
failed=0
for name in "${names[@]}"; do
	work="$out/run/$name"
	cat "$work/summary"
	rc=$(cat "$work/rc")
	reproducers=$(find "$work/artifacts" -type f)
	if [[ "$rc" != 0 || -n "$reproducers" ]]; then
		failed=1
		echo "FAIL fuzz_$name (exit $rc); last lines of $work/log:" >&2
		tail -n 30 "$work/log" >&2
		for r in $reproducers; do
			echo "reproducer: $r (replay: $out/bin/fuzz_$name $r)" >&2
		done
	fi
done
exit "$failed"
