# Sourced by the scripts and tests that compile CUDA outside stitch (tests/lib.sh,
# scripts/gpu-variants --check), so that they use the nvcc stitch itself would compile with.
# find_nvcc: into NVCC, $STITCH_NVCC, else the one on PATH, else /usr/local/cuda/bin's
# (src/verify/compile_job.c's order); empty where none runs.
find_nvcc() {
	NVCC=${STITCH_NVCC:-$(command -v nvcc || true)}
	[ -n "$NVCC" ] || NVCC=/usr/local/cuda/bin/nvcc
	[ -x "$NVCC" ] || NVCC=
	return 0
}
