// P3O advantage: one thread per decision (t, n). The maths is docs/algorithm.md, "The advantage".
//
//   window   k = min(H, T - t), cut after the first j with terminals[t + j] = 1 (that reward kept);
//            with tail_mu, a window that reaches the rollout's end without a terminal runs on to H,
//            the unseen rewards replaced by the bootstrap predictions tail_mu[n, t + j - T];
//            with zeros_after_terminal, a window runs on past its episode's terminal to H, inside the
//            rollout or beyond it, with target 0 there: the episode pays nothing after its end, so mu
//            learns how likely each offset is to be reached, and ending the episode early costs
//            the advantage what it forgoes (P3O.md's cut makes mu predict surviving episodes alone)
//   horizon  h = first j >= min_horizon with sigma[j] > cut * sigma_r, else H (cut <= 0: h = H)
//   kept     offsets j < L = min(k, h); window[t, n] = L
//   omega[j] = max(0, 1 / sigma[j]^2 - puf / sigma_r^2)   (no subtraction when puf = 0 or sigma_r = 0)
//   A[t, n]  = sum_{j < L} omega[j] * (target[t + j] - mu[t, n, j]) / Z,
//            Z = max_{j < L} omega[j] (weight_norm 0) or sum_{j < L} omega[j] (weight_norm 1); A = 0 if Z = 0
//
// sigma is clamped to [e^-10, e^10], the range training keeps log_sigma in, so sigma = 0 gives large but
// finite weights instead of inf - inf = NaN. Arrays are contiguous float32: rewards, terminals [T, N];
// mu [T, N, H]; sigma [H]; tail_mu [N, H] or null. Outputs advantages [T, N] float32, window [T, N] int64.
// Threads run along n, so neighbouring threads read neighbouring rewards (coalesced); each thread walks
// its own contiguous row of mu. The same source builds for the CPU with kernels/host_shim.h.

extern "C" __global__ void p3o_advantage(
    const float* __restrict__ rewards, const float* __restrict__ terminals, const float* __restrict__ mu,
    const float* __restrict__ sigma, const float* __restrict__ tail_mu, const float sigma_r, const float puf,
    const int weight_norm, const int min_horizon, const float cut, const int zeros_after_terminal,
    const int T, const int N, const int H,
    float* __restrict__ advantages, long long* __restrict__ window)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)T * N) return;
    const int t = (int)(i / N);
    const int n = (int)(i - (long long)t * N);

    const float min_sigma = 4.539993e-05f;  // e^-10
    const float max_sigma = 2.202646e+04f;  // e^10
    const float subtract = (puf > 0.0f && sigma_r > 0.0f) ? puf / (sigma_r * sigma_r) : 0.0f;
    const float sigma_cut = cut * sigma_r;
    // Offsets past the rollout of an episode still running exist only through the bootstrap.
    const int reach = tail_mu != nullptr ? H : min(H, T - t);

    const float* mu_row = mu + i * H;
    float total = 0.0f;  // sum of omega * (target - mu)
    float norm = 0.0f;   // Z: running max or sum of omega
    int kept = 0;
    bool ended = false;  // past the episode's terminal (zeros_after_terminal): every target is 0
    for (int j = 0; j < H && (ended || j < reach); ++j) {
        const float s = fminf(fmaxf(sigma[j], min_sigma), max_sigma);
        if (cut > 0.0f && j >= min_horizon && s > sigma_cut) break;  // variable horizon h reached
        const float omega = fmaxf(0.0f, 1.0f / (s * s) - subtract);
        const int u = t + j;
        const float target = ended ? 0.0f : u < T ? rewards[(long long)u * N + n] : tail_mu[(long long)n * H + (u - T)];
        total += omega * (target - mu_row[j]);
        norm = weight_norm == 0 ? fmaxf(norm, omega) : norm + omega;
        kept = j + 1;
        if (!ended && u < T && terminals[(long long)u * N + n] != 0.0f) {  // the episode's last reward
            if (!zeros_after_terminal) break;
            ended = true;
        }
    }
    advantages[i] = norm > 0.0f ? total / norm : 0.0f;
    window[i] = kept;
}
