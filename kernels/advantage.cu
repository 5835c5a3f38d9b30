// P3O advantage in two kernels. The maths is docs/algorithm.md, "The advantage".
//
//   y[t, j]  the per-offset lambda-return of the reward j steps after decision t (fixed-horizon TD(lambda)):
//              y[t, 0] = rewards[t]
//              y[t, j] = (1 - lam) mu[t + 1, j - 1] + lam y[t + 1, j - 1]   (j >= 1, t's episode runs at t + 1)
//              y[t, j] = 0                                                  (j >= 1, step t ended the episode)
//              y[T, j] = tail_mu[n, j], the predictions at the bootstrap state
//            At the offsets with keep[j] != 0 (the action measurably moves that reward) the target is the reward
//            itself, as lam = 1 gives it: rewards[t + j] inside the episode and the rollout, 0 after its terminal,
//            tail_mu[n, t + j - T] past the rollout's end.
//   A[t, n]  = sum_j omega[j] * (target[t, n, j] - mu[t, n, j]) / max_j omega[j], omega[j] = 1 / sigma[j]^2
//
// lambda_targets writes target[T, N, H]; p3o_advantage reads it. Each y[t, j] depends only on y[t + 1, j - 1],
// so the recursion runs along the diagonals t + j = s: one thread per (n, s), walking t down from s, O(H) each.
// Neighbouring threads take neighbouring diagonals of one env: at each step they are at the same offset j of
// neighbouring decisions, N * H floats apart, so their reads of mu and writes of target are not coalesced (not yet
// measured on a GPU; p3o_advantage's rows are H floats apart likewise). sigma is clamped to [e^-10, e^10], the range
// training keeps log_sigma in, so sigma = 0 gives large but finite weights instead of inf - inf = NaN. Arrays are
// contiguous float32: rewards, terminals [T, N]; mu, target [T, N, H]; sigma, keep [H]; tail_mu [N, H]; advantages
// [T, N]. The same source builds for the CPU with kernels/host_shim.h.

extern "C" __global__ void lambda_targets(
    const float* __restrict__ rewards, const float* __restrict__ terminals, const float* __restrict__ mu,
    const float* __restrict__ tail_mu, const float* __restrict__ keep, const float lam,
    const int T, const int N, const int H, float* __restrict__ target)
{
    const int S = T + H - 1;  // the diagonals s = t + j of one env
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)N * S) return;
    const int n = (int)(i / S);
    const int s = (int)(i - (long long)n * S);

    // The diagonal starts at y[s, 0] = rewards[s] inside the rollout, or at y[T, s - T] = tail_mu past it.
    int t = s < T ? s : T;
    float y = s < T ? rewards[(long long)s * N + n] : tail_mu[(long long)n * H + (s - T)];
    float reward = y;  // the reward s, what lam = 1 carries, until a terminal between t and s cuts it to 0
    if (t < T) target[((long long)t * N + n) * H] = y;
    for (t = t - 1; t >= 0 && s - t < H; --t) {
        const int j = s - t;
        const bool ended = terminals[(long long)t * N + n] != 0.0f;  // step t ended t's episode: nothing after
        const float next_mu = t + 1 < T ? mu[((long long)(t + 1) * N + n) * H + (j - 1)]
                                        : tail_mu[(long long)n * H + (j - 1)];
        y = ended ? 0.0f : (1.0f - lam) * next_mu + lam * y;
        reward = ended ? 0.0f : reward;
        target[((long long)t * N + n) * H + j] = keep[j] != 0.0f ? reward : y;
    }
}

extern "C" __global__ void p3o_advantage(
    const float* __restrict__ target, const float* __restrict__ mu, const float* __restrict__ sigma,
    const int T, const int N, const int H, float* __restrict__ advantages)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)T * N) return;
    const float min_sigma = 4.539993e-05f;  // e^-10
    const float max_sigma = 2.202646e+04f;  // e^10
    float sum = 0.0f;   // sum of omega * (target - mu)
    float norm = 0.0f;  // the largest omega
    for (int j = 0; j < H; ++j) {
        const float s = fminf(fmaxf(sigma[j], min_sigma), max_sigma);
        const float omega = 1.0f / (s * s);
        sum += omega * (target[i * H + j] - mu[i * H + j]);
        norm = fmaxf(norm, omega);
    }
    advantages[i] = sum / norm;
}
