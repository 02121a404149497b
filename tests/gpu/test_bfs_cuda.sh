#!/usr/bin/env bash
# t3/bfs's expert (tests/gpu/bfs_selftest.cu) on the task's graphs at every size set and on graphs
# its generator never draws: a star from its centre and from a leaf, a path of 3000 levels, an
# isolated source, every row a hub; each search against a host BFS and the task's validator. Then
# its eval-size time on three seeds' graphs, printed, and (a second build, with the trace hook,
# which can change the kernel's registers and so is not timed) one search traced barrier by barrier.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

task_c="$STITCH_SRC/tasks/t3/bfs/task.c"
selftest bfs bfs_selftest.cu "$(gpu_arch)" "$task_c"
check "every bfs case matches the host search and the validator (exit $RC)" [ "$RC" -eq 0 ]
check "all 9 cases ran" [ "$(grep -c '^PASS ' "$WORK/bfs.log")" -eq 9 ]
check "the three seeds' graphs were timed" [ "$(grep -c '^bench: ' "$WORK/bfs.log")" -eq 3 ]

nvcc -std=c++17 -arch="$(gpu_arch)" -I"$STITCH_SRC/include" -DBFS_SELFTEST_TRACE -o "$WORK/bfs_trace" \
	"$STITCH_SRC/tests/gpu/bfs_selftest.cu" "$task_c" >"$WORK/bfs_trace.nvcc" 2>&1
check "bfs_selftest.cu builds with the trace hook" [ $? -eq 0 ]
timeout 300 "$WORK/bfs_trace" trace >"$WORK/bfs_trace.log" 2>&1
RC=$?
cat "$WORK/bfs_trace.nvcc" "$WORK/bfs_trace.log"
check "the traced search ran (exit $RC)" [ "$RC" -eq 0 ]
check "the trace stamped its barriers" grep -q '^trace: [0-9]* barriers' "$WORK/bfs_trace.log"
finish
