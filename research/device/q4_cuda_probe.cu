// A CUDA replica of webtune's WGSL q4 decode kernels, for profiling with
// Nsight Compute on the GPU machine (Vulkan kernels cannot be profiled
// there). Same arithmetic as the WGSL generator: nibbles unpacked in place
// into the mantissa of 2^23, four position sums per word, f32 throughout.
// Build and run: nvcc -O3 -arch=sm_90 q4_cuda_probe.cu -o probe && ./probe
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ float nib(uint32_t src, uint32_t mask, float bias) {
  return __uint_as_float((src & mask) | 0x4B000000u) - bias;
}
__device__ __forceinline__ float word_dot(uint32_t l, float4 a0, float4 a1) {
  uint32_t h = l >> 16;
  float p0 = fmaf(nib(h, 0xFu, 8388616.f), a1.x, nib(l, 0xFu, 8388616.f) * a0.x);
  float p1 = fmaf(nib(h, 0xF0u, 8388736.f), a1.y, nib(l, 0xF0u, 8388736.f) * a0.y);
  float p2 = fmaf(nib(h, 0xF00u, 8390656.f), a1.z, nib(l, 0xF00u, 8390656.f) * a0.z);
  float p3 = fmaf(nib(h, 0xF000u, 8421376.f), a1.w, nib(l, 0xF000u, 8421376.f) * a0.w);
  return fmaf(fmaf(fmaf(p3, 0.0625f, p2), 0.0625f, p1), 0.0625f, p0);
}

// The generator's pattern: 32 lanes split K, lane l on words l, l+32, ...;
// Y outputs per thread; NOALU: the words are summed, no unpacking.
template <int Y, int KW, bool NOALU>
__global__ void gen(const float4* __restrict__ a, const uint32_t* __restrict__ w, const float* __restrict__ s, float* __restrict__ c) {
  int lane = threadIdx.x & 31;
  int n0 = (blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * Y;
  float acc[Y];
#pragma unroll
  for (int r = 0; r < Y; r++) acc[r] = 0.f;
#pragma unroll
  for (int i = 0; i < KW / 32; i++) {
    int wi = i * 32 + lane;
    float4 a0 = a[2 * wi], a1 = a[2 * wi + 1];
#pragma unroll
    for (int r = 0; r < Y; r++) {
      uint32_t l = w[(n0 + r) * KW + wi];
      float sc = s[(n0 + r) * (KW / 4) + (wi >> 2)];
      float d = NOALU ? __uint_as_float(l & 0x3FFFFFFFu) * (a0.x + a1.w) : word_dot(l, a0, a1);
      acc[r] = fmaf(d, sc, acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < Y; r++)
    for (int m = 16; m >= 1; m /= 2) acc[r] += __shfl_xor_sync(~0u, acc[r], m);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < Y; r++) c[n0 + r] = acc[r];
}

// Rows loop: thread t keeps A's block t (32 values) in registers and walks R
// rows; KB/32 subgroups per workgroup, reduced in shared memory.
template <int R, int KB, bool NOALU>
__global__ void rows(const float4* __restrict__ a, const uint4* __restrict__ w, const float* __restrict__ s, float* __restrict__ c) {
  __shared__ float red[KB / 32][R];
  int t = threadIdx.x, lane = t & 31;
  int n0 = blockIdx.x * R;
  float4 av[8];
#pragma unroll
  for (int i = 0; i < 8; i++) av[i] = a[t * 8 + i];
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    uint4 q = w[(n0 + r) * KB + t];
    float sc = s[(n0 + r) * KB + t];
    float d;
    if (NOALU) d = __uint_as_float((q.x ^ q.y ^ q.z ^ q.w) & 0x3FFFFFFFu) * av[r & 7].x;
    else d = word_dot(q.x, av[0], av[1]) + word_dot(q.y, av[2], av[3]) + word_dot(q.z, av[4], av[5]) + word_dot(q.w, av[6], av[7]);
    acc[r] = d * sc;
  }
#pragma unroll
  for (int r = 0; r < R; r++)
    for (int m = 16; m >= 1; m /= 2) acc[r] += __shfl_xor_sync(~0u, acc[r], m);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < R; r++) red[t / 32][r] = acc[r];
  __syncthreads();
  if (t < R) {
    float v = 0.f;
    for (int i = 0; i < KB / 32; i++) v += red[i][t];
    c[n0 + t] = v;
  }
}

__global__ void readonly(const uint4* __restrict__ p, size_t n, float* out) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = p[i];
    acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345678u) out[0] = 1.f;
}

