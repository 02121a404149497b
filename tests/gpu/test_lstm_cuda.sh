#!/usr/bin/env bash
# t2/lstm's expert on H = 512 shapes its size sets leave out, where the cluster path chooses its
# rows a cluster by how many clusters fit the GPU at once: B = 1, 8 and 40 take 8 rows a cluster
# (1 to 5 clusters), B = 100 takes 16 where 13 clusters of 8 rows do not fit (7 clusters of 16
# blocks fit an H100 or H200), T from 3 to 20. A copy of the task with those hidden sets, the
# expert verified as any solution is (every set, 3 seeds each); off sm_90 the same sets run the
# other paths.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

expert_on_sets t2/lstm '[{"T": 20, "B": 40, "I": 64, "H": 512}, {"T": 5, "B": 8, "I": 16, "H": 512},
	{"T": 7, "B": 100, "I": 32, "H": 512}, {"T": 3, "B": 1, "I": 8, "H": 512}]'
finish
