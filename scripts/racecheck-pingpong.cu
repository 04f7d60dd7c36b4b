// racecheck-pingpong: does compute-sanitizer's racecheck report hazards
// across a barrier that every thread reaches when two warpgroups also take
// turns through a named barrier, as NVIDIA's fused attention step on two
// warpgroups does (FusedStep::pingPong: warpgroup 1 `bar.sync 1, 256`
// before issuing, warpgroup 0 `bar.arrive 1, 256` after; docs/Performance.md,
// "The sanitizers", 2026-12-07)? The kernel is race-free by construction:
// a key loop ending in __syncthreads, then the write-back of one value per
// row by the lanes that lead a row (FusedStep::writeBack), __syncthreads,
// and an output loop that spreads all rows over all threads.
//
//   racecheck-pingpong 0|1     (1: with the named-barrier turns)
//
// scripts/gpu-roundtrip's sanitizer step builds it with nvcc and runs it
// under racecheck both ways: hazards with 1 and none with 0 are racecheck's
// model of `bar.arrive`, not a race.
#include <cstdio>
#include <cstdlib>

__global__ void step(float *out, int iters, int pingPong) {
  __shared__ float l[128];
  const int tid = threadIdx.x, warpgroup = tid / 128;
  float acc = tid;
  for (int i = 0; i < iters; ++i) {
    if (pingPong && warpgroup == 1)
      asm volatile("bar.sync 1, 256;" ::: "memory");
    acc = acc * 1.0001f + i;
    if (pingPong && warpgroup == 0)
      asm volatile("bar.arrive 1, 256;" ::: "memory");
    __syncthreads();
  }
  // Warp w owns rows 16w .. 16w + 15; the lane leading each quad writes two.
  if ((tid & 3) == 0) {
    const int row = (tid / 32) * 16 + (tid & 31) / 4;
    l[row] = acc;
    l[row + 8] = acc;
  }
  __syncthreads();
  for (int r = tid; r < 128; r += 256)
    out[blockIdx.x * 128 + r] = l[r];
}

int main(int argc, char **argv) {
  const int pingPong = argc > 1 ? std::atoi(argv[1]) : 1;
  float *out = nullptr;
  if (cudaMalloc(&out, sizeof(float) * 128 * 64) != cudaSuccess)
    return 2;
  step<<<64, 256>>>(out, 8, pingPong);
  const cudaError_t err = cudaDeviceSynchronize();
  std::printf("racecheck-pingpong %d: %s\n", pingPong, cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : 1;
}