template <typename F>
float time_us(F launch, int reps = 2000) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int i = 0; i < 200; i++) launch();
  float best = 1e30f;
  for (int round = 0; round < 5; round++) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < reps; i++) launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
    best = fminf(best, ms * 1000.f / reps);
  }
  CK(cudaGetLastError());
  return best;
}

int main() {
  const int K = 4096, N = 4096, KW = K / 8, KB = K / 32;
  size_t wb = (size_t)N * KW * 4, sb = (size_t)N * KB * 4;
  std::vector<uint32_t> hw(N * KW); std::vector<float> hs(N * KB), ha(K);
  uint64_t x = 88172645463325252ull;
  auto rnd = [&]() { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; };
  for (auto& v : hw) v = (uint32_t)rnd();
  for (auto& v : hs) v = 0.01f + (rnd() % 1000) * 1e-4f;
  for (auto& v : ha) v = ((int)(rnd() % 2001) - 1000) * 1e-3f + 0.0005f;
  float *da, *ds, *dc; uint32_t* dw;
  CK(cudaMalloc(&da, K * 4)); CK(cudaMalloc(&dw, wb)); CK(cudaMalloc(&ds, sb)); CK(cudaMalloc(&dc, N * 4));
  CK(cudaMemcpy(da, ha.data(), K * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, hw.data(), wb, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ds, hs.data(), sb, cudaMemcpyHostToDevice));
  // f64 reference
  std::vector<double> ref(N);
  for (int n = 0; n < N; n++) {
    double acc = 0;
    for (int k = 0; k < K; k++) acc += (double)ha[k] * (double)((int)((hw[n * KW + k / 8] >> (4 * (k % 8))) & 15) - 8) * hs[n * KB + k / 32];
    ref[n] = acc;
  }
  auto check = [&](const char* name) {
    std::vector<float> out(N);
    CK(cudaMemcpy(out.data(), dc, N * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int n = 0; n < N; n++) worst = fmax(worst, fabs(out[n] - ref[n]) / (1e-3 + fabs(ref[n])));
    printf("{\"check\": \"%s\", \"max_rel\": %.3g}\n", name, worst);
  };
  double bytes = (double)(wb + sb);
  auto report = [&](const char* name, float us) { printf("{\"kernel\": \"%s\", \"us\": %.3f, \"weight_gbps\": %.1f}\n", name, us, bytes / (us * 1e3)); };
  const float4* a4 = (const float4*)da;
  auto g2 = [&] { gen<2, KW, false><<<N / 2, 32>>>(a4, dw, ds, dc); };
  auto g2x4 = [&] { gen<2, KW, false><<<N / 8, 128>>>(a4, dw, ds, dc); };
  auto g2n = [&] { gen<2, KW, true><<<N / 2, 32>>>(a4, dw, ds, dc); };
  auto r16 = [&] { rows<16, KB, false><<<N / 16, KB>>>(a4, (const uint4*)dw, ds, dc); };
  auto r8 = [&] { rows<8, KB, false><<<N / 8, KB>>>(a4, (const uint4*)dw, ds, dc); };
  auto r16n = [&] { rows<16, KB, true><<<N / 16, KB>>>(a4, (const uint4*)dw, ds, dc); };
  g2(); CK(cudaDeviceSynchronize()); check("gen y0=2");
  g2x4(); CK(cudaDeviceSynchronize()); check("gen y0=2 4 warps");
  r16(); CK(cudaDeviceSynchronize()); check("rows 16");
  r8(); CK(cudaDeviceSynchronize()); check("rows 8");
  if (getenv("PROBE_ONCE")) { g2(); g2n(); r16(); r16n(); CK(cudaDeviceSynchronize()); return 0; }
  report("gen y0=2 1 warp", time_us(g2));
  report("gen y0=2 4 warps", time_us(g2x4));
  report("gen y0=2 no unpacking", time_us(g2n));
  report("rows 16", time_us(r16));
  report("rows 8", time_us(r8));
  report("rows 16 no unpacking", time_us(r16n));
  size_t n4 = (wb + sb) / 16;
  uint4* big; CK(cudaMalloc(&big, wb + sb));
  report("read-only same bytes", time_us([&] { readonly<<<132 * 16, 256>>>(big, n4, dc); }));
  report("empty launch", time_us([&] { readonly<<<132, 32>>>(big, 0, dc); }));
  float* cp; CK(cudaMalloc(&cp, wb + sb));
  report("memcpy d2d same bytes (read+write)", time_us([&] { cudaMemcpyAsync(cp, big, wb + sb, cudaMemcpyDeviceToDevice); }));
  return 0;
}
