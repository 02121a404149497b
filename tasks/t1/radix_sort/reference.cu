/* Reference for t1/radix_sort: stable argsort of int32 keys by the textbook one-bit split, least
 * significant bit first. Each of the 32 passes moves every (key, index) pair to the front group
 * (bit clear) or the back group (bit set), keeping the order inside each group, which is what
 * makes the whole sort stable. A pass is three plain kernels: count the front keys of every tile,
 * scan those counts on one block, scatter each pair to its place. Keys are compared with their
 * sign bit flipped, so negative keys sort first. Obviously correct and slow: 32 passes where a
 * byte-wise radix sort needs 4. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "radix_sort reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define TILE 512        /* keys per block, one per thread */
#define SCAN_THREADS 1024

typedef struct {
    int n, tiles;
    int *tmp_keys, *tmp_perm; /* [n] each: the other half of the ping-pong */
    int *tile_count;          /* [tiles]: front keys per tile, then their exclusive prefix */
    int *total_front;         /* [1] */
} sort_ctx;

// ----------------------------------------------------------------------------
// kernels

/* A key goes to the front group when bit `bit` of its sign-flipped value is clear. */
__device__ __forceinline__ int goes_front(int key, int bit) {
    return ((((unsigned)key ^ 0x80000000u) >> bit) & 1u) == 0;
}

__global__ void count_kernel(const int *keys, int n, int bit, int *tile_count) {
    const int i = blockIdx.x * TILE + threadIdx.x;
    const int front = i < n && goes_front(keys[i], bit);
    const int count = __syncthreads_count(front);
    if (threadIdx.x == 0) tile_count[blockIdx.x] = count;
}

/* One block turns the per-tile counts into exclusive prefixes in place: each thread sums a
 * contiguous run of tiles, the run sums are scanned in shared memory, then each thread writes
 * its run's prefixes. */
__global__ void scan_kernel(int *tile_count, int tiles, int *total_front) {
    __shared__ int part[SCAN_THREADS];
    const int t = threadIdx.x;
    const int per = (tiles + SCAN_THREADS - 1) / SCAN_THREADS;
    const int lo = min(t * per, tiles), hi = min(lo + per, tiles);
    int sum = 0;
    for (int i = lo; i < hi; i++) sum += tile_count[i];
    part[t] = sum;
    __syncthreads();
    /* Hillis-Steele inclusive scan; read, barrier, write keeps it race-free */
    for (int off = 1; off < SCAN_THREADS; off *= 2) {
        const int add = t >= off ? part[t - off] : 0;
        __syncthreads();
        part[t] += add;
        __syncthreads();
    }
    int run = part[t] - sum;
    for (int i = lo; i < hi; i++) {
        const int c = tile_count[i];
        tile_count[i] = run;
        run += c;
    }
    if (t == SCAN_THREADS - 1) *total_front = part[t];
}

/* Front keys of tile b go to tile_front[b] + (front keys before them in the tile); back keys to
 * total_front + (back keys in earlier tiles) + (back keys before them in the tile). Earlier tiles
 * are full, so they hold b*TILE - tile_front[b] back keys. perm_in == NULL means the identity. */
__global__ void scatter_kernel(const int *keys_in, const int *perm_in, int *keys_out,
                               int *perm_out, int n, int bit, const int *tile_front,
                               const int *total_front) {
    __shared__ int scan[TILE];
    const int t = threadIdx.x, i = blockIdx.x * TILE + t;
    const bool valid = i < n;
    const int key = valid ? keys_in[i] : 0;
    const int front = valid && goes_front(key, bit);
    scan[t] = front;
    __syncthreads();
    for (int off = 1; off < TILE; off *= 2) {
        const int add = t >= off ? scan[t - off] : 0;
        __syncthreads();
        scan[t] += add;
        __syncthreads();
    }
    if (!valid) return;
    const int front_before = scan[t] - front; /* exclusive */
    const int base = tile_front[blockIdx.x];
    const int dst = front ? base + front_before
                          : *total_front + (blockIdx.x * TILE - base) + (t - front_before);
    keys_out[dst] = key;
    perm_out[dst] = perm_in ? perm_in[i] : i;
}

// ----------------------------------------------------------------------------
// ABI

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "radix_sort reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t len) {
    int ok = t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok) fprintf(stderr, "radix_sort reference: %s: expected i32 of shape [%lld]\n", what, (long long)len);
    return !ok;
}

extern "C" void st_free(void *p) {
    sort_ctx *c = (sort_ctx *)p;
    if (!c) return;
    cudaFree(c->tmp_keys);
    cudaFree(c->tmp_perm);
    cudaFree(c->tile_count);
    cudaFree(c->total_front);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n;
    if (cfg_get(cfg, "n", &n)) return 1;
    if (n_params != 0 || n < 1 || n > INT32_MAX) {
        fprintf(stderr, "radix_sort reference: bad n %lld or %d params\n", (long long)n, n_params);
        return 1;
    }
    sort_ctx *c = (sort_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->n = (int)n;
    c->tiles = (int)((n + TILE - 1) / TILE);
    cudaError_t e = cudaMalloc(&c->tmp_keys, sizeof(int) * (size_t)n);
    if (e == cudaSuccess) e = cudaMalloc(&c->tmp_perm, sizeof(int) * (size_t)n);
    if (e == cudaSuccess) e = cudaMalloc(&c->tile_count, sizeof(int) * (size_t)c->tiles);
    if (e == cudaSuccess) e = cudaMalloc(&c->total_front, sizeof(int));
    if (e != cudaSuccess) {
        fprintf(stderr, "radix_sort reference: cudaMalloc: %s\n", cudaGetErrorString(e));
        st_free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const sort_ctx *c = (const sort_ctx *)p;
    if (!c || n_in != 1 || n_out != 2) return 1;
    if (check_vec(&in[0], "keys", c->n) || check_vec(&out[0], "sorted", c->n) ||
        check_vec(&out[1], "perm", c->n))
        return 1;
    const int *keys = (const int *)in[0].data;
    int *sorted = (int *)out[0].data, *perm = (int *)out[1].data;

    /* Pass b writes the outputs when b is odd, the temporaries when even; 32 passes end in the
     * outputs. Pass 0 reads the input keys and the identity permutation. */
    for (int bit = 0; bit < 32; bit++) {
        const int *src_k = bit == 0 ? keys : (bit % 2 ? c->tmp_keys : sorted);
        const int *src_p = bit == 0 ? NULL : (bit % 2 ? c->tmp_perm : perm);
        int *dst_k = bit % 2 ? sorted : c->tmp_keys;
        int *dst_p = bit % 2 ? perm : c->tmp_perm;
        count_kernel<<<c->tiles, TILE, 0, stream>>>(src_k, c->n, bit, c->tile_count);
        CUDA_CHECK(cudaGetLastError());
        scan_kernel<<<1, SCAN_THREADS, 0, stream>>>(c->tile_count, c->tiles, c->total_front);
        CUDA_CHECK(cudaGetLastError());
        scatter_kernel<<<c->tiles, TILE, 0, stream>>>(src_k, src_p, dst_k, dst_p, c->n, bit,
                                                      c->tile_count, c->total_front);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}
