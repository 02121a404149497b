#!/usr/bin/env bash
# t1/conv2d's expert on shapes its size sets leave out, chosen for the paths st_init and st_run
# pick between: W a multiple of 8 (56, 16, 112, 8; K past one block of 64 at K = 70), odd W (1,
# 57: a pair of outputs split across padded rows), a wide row (W = 255) whose window needs more
# shared memory, tiny and single-channel shapes. A copy of the task with those hidden sets, the
# expert verified as any solution is (every set, 3 seeds each).
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

expert_on_sets t1/conv2d '[{"N": 3, "C": 64, "H": 56, "W": 56, "K": 64}, {"N": 2, "C": 20, "H": 14, "W": 16, "K": 70},
	{"N": 4, "C": 16, "H": 13, "W": 1, "K": 8}, {"N": 2, "C": 48, "H": 112, "W": 112, "K": 32},
	{"N": 1, "C": 64, "H": 7, "W": 255, "K": 64}, {"N": 2, "C": 1, "H": 5, "W": 6, "K": 1},
	{"N": 3, "C": 33, "H": 30, "W": 57, "K": 64}, {"N": 3, "C": 21, "H": 9, "W": 8, "K": 64}]'
finish
