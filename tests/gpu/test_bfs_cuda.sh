#!/usr/bin/env bash
# t3/bfs's expert (tests/gpu/bfs_selftest.cu) on the task's graphs at every size set and on graphs
# its generator never draws: a star from its centre and from a leaf, a path of 3000 levels, an
# isolated source, every row a hub; each search against a host BFS and the task's validator. Then
# its eval-size time on three seeds' graphs and one search traced barrier by barrier, printed.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

selftest bfs bfs_selftest.cu "$(gpu_arch)" "$STITCH_SRC/tasks/t3/bfs/task.c"
check "every bfs case matches the host search and the validator (exit $RC)" [ "$RC" -eq 0 ]
check "all 9 cases ran" [ "$(grep -c '^PASS ' "$WORK/bfs.log")" -eq 9 ]
finish
