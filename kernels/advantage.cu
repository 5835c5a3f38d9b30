// P3O advantage: one thread per decision (t, n). The maths is docs/algorithm.md, "The advantage".
//
//   target   the reward j steps after decision t, for j = 0 .. H - 1: rewards[t + j] inside the rollout;
//            after its episode's terminal 0 (the episode pays nothing after its end, so ending it early
//            costs the advantage what it forgoes); past the rollout's end, for an episode still running,
//            the bootstrap prediction tail_mu[n, t + j - T]
//   beyond K (offsets j >= K, where t's episode still runs at step t + K and t + K < T) the target is the
//            critic's own prediction of that reward made K steps later, mu[t + K, n, j - K], except at the
//            offsets with keep[j] != 0, which keep the reward: Monte-Carlo up to K, bootstrapped beyond
//   omega[j] = 1 / sigma[j]^2, the precision of the prediction j steps ahead
//   near[t, n] = sum_{j < K} omega[j] * (target[j] - mu[t, n, j]) / max_j omega[j], far[t, n] the same over
//            j >= K (the scripts centre the far part per episode step before adding the two)
//
// sigma is clamped to [e^-10, e^10], the range training keeps log_sigma in, so sigma = 0 gives large but
// finite weights instead of inf - inf = NaN. Arrays are contiguous float32: rewards, terminals [T, N];
// mu [T, N, H]; sigma, keep [H]; tail_mu [N, H]. Outputs near, far [T, N] float32. Threads run along n, so
// neighbouring threads read neighbouring rewards (coalesced). Each thread walks its own contiguous row of mu,
// 16 bytes at a time where H % 4 == 0 (neighbouring rows are H * 4 bytes apart, so a warp's 4-byte reads
// would each touch another 32-byte sector: on an H100 at T = 128, N = 4096, H = 128 the 16-byte reads took 260 us
// against 578, by Nsight Compute; docs/gpu.md). The same source builds for the CPU with kernels/host_shim.h.

// Offset j of one decision: target[j] - mu[t, n, j] (m), weighted by omega[j], into the near or the far sum.
__device__ __forceinline__ void accumulate(
    const int j, const float m, const int t, const int n, const int T, const int N, const int H, const int K,
    const float* __restrict__ rewards, const float* __restrict__ terminals, const float* __restrict__ mu,
    const float* __restrict__ sigma, const float* __restrict__ tail_mu, const float* __restrict__ keep,
    float& near, float& far, float& norm, bool& ended, bool& bootstrap)
{
    const float min_sigma = 4.539993e-05f;  // e^-10
    const float max_sigma = 2.202646e+04f;  // e^10
    const float s = fminf(fmaxf(sigma[j], min_sigma), max_sigma);
    const float omega = 1.0f / (s * s);
    const int u = t + j;
    if (j == K) bootstrap = !ended && t + K < T;  // t's episode runs at step t + K, inside the rollout
    float target = ended ? 0.0f : u < T ? rewards[(long long)u * N + n] : tail_mu[(long long)n * H + (u - T)];
    if (bootstrap && keep[j] == 0.0f) target = mu[((long long)(t + K) * N + n) * H + (j - K)];
    if (j < K) near += omega * (target - m);
    else far += omega * (target - m);
    norm = fmaxf(norm, omega);
    if (!ended && u < T && terminals[(long long)u * N + n] != 0.0f) ended = true;  // the episode's last reward
}

extern "C" __global__ void p3o_advantage(
    const float* __restrict__ rewards, const float* __restrict__ terminals, const float* __restrict__ mu,
    const float* __restrict__ sigma, const float* __restrict__ tail_mu, const float* __restrict__ keep,
    const int T, const int N, const int H, const int K, float* __restrict__ near_out, float* __restrict__ far_out)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)T * N) return;
    const int t = (int)(i / N);
    const int n = (int)(i - (long long)t * N);

    const float* mu_row = mu + i * H;
    float near = 0.0f;       // sum of omega * (target - mu) over the offsets before K
    float far = 0.0f;        // and from K on
    float norm = 0.0f;       // the largest omega
    bool ended = false;      // past the episode's terminal: every target is 0
    bool bootstrap = false;  // from K on: the targets are mu[t + K] (set at j = K)
    int j = 0;
    if (H % 4 == 0 && (unsigned long long)mu % 16 == 0) {  // every row starts on a 16-byte boundary
        const float4* row4 = reinterpret_cast<const float4*>(mu_row);
        for (; j < H; j += 4) {
            const float4 m = row4[j / 4];
            accumulate(j, m.x, t, n, T, N, H, K, rewards, terminals, mu, sigma, tail_mu, keep, near, far, norm, ended, bootstrap);
            accumulate(j + 1, m.y, t, n, T, N, H, K, rewards, terminals, mu, sigma, tail_mu, keep, near, far, norm, ended, bootstrap);
            accumulate(j + 2, m.z, t, n, T, N, H, K, rewards, terminals, mu, sigma, tail_mu, keep, near, far, norm, ended, bootstrap);
            accumulate(j + 3, m.w, t, n, T, N, H, K, rewards, terminals, mu, sigma, tail_mu, keep, near, far, norm, ended, bootstrap);
        }
    }
    for (; j < H; ++j)
        accumulate(j, mu_row[j], t, n, T, N, H, K, rewards, terminals, mu, sigma, tail_mu, keep, near, far, norm, ended, bootstrap);
    near_out[i] = near / norm;
    far_out[i] = far / norm;
}
