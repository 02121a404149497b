set -e
NV="nvcc -std=c++17 -O3 -arch=sm_90a -Xcompiler -fPIC -shared -Iinclude"
B=/tmp/b; mkdir -p $B
for t in softmax gemm_bf16; do for f in reference expert; do $NV -o $B/${t}_$f.so tasks/t1/$t/$f.cu -lcublasLt -lcublas; done; done
nvcc -std=c++17 -O2 -arch=sm_90a -Iinclude -o $B/drv tasks/t1/softmax/_tmp_gpu_test/gpu_drv.cu -ldl
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
$B/drv softmax $B/softmax_reference.so $B/softmax_expert.so || true
$B/drv gemm $B/gemm_bf16_reference.so $B/gemm_bf16_expert.so || true
